package main

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

func TestStatCPUReadsUtimeAndStimeAfterTheCommand(t *testing.T) {
	// A command name with a space and a parenthesis, as /proc shows it.
	line := "4242 (envoy (x) y) S 1 4242 4242 0 -1 4194560 3093 0 0 0 250 75 0 0 20 0 12 0 7021 1 2"
	if got := statCPU(line); got != 3.25 {
		t.Fatalf("statCPU = %v, want 3.25 (250 + 75 ticks)", got)
	}
	if got := statCPU("1 (short) S 1"); got != 0 {
		t.Fatalf("a truncated line gives %v, want 0", got)
	}
}

func TestPodSetReplacesOnePodWithANewAddress(t *testing.T) {
	p := newPodSet(3, 7)
	all := map[string]bool{}
	for i := range 3 {
		for _, a := range p.bySvc[i] {
			ip, err := netip.ParseAddr(a)
			if err != nil || !netip.MustParsePrefix("10.128.0.0/9").Contains(ip) {
				t.Fatalf("pod address %q is not in 10.128.0.0/9", a)
			}
			all[a] = true
		}
	}
	if len(all) != 7 || len(p.bySvc[0]) != 3 || len(p.bySvc[2]) != 2 {
		t.Fatalf("7 pods over 3 Services: %v", p.bySvc)
	}
	before := append([]string{}, p.bySvc[1]...)
	p.replace(1, rand.New(rand.NewPCG(1, 2)))
	changed := 0
	for k, a := range p.bySvc[1] {
		if a != before[k] {
			changed++
			if all[a] {
				t.Fatalf("the new pod reuses address %s", a)
			}
		}
	}
	if changed != 1 || len(p.slice("bench", 1).Endpoints) != 2 {
		t.Fatalf("one pod of scale-1 replaced: %v → %v", before, p.bySvc[1])
	}
}
