# synthgen's container image: a static binary on distroless/static, which
# carries the CA certificates (for https endpoints and the Hub) and the
# non-root user "nonroot" (65532), and nothing else: no shell.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t synthgen .
#   docker run --rm synthgen version
#
# cmd/synthgen/deploy_test.go builds the binary with the go build line below
# (its environment and flags, read from this file) and checks it is static.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/synthgen ./cmd/synthgen

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/synthgen /usr/local/bin/synthgen
USER nonroot:nonroot
ENTRYPOINT ["synthgen"]
