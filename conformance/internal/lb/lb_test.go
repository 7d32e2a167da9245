package lb

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

func ptr[T any](v T) *T { return &v }

func slice(name, svc string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
		Endpoints:   eps,
	}
}

func TestEndpointsPicksReadyAddressesAtTheSlicePortForTheServicePort(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	ports := []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(3000))}, {Name: ptr("h2c"), Port: ptr(int32(3001))}}
	_ = idx.Add(slice("a", "web", ports,
		discoveryv1.Endpoint{Addresses: []string{"10.244.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
		discoveryv1.Endpoint{Addresses: []string{"10.244.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}},
		discoveryv1.Endpoint{Addresses: []string{"10.244.0.4"}}, // ready unset counts as ready
		// terminating (a draining pod, or a copy that kept ready): no new connections
		discoveryv1.Endpoint{Addresses: []string{"10.244.0.6"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Terminating: ptr(true)}},
	))
	_ = idx.Add(slice("b", "other", ports, discoveryv1.Endpoint{Addresses: []string{"10.244.0.9"}}))
	_ = idx.Add(slice("c", "unnamed", []discoveryv1.EndpointPort{{Name: ptr(""), Port: ptr(int32(8080))}},
		discoveryv1.Endpoint{Addresses: []string{"10.244.0.5"}}))
	b := &Balancer{Slices: discoverylisters.NewEndpointSliceLister(idx)}

	got := b.endpoints(&listener{svcNS: "ns", svcName: "web", port: corev1.ServicePort{Name: "h2c", Port: 8081}})
	sort.Strings(got)
	if want := []string{"10.244.0.2:3001", "10.244.0.4:3001"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("web/h2c endpoints = %v, want %v", got, want)
	}
	got = b.endpoints(&listener{svcNS: "ns", svcName: "unnamed", port: corev1.ServicePort{Port: 80}})
	if len(got) != 1 || got[0] != "10.244.0.5:8080" {
		t.Errorf("unnamed endpoints = %v", got)
	}
	if got := b.endpoints(&listener{svcNS: "ns", svcName: "web", port: corev1.ServicePort{Name: "nope"}}); len(got) != 0 {
		t.Errorf("unknown port name got endpoints %v", got)
	}
}

// udpEcho answers every datagram with "<payload> from <sender ip:port>", so a test
// can tell which upstream socket (session) a datagram came through.
func udpEcho(t *testing.T) *net.UDPConn {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteToUDP([]byte(fmt.Sprintf("%s from %s", buf[:n], from)), from)
		}
	}()
	return pc
}

// balancerFor makes a Balancer whose Service ns/name has one ready endpoint at
// 127.0.0.1:port for its port named portName with the given protocol. No interface:
// the loopback addresses are local already.
func balancerFor(name, portName string, proto corev1.Protocol, port int) *Balancer {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = idx.Add(slice(name, name, []discoveryv1.EndpointPort{{Name: ptr(portName), Port: ptr(int32(port)), Protocol: ptr(proto)}},
		discoveryv1.Endpoint{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}))
	b := &Balancer{Slices: discoverylisters.NewEndpointSliceLister(idx), UDPIdleTimeout: 300 * time.Millisecond}
	b.init()
	return b
}

func exchange(t *testing.T, c *net.UDPConn, to *net.UDPAddr, msg string) (string, *net.UDPAddr) {
	t.Helper()
	if _, err := c.WriteToUDP([]byte(msg), to); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 2048)
	n, from, err := c.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("no reply to %q: %v", msg, err)
	}
	return string(buf[:n]), from
}

func TestUDPForwardingKeepsOneSessionPerClientAndAnswersFromTheServiceAddress(t *testing.T) {
	echo := udpEcho(t)
	b := balancerFor("dns", "udp-dns", corev1.ProtocolUDP, echo.LocalAddr().(*net.UDPAddr).Port)
	// Port 0: the kernel picks the "Service port"; the listener key is what Sync makes.
	lk := listenerKey(corev1.ProtocolUDP, netip.MustParseAddr("127.0.0.1"), 0)
	if lk != "udp/127.0.0.1:0" {
		t.Fatalf("listener key %q", lk)
	}
	if err := b.openListener(lk, "ns", "dns", corev1.ServicePort{Name: "udp-dns", Protocol: corev1.ProtocolUDP, Port: 53}); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l := b.listeners[lk]
	svc := l.pc.LocalAddr().(*net.UDPAddr)

	c1, _ := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	c2, _ := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	defer c1.Close()
	defer c2.Close()

	r1, from := exchange(t, c1, svc, "one")
	if from.String() != svc.String() {
		t.Errorf("reply came from %s, want the Service address %s", from, svc)
	}
	r1b, _ := exchange(t, c1, svc, "two")
	r2, _ := exchange(t, c2, svc, "three")
	up1 := strings.TrimPrefix(r1, "one from ")
	if !strings.HasPrefix(r1, "one from 127.0.0.1:") || r1b != "two from "+up1 {
		t.Errorf("client 1 replies %q, %q: want both through one upstream socket", r1, r1b)
	}
	if up2 := strings.TrimPrefix(r2, "three from "); up2 == up1 || !strings.HasPrefix(r2, "three from ") {
		t.Errorf("client 2 reply %q: want its own upstream socket (client 1 has %s)", r2, up1)
	}
	if n := l.sessionCount(); n != 2 {
		t.Errorf("%d sessions, want 2", n)
	}
	// Idle: both sessions end after the idle timeout; a new datagram makes a new one.
	deadline := time.Now().Add(3 * time.Second)
	for l.sessionCount() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := l.sessionCount(); n != 0 {
		t.Fatalf("%d sessions left after the idle timeout", n)
	}
	r1c, _ := exchange(t, c1, svc, "four")
	if r1c == "four from "+up1 {
		t.Errorf("after the idle timeout client 1 still used its old upstream socket %s", up1)
	}
}

func TestUDPWithoutEndpointsDropsAndClosingEndsSessions(t *testing.T) {
	echo := udpEcho(t)
	b := balancerFor("dns", "udp-dns", corev1.ProtocolUDP, echo.LocalAddr().(*net.UDPAddr).Port)
	// A Service port whose name has no endpoint port: datagrams are dropped.
	lk := "udp/127.0.0.1:0"
	if err := b.openListener(lk, "ns", "dns", corev1.ServicePort{Name: "other", Protocol: corev1.ProtocolUDP, Port: 53}); err != nil {
		t.Fatal(err)
	}
	l := b.listeners[lk]
	svc := l.pc.LocalAddr().(*net.UDPAddr)
	c, _ := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	defer c.Close()
	_, _ = c.WriteToUDP([]byte("x"), svc)
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _, err := c.ReadFromUDP(make([]byte, 64)); err == nil {
		t.Errorf("got a %d-byte reply without endpoints", n)
	}
	// The port now matches (as after an update from Sync): forwarded.
	l.mu.Lock()
	l.port.Name = "udp-dns"
	l.mu.Unlock()
	if r, _ := exchange(t, c, svc, "y"); !strings.HasPrefix(r, "y from ") {
		t.Errorf("reply %q", r)
	}
	b.Close()
	if n := l.sessionCount(); n != 0 {
		t.Errorf("%d sessions after Close", n)
	}
	if _, err := c.WriteToUDP([]byte("z"), svc); err == nil {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, _, err := c.ReadFromUDP(make([]byte, 64)); err == nil {
			t.Errorf("reply after Close")
		}
	}
}

func TestTCPAndUDPOnTheSamePortAreSeparateListeners(t *testing.T) {
	// A TCP echo and a UDP echo; a Service with TCP and UDP ports of the same number.
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	echo := udpEcho(t)
	_ = idx.Add(slice("mixed", "mixed", []discoveryv1.EndpointPort{
		{Name: ptr("tcp"), Port: ptr(int32(tl.Addr().(*net.TCPAddr).Port)), Protocol: ptr(corev1.ProtocolTCP)},
		{Name: ptr("udp"), Port: ptr(int32(echo.LocalAddr().(*net.UDPAddr).Port)), Protocol: ptr(corev1.ProtocolUDP)},
	}, discoveryv1.Endpoint{Addresses: []string{"127.0.0.1"}}))
	b := &Balancer{Slices: discoverylisters.NewEndpointSliceLister(idx)}
	b.init()
	defer b.Close()
	// One free port number for both protocols.
	probe, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := probe.LocalAddr().(*net.UDPAddr).Port
	_ = probe.Close()
	lo := netip.MustParseAddr("127.0.0.1")
	tk, uk := listenerKey(corev1.ProtocolTCP, lo, int32(port)), listenerKey(corev1.ProtocolUDP, lo, int32(port))
	if err := b.openListener(tk, "ns", "mixed", corev1.ServicePort{Name: "tcp", Port: int32(port)}); err != nil {
		t.Skipf("port %d taken for TCP meanwhile: %v", port, err)
	}
	if err := b.openListener(uk, "ns", "mixed", corev1.ServicePort{Name: "udp", Protocol: corev1.ProtocolUDP, Port: int32(port)}); err != nil {
		t.Fatal(err)
	}
	hp := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	c, err := net.DialTimeout("tcp", hp, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("over tcp"))
	_ = c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(c)
	_ = c.Close()
	if string(got) != "over tcp" {
		t.Errorf("TCP echo through the forwarder: %q", got)
	}
	uc, _ := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	defer uc.Close()
	if r, _ := exchange(t, uc, net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, uint16(port))), "over udp"); !strings.HasPrefix(r, "over udp from ") {
		t.Errorf("UDP echo through the forwarder: %q", r)
	}
	if lk := listenerKey(corev1.ProtocolSCTP, lo, 1); lk != "" {
		t.Errorf("SCTP listener key %q, want none", lk)
	}
}

func TestRequestedAddressesAreGivenWhenInThePoolAndFree(t *testing.T) {
	b := &Balancer{Pool: netip.MustParsePrefix("10.250.0.0/24")}
	b.init()
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, v := range s {
			out = append(out, netip.MustParseAddr(v))
		}
		return out
	}
	if got := b.requested("ns/a", []string{"10.251.0.1", " 10.250.0.9", "bogus", "10.250.0.9"}); !slices.Equal(got, addrs("10.250.0.9")) {
		t.Fatalf("a got %v, want only the pool address, once", got)
	}
	if got := b.requested("ns/b", []string{"10.250.0.9"}); len(got) != 0 {
		t.Fatalf("b got %v, but a holds it", got)
	}
	if got := b.requested("ns/a", []string{"10.250.0.10"}); !slices.Equal(got, addrs("10.250.0.10")) {
		t.Fatalf("a got %v after changing its request", got)
	}
	if got := b.requested("ns/b", []string{"10.250.0.9"}); !slices.Equal(got, addrs("10.250.0.9")) {
		t.Fatalf("b got %v once a let it go", got)
	}
}
