package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

func TestEveryQueryOfTheDashboardIsReadAndNeedsOnlyTheRateInterval(t *testing.T) {
	data, err := os.ReadFile("../../../deploy/grafana/aether-edge.json")
	if err != nil {
		t.Fatal(err)
	}
	qs, err := dashboardQueries(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 10 {
		t.Fatalf("%d queries read from the dashboard, want all of them", len(qs))
	}
	for _, q := range qs {
		if _, err := substitute(q.Expr, "1m"); err != nil {
			t.Errorf("panel %q: %v", q.Panel, err)
		}
	}
}

func TestQueriesInRowsAreRead(t *testing.T) {
	qs, err := dashboardQueries([]byte(`{"panels":[{"title":"a","targets":[{"expr":"x"}]},
		{"type":"row","panels":[{"title":"b","targets":[{"expr":"y"},{"expr":" "}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(qs) != "[{a x} {b y}]" {
		t.Fatalf("got %v", qs)
	}
}

func TestSubstitute(t *testing.T) {
	got, err := substitute("rate(a[$__rate_interval]) + rate(b[${__rate_interval}])", "1m")
	if err != nil || got != "rate(a[1m]) + rate(b[1m])" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := substitute(`sum by (x) (a{node="$node"})`, "1m"); err == nil || !strings.Contains(err.Error(), "$node") {
		t.Fatalf("an unknown variable must be refused, got %v", err)
	}
}

// fakePrometheus answers `up`, `count_over_time(up[…])` and the given queries.
func fakePrometheus(t *testing.T, answers map[string]string) client {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.FormValue("query")
		result, ok := answers[q]
		switch {
		case ok:
		case q == "up":
			result = `[{"metric":{"job":"aether-edge","instance":"n:19003"},"value":[1,"1"]}]`
		case strings.HasPrefix(q, "count_over_time(up["):
			result = `[{"metric":{"job":"aether-edge","instance":"n:19003"},"value":[1,"9"]}]`
		default:
			result = `[]`
		}
		_, _ = fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":%s}}`, result)
	}))
	t.Cleanup(srv.Close)
	return client{base: srv.URL, http: srv.Client()}
}

func TestAQueryWithoutDataOrOnlyNaNFailsTheCheck(t *testing.T) {
	c := fakePrometheus(t, map[string]string{
		"a":        `[{"metric":{},"value":[1,"0"]}]`,
		"q(b[1m])": `[{"metric":{},"value":[1,"NaN"]}]`,
	})
	if !run(c, []query{{"A", "a"}}, "1m", 1, 5, time.Second) {
		t.Fatal("a series that reads 0 is data")
	}
	if run(c, []query{{"A", "a"}, {"B", "q(b[$__rate_interval])"}}, "1m", 1, 5, time.Second) {
		t.Fatal("a query whose only series is NaN must fail")
	}
	if run(c, []query{{"C", "missing"}}, "1m", 1, 5, time.Second) {
		t.Fatal("a query with no series must fail")
	}
}

func TestAPrometheusThatAnswersEverythingFailsTheControl(t *testing.T) {
	c := fakePrometheus(t, map[string]string{
		"a":     `[{"metric":{},"value":[1,"1"]}]`,
		control: `[{"metric":{},"value":[1,"0"]}]`,
	})
	if run(c, []query{{"A", "a"}}, "1m", 1, 5, time.Second) {
		t.Fatal("data for a metric nobody exports: the check cannot tell, and must fail")
	}
}

func TestTargetsMustAllBeThereAndUp(t *testing.T) {
	c := fakePrometheus(t, map[string]string{"a": `[{"metric":{},"value":[1,"1"]}]`})
	if run(c, []query{{"A", "a"}}, "1m", 2, 5, 10*time.Millisecond) {
		t.Fatal("one target where two are expected must fail")
	}
	down := fakePrometheus(t, map[string]string{
		"a":  `[{"metric":{},"value":[1,"1"]}]`,
		"up": `[{"metric":{"job":"envoy","instance":"n:19004"},"value":[1,"0"]}]`,
	})
	if run(down, []query{{"A", "a"}}, "1m", 1, 5, time.Second) {
		t.Fatal("a target down must fail")
	}
}
