# Millwright's developer entry points. The README's two first commands are
# `make demo` and `make test`; .ci/run calls `make test`, the same path a
# newcomer types.
SHELL := /bin/bash
# Go's standard install location, for shells whose PATH lacks it.
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
export GOTOOLCHAIN := local
# Tests that start real processes (Temporal, the control plane) run long on a
# cold 2-core machine; the bound is generous and the suite stays well inside it.
TEST_TIMEOUT ?= 45m
PKGS := ./...
WORKLOADS ?= ../shared/benchmarks

.PHONY: all build test test-prereqs bench chaos scale consolidation lint demo plan-demo dev tools ci-prereqs generate

all: build

build:
	$(GO) build -o bin/ ./starter ./worker

## test: every test in the module, including the integration tests on the local stack.
## It first installs or builds what they need (test-prereqs), then checks formatting and vet.
test: test-prereqs lint
	$(GO) test -timeout $(TEST_TIMEOUT) $(PKGS)

## test-prereqs: Chromium (installed from Debian's packages when root; otherwise one line
## says what to install) and the control-plane binaries (built once, cached).
test-prereqs:
	@local/tools/prereqs.sh

## bench: packer benchmarks at 1,000 / 5,000 / 10,000 pods, and one
## disruption pass (ComputeCommands' model) over 500 nodes and 5,000 pods.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./model/packer/...
	$(GO) test -run '^$$' -bench BenchmarkCompute -benchmem ./model/disruption/

# SEED and LIFECYCLES tune `make chaos`; CHAOS_FLAGS adds any -chaos.* flag
# (harness/chaos/chaos_test.go).
SEED ?= 1
LIFECYCLES ?= 1000
CHAOS_FLAGS ?=

## chaos: the chaos suite on the real binaries (two workers, Temporal restarted on its
## database, EC2 faults, spot storms, kube-apiserver restarts) until LIFECYCLES node
## lifecycles completed; prints every invariant counter (all must be 0).
## `make test` runs its short seeded version (seed 1, 100 lifecycles).
chaos: tools
	$(GO) test -timeout 4h -count=1 -v -run '^TestChaos$$' ./harness/chaos/ \
		-args -chaos.seed=$(SEED) -chaos.lifecycles=$(LIFECYCLES) -chaos.timeout=3h $(CHAOS_FLAGS)

# SCENARIOS picks `make scale`'s scenarios (comma-separated; default all).
SCENARIOS ?= all

## scale: the scale benchmark on the local stack with two workers: each scenario's
## workload created at once, time to Running, nodes, $/h, utilization, latencies,
## scale to zero, worker memory, history sizes. `make test` runs the smallest once
## for correctness only.
scale: tools
	$(GO) test -timeout 3h -count=1 -v -run '^TestScale$$' ./harness/scale/ -args -scale.scenarios=$(SCENARIOS)

# CONSOLIDATION picks `make consolidation`'s scenarios (comma-separated).
CONSOLIDATION ?= mixed-600,karpenter-perf

## consolidation: consolidation on the local stack with two workers: a workload
## scaled up on a WhenEmptyOrUnderutilized pool, every deployment scaled down,
## then cost against a fresh plan of the remaining pods, time to ≤ 1.15×,
## budget and PDBs sampled. `make test` runs the 60-pod version.
consolidation: tools
	$(GO) test -timeout 3h -count=1 -v -run '^TestConsolidation$$' ./harness/scale/ -args -consolidation.scenarios=$(CONSOLIDATION)

## generate: regenerate deepcopy code and the CRDs from model/apis/v1.
generate:
	$(GO) generate ./model/apis/v1

## lint: formatting and vet.
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

# DEMO_FLAGS are extra `starter dev` flags for `make demo`; scripts and CI use
# DEMO_FLAGS=--exit to stop after the walkthrough.
DEMO_FLAGS ?=

## demo: the walkthrough on the local stack: examples applied, inflate scaled to 10 pods
## (nodes launched), then deleted (nodes terminated after 30 s); Ctrl-C stops it.
demo:
	@echo "==> building bin/starter (a first build compiles Temporal, the Kubernetes clients and the UI, listing each package: a few minutes)"
	$(GO) build -v -o bin/ ./starter
	@echo "==> building the control-plane binaries (once; cached in ~/.cache/millwright)"
	local/tools/build.sh
	@echo "==> starting the local stack and playing the walkthrough"
	./bin/starter dev --ephemeral --demo $(DEMO_FLAGS)

## plan-demo: the packer on its own: plan the diverse-1000 example workload offline.
plan-demo: build
	./bin/starter plan --verify --workload $(WORKLOADS)/diverse-1000.json > bin/diverse-1000.plan.json
	@echo "plan written to bin/diverse-1000.plan.json"

## dev: the local stack (Temporal + UI, control plane, EC2/SQS emulator, worker) until Ctrl-C.
dev: build tools
	./bin/starter dev

## tools: build (once, cached outside the repo) the Kubernetes control-plane binaries the tests use.
tools:
	local/tools/build.sh

ci-prereqs: test-prereqs
