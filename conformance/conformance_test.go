// Package conformance drives the upstream Gateway API conformance suite
// (sigs.k8s.io/gateway-api/conformance, v1.6.1: the version go.mod requires, the
// default GATEWAY_API_VERSION) against the cluster that conformance/run builds; other
// versions have their own module under suite/<version>/. All options are the suite's
// own flags (sigs.k8s.io/gateway-api/conformance/utils/flags): --gateway-class,
// --conformance-profiles, --supported-features (unset: read from the GatewayClass
// status), --run-test, --report-output, --organization/--project/--url/--version/
// --contact, ... The cluster comes from KUBECONFIG.
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
		t.Skip("needs a cluster (KUBECONFIG); run conformance/run")
	}
	serialize(tests.ConformanceTests)
	suiteconformance.RunConformance(t)
}

// serialize runs every test in sequence. In v1.6.1 a test marked Parallel calls
// t.Parallel(), so the suite's t.Run returns at once and records it as passed, and the
// report is written before such tests have run at all: the report counted
// GatewayInvalidParametersRef as a core pass while the test binary failed it
// (kubernetes-sigs/gateway-api#5142). Run in sequence, each test's real result reaches
// the suite's report. Subtests a test runs in parallel still do: its t.Run waits for them.
func serialize(all []suite.ConformanceTest) {
	for i := range all {
		all[i].Parallel = false
	}
}

func TestSerializeClearsParallel(t *testing.T) {
	all := []suite.ConformanceTest{{ShortName: "A", Parallel: true}, {ShortName: "B"}}
	serialize(all)
	for _, ct := range all {
		if ct.Parallel {
			t.Errorf("%s still Parallel", ct.ShortName)
		}
	}
	parallel := 0
	for _, ct := range tests.ConformanceTests {
		if ct.Parallel {
			parallel++
		}
	}
	t.Logf("%d of the suite's %d tests are marked Parallel (run in sequence here)", parallel, len(tests.ConformanceTests))
}
