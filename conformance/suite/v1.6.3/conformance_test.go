// Package conformance drives the upstream Gateway API conformance suite at v1.6.3
// (sigs.k8s.io/gateway-api/conformance v1.6.3) against the cluster that
// conformance/run builds, when GATEWAY_API_VERSION=v1.6.3. It is the same driver as
// conformance/conformance_test.go; it lives in its own module because one module can
// require only one version of the suite. All options are the suite's own flags; the
// cluster comes from KUBECONFIG.
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
		t.Skip("needs a cluster (KUBECONFIG); run GATEWAY_API_VERSION=v1.6.3 conformance/run")
	}
	serialize(tests.ConformanceTests)
	suiteconformance.RunConformance(t)
}

// serialize runs every test in sequence, as the default driver does (a test marked
// Parallel reported from t.Run's immediate return, kubernetes-sigs/gateway-api#5142);
// v1.6.3 marks tests Parallel too. Subtests a test runs in parallel still do.
func serialize(all []suite.ConformanceTest) {
	for i := range all {
		all[i].Parallel = false
	}
}
