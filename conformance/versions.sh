# Pinned versions of everything the harness builds. Raise them deliberately.
# shellcheck shell=bash
KUBE_VERSION="${KUBE_VERSION:-v1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
# The Gateway API conformance suite (and its echo-basic backend, CRDs and manifests).
# The default is v1.7.0, the current release, which aether-edge passes in full
# (reports/v1.7.0). conformance/go.mod requires v1.6.1 (the harness's own programs
# build from it); every other version, the default included, has its own module,
# conformance/suite/<version>/. Older ones on request: GATEWAY_API_VERSION=v1.6.1.
# v1.7.0's module pins its Go (toolchain go1.27.4 in its
# go.mod; build-tools runs go there with GOTOOLCHAIN set to it, fetched from the module
# proxy) and its echo-basic is the one of conformance/go.mod's version (README, "v1.7.0").
GATEWAY_API_VERSION="${GATEWAY_API_VERSION:-v1.7.0}"
# The DNS server behind the suite's UDPRoute tests (its coredns/coredns image).
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
# Helm (helm.sh/helm/v4, cmd/helm): renders and installs deploy/helm/aether-edge (the
# chart test in conformance/internal/chart, `conformance/run --install chart`).
HELM_VERSION="${HELM_VERSION:-v4.3.2}"
# Helm 3 (helm.sh/helm/v3, cmd/helm): the chart test renders and lints with both
# majors, since platform teams still run Helm 3.
HELM3_VERSION="${HELM3_VERSION:-v3.21.4}"
# The chart's previous version, from which conformance/traffic's upgrade scenario runs
# `helm upgrade` to deploy/helm/aether-edge under traffic: the chart at this commit of
# the repository (git archive; a clone needs that history). 0.1.0 changed in place until
# 0.2.0; this is 0.1.0 as it stood last before the edge agents and the controller were
# split into two identities (one DaemonSet of `agent` with every right → edge agents
# plus a controller Deployment), the upgrade with the most to get wrong.
CHART_PREVIOUS_VERSION="${CHART_PREVIOUS_VERSION:-0.1.0}"
CHART_PREVIOUS_COMMIT="${CHART_PREVIOUS_COMMIT:-c8bbe68ab8ffd8f4ccd7327e72471974bc719dc3}"
# The older CRDs the Rust discovery tests install (what a cluster that has not
# upgraded serves); fetched with the kube binaries, since those tests run in a
# network namespace of their own and cannot reach the module proxy.
GATEWAY_API_OLDER_VERSION="${GATEWAY_API_OLDER_VERSION:-v1.5.1}"
# The previous release, still selectable here (conformance/suite/v1.6.3) and
# installed whole by the Rust version-skew test (kube::discovery).
GATEWAY_API_PREVIOUS_VERSION="${GATEWAY_API_PREVIOUS_VERSION:-v1.6.3}"
# Prometheus (github.com/prometheus/prometheus, cmd/prometheus; 3.x is tagged v0.3xx.y:
# v0.316.0 is Prometheus 3.16.0): `conformance/run --prometheus` scrapes the edge with it
# and runs every query of deploy/grafana.
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
