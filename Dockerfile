# syntax=docker/dockerfile:1.7
#
# Millwright's container image: the worker (the entrypoint) and the starter
# CLI (`starter setup`, `starter nodes`, ...), both static binaries on a
# distroless base with no shell, running as a non-root user.
#
#   docker build -t millwright:dev .
#   docker run --rm millwright:dev --help
#   docker run --rm --entrypoint /usr/local/bin/starter millwright:dev setup --help
#
# The builder's Go version is the go directive of go.mod: keep them equal.

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
# Modules first so a source-only change reuses the download layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/ ./worker ./starter

# static-debian12:nonroot has CA certificates (AWS and Temporal Cloud use
# TLS), /etc/passwd with the nonroot user (65532) and nothing else: no shell,
# no package manager. CGO is off, so no libc is needed (the embedded dev
# server's SQLite is the pure-Go driver).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/worker /out/starter /usr/local/bin/
USER 65532:65532
# The worker's /metrics, /healthz and /readyz (--metrics-address).
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/worker"]
