package node

import (
	"reflect"
	"testing"
)

func TestForImage(t *testing.T) {
	p := Programs{EchoBasic: "/b/echo", EchoBasicV2: "/b/echo2", CoreDNS: "/b/coredns", Envoy: "/b/envoy", AetherEdge: "/b/ae", EdgeTraffic: "/b/et", EnvoyGateway: "/b/eg", Self: "/b/self"}
	cases := map[string]string{
		"gcr.io/k8s-staging-gateway-api/echo-basic:v20260204-monthly": "/b/echo",
		"docker.io/envoyproxy/envoy:v1.40.0":                          "/b/envoy",
		"envoyproxy/envoy-distroless:v1.40-latest":                    "/b/envoy",
		"localhost:5000/aether-edge:dev":                              "/b/ae",
		"ghcr.io/aether/aether-edge@sha256:abc":                       "/b/ae",
		"aether-edge-traffic:dev":                                     "/b/et",
		"registry.k8s.io/coredns/coredns:v1.12.2":                     "/b/coredns",
		"registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev.2":         "/b/echo",
		"registry.k8s.io/pause:3.10":                                  "/b/self",
		"docker.io/envoyproxy/gateway:v1.9.1":                         "/b/eg",
		// v1.7.0's images (gateway-api-conformance-images): v0.1.0 is the v1.6.x code,
		// v0.2.0 (the UDP echo) our own program.
		"registry.k8s.io/gateway-api/conformance/echo-basic:v0.1.0":             "/b/echo",
		"registry.k8s.io/gateway-api/conformance/echo-basic:v0.2.0":             "/b/echo2",
		"registry.k8s.io/gateway-api/conformance/echo-basic:v0.10.1@sha256:abc": "/b/echo2",
		"registry.k8s.io/gateway-api/echo-basic:v1.5.1":                         "/b/echo",
	}
	for image, want := range cases {
		got, _, err := p.forImage(image)
		if err != nil || got != want {
			t.Errorf("forImage(%q) = %q, %v; want %q", image, got, err, want)
		}
	}
	if _, _, err := (Programs{EchoBasic: "/b/echo"}).forImage("registry.k8s.io/gateway-api/conformance/echo-basic:v0.2.0"); err == nil {
		t.Errorf("forImage(echo-basic:v0.2.0) without echo-basic-v2 succeeded; want an error, not the v1.6.x echo-basic")
	}
	if _, _, err := p.forImage("nginx:1.27"); err == nil {
		t.Errorf("forImage(nginx) succeeded; want an error for an unmapped image")
	}
	if _, _, err := (Programs{Self: "/b/self"}).forImage("registry.k8s.io/coredns/coredns:v1.12.2"); err == nil {
		t.Errorf("forImage(coredns) without a coredns binary succeeded; want an error, not a stand-in")
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine("/b/envoy", "envoy", []string{"envoy"}, []string{"-c", "/etc/envoy/envoy.yaml"})
	want := []string{"/b/envoy", "-c", "/etc/envoy/envoy.yaml"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v want %v", got, want)
	}
	got = commandLine("/b/echo", "echo-basic", nil, []string{"-x"})
	if !reflect.DeepEqual(got, []string{"/b/echo", "-x"}) {
		t.Errorf("got %v", got)
	}
	// The suite's coredns Deployment: no command, args to the image's entrypoint.
	got = commandLine("/b/coredns", "coredns", nil, []string{"-conf", "/root/Corefile"})
	if !reflect.DeepEqual(got, []string{"/b/coredns", "-conf", "/root/Corefile"}) {
		t.Errorf("got %v", got)
	}
	got = commandLine("/b/coredns", "coredns", []string{"/coredns"}, []string{"-conf", "/root/Corefile"})
	if !reflect.DeepEqual(got, []string{"/b/coredns", "-conf", "/root/Corefile"}) {
		t.Errorf("got %v", got)
	}
	got = commandLine("/b/ae", "aether-edge", []string{"/bin/sh", "-c", "true"}, nil)
	if !reflect.DeepEqual(got, []string{"/bin/sh", "-c", "true"}) {
		t.Errorf("got %v", got)
	}
}
