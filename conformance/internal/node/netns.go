package node

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
)

// Network hands out pod IPs from the node's pod CIDR and wires each pod's network
// namespace to the node bridge:
//
//	node netns:  bridge (node IP, gateway) ─┬─ veth vNNN ══ eth0 (pod IP)  pod netns
//	                                        └─ veth vMMM ══ eth0 (pod IP)  pod netns
//
// Everything here runs inside the node network namespace; `ip netns add` puts the
// namespace files under /run/netns with the run's prefix, so teardown finds them.
//
// With more than one node the bridges are joined into one L2 segment (CIDR), and each
// node hands out pod IPs from its own Range of it; pods route through Gateway (the node
// carrying the Service addresses), else through their own node.
type Network struct {
	Prefix  string // netns name prefix of this run, e.g. "ae1a2b-"
	Bridge  string
	NodeIP  netip.Addr
	CIDR    netip.Prefix // the pod network (the mask pods get)
	Range   netip.Prefix // this node's pod IPs (invalid: all of CIDR)
	Gateway netip.Addr   // pods' default route (invalid: NodeIP)

	mu   sync.Mutex
	used map[netip.Addr]bool
	seq  int
	last netip.Addr // the last IP handed out: the search resumes after it
}

type podNet struct {
	netns string // name under /run/netns
	veth  string
	ip    netip.Addr
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (n *Network) allocate() (netip.Addr, int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.used == nil {
		n.used = map[netip.Addr]bool{n.NodeIP: true}
	}
	n.seq++
	// Round robin from the last IP handed out, not lowest-free: an IP freed a
	// moment ago is taken last, so the node's neighbour cache never sends a new
	// pod's packets to the deleted pod's MAC (seen as ~50 s of upstream connect
	// timeouts when a test's backend pod got its predecessor's IP).
	pool := n.pool()
	start := n.last
	if !start.IsValid() {
		start = pool.Addr()
	}
	ip := start
	for {
		ip = ip.Next()
		if !pool.Contains(ip) {
			if start == pool.Addr() {
				return netip.Addr{}, 0, fmt.Errorf("pod range %s exhausted", pool)
			}
			ip = pool.Addr()
			continue
		}
		if !n.used[ip] {
			n.used[ip] = true
			n.last = ip
			return ip, n.seq, nil
		}
		if ip == start {
			return netip.Addr{}, 0, fmt.Errorf("pod range %s exhausted", pool)
		}
	}
}

// pool is where this node's pod IPs come from.
func (n *Network) pool() netip.Prefix {
	if n.Range.IsValid() {
		return n.Range
	}
	return n.CIDR
}

// PodRange is this node's share of the pod network (the Node's podCIDR).
func (n *Network) PodRange() netip.Prefix { return n.pool() }

func (n *Network) gateway() netip.Addr {
	if n.Gateway.IsValid() {
		return n.Gateway
	}
	return n.NodeIP
}

func (n *Network) release(ip netip.Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.used, ip)
}

// add creates a pod network namespace with its veth and address.
func (n *Network) add() (*podNet, error) {
	ip, seq, err := n.allocate()
	if err != nil {
		return nil, err
	}
	p := &podNet{netns: fmt.Sprintf("%spod%d", n.Prefix, seq), veth: fmt.Sprintf("%sv%d", n.Prefix, seq), ip: ip}
	if len(p.veth) > 15 {
		p.veth = fmt.Sprintf("aev%d", seq)
	}
	steps := [][]string{
		{"ip", "netns", "add", p.netns},
		{"ip", "link", "add", p.veth, "type", "veth", "peer", "name", "eth0", "netns", p.netns},
		{"ip", "link", "set", p.veth, "master", n.Bridge, "up"},
		{"ip", "-n", p.netns, "link", "set", "lo", "up"},
		{"ip", "-n", p.netns, "addr", "add", fmt.Sprintf("%s/%d", ip, n.CIDR.Bits()), "dev", "eth0"},
		{"ip", "-n", p.netns, "link", "set", "eth0", "up"},
		{"ip", "-n", p.netns, "route", "add", "default", "via", n.gateway().String()},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			n.remove(p)
			return nil, err
		}
	}
	// Forget whatever the node knew of this IP's link address (an earlier pod's).
	_ = run("ip", "neigh", "flush", "to", ip.String())
	return p, nil
}

// remove deletes the namespace (its veth goes with it) and frees the IP.
func (n *Network) remove(p *podNet) {
	_ = run("ip", "link", "del", p.veth)
	_ = run("ip", "netns", "del", p.netns)
	n.release(p.ip)
}
