// Package conformance drives the upstream Gateway API conformance suite at v1.5.1
// (sigs.k8s.io/gateway-api/conformance v1.5.1) against the cluster that
// conformance/run builds, when GATEWAY_API_VERSION=v1.5.1. It is the same driver as
// conformance/conformance_test.go (the default version); it lives in its own module
// because one module can require only one version of the suite. All options are the
// suite's own flags; the cluster comes from KUBECONFIG.
package conformance

import (
	"os"
	"testing"

	suiteconformance "sigs.k8s.io/gateway-api/conformance"
)

func TestConformance(t *testing.T) {
	if os.Getenv("KUBECONFIG") == "" {
		t.Skip("needs a cluster (KUBECONFIG); run GATEWAY_API_VERSION=v1.5.1 conformance/run")
	}
	suiteconformance.RunConformance(t)
}
