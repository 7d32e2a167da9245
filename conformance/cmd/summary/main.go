// Command summary prints a one-screen summary of a Gateway API ConformanceReport and
// exits 1 if any core test failed (or the report is missing or unreadable).
//
//	summary REPORT.yaml
//	summary -sorted-into DEST REPORT.yaml
//
// With -sorted-into it first writes the report to DEST with its profiles in name
// order: the suite writes them in Go map order, so two runs with the same results
// would give different files.
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	args := os.Args[1:]
	if len(args) == 3 && args[0] == "-sorted-into" {
		if err := writeSorted(args[2], args[1]); err != nil {
			fmt.Fprintf(os.Stderr, "summary: %v\n", err)
			os.Exit(1)
		}
		args = args[2:]
	}
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: summary [-sorted-into DEST] REPORT.yaml")
		os.Exit(2)
	}
	os.Exit(summarize(args[0], os.Stdout))
}

// writeSorted writes the report at path to dest with its profiles sorted by name,
// marshalled as the suite marshals it.
func writeSorted(path, dest string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r confv1.ConformanceReport
	if err := yaml.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("unreadable conformance report %s: %w", path, err)
	}
	sort.SliceStable(r.ProfileReports, func(i, j int) bool {
		return r.ProfileReports[i].Name < r.ProfileReports[j].Name
	})
	out, err := yaml.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(dest, out, 0o644)
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
