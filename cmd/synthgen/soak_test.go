package main

// The fault soak: the built binary answers a dataset against a mock that
// fails about one request in five on purpose, in every way it knows (429
// with Retry-After, 500, 503, resets before and during the answer, a
// malformed chunk, a stream cut without finish_reason, a non-JSON 200, an
// answer cut at max_tokens) and restarts once in the middle. For both output
// formats and both streaming modes it checks from the outside that:
//
//   - every prompt ends answered or in DIR/errors with its cause, exactly
//     once, and the directory is clean (no temporary file, the manifest
//     lists exactly the shards on disk);
//   - every fault the mock injected shows in report.json as a retry or an
//     error record of the matching cause, and the status codes exactly so;
//   - the exit code is the documented one: 0 when every prompt was
//     answered, 3 when some failed for good;
//   - the test process (which hosts the mock) ends with no more goroutines
//     and file descriptors than it started with.
//
// Sizes: a few hundred prompts by default (make test), fewer with -short,
// a few thousand with SYNTHGEN_SOAK_LONG=1.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// soakFaults is the mix: 20% of requests in all.
func soakFaults(o *mockserver.Options) {
	o.Rate429, o.RetryAfter = 0.03, 5*time.Millisecond
	o.Rate500 = 0.02
	o.Rate503 = 0.02
	o.RateReset = 0.02
	o.RateResetMid = 0.02
	o.RateBadChunk = 0.02
	o.RateCut = 0.03
	o.RateGarbage = 0.02
	o.RateLength = 0.02
}

// soakCauses is, for each injected kind, the causes the engine may give
// the failed attempt. A restart adds connection failures of its own.
var soakCauses = map[string][]string{
	mockserver.Fault429:      {"http_429"},
	mockserver.Fault500:      {"http_500"},
	mockserver.Fault503:      {"http_503"},
	mockserver.FaultReset:    {"connection"},
	mockserver.FaultResetMid: {"connection", "stream_cut", "decode"},
	mockserver.FaultBadChunk: {"decode"},
	mockserver.FaultCut:      {"stream_cut", "incomplete"},
	mockserver.FaultGarbage:  {"decode", "stream_cut"}, // a stream of HTML has no data line: no finish_reason
	mockserver.FaultLength:   {"length"},
}

const soakConcurrency = 32

func soakSize() int {
	switch {
	case os.Getenv("SYNTHGEN_SOAK_LONG") != "":
		return 3000
	case testing.Short():
		return 200
	}
	return 400
}

func TestFaultSoak(t *testing.T) {
	synthgenBinary(t) // built before the descriptors and goroutines are counted
	prompts := soakSize()
	for _, format := range []string{"jsonl", "parquet"} {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", format, stream), func(t *testing.T) {
				runSoak(t, prompts, format, stream)
			})
		}
	}
}

func runSoak(t *testing.T, prompts int, format string, stream bool) {
	begin := time.Now()
	goroutines := goleak.IgnoreCurrent()
	fds := countFDs(t)

	work := t.TempDir()
	ds := writeShareGPT(t, work, prompts)
	out := filepath.Join(work, "out")

	opts := mockserver.Options{MeanTokens: 30, Seed: int64(prompts), MaxRunning: 16}
	soakFaults(&opts)
	// One restart in the middle: with ~1.3 requests a prompt (retries,
	// answers asked again with more room), the count reaches
	// 3/4 of the prompts about halfway and 3/2 of them never.
	opts.RestartEvery, opts.RestartFor = prompts*3/4, 200*time.Millisecond
	m := mockserver.New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- m.Serve(ctx, ln, 5*time.Second) }()
	stopMock := func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("mock: %v", err)
		}
	}

	// Three tries a request fail a few prompts for good (exit 3); six
	// almost never do (exit 0): the JSONL cells see the one, Parquet the
	// other, and each checks the code against what it finds on disk.
	attempts := map[string]string{"jsonl": "6", "parquet": "3"}[format]
	p := startSynthgen(t, "run", "run",
		"--dataset.path", ds,
		"--endpoint.base_url", "http://"+ln.Addr().String()+"/v1",
		"--output.dir", out,
		"--output.format", format,
		"--output.shard_size", "100",
		"--generation.stream="+strconv.FormatBool(stream),
		"--generation.max_tokens", "60",
		"--generation.on_length", "retry",
		"--retry.max_attempts", attempts,
		"--retry.initial_backoff", "1ms",
		"--retry.max_backoff", "10ms",
		"--concurrency", strconv.Itoa(soakConcurrency),
		"--log-format", "json",
	)
	code := p.wait(t, 5*time.Minute)
	stopMock()
	st := m.Stats()

	// Every prompt once: answered, or an error record with a cause.
	inv, err := readInventory(out)
	if err != nil {
		t.Fatalf("read output: %v", err)
	}
	if len(inv.Temps) > 0 {
		t.Errorf("temporary files left after a clean exit: %v", inv.Temps)
	}
	failed := readErrorRecords(t, out)
	lengthKept, usageUnknown := 0, 0
	for i := range prompts {
		k := sink.Key{ID: strconv.Itoa(i)}
		r, answered := inv.Records[k]
		e, errored := failed[k]
		switch {
		case answered && errored:
			t.Errorf("key %d is both answered and an error record (%s)", i, e.Cause)
		case answered && stream && r.PromptTokens == 0 && r.CompletionTokens == 0 && r.FinishReason != "":
			// The restart cut this stream between its finish chunk and its
			// usage chunk: the answer is whole and kept (asking it again
			// would throw a whole answer away for two counts), usage unknown.
			// Only the requests in flight at the restart can end so.
			usageUnknown++
			r.PromptTokens, r.CompletionTokens = 1, 1
			checkRecord(t, r, i, mockserver.DefaultModel)
		case answered:
			checkRecord(t, r, i, mockserver.DefaultModel)
			if r.FinishReason == "length" {
				lengthKept++
			}
		case errored:
			if e.Cause == "" || e.Attempts < 1 {
				t.Errorf("key %d: error record without a cause or attempts: %+v", i, e)
			}
		default:
			t.Errorf("key %d is lost: neither answered nor an error record", i)
		}
	}
	if usageUnknown > soakConcurrency {
		t.Errorf("%d answers without usage: more than the %d requests one restart can cut", usageUnknown, soakConcurrency)
	}
	if got := len(inv.Records) + len(failed); got != prompts {
		t.Errorf("%d records and %d error records for %d prompts", len(inv.Records), len(failed), prompts)
	}
	checkManifest(t, out, inv)

	// The exit code, and report.json agreeing with the directory.
	want := 0
	if len(failed) > 0 {
		want = 3
	}
	if code != want {
		t.Errorf("exit %d with %d error records, want %d; stderr:\n%s", code, len(failed), want, p.stderr(t))
	}
	var rep runfiles.ReportRecord
	b, err := os.ReadFile(filepath.Join(out, runfiles.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if rep.ExitCode != code || rep.Written != len(inv.Records) || rep.Failed != len(failed) {
		t.Errorf("report.json: exit %d, %d written, %d error records; the run: exit %d, %d, %d",
			rep.ExitCode, rep.Written, rep.Failed, code, len(inv.Records), len(failed))
	}
	byCause := map[string]int64{}
	for _, e := range failed {
		byCause[e.Cause]++
	}
	if !maps.Equal(byCause, nonZero(rep.ErrorsByCause)) {
		t.Errorf("report.json errors by cause %v, error records by cause %v", rep.ErrorsByCause, byCause)
	}

	// What was injected shows as retries or error records of its cause.
	// The one blur is the restart: a fault's response on a connection the
	// restart closes reaches the client as a connection failure instead,
	// so a kind may be short of its count by at most what one restart can
	// cut (every request in flight), and the failures in all must cover
	// the faults in all.
	seen := func(causes ...string) int64 {
		n := int64(0)
		for _, c := range causes {
			n += rep.RetriesByCause[c] + byCause[c]
		}
		return n
	}
	const cutByRestart = soakConcurrency
	for _, c := range []string{mockserver.Fault429, mockserver.Fault500, mockserver.Fault503} {
		// Nothing else answers with these statuses: never more than injected.
		if got := seen(c); got > st.Injected[c] || got < st.Injected[c]-cutByRestart {
			t.Errorf("%s: injected %d, seen %d as retries or error records", c, st.Injected[c], got)
		}
	}
	var allInjected, allSeen int64
	for kind, causes := range soakCauses {
		got := seen(causes...)
		if kind == mockserver.FaultLength {
			got += int64(lengthKept) // an answer cut at 4x max_tokens is kept
		}
		if got < st.Injected[kind]-cutByRestart {
			t.Errorf("%s: injected %d, only %d retries or error records of %v", kind, st.Injected[kind], got, causes)
		}
		allInjected += st.Injected[kind]
	}
	for _, m := range []map[string]int64{rep.RetriesByCause, byCause} {
		for _, n := range m {
			allSeen += n
		}
	}
	if allSeen+int64(lengthKept) < allInjected {
		t.Errorf("%d faults injected, only %d failed attempts seen (%d retries, errors %v)", allInjected, allSeen, rep.Retries, byCause)
	}
	known := map[string]bool{}
	for _, causes := range soakCauses {
		for _, c := range causes {
			known[c] = true
		}
	}
	for _, m := range []map[string]int64{rep.RetriesByCause, byCause} {
		for c, n := range m {
			if n > 0 && !known[c] {
				t.Errorf("%d failures of cause %q, which no injected fault makes", n, c)
			}
		}
	}
	if st.Injected[mockserver.FaultRestart] < 1 {
		t.Errorf("the mock never restarted: %+v", st)
	}
	for _, kind := range mockserver.FaultKinds() {
		if st.Injected[kind] == 0 {
			t.Errorf("no %s fault was injected: the soak is too small to show it", kind)
		}
	}

	// Nothing left behind in this process.
	goleak.VerifyNone(t, goroutines)
	waitFDs(t, fds)

	injected := make([]string, 0, len(st.Injected))
	for _, k := range mockserver.FaultKinds() {
		injected = append(injected, fmt.Sprintf("%s=%d", k, st.Injected[k]))
	}
	t.Logf("%d prompts (%d answered, %d failed, exit %d) in %v; %d requests; injected %s; retries %d %v; errors %v",
		prompts, len(inv.Records), len(failed), code, time.Since(begin).Round(time.Millisecond), st.Requests,
		strings.Join(injected, " "), rep.Retries, nonZero(rep.RetriesByCause), byCause)
}

func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// readErrorRecords reads every error record under DIR/errors by key; a key
// found twice fails the test.
func readErrorRecords(t *testing.T, dir string) map[sink.Key]sink.ErrorRecord {
	t.Helper()
	out := map[sink.Key]sink.ErrorRecord{}
	files, _ := filepath.Glob(filepath.Join(dir, "errors", "*"))
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e sink.ErrorRecord
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if prev, dup := out[e.Key()]; dup {
				t.Errorf("key %s has two error records (%s, %s)", e.ID, prev.Cause, e.Cause)
			}
			out[e.Key()] = e
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkManifest asserts that the manifest lists exactly the final shards on
// disk with their row counts, and that the last run ended.
func checkManifest(t *testing.T, dir string, inv *inventory) {
	t.Helper()
	man, err := sink.ReadManifest(dir)
	if err != nil {
		t.Fatalf("read manifest: %v", err)
	}
	listed := map[string]int{}
	for _, sh := range man.Parts {
		listed[sh.Name] = sh.Records
	}
	if !maps.Equal(listed, inv.Finals) {
		t.Errorf("manifest lists %v, on disk %v", listed, inv.Finals)
	}
	if last := man.Runs[len(man.Runs)-1]; last.EndedAt == nil {
		t.Errorf("the manifest's last run has no ended_at after a clean exit")
	}
}

// countFDs is the number of this process's open file descriptors.
func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// waitFDs waits until no more descriptors are open than before: sockets of
// the mock's connections close a moment after the server has stopped.
func waitFDs(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := countFDs(t)
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			ents, _ := os.ReadDir("/proc/self/fd")
			var links []string
			for _, e := range ents {
				l, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
				links = append(links, l)
			}
			slices.Sort(links)
			t.Fatalf("%d file descriptors open, %d before: %v", n, before, links)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
