// Package lb is the harness's stand-in for a cloud load balancer and kube-proxy.
//
// LoadBalancer Services get an address from the pool (or the pool addresses they
// ask for in RequestedIPsAnnotation), written to status.loadBalancer.ingress; every Service's ClusterIP and load-balancer address is
// added (as a /32) to an interface of the node network namespace (its loopback), and a
// forwarder listens on each address:port and relays to the Service's ready endpoints
// (from EndpointSlices; not terminating) at their target port, round robin, on
// whichever node they are:
//
//	client (node netns or pod) ─► LBIP:port / ClusterIP:port ─► forwarder ─► endpoint IP:targetPort
//
// TCP ports: each connection goes to one endpoint. UDP ports: each client address gets
// a session, a UDP socket of its own toward one endpoint; the endpoint's replies are
// sent back to the client from the Service address:port it sent to. A session ends
// after UDPIdleTimeout without a datagram either way (as a conntrack entry does), or
// when the endpoint refuses (ICMP port unreachable).
//
// Addresses live only in the node network namespace; nothing is routed from the host.
package lb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// Balancer owns the pool, the addresses and the listeners.
type Balancer struct {
	CS        kubernetes.Interface
	Pool      netip.Prefix
	Interface string // interface in the node netns carrying the addresses (lo)
	Slices    discoverylisters.EndpointSliceLister
	// UDPIdleTimeout ends a UDP session with no datagram either way for this long
	// (0: DefaultUDPIdleTimeout).
	UDPIdleTimeout time.Duration

	mu        sync.Mutex
	listeners map[string]*listener       // "tcp/ip:port" or "udp/ip:port" → listener
	bySvc     map[string]map[string]bool // service key → listener keys
	assigned  map[netip.Addr]string      // LB address → service key
	addrs     map[netip.Addr]int         // address → listener count
}

// DefaultUDPIdleTimeout is the Linux conntrack default for UDP (nf_conntrack_udp_timeout).
const DefaultUDPIdleTimeout = 30 * time.Second

type listener struct {
	ln      net.Listener // TCP
	pc      *net.UDPConn // UDP
	svcNS   string
	svcName string
	next    atomic.Uint64

	mu   sync.Mutex // guards port only: connections must not wait on Sync's API calls
	port corev1.ServicePort

	smu      sync.Mutex // UDP sessions by client address
	sessions map[netip.AddrPort]*udpSession
}

func (l *listener) servicePort() corev1.ServicePort {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.port
}

func (b *Balancer) init() {
	if b.listeners == nil {
		b.listeners = map[string]*listener{}
		b.bySvc = map[string]map[string]bool{}
		b.assigned = map[netip.Addr]string{}
		b.addrs = map[netip.Addr]int{}
	}
}

func key(ns, name string) string { return ns + "/" + name }

// Sync reconciles one Service (nil: deleted).
func (b *Balancer) Sync(ctx context.Context, ns, name string, svc *corev1.Service) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	k := key(ns, name)
	want := map[string]corev1.ServicePort{}
	var ips []netip.Addr
	if svc != nil {
		for _, ip := range svc.Spec.ClusterIPs {
			if a, err := netip.ParseAddr(ip); err == nil {
				ips = append(ips, a)
			}
		}
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			lbips, err := b.lbAddresses(ctx, svc)
			if err != nil {
				log.Printf("service %s: %v", k, err)
			}
			ips = append(ips, lbips...)
		}
		for _, ip := range ips {
			for _, p := range svc.Spec.Ports {
				if lk := listenerKey(p.Protocol, ip, p.Port); lk != "" {
					want[lk] = p
				}
			}
		}
	}
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		for a, owner := range b.assigned {
			if owner == k {
				delete(b.assigned, a)
			}
		}
	}
	// Close listeners no longer wanted.
	for lk := range b.bySvc[k] {
		if _, ok := want[lk]; !ok {
			b.closeListener(lk)
			delete(b.bySvc[k], lk)
		}
	}
	for lk, p := range want {
		if l, ok := b.listeners[lk]; ok {
			l.mu.Lock()
			l.port = p
			l.mu.Unlock()
			continue
		}
		if err := b.openListener(lk, ns, name, p); err != nil {
			log.Printf("service %s: listen %s: %v", k, lk, err)
			continue
		}
		if b.bySvc[k] == nil {
			b.bySvc[k] = map[string]bool{}
		}
		b.bySvc[k][lk] = true
	}
	if len(b.bySvc[k]) == 0 {
		delete(b.bySvc, k)
	}
}

// RequestedIPsAnnotation lists the addresses a Service asks for, comma-separated
// (MetalLB's annotation, which aether-edge sets from a Gateway's spec.addresses).
const RequestedIPsAnnotation = "metallb.io/loadBalancerIPs"

// lbAddresses writes the Service's load-balancer addresses to
// status.loadBalancer.ingress and returns them. Requested addresses are given
// when they are in the pool and free (or already this Service's); the others are
// not usable and left out, so a Service may get only some of what it asked for.
// Without a request it keeps the address already in status (if it is ours and
// free) or gets the lowest free one.
func (b *Balancer) lbAddresses(ctx context.Context, svc *corev1.Service) ([]netip.Addr, error) {
	k := key(svc.Namespace, svc.Name)
	if v := svc.Annotations[RequestedIPsAnnotation]; v != "" {
		got := b.requested(k, strings.Split(v, ","))
		return got, b.writeStatus(ctx, svc, got)
	}
	var owned []netip.Addr
	for a, owner := range b.assigned {
		if owner == k {
			owned = append(owned, a)
		}
	}
	if len(owned) > 0 {
		slices.SortFunc(owned, func(x, y netip.Addr) int { return x.Compare(y) })
		for _, a := range owned[1:] {
			delete(b.assigned, a)
		}
		return owned[:1], b.writeStatus(ctx, svc, owned[:1])
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil && b.Pool.Contains(a) {
			if _, taken := b.assigned[a]; !taken {
				b.assigned[a] = k
				return []netip.Addr{a}, b.writeStatus(ctx, svc, []netip.Addr{a})
			}
		}
	}
	for a := b.Pool.Addr().Next(); b.Pool.Contains(a); a = a.Next() {
		if _, taken := b.assigned[a]; taken || !b.Pool.Contains(a.Next()) {
			continue // skip taken and the broadcast address
		}
		b.assigned[a] = k
		return []netip.Addr{a}, b.writeStatus(ctx, svc, []netip.Addr{a})
	}
	return nil, fmt.Errorf("load-balancer pool %s exhausted", b.Pool)
}

// requested gives service k the requested addresses it can have, releasing
// the ones it held and no longer asks for.
func (b *Balancer) requested(k string, values []string) []netip.Addr {
	want := map[netip.Addr]bool{}
	var got []netip.Addr
	for _, v := range values {
		a, err := netip.ParseAddr(strings.TrimSpace(v))
		switch {
		case err != nil:
			log.Printf("service %s: requested address %q is not an IP", k, v)
		case !b.Pool.Contains(a):
			log.Printf("service %s: requested address %s is outside the pool %s", k, a, b.Pool)
		case b.assigned[a] != "" && b.assigned[a] != k:
			log.Printf("service %s: requested address %s is taken by %s", k, a, b.assigned[a])
		case !want[a]:
			want[a] = true
			got = append(got, a)
		}
	}
	for a, owner := range b.assigned {
		if owner == k && !want[a] {
			delete(b.assigned, a)
		}
	}
	for _, a := range got {
		b.assigned[a] = k
	}
	return got
}

func (b *Balancer) writeStatus(ctx context.Context, svc *corev1.Service, addrs []netip.Addr) error {
	mode := corev1.LoadBalancerIPModeVIP
	ingress := []corev1.LoadBalancerIngress{}
	for _, a := range addrs {
		ingress = append(ingress, corev1.LoadBalancerIngress{IP: a.String(), IPMode: &mode})
	}
	current := svc.Status.LoadBalancer.Ingress
	same := len(current) == len(ingress)
	for i := 0; same && i < len(ingress); i++ {
		same = current[i].IP == ingress[i].IP
	}
	if same {
		return nil
	}
	cp := svc.DeepCopy()
	cp.Status.LoadBalancer.Ingress = ingress
	_, err := b.CS.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("write load-balancer status: %w", err)
	}
	log.Printf("service %s/%s: load-balancer addresses %v", svc.Namespace, svc.Name, addrs)
	return nil
}

func listenerKey(proto corev1.Protocol, ip netip.Addr, port int32) string {
	var network string
	switch proto {
	case "", corev1.ProtocolTCP:
		network = "tcp"
	case corev1.ProtocolUDP:
		network = "udp"
	default:
		return ""
	}
	return network + "/" + net.JoinHostPort(ip.String(), fmt.Sprint(port))
}

// splitKey: "udp/10.96.0.10:53" → "udp", "10.96.0.10:53", 10.96.0.10.
func splitKey(lk string) (network, hostport string, ip netip.Addr) {
	network, hostport, _ = strings.Cut(lk, "/")
	h, _, _ := net.SplitHostPort(hostport)
	ip, _ = netip.ParseAddr(h)
	return network, hostport, ip
}

// The addresses are added to b.Interface (none: they must be local already, as in tests).
func (b *Balancer) addAddress(ip netip.Addr) error {
	if b.Interface == "" {
		return nil
	}
	if out, err := exec.Command("ip", "addr", "replace", ip.String()+"/32", "dev", b.Interface).CombinedOutput(); err != nil {
		return fmt.Errorf("add address: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (b *Balancer) delAddress(ip netip.Addr) {
	if b.Interface != "" {
		_ = exec.Command("ip", "addr", "del", ip.String()+"/32", "dev", b.Interface).Run()
	}
}

func (b *Balancer) openListener(lk, ns, name string, p corev1.ServicePort) error {
	network, hostport, ip := splitKey(lk)
	if b.addrs[ip] == 0 {
		if err := b.addAddress(ip); err != nil {
			return err
		}
	}
	l := &listener{svcNS: ns, svcName: name, port: p}
	var err error
	if network == "udp" {
		var ua *net.UDPAddr
		if ua, err = net.ResolveUDPAddr("udp", hostport); err == nil {
			l.pc, err = net.ListenUDP("udp", ua)
		}
	} else {
		l.ln, err = net.Listen("tcp", hostport)
	}
	if err != nil {
		if b.addrs[ip] == 0 {
			b.delAddress(ip)
		}
		return err
	}
	b.addrs[ip]++
	b.listeners[lk] = l
	if l.pc != nil {
		l.sessions = map[netip.AddrPort]*udpSession{}
		go b.serveUDP(l)
	} else {
		go b.serve(l)
	}
	return nil
}

func (b *Balancer) closeListener(lk string) {
	l, ok := b.listeners[lk]
	if !ok {
		return
	}
	if l.pc != nil {
		_ = l.pc.Close()
		l.closeSessions()
	} else {
		_ = l.ln.Close()
	}
	delete(b.listeners, lk)
	_, _, ip := splitKey(lk)
	b.addrs[ip]--
	if b.addrs[ip] <= 0 {
		delete(b.addrs, ip)
		b.delAddress(ip)
	}
}

func (b *Balancer) serve(l *listener) {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		go b.forward(l, c)
	}
}

// endpoints lists the ready, not terminating, endpoint addresses of a Service port
// (ip:port).
func (b *Balancer) endpoints(l *listener) []string {
	p := l.servicePort()
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: l.svcName})
	slices, err := b.Slices.EndpointSlices(l.svcNS).List(sel)
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		port := int32(-1)
		for _, sp := range s.Ports {
			if sp.Protocol != nil && *sp.Protocol != proto {
				continue
			}
			if sp.Port != nil && (sp.Name == nil && p.Name == "" || sp.Name != nil && *sp.Name == p.Name) {
				port = *sp.Port
			}
		}
		if port < 0 {
			continue
		}
		for _, e := range s.Endpoints {
			// New connections only to endpoints ready and not terminating, as a load
			// balancer's health check or kube-proxy does; connections already made
			// to one that stops being so are left to it (a draining Envoy ends them).
			c := e.Conditions
			if c.Ready != nil && !*c.Ready || c.Terminating != nil && *c.Terminating {
				continue
			}
			for _, a := range e.Addresses {
				out = append(out, net.JoinHostPort(a, fmt.Sprint(port)))
			}
		}
	}
	return out
}

func (b *Balancer) forward(l *listener, c net.Conn) {
	defer c.Close()
	eps := b.endpoints(l)
	if len(eps) == 0 {
		return // like kube-proxy with no endpoints: the connection is refused/reset
	}
	start := l.next.Add(1)
	var up net.Conn
	var err error
	for i := range eps {
		up, err = net.DialTimeout("tcp", eps[(int(start)+i)%len(eps)], 3*time.Second)
		if err == nil {
			break
		}
	}
	if up == nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// udpSession is one client's flow through a UDP listener: its own socket, connected to
// the endpoint chosen when the client's first datagram arrived.
type udpSession struct {
	client netip.AddrPort
	up     *net.UDPConn
	last   atomic.Int64 // unix nanoseconds of the last datagram either way
}

func (s *udpSession) touch() { s.last.Store(time.Now().UnixNano()) }

func (b *Balancer) udpIdleTimeout() time.Duration {
	if b.UDPIdleTimeout > 0 {
		return b.UDPIdleTimeout
	}
	return DefaultUDPIdleTimeout
}

// serveUDP reads client datagrams on the Service address and sends each through the
// client's session (made on its first datagram; none while there is no endpoint, when
// the datagram is dropped, as kube-proxy drops it).
func (b *Balancer) serveUDP(l *listener) {
	buf := make([]byte, 64*1024)
	for {
		n, client, err := l.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. a transient error reported by the kernel: keep serving
		}
		s := l.session(client, b)
		if s == nil {
			continue
		}
		s.touch()
		if _, err := s.up.Write(buf[:n]); err != nil {
			l.endSession(s)
		}
	}
}

// session returns the client's session, making one toward the next ready endpoint.
func (l *listener) session(client netip.AddrPort, b *Balancer) *udpSession {
	l.smu.Lock()
	defer l.smu.Unlock()
	if l.sessions == nil {
		return nil // listener closed
	}
	if s, ok := l.sessions[client]; ok {
		return s
	}
	eps := b.endpoints(l)
	if len(eps) == 0 {
		return nil
	}
	start := l.next.Add(1)
	for i := range eps {
		ua, err := net.ResolveUDPAddr("udp", eps[(int(start)+i)%len(eps)])
		if err != nil {
			continue
		}
		up, err := net.DialUDP("udp", nil, ua)
		if err != nil {
			continue
		}
		s := &udpSession{client: client, up: up}
		s.touch()
		l.sessions[client] = s
		go b.relayReplies(l, s)
		return s
	}
	return nil
}

// relayReplies sends the endpoint's datagrams back to the client from the Service
// address, until the session is idle for the timeout, refused, or closed.
func (b *Balancer) relayReplies(l *listener, s *udpSession) {
	defer l.endSession(s)
	idle := b.udpIdleTimeout()
	buf := make([]byte, 64*1024)
	for {
		_ = s.up.SetReadDeadline(time.Now().Add(idle))
		n, err := s.up.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, s.last.Load())) < idle {
				continue // the client sent meanwhile: not idle
			}
			return // idle, refused by the endpoint (ICMP port unreachable), or closed
		}
		s.touch()
		if _, err := l.pc.WriteToUDPAddrPort(buf[:n], s.client); err != nil && errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

func (l *listener) endSession(s *udpSession) {
	l.smu.Lock()
	if l.sessions[s.client] == s {
		delete(l.sessions, s.client)
	}
	l.smu.Unlock()
	_ = s.up.Close()
}

func (l *listener) closeSessions() {
	l.smu.Lock()
	sessions := l.sessions
	l.sessions = nil
	l.smu.Unlock()
	for _, s := range sessions {
		_ = s.up.Close()
	}
}

// sessionCount is the number of live UDP sessions (for tests).
func (l *listener) sessionCount() int {
	l.smu.Lock()
	defer l.smu.Unlock()
	return len(l.sessions)
}

// Close stops every listener and removes every address.
func (b *Balancer) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	for lk := range b.listeners {
		b.closeListener(lk)
	}
}
