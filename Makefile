# synthgen's front door. `make help` lists the targets.
GO        ?= go
BIN       := bin/synthgen
VERSION   ?= $(shell git describe --tags --always --dirty --abbrev=12 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)

.DEFAULT_GOAL := help

## help: list the targets
.PHONY: help
help:
	@grep -E '^## ' $(MAKEFILE_LIST) | sed 's/^## //' | awk -F': ' '{printf "  %-10s %s\n", $$1, $$2}'

## build: build bin/synthgen
.PHONY: build
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/synthgen

## run: generate answers for the bundled sample against the built-in mock server (out/sample)
# The mock listens on a port of its own choosing (MOCK_ADDR's port 0) and
# writes the address it bound to a file only once it listens; the run is
# sent there and nowhere else, so a process that holds some port (another
# mock, a real server) never gets the sample. No file while the mock lives
# means it is still starting; no mock, that it failed: nothing is sent.
MOCK_ADDR ?= 127.0.0.1:0
.PHONY: run
run: build
	@set -e; tmp=$$(mktemp -d); \
	$(BIN) mock --addr $(MOCK_ADDR) --addr-file $$tmp/addr --token-delay 2ms --ttft 50ms & mock=$$!; \
	trap 'kill $$mock 2>/dev/null; wait $$mock 2>/dev/null; rm -rf $$tmp' EXIT; \
	until [ -s $$tmp/addr ]; do \
	  if ! kill -0 $$mock 2>/dev/null; then \
	    echo "make run: the mock server did not start (its error is above); nothing was sent" >&2; exit 1; \
	  fi; \
	  sleep 0.1; \
	done; \
	$(BIN) run --config examples/sample.yaml --endpoint.base_url http://$$(cat $$tmp/addr)/v1

## test: the whole test suite with the race detector (2 to 3 minutes on 2 cores; TEST_TIMEOUT bounds each package)
# TEST_TIMEOUT is per package: the slowest, cmd/synthgen, took 3 min 3 s
# with two busy loops beside the suite on the shared 2-core machine (the
# whole suite 3 min 12 s; quiet, 2 min 27 s). A hung test ends the run with
# every goroutine's stack well inside CI's 15 minutes, not at go test's
# default 10.
TEST_TIMEOUT ?= 8m
# TEST_PACKAGES is how many packages test at once. Most of the suite waits
# (mock token delays, child processes, a browser): at go test's default of
# one a core, cmd/synthgen held one slot for two minutes while the other
# ran the 60 other packages one by one, and the whole took 200 s on the
# quiet 2-core machine; at 4 it took 180 s, CPU-bound (330 CPU-seconds;
# 270 since).
TEST_PACKAGES ?= 4
# NORACE_PACKAGES test without the race detector, beside the rest: they
# start no goroutine, in their code or their tests, so it has nothing to
# watch there, and it made sink/keyset's tests eight times slower (23
# CPU-seconds under -race, 3 without: a tenth of the suite's CPU). Their
# code still runs under -race in the tests of every package that uses it.
# cmd/synthgen's TestNoRacePackagesStartNoGoroutine holds the list to that.
NORACE_PACKAGES := ./sink/keyset
# GORACE: a race-instrumented binary sleeps a second before it exits
# (atexit_sleep_ms, 1000 by default), once for each of the suite's 50
# test binaries; a race still fails the test that ran into it.
GORACE ?= atexit_sleep_ms=0
export GORACE
.PHONY: test
test:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(NORACE_PACKAGES) & norace=$$!; \
	$(GO) test -race -count=1 -p $(TEST_PACKAGES) -timeout $(TEST_TIMEOUT) \
	  $$($(GO) list ./... | grep -vxF "$$($(GO) list $(NORACE_PACKAGES))"); rc=$$?; \
	wait $$norace || rc=1; exit $$rc

## bench: the end-to-end scenarios beside a minimal client, on loopback (under 5 min; writes bench/results.json)
.PHONY: bench
bench:
	$(GO) run ./bench -size full

## bench-scale: inspect and export of 1M and 10M records in 100 shard dirs, peak RSS and time per record (bench/scale-results.json; ~20 min, ~10 GB of disk)
SCALE_RECORDS ?= 1000000,10000000
.PHONY: bench-scale
bench-scale:
	$(GO) run ./bench/scale -records $(SCALE_RECORDS) -dirs 100 -json bench/scale-results.json

## bench-micro: the Go micro-benchmarks (ratios are meaningful within one run only)
.PHONY: bench-micro
bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## lint: gofmt, go vet, and the binary built for macOS and Windows too
# The binary is for Linux first, but people run the mock, inspect, export
# and view on their laptops: a Unix-only call (flock, statfs) must sit
# behind a build constraint, and this says so before a user does.
.PHONY: lint
lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOOS=darwin $(GO) build -o /dev/null ./cmd/synthgen
	GOOS=windows $(GO) build -o /dev/null ./cmd/synthgen

## fuzz: run every fuzzer for FUZZTIME each (default 10s; e.g. make fuzz FUZZTIME=30s)
FUZZTIME ?= 10s
.PHONY: fuzz
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## image: build the container image synthgen:VERSION from the Dockerfile (needs docker)
.PHONY: image
image:
	docker build --build-arg VERSION=$(VERSION) -t synthgen:$(VERSION) .

## docs: regenerate docs/config.md, the reference of every config key, from config/keys.go
.PHONY: docs
docs:
	$(GO) test ./config -run TestConfigReference -count=1 -update

## clean: remove build output and the sample run
.PHONY: clean
clean:
	rm -rf bin out
