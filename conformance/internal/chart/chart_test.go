package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// From conformance/internal/chart.
var (
	conformanceDir = filepath.Join("..", "..")
	repoDir        = filepath.Join("..", "..", "..")
	chartDir       = filepath.Join(repoDir, "deploy", "helm", "aether-edge")
	deployDir      = filepath.Join(repoDir, "deploy")
)

// A Helm binary under test: the chart must render the same with Helm 4 and
// Helm 3 (platform teams run both).
type helmBin struct{ name, path string }

// helms are both Helm majors; a missing one fails the test (it never skips),
// naming how to build it.
func helms(t *testing.T) []helmBin {
	t.Helper()
	h4, err := FindHelm(conformanceDir)
	if err != nil {
		t.Fatalf("no helm 4: %v", err)
	}
	h3, err := FindHelm3(conformanceDir)
	if err != nil {
		t.Fatalf("no helm 3: %v", err)
	}
	return []helmBin{{"helm 4", h4}, {"helm 3", h3}}
}

// render runs `helm template aether-edge deploy/helm/aether-edge --namespace NS` with
// more args, with Helm 4 and Helm 3, checks both render the same objects, and
// parses what they print.
func render(t *testing.T, ns string, args ...string) map[string]Object {
	t.Helper()
	full := append([]string{"template", "aether-edge", chartDir, "--namespace", ns}, args...)
	var first map[string]Object
	for _, h := range helms(t) {
		out, err := Helm(h.path, full...)
		if err != nil {
			t.Fatalf("%s: %v", h.name, err)
		}
		objs := map[string]Object{}
		if err := Parse(out, objs, h.name+" template"); err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = objs
			continue
		}
		// Helm's own label says which Helm rendered it: the rest must agree.
		if diffs := compare(first, objs); len(diffs) > 0 {
			t.Errorf("%s renders differently from helm 4:\n  %s", h.name, strings.Join(diffs, "\n  "))
		}
	}
	return first
}

// valuesFile writes values YAML to a file for `helm template -f`.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// compare reports every object missing on one side and every differing field.
func compare(want, got map[string]Object) []string {
	var out []string
	keys := map[string]any{}
	for k := range want {
		keys[k] = nil
	}
	for k := range got {
		keys[k] = nil
	}
	for _, k := range unionKeys(keys, nil) {
		w, win := want[k]
		g, gin := got[k]
		switch {
		case !gin:
			out = append(out, k+": in deploy/, not rendered by the chart")
		case !win:
			out = append(out, k+": rendered by the chart, not in deploy/")
		default:
			for _, d := range Diff("", w, g) {
				out = append(out, k+": "+d)
			}
		}
	}
	return out
}

func TestDefaultValuesRenderDeploy(t *testing.T) {
	want, err := ParseDir(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	got := render(t, "aether-ingress")
	for _, o := range got {
		stripHelmLabels(o)
	}
	if diffs := compare(want, got); len(diffs) > 0 {
		t.Errorf("helm template with default values differs from deploy/*.yaml (%d differences; deploy/ is what conformance/run applies: change the chart to match it):\n  %s",
			len(diffs), strings.Join(diffs, "\n  "))
	}
	// What the comparison is about, so a vacuous pass shows.
	kinds := map[string]int{}
	for _, o := range want {
		kinds[o["kind"].(string)]++
	}
	// Two identities: the edge agents' (read) and the controller's (write).
	for k, n := range map[string]int{"Namespace": 1, "ServiceAccount": 2, "ClusterRole": 2, "ClusterRoleBinding": 2, "Role": 2, "RoleBinding": 2, "GatewayClass": 1, "DaemonSet": 1, "Deployment": 1} {
		if kinds[k] != n {
			t.Errorf("deploy/ has %d %s objects, want %d (the test compares nothing if deploy/ is not read)", kinds[k], k, n)
		}
	}
	t.Logf("compared %d objects", len(want))
}

// helmOnlyLabels are the recommended labels only a Helm release can say (its
// version, Helm itself, the chart); deploy/ carries every other one.
var helmOnlyLabels = []string{"app.kubernetes.io/version", "app.kubernetes.io/managed-by", "helm.sh/chart"}

func stripHelmLabels(o Object) {
	md, _ := o["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	for _, k := range helmOnlyLabels {
		delete(labels, k)
	}
}

// Every object the chart renders carries Kubernetes' recommended labels, naming
// the release and the chart.
func TestStandardLabels(t *testing.T) {
	objs := render(t, "aether-ingress", "--set", "metrics.serviceMonitor.create=true")
	want := map[string]string{
		"app.kubernetes.io/name":       "aether-edge",
		"app.kubernetes.io/instance":   "aether-edge",
		"app.kubernetes.io/part-of":    "aether-edge",
		"app.kubernetes.io/version":    "0.1.0",
		"app.kubernetes.io/managed-by": "Helm",
		"helm.sh/chart":                "aether-edge-0.2.0",
	}
	for k, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		for name, value := range want {
			// The controller's own name keeps it out of every selector of the edge pods.
			if name == "app.kubernetes.io/name" && o["kind"] == "Deployment" {
				value = "aether-edge-controller"
			}
			if labels[name] != value {
				t.Errorf("%s: label %s = %v, want %q", k, name, labels[name], value)
			}
		}
	}
	if len(objs) < 9 {
		t.Errorf("only %d objects rendered", len(objs))
	}
}

// The comparison itself: a changed field, a missing object and a reordered
// container are each reported, by path.
func TestCompareFindsDifferences(t *testing.T) {
	want, err := ParseDir(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	// A deep copy through a second parse.
	got, err := ParseDir(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	if d := compare(want, got); len(d) != 0 {
		t.Fatalf("deploy/ differs from itself: %v", d)
	}
	ds := find(t, got, "DaemonSet", "aether-edge")
	agent := container(t, ds, "agent")
	args := agent["args"].([]any)
	args[2] = "--namespace=elsewhere"
	ds["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["hostNetwork"] = false
	var gwc string
	for k, o := range got {
		if o["kind"] == "GatewayClass" {
			gwc = k
		}
	}
	delete(got, gwc)
	diffs := strings.Join(compare(want, got), "\n")
	for _, sub := range []string{
		`spec.template.spec.containers[name=agent].args[2]: want "--namespace=$(POD_NAMESPACE)", got "--namespace=elsewhere"`,
		"spec.template.spec.hostNetwork: want true, got false",
		"GatewayClass//aether: in deploy/, not rendered by the chart",
	} {
		if !strings.Contains(diffs, sub) {
			t.Errorf("the diff does not say %q; it says:\n%s", sub, diffs)
		}
	}
	// Containers in another order (and nothing else changed): the order is reported.
	again, err := ParseDir(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	podSpec := func(o Object) map[string]any {
		return o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	}
	reordered := podSpec(find(t, again, "DaemonSet", "aether-edge"))
	slices.Reverse(reordered["containers"].([]any))
	d := Diff("containers", podSpec(want[Key(ds)])["containers"], reordered["containers"])
	if len(d) != 1 || !strings.Contains(d[0], "containers: order: want [agent envoy], got [envoy agent]") {
		t.Errorf("reordered containers: got %q", d)
	}
}

func TestValuesTakeEffect(t *testing.T) {
	values := valuesFile(t, `
namespace:
  name: edge-system
gatewayClass:
  name: edge-public
  controllerName: example.com/edge
addressMode: static
logFormat: json
logLevel: debug
image:
  repository: registry.example/aether-edge
  tag: "1.2.3"
  pullPolicy: Always
envoy:
  image:
    tag: v1.41.0
  logLevel: info
  drainTimeSeconds: 20
terminationGracePeriodSeconds: 45
agent:
  resources:
    limits: {memory: 1Gi}
  extraArgs: [--port-range=30000-30999]
nodeSelector:
  node-role.kubernetes.io/edge: ""
tolerations:
  - {key: node-role.kubernetes.io/edge, operator: Exists, effect: NoSchedule}
podAnnotations:
  example.com/scrape: "true"
priorityClassName: system-node-critical
proxyProtocol: true
allowExternalHostnameBackends: true
service:
  externalTrafficPolicy: Local
  loadBalancerClass: example.com/lb
`)
	objs := render(t, "aether-ingress", "-f", values)

	for k, o := range objs {
		meta := o["metadata"].(map[string]any)
		if ns, ok := meta["namespace"]; ok && ns != "edge-system" {
			t.Errorf("%s: namespace %v, want edge-system (namespace.name)", k, ns)
		}
	}
	find(t, objs, "Namespace", "edge-system")
	crb := find(t, objs, "ClusterRoleBinding", "aether-edge")
	if ns := crb["subjects"].([]any)[0].(map[string]any)["namespace"]; ns != "edge-system" {
		t.Errorf("ClusterRoleBinding subject in %v, want edge-system", ns)
	}
	gwc := find(t, objs, "GatewayClass", "edge-public")
	if c := gwc["spec"].(map[string]any)["controllerName"]; c != "example.com/edge" {
		t.Errorf("GatewayClass controllerName %v", c)
	}

	ds := find(t, objs, "DaemonSet", "aether-edge")
	pod := ds["spec"].(map[string]any)["template"].(map[string]any)
	spec := pod["spec"].(map[string]any)
	expect(t, "nodeSelector", spec["nodeSelector"], map[string]any{"node-role.kubernetes.io/edge": ""})
	expect(t, "tolerations", spec["tolerations"], []any{map[string]any{"key": "node-role.kubernetes.io/edge", "operator": "Exists", "effect": "NoSchedule"}})
	expect(t, "pod annotations", pod["metadata"].(map[string]any)["annotations"], map[string]any{"example.com/scrape": "true"})
	expect(t, "priorityClassName", spec["priorityClassName"], "system-node-critical")

	agent := container(t, ds, "agent")
	args := agent["args"].([]any)
	for _, a := range []string{"--controller-name=example.com/edge", "--address-mode=static", "--log-format=json", "--log-level=debug", "--port-range=30000-30999",
		"--proxy-protocol", "--external-traffic-policy=Local", "--load-balancer-class=example.com/lb",
		"--allow-external-hostname-backends"} {
		if !slices.Contains(args, any(a)) {
			t.Errorf("agent args lack %s: %v", a, args)
		}
	}
	if args[0] != "agent" || args[1] != "--role=edge" {
		t.Errorf("agent args[:2] = %v, want agent --role=edge", args[:2])
	}
	// The controller translates as the agents do: it gets the same flags.
	ctl := find(t, objs, "Deployment", "aether-edge-controller")
	controller := container(t, ctl, "controller")
	cargs := controller["args"].([]any)
	for _, a := range []string{"--controller-name=example.com/edge", "--address-mode=static", "--log-format=json", "--port-range=30000-30999",
		"--proxy-protocol", "--external-traffic-policy=Local", "--load-balancer-class=example.com/lb", "--allow-external-hostname-backends"} {
		if !slices.Contains(cargs, any(a)) {
			t.Errorf("controller args lack %s: %v", a, cargs)
		}
	}
	if cargs[0] != "agent" || cargs[1] != "--role=controller" {
		t.Errorf("controller args[:2] = %v, want agent --role=controller", cargs[:2])
	}
	expect(t, "controller image", controller["image"], "registry.example/aether-edge:1.2.3")
	expect(t, "agent image", agent["image"], "registry.example/aether-edge:1.2.3")
	expect(t, "agent imagePullPolicy", agent["imagePullPolicy"], "Always")
	expect(t, "agent resources", agent["resources"], map[string]any{
		"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}, "limits": map[string]any{"memory": "1Gi"}})
	boot := initContainer(t, ds, "bootstrap")
	expect(t, "bootstrap image", boot["image"], "registry.example/aether-edge:1.2.3")
	envoy := container(t, ds, "envoy")
	expect(t, "envoy image", envoy["image"], "envoyproxy/envoy:v1.41.0")
	expect(t, "envoy args", envoy["args"], []any{"-c", "/etc/envoy/bootstrap.yaml", "--log-level", "info", "--drain-time-s", "20"})
	// The drain on stop follows the drain time: the agent's preStop drains that
	// long, Envoy's preStop sleeps 2 s more, within the pod's grace period.
	expect(t, "agent preStop", agent["lifecycle"], map[string]any{"preStop": map[string]any{"exec": map[string]any{
		"command": []any{"aether-edge", "drain", "--envoy-admin=127.0.0.1:19000", "--seconds=20"}}}})
	expect(t, "envoy preStop", envoy["lifecycle"], map[string]any{"preStop": map[string]any{"sleep": map[string]any{"seconds": float64(22)}}})
	expect(t, "grace period", spec["terminationGracePeriodSeconds"], float64(45))
}

// Objects a value turns off are not rendered.
func TestCreateToggles(t *testing.T) {
	objs := render(t, "aether-ingress", "--set", "namespace.create=false", "--set", "gatewayClass.create=false")
	for k, o := range objs {
		if o["kind"] == "Namespace" || o["kind"] == "GatewayClass" {
			t.Errorf("%s rendered although turned off", k)
		}
	}
	find(t, objs, "DaemonSet", "aether-edge")
}

// The controller's NetworkPolicy, off by default (TestDefaultValuesRenderDeploy:
// deploy/ has none): on, it admits the report port from reportFrom alone and
// the metrics port from metricsFrom (anywhere when empty), on the controller's
// pods only; without reportFrom it refuses to render, as it would cut every
// report off.
func TestNetworkPolicy(t *testing.T) {
	objs := render(t, "aether-ingress", "-f", valuesFile(t, `
networkPolicy:
  create: true
  reportFrom: [{ipBlock: {cidr: 10.0.0.0/24}}]
controller:
  podDisruptionBudget: {maxUnavailable: 2}
`))
	np := find(t, objs, "NetworkPolicy", "aether-edge-controller")
	spec := np["spec"].(map[string]any)
	expect(t, "podSelector", spec["podSelector"], map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "aether-edge-controller"}})
	expect(t, "policyTypes", spec["policyTypes"], []any{"Ingress"})
	expect(t, "ingress", spec["ingress"], []any{
		map[string]any{
			"ports": []any{map[string]any{"protocol": "TCP", "port": float64(18001)}},
			"from":  []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/24"}}},
		},
		map[string]any{"ports": []any{map[string]any{"protocol": "TCP", "port": float64(19003)}}},
	})
	// The report port it admits is the one the controller listens on.
	ctl := find(t, objs, "Deployment", "aether-edge-controller")
	if args := container(t, ctl, "controller")["args"].([]any); !slices.Contains(args, any("--report-address=0.0.0.0:18001")) {
		t.Errorf("controller args lack --report-address=0.0.0.0:18001: %v", args)
	}
	pdb := find(t, objs, "PodDisruptionBudget", "aether-edge-controller")
	expect(t, "controller PDB maxUnavailable", pdb["spec"].(map[string]any)["maxUnavailable"], float64(2))

	for _, h := range helms(t) {
		_, err := Helm(h.path, "template", "aether-edge", chartDir, "--namespace", "aether-ingress", "--set", "networkPolicy.create=true")
		if err == nil || !strings.Contains(err.Error(), "networkPolicy.create needs networkPolicy.reportFrom") {
			t.Errorf("%s: a NetworkPolicy without reportFrom rendered, or failed otherwise: %v", h.name, err)
		}
	}
}

// Values the agent would refuse fail at render time: the values schema
// (values.schema.json) names the field, and the namespace the chart would own
// is refused by the chart itself. With Helm 4 and Helm 3.
func TestBadValuesFail(t *testing.T) {
	for _, h := range helms(t) {
		for _, c := range []struct {
			args []string
			says []string
		}{
			{[]string{"--namespace", "aether-ingress", "--set", "addressMode=dynamic"}, []string{"schema", "addressMode"}},
			{[]string{"--namespace", "aether-ingress", "--set", "logFormat=yaml"}, []string{"schema", "logFormat"}},
			{[]string{"--namespace", "aether-ingress", "--set", "accessLog=verbose"}, []string{"schema", "accessLog"}},
			{[]string{"--namespace", "aether-ingress", "--set", "service.externalTrafficPolicy=local"}, []string{"schema", "externalTrafficPolicy"}},
			{[]string{"--namespace", "aether-ingress", "--set", "metrics.port=70000"}, []string{"schema", "port"}},
			{[]string{"--namespace", "aether-ingress", "--set", "envoy.logLevel=loud"}, []string{"schema", "logLevel"}},
			{[]string{"--namespace", "aether-ingress", "--set", "controller.podDisruptionBudget.maxUnavailable=0"}, []string{"schema", "maxUnavailable"}},
			{[]string{"--namespace", "aether-ingress", "--set", "networkPolicy.reportFrom[0].cidr=10.0.0.0/8"}, []string{"schema", "cidr"}},
			// A misspelt key is refused, not silently ignored.
			{[]string{"--namespace", "aether-ingress", "--set", "adressMode=static"}, []string{"schema", "adressMode"}},
			{[]string{"--namespace", "default"}, []string{`would make the chart own namespace "default"`}},
		} {
			out, err := Helm(h.path, append([]string{"template", "aether-edge", chartDir}, c.args...)...)
			if err == nil {
				t.Errorf("%s template %v succeeded, want an error saying %q; it rendered:\n%s", h.name, c.args, c.says, out)
				continue
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s template %v: error does not say %q: %v", h.name, c.args, s, err)
				}
			}
		}
	}
}

// helm lint --strict, with Helm 4 and Helm 3: the chart is well-formed
// (Chart.yaml, templates, values against their schema).
func TestLint(t *testing.T) {
	for _, h := range helms(t) {
		if out, err := Helm(h.path, "lint", chartDir, "--namespace", "aether-ingress", "--strict"); err != nil {
			t.Errorf("%s lint: %v\n%s", h.name, err, out)
		}
	}
}

func find(t *testing.T, objs map[string]Object, kind, name string) Object {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == kind && o["metadata"].(map[string]any)["name"] == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func container(t *testing.T, ds Object, name string) map[string]any {
	t.Helper()
	return named(t, ds, "containers", name)
}

func initContainer(t *testing.T, ds Object, name string) map[string]any {
	t.Helper()
	return named(t, ds, "initContainers", name)
}

func named(t *testing.T, ds Object, field, name string) map[string]any {
	t.Helper()
	spec := ds["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	for _, c := range spec[field].([]any) {
		if c.(map[string]any)["name"] == name {
			return c.(map[string]any)
		}
	}
	t.Fatalf("no %s %s", field, name)
	return nil
}

func expect(t *testing.T, what string, got, want any) {
	t.Helper()
	if d := Diff(what, want, got); len(d) > 0 {
		t.Errorf("%s", strings.Join(d, "\n"))
	}
}
