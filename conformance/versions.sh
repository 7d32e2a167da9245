# Pinned versions of everything the harness builds. Raise them deliberately.
# shellcheck shell=bash
KUBE_VERSION="${KUBE_VERSION:-v1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
GATEWAY_API_VERSION="${GATEWAY_API_VERSION:-v1.5.1}"
