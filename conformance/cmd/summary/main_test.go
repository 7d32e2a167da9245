package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const report = `apiVersion: gateway.networking.k8s.io/v1
kind: ConformanceReport
gatewayAPIVersion: v1.5.1
gatewayAPIChannel: experimental
mode: default
implementation: {organization: aether, project: aether-edge, url: x, version: v0, contact: [x]}
profiles:
- name: GATEWAY-HTTP
  summary: x
  core:
    result: %CORE%
    statistics: {Passed: 30, Failed: %FAILED%, Skipped: 0}
    failedTests: [%NAMES%]
  extended:
    result: success
    statistics: {Passed: 2, Failed: 0, Skipped: 0}
`

func run(t *testing.T, core, failed, names string) (int, string) {
	dir := t.TempDir()
	in := filepath.Join(dir, "report.yaml")
	body := strings.NewReplacer("%CORE%", core, "%FAILED%", failed, "%NAMES%", names).Replace(report)
	if err := os.WriteFile(in, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	rc := summarize(in, out)
	out.Close()
	text, _ := os.ReadFile(out.Name())
	return rc, string(text)
}

func TestSummaryFailsOnCoreFailure(t *testing.T) {
	rc, text := run(t, "failure", "3", "HTTPRouteSimpleSameNamespace")
	if rc != 1 || !strings.Contains(text, "GATEWAY-HTTP/core: HTTPRouteSimpleSameNamespace") {
		t.Errorf("rc %d, output:\n%s", rc, text)
	}
}

func TestSummaryPassesWhenCorePasses(t *testing.T) {
	rc, text := run(t, "success", "0", "")
	if rc != 0 || !strings.Contains(text, "all core tests passed") || !strings.Contains(text, "extended") {
		t.Errorf("rc %d, output:\n%s", rc, text)
	}
}

func TestSummaryFailsWithoutReport(t *testing.T) {
	out, _ := os.Create(filepath.Join(t.TempDir(), "out"))
	defer out.Close()
	if rc := summarize(filepath.Join(t.TempDir(), "missing.yaml"), out); rc != 1 {
		t.Errorf("rc %d for a missing report", rc)
	}
}

func TestSortedIntoPutsProfilesInNameOrderAndKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.yaml"), filepath.Join(dir, "out.yaml")
	body := strings.NewReplacer("%CORE%", "success", "%FAILED%", "0", "%NAMES%", "").Replace(report)
	udp := strings.Replace(body[strings.Index(body, "- name: GATEWAY-HTTP"):], "GATEWAY-HTTP", "GATEWAY-UDP", 1)
	grpc := strings.Replace(udp, "GATEWAY-UDP", "GATEWAY-GRPC", 1)
	if err := os.WriteFile(in, []byte(body+udp+grpc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSorted(in, out); err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(out)
	var at []int
	for _, p := range []string{"name: GATEWAY-GRPC", "name: GATEWAY-HTTP", "name: GATEWAY-UDP"} {
		at = append(at, strings.Index(string(text), p))
	}
	if at[0] < 0 || !(at[0] < at[1] && at[1] < at[2]) {
		t.Errorf("profiles not in name order (%v):\n%s", at, text)
	}
	if !strings.Contains(string(text), "gatewayAPIVersion: v1.5.1") || strings.Count(string(text), "Passed: 30") != 3 {
		t.Errorf("the rest of the report changed:\n%s", text)
	}
	// Sorting a sorted report changes nothing.
	again := filepath.Join(dir, "again.yaml")
	if err := writeSorted(out, again); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(again); string(second) != string(text) {
		t.Errorf("not stable:\n%s\n---\n%s", text, second)
	}
}
