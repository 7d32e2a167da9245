package node

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestGracePeriodIsTheDeletionsElseThePodsElse30s(t *testing.T) {
	secs := func(n int64) *int64 { return &n }
	cases := []struct {
		deletion, spec *int64
		want           time.Duration
	}{
		{nil, nil, 30 * time.Second},
		{nil, secs(45), 45 * time.Second},
		{secs(0), secs(45), 0},
		{secs(10), secs(45), 10 * time.Second},
	}
	for _, c := range cases {
		pod := &corev1.Pod{}
		pod.DeletionGracePeriodSeconds, pod.Spec.TerminationGracePeriodSeconds = c.deletion, c.spec
		if got := gracePeriod(pod); got != c.want {
			t.Errorf("gracePeriod(deletion %v, spec %v) = %s, want %s", c.deletion, c.spec, got, c.want)
		}
	}
}
