package node

import (
	"net/netip"
	"testing"
)

func TestAllocateDoesNotReuseAFreedIPAtOnce(t *testing.T) {
	n := &Network{NodeIP: netip.MustParseAddr("10.9.0.1"), CIDR: netip.MustParsePrefix("10.9.0.0/29")}
	a, _, _ := n.allocate()
	b, _, _ := n.allocate()
	if a.String() != "10.9.0.2" || b.String() != "10.9.0.3" {
		t.Fatalf("got %s, %s", a, b)
	}
	n.release(a)
	c, _, _ := n.allocate()
	if c == a {
		t.Fatalf("freed %s handed out again at once", a)
	}
	// Wraps around and finds the freed one once the rest is taken; then exhausted.
	seen := map[netip.Addr]bool{b: true, c: true}
	for {
		ip, _, err := n.allocate()
		if err != nil {
			break
		}
		if seen[ip] {
			t.Fatalf("%s handed out twice", ip)
		}
		seen[ip] = true
	}
	if !seen[a] {
		t.Fatalf("freed %s never handed out again: %v", a, seen)
	}
}

func TestAllocateFromTheNodesRangeWithTheNetworksMask(t *testing.T) {
	n := &Network{NodeIP: netip.MustParseAddr("10.9.0.129"), CIDR: netip.MustParsePrefix("10.9.0.0/24"),
		Range: netip.MustParsePrefix("10.9.0.128/25"), Gateway: netip.MustParseAddr("10.9.0.1")}
	a, _, _ := n.allocate()
	if a.String() != "10.9.0.130" {
		t.Fatalf("first pod IP %s, want 10.9.0.130 (the range's first after the node's own)", a)
	}
	if n.PodRange().String() != "10.9.0.128/25" || n.gateway().String() != "10.9.0.1" {
		t.Fatalf("range %s, gateway %s", n.PodRange(), n.gateway())
	}
	for {
		ip, _, err := n.allocate()
		if err != nil {
			break
		}
		if !n.Range.Contains(ip) {
			t.Fatalf("%s is outside the node's range", ip)
		}
	}
}
