// Command summary prints a one-screen summary of a Gateway API ConformanceReport and
// exits 1 if any core test failed (or the report is missing or unreadable).
//
//	summary REPORT.yaml
package main

import (
	"fmt"
	"os"
	"strings"

	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: summary REPORT.yaml")
		os.Exit(2)
	}
	os.Exit(summarize(os.Args[1], os.Stdout))
}

func summarize(path string, out *os.File) int {
	raw, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(out, "no conformance report: %v\n", err)
		return 1
	}
	var r confv1.ConformanceReport
	if err := yaml.Unmarshal(raw, &r); err != nil {
		fmt.Fprintf(out, "unreadable conformance report %s: %v\n", path, err)
		return 1
	}
	fmt.Fprintf(out, "Gateway API %s conformance (%s channel), mode %s, implementation %s %s\n",
		r.GatewayAPIVersion, r.GatewayAPIChannel, r.Mode, r.Implementation.Project, r.Implementation.Version)
	fmt.Fprintf(out, "%-14s %-8s %7s %7s %7s  %s\n", "profile", "level", "passed", "failed", "skipped", "result")
	coreFailed := false
	var failed []string
	row := func(profile, level string, s confv1.Status) {
		fmt.Fprintf(out, "%-14s %-8s %7d %7d %7d  %s\n", profile, level, s.Passed, s.Failed, s.Skipped, s.Result)
		for _, name := range s.FailedTests {
			failed = append(failed, fmt.Sprintf("%s/%s: %s", profile, level, name))
		}
	}
	for _, p := range r.ProfileReports {
		row(p.Name, "core", p.Core)
		if p.Core.Failed > 0 || p.Core.Result == confv1.Failure {
			coreFailed = true
		}
		if p.Extended != nil {
			row(p.Name, "extended", p.Extended.Status)
		}
	}
	if len(r.ProfileReports) == 0 {
		fmt.Fprintln(out, "(the report has no profile results)")
		coreFailed = true
	}
	if len(failed) > 0 {
		fmt.Fprintf(out, "failed tests:\n  %s\n", strings.Join(failed, "\n  "))
	}
	if coreFailed {
		fmt.Fprintln(out, "RESULT: core tests failed")
		return 1
	}
	fmt.Fprintln(out, "RESULT: all core tests passed")
	return 0
}
