// Command promcheck asks a running Prometheus whether every query of a Grafana
// dashboard returns data, and whether every scrape target is up.
//
//	Prometheus (scraping the edge) ◄── /api/v1/query ── promcheck ◄── dashboard JSON
//	                                                        │
//	                                   table: query → series; exit 1 naming the
//	                                   queries without data and the targets not up
//
// `conformance/run --prometheus` runs it in the node netns against the Prometheus it
// started (see conformance/README.md, "Prometheus"). Grafana's `$__rate_interval` is
// replaced by --rate-interval; any other `$variable` in a query is an error, so a
// dashboard that grows a variable makes this check say how to handle it.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// query is one target of one panel of the dashboard.
type query struct {
	Panel string
	Expr  string
}

// panel is what the dashboard JSON holds that we read: rows nest panels.
type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// dashboardQueries lists every non-empty `expr` of the dashboard, in panel order.
func dashboardQueries(data []byte) ([]query, error) {
	var d panel
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	var out []query
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) != "" {
					out = append(out, query{Panel: p.Title, Expr: t.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	if len(out) == 0 {
		return nil, errors.New("dashboard: no panel has a query")
	}
	return out, nil
}

var variable = regexp.MustCompile(`\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)`)

// substitute replaces Grafana's `$__rate_interval` (or `${__rate_interval}`) with
// window and refuses any other variable.
func substitute(expr, window string) (string, error) {
	var unknown []string
	out := variable.ReplaceAllStringFunc(expr, func(v string) string {
		name := strings.Trim(v[1:], "{}")
		if name == "__rate_interval" {
			return window
		}
		unknown = append(unknown, v)
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("grafana variable(s) %s not handled by promcheck", strings.Join(unknown, ", "))
	}
	return out, nil
}

// sample is one series of an instant query's vector result.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

type apiResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// value is a sample's number ("NaN", "+Inf" included).
func (s sample) value() float64 {
	str, _ := s.Value[1].(string)
	f, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

// withData counts the series that carry a number: Grafana draws nothing for a
// NaN (e.g. a histogram_quantile over buckets that saw no observation in the
// window), so such a series is no data.
func withData(ss []sample) int {
	n := 0
	for _, s := range ss {
		if !math.IsNaN(s.value()) {
			n++
		}
	}
	return n
}

type client struct {
	base string
	http *http.Client
}

func (c client) instant(expr string) ([]sample, error) {
	resp, err := c.http.PostForm(c.base+"/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	switch r.Data.ResultType {
	case "vector":
		var ss []sample
		if err := json.Unmarshal(r.Data.Result, &ss); err != nil {
			return nil, err
		}
		return ss, nil
	case "scalar":
		// A scalar always has a value; count it as one series.
		var v [2]any
		if err := json.Unmarshal(r.Data.Result, &v); err != nil {
			return nil, err
		}
		return []sample{{Value: v}}, nil
	default:
		return nil, fmt.Errorf("result type %q, want vector", r.Data.ResultType)
	}
}

// targetsReady: the `up` series, one per target, each scraped at least minScrapes
// times in window. It says what is missing while the answer is no.
func targetsReady(c client, want, minScrapes int, window string) ([]sample, error) {
	up, err := c.instant("up")
	if err != nil {
		return nil, err
	}
	if len(up) != want {
		return up, fmt.Errorf("%d scrape targets, want %d", len(up), want)
	}
	counts, err := c.instant(fmt.Sprintf("count_over_time(up[%s])", window))
	if err != nil {
		return nil, err
	}
	for _, s := range counts {
		if int(s.value()) < minScrapes {
			return up, fmt.Errorf("%s scraped %d times, want %d", s.Metric["instance"], int(s.value()), minScrapes)
		}
	}
	return up, nil
}

func main() {
	base := flag.String("prometheus", "http://127.0.0.1:19090", "Prometheus base URL")
	dashboard := flag.String("dashboard", "deploy/grafana/aether-edge.json", "Grafana dashboard JSON")
	window := flag.String("rate-interval", "1m", "what $__rate_interval stands for")
	targets := flag.Int("targets", 0, "scrape targets Prometheus must have, every one up (required)")
	minScrapes := flag.Int("min-scrapes", 5, "scrapes of every target within --rate-interval before querying")
	wait := flag.Duration("wait", 2*time.Minute, "how long to wait for the targets and their scrapes")
	flag.Parse()
	if *targets <= 0 {
		fmt.Fprintln(os.Stderr, "promcheck: --targets N is required")
		os.Exit(2)
	}
	data, err := os.ReadFile(*dashboard)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promcheck:", err)
		os.Exit(2)
	}
	queries, err := dashboardQueries(data)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promcheck:", err)
		os.Exit(2)
	}
	c := client{base: strings.TrimRight(*base, "/"), http: &http.Client{Timeout: 10 * time.Second}}
	if !run(c, queries, *window, *targets, *minScrapes, *wait) {
		os.Exit(1)
	}
}

// control is a query over a metric that no target exports.
const control = "sum by (instance) (rate(aether_edge_promcheck_control_absent_total[1m]))"

func run(c client, queries []query, window string, targets, minScrapes int, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	var up []sample
	for {
		var err error
		up, err = targetsReady(c, targets, minScrapes, window)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Printf("promcheck: FAIL after %s: %v\n", wait, err)
			return false
		}
		time.Sleep(time.Second)
	}
	ok := true
	sort.Slice(up, func(i, j int) bool { return up[i].Metric["instance"] < up[j].Metric["instance"] })
	for _, s := range up {
		state := "up"
		if s.value() != 1 {
			state = "DOWN"
			ok = false
		}
		fmt.Printf("target %-8s %-12s %s\n", state, s.Metric["job"], s.Metric["instance"])
	}

	fmt.Printf("\n%6s  %s\n", "series", "query ($__rate_interval = "+window+")")
	var failed []string
	for _, q := range queries {
		expr, err := substitute(q.Expr, window)
		if err != nil {
			fmt.Printf("%6s  %s\n", "ERROR", q.Expr)
			failed = append(failed, fmt.Sprintf("%q: %s: %v", q.Panel, q.Expr, err))
			continue
		}
		ss, err := c.instant(expr)
		if err != nil {
			fmt.Printf("%6s  %s\n", "ERROR", expr)
			failed = append(failed, fmt.Sprintf("%q: %s: %v", q.Panel, expr, err))
			continue
		}
		n, nan := withData(ss), len(ss)-withData(ss)
		col := strconv.Itoa(n)
		if nan > 0 {
			col += fmt.Sprintf("+%dNaN", nan)
		}
		fmt.Printf("%6s  %s\n", col, expr)
		if n == 0 {
			why := "no series"
			if nan > 0 {
				why = fmt.Sprintf("%d series, every value NaN", nan)
			}
			failed = append(failed, fmt.Sprintf("%q: %s: %s", q.Panel, expr, why))
		}
	}
	// The negative twin: the same path, on this Prometheus, must find no data for a
	// dashboard-shaped query over a metric nobody exports, or the check proves nothing.
	if ss, err := c.instant(control); err != nil || withData(ss) != 0 {
		fmt.Printf("%6s  %s (control: must have no data)\n", "FAIL", control)
		failed = append(failed, fmt.Sprintf("control %s: %d series, error %v; want no data", control, len(ss), err))
	} else {
		fmt.Printf("%6s  %s (control: no data, as it must)\n", "0", control)
	}
	fmt.Println()
	if len(failed) > 0 {
		ok = false
		fmt.Printf("promcheck: FAIL: %d of %d checks failed (dashboard queries without data, or the control):\n", len(failed), len(queries)+1)
		for _, f := range failed {
			fmt.Println("  panel", f)
		}
	}
	if ok {
		fmt.Printf("promcheck: ok: %d targets up, %d dashboard queries each returned data\n", len(up), len(queries))
	}
	return ok
}
