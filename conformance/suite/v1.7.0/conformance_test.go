// Package conformance drives the upstream Gateway API conformance suite at v1.7.0
// (sigs.k8s.io/gateway-api/conformance v1.7.0, Go 1.27) against the cluster that
// conformance/run builds, when GATEWAY_API_VERSION=v1.7.0. It is the same driver as
// conformance/conformance_test.go; it lives in its own module because one module can
// require only one version of the suite. All options are the suite's own flags; the
// cluster comes from KUBECONFIG.
//
// The suite imports three packages of sigs.k8s.io/gateway-api-conformance-images
// v0.2.0, which the Go module proxy does not serve; build-tools builds this module
// with a replacement of that module (see conformance/README.md, "v1.7.0").
package conformance

import (
	"os"
	"testing"

	suiteconformance "sigs.k8s.io/gateway-api/conformance"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
)

func TestConformance(t *testing.T) {
	if os.Getenv("KUBECONFIG") == "" {
		t.Skip("needs a cluster (KUBECONFIG); run GATEWAY_API_VERSION=v1.7.0 conformance/run")
	}
	serialize(tests.ConformanceTests)
	suiteconformance.RunConformance(t)
}

// serialize runs every test in sequence, as the default driver does (a test marked
// Parallel reported from t.Run's immediate return, kubernetes-sigs/gateway-api#5142);
// v1.7.0 marks 37 tests Parallel. Subtests a test runs in parallel still do.
func serialize(all []suite.ConformanceTest) {
	for i := range all {
		all[i].Parallel = false
	}
}
