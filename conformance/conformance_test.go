// Package conformance drives the upstream Gateway API conformance suite
// (sigs.k8s.io/gateway-api/conformance, v1.6.1: the version go.mod requires, the
// default GATEWAY_API_VERSION) against the cluster that conformance/run builds; other
// versions have their own module under suite/<version>/ with the same driver. All
// options are the suite's own flags
// (sigs.k8s.io/gateway-api/conformance/utils/flags): --gateway-class,
// --conformance-profiles, --supported-features (unset: read from the GatewayClass
// status), --run-test, --report-output, --organization/--project/--url/--version/
// --contact, ... The cluster comes from KUBECONFIG.
package conformance

import (
	"os"
	"testing"

	suiteconformance "sigs.k8s.io/gateway-api/conformance"
)

func TestConformance(t *testing.T) {
	if os.Getenv("KUBECONFIG") == "" {
		t.Skip("needs a cluster (KUBECONFIG); run conformance/run")
	}
	suiteconformance.RunConformance(t)
}
