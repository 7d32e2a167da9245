// Package chart checks the Helm chart deploy/helm/aether-edge against the plain
// manifests of deploy/: with default values, `helm template` must render the same
// objects (same apiVersion, kind, namespace and name, and the same content; comments
// and key order do not count). The helm binary is the one conformance/build-tools
// builds (HELM_BIN overrides it).
package chart

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Object is one Kubernetes object as YAML decodes it into JSON types
// (map[string]any, []any, string, float64, bool, nil).
type Object = map[string]any

// docSeparator splits a multi-document YAML stream.
var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// Key names an object the way the API server does: apiVersion/kind/namespace/name
// (namespace empty for cluster-scoped objects).
func Key(o Object) string {
	meta, _ := o["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	return fmt.Sprintf("%v/%v/%s/%s", o["apiVersion"], o["kind"], ns, name)
}

// Parse reads every object of a multi-document YAML stream, keyed by Key. Empty
// documents (only comments) are skipped; a key seen twice is an error.
func Parse(stream []byte, into map[string]Object, source string) error {
	for i, doc := range docSeparator.Split(string(stream), -1) {
		var o Object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return fmt.Errorf("%s: document %d: %w", source, i+1, err)
		}
		if len(o) == 0 {
			continue
		}
		k := Key(o)
		if _, dup := into[k]; dup {
			return fmt.Errorf("%s: %s appears twice", source, k)
		}
		into[k] = o
	}
	return nil
}

// ParseDir reads the *.yaml files directly in dir (not its subdirectories, so not
// deploy/helm/), as `kubectl apply -f dir` does.
func ParseDir(dir string) (map[string]Object, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.yaml in %s", dir)
	}
	objs := map[string]Object{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := Parse(b, objs, filepath.Base(f)); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

// Diff lists every difference between want and got as "path: want X, got Y" lines,
// paths like spec.template.spec.containers[name=agent].args[3]. Lists of maps that
// all carry a name are matched by name, so a reordered or missing container is named.
func Diff(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want %s, got %s", pathOr(path), show(want), show(got))}
		}
		var out []string
		for _, k := range unionKeys(w, g) {
			wv, win := w[k]
			gv, gin := g[k]
			p := join(path, k)
			switch {
			case !gin:
				out = append(out, fmt.Sprintf("%s: missing (want %s)", p, show(wv)))
			case !win:
				out = append(out, fmt.Sprintf("%s: unexpected (got %s)", p, show(gv)))
			default:
				out = append(out, Diff(p, wv, gv)...)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want %s, got %s", pathOr(path), show(want), show(got))}
		}
		if wn, gn := byName(w), byName(g); wn != nil && gn != nil {
			var out []string
			for _, n := range unionKeys(wn, gn) {
				p := fmt.Sprintf("%s[name=%s]", path, n)
				wv, win := wn[n]
				gv, gin := gn[n]
				switch {
				case !gin:
					out = append(out, fmt.Sprintf("%s: missing", p))
				case !win:
					out = append(out, fmt.Sprintf("%s: unexpected (got %s)", p, show(gv)))
				default:
					out = append(out, Diff(p, wv, gv)...)
				}
			}
			if len(out) == 0 && !reflect.DeepEqual(names(w), names(g)) {
				out = append(out, fmt.Sprintf("%s: order: want %v, got %v", pathOr(path), names(w), names(g)))
			}
			return out
		}
		var out []string
		for i := 0; i < len(w) || i < len(g); i++ {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(g):
				out = append(out, fmt.Sprintf("%s: missing (want %s)", p, show(w[i])))
			case i >= len(w):
				out = append(out, fmt.Sprintf("%s: unexpected (got %s)", p, show(g[i])))
			default:
				out = append(out, Diff(p, w[i], g[i])...)
			}
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: want %s, got %s", pathOr(path), show(want), show(got))}
		}
		return nil
	}
}

// Helm runs helm with args and returns its stdout, or an error carrying its stderr.
func Helm(bin string, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No user or cluster configuration leaks in: rendering needs neither.
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+os.TempDir()+"/aether-edge-chart-test-config",
		"HELM_CACHE_HOME="+os.TempDir()+"/aether-edge-chart-test-cache", "HELM_DATA_HOME="+os.TempDir()+"/aether-edge-chart-test-data")
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// FindHelm is HELM_BIN if set, else the Helm 4 conformance/build-tools built
// (HELM_BIN_DIR of `build-tools bindir`). conformanceDir is the conformance/ directory.
func FindHelm(conformanceDir string) (string, error) {
	return findHelm(conformanceDir, "HELM_BIN", "HELM_BIN_DIR", "helm")
}

// FindHelm3 is HELM3_BIN if set, else the Helm 3 build-tools built (HELM3_BIN_DIR).
func FindHelm3(conformanceDir string) (string, error) {
	return findHelm(conformanceDir, "HELM3_BIN", "HELM3_BIN_DIR", "helm3")
}

func findHelm(conformanceDir, env, dirKey, component string) (string, error) {
	if bin := os.Getenv(env); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s=%s: %w", env, bin, err)
		}
		return bin, nil
	}
	out, err := exec.Command("bash", filepath.Join(conformanceDir, "build-tools"), "bindir").Output()
	if err != nil {
		return "", fmt.Errorf("conformance/build-tools bindir: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if dir, ok := strings.CutPrefix(line, dirKey+"="); ok {
			bin := filepath.Join(dir, "helm")
			if _, err := os.Stat(filepath.Join(dir, ".done")); err != nil {
				return "", fmt.Errorf("%s is not built (no %s): build it with `conformance/build-tools %s` (make test does), or set %s", component, bin, component, env)
			}
			return bin, nil
		}
	}
	return "", fmt.Errorf("conformance/build-tools bindir printed no %s", dirKey)
}

func byName(list []any) map[string]any {
	if len(list) == 0 {
		return nil
	}
	out := map[string]any{}
	for _, v := range list {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		n, ok := m["name"].(string)
		if !ok {
			return nil
		}
		if _, dup := out[n]; dup {
			return nil
		}
		out[n] = m
	}
	return out
}

func names(list []any) []string {
	var out []string
	for _, v := range list {
		out = append(out, v.(map[string]any)["name"].(string))
	}
	return out
}

func unionKeys(a, b map[string]any) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]any{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func pathOr(p string) string {
	if p == "" {
		return "(object)"
	}
	return p
}

func show(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	s := strings.TrimSpace(string(b))
	if strings.Contains(s, "\n") {
		return "\n    " + strings.ReplaceAll(s, "\n", "\n    ")
	}
	if _, isString := v.(string); isString {
		return fmt.Sprintf("%q", v)
	}
	return s
}
