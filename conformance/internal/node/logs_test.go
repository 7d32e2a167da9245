package node

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteLogsHonoursSinceTimeTailAndTimestamps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.log")
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lines := []string{
		old.Format(time.RFC3339Nano) + " stdout before",
		old.Add(2*time.Second).Format(time.RFC3339Nano) + " stdout first after",
		old.Add(3*time.Second).Format(time.RFC3339Nano) + " stderr second after",
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	get := func(q map[string][]string) string {
		rec := httptest.NewRecorder()
		if err := writeLogs(context.Background(), rec, path, q); err != nil {
			t.Fatal(err)
		}
		return rec.Body.String()
	}
	if got := get(nil); got != "before\nfirst after\nsecond after\n" {
		t.Errorf("all: %q", got)
	}
	since := old.Add(time.Second).Format(time.RFC3339)
	if got := get(map[string][]string{"sinceTime": {since}}); got != "first after\nsecond after\n" {
		t.Errorf("sinceTime: %q", got)
	}
	if got := get(map[string][]string{"tailLines": {"1"}}); got != "second after\n" {
		t.Errorf("tailLines: %q", got)
	}
	got := get(map[string][]string{"tailLines": {"1"}, "timestamps": {"true"}})
	if !strings.HasPrefix(got, "2026-01-01T00:00:03Z second after") {
		t.Errorf("timestamps: %q", got)
	}
	if got := get(map[string][]string{"limitBytes": {"3"}}); got != "bef" {
		t.Errorf("limitBytes: %q", got)
	}
}

func TestExpand(t *testing.T) {
	env := []envVar{{"A", "x"}, {"B", "y"}}
	cases := map[string]string{
		"$(A)-$(B)":  "x-y",
		"$$(A)":      "$(A)",
		"$(MISSING)": "$(MISSING)",
		"plain":      "plain",
	}
	for in, want := range cases {
		if got := expand(in, env); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}
