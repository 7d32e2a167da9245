// Package lb is the harness's stand-in for a cloud load balancer and kube-proxy.
//
// LoadBalancer Services get an address from the pool, written to
// status.loadBalancer.ingress; every Service's ClusterIP and load-balancer address is
// added (as a /32) to an interface of the node network namespace (its loopback), and a TCP
// forwarder listens on each address:port and relays connections to the Service's
// ready endpoints (from EndpointSlices) at their target port, round robin.
//
//	client (node netns or pod) ─► LBIP:port / ClusterIP:port ─► forwarder ─► endpoint IP:targetPort
//
// Addresses live only in the node network namespace; nothing is routed from the host.
package lb

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"os/exec"
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

	mu        sync.Mutex
	listeners map[string]*listener       // "ip:port" → listener
	bySvc     map[string]map[string]bool // service key → listener keys
	assigned  map[netip.Addr]string      // LB address → service key
	addrs     map[netip.Addr]int         // address → listener count
}

type listener struct {
	ln      net.Listener
	svcNS   string
	svcName string
	next    atomic.Uint64

	mu   sync.Mutex // guards port only: connections must not wait on Sync's API calls
	port corev1.ServicePort
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
			lbip, err := b.lbAddress(ctx, svc)
			if err != nil {
				log.Printf("service %s: %v", k, err)
			} else {
				ips = append(ips, lbip)
			}
		}
		for _, ip := range ips {
			for _, p := range svc.Spec.Ports {
				if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
					continue
				}
				want[net.JoinHostPort(ip.String(), fmt.Sprint(p.Port))] = p
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

// lbAddress keeps the address already in status (if it is ours and free) or assigns
// the lowest free one, and writes it to status.loadBalancer.ingress.
func (b *Balancer) lbAddress(ctx context.Context, svc *corev1.Service) (netip.Addr, error) {
	k := key(svc.Namespace, svc.Name)
	for a, owner := range b.assigned {
		if owner == k {
			return a, b.writeStatus(ctx, svc, a)
		}
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil && b.Pool.Contains(a) {
			if _, taken := b.assigned[a]; !taken {
				b.assigned[a] = k
				return a, nil
			}
		}
	}
	for a := b.Pool.Addr().Next(); b.Pool.Contains(a); a = a.Next() {
		if _, taken := b.assigned[a]; taken || !b.Pool.Contains(a.Next()) {
			continue // skip taken and the broadcast address
		}
		b.assigned[a] = k
		return a, b.writeStatus(ctx, svc, a)
	}
	return netip.Addr{}, fmt.Errorf("load-balancer pool %s exhausted", b.Pool)
}

func (b *Balancer) writeStatus(ctx context.Context, svc *corev1.Service, a netip.Addr) error {
	ing := svc.Status.LoadBalancer.Ingress
	if len(ing) == 1 && ing[0].IP == a.String() {
		return nil
	}
	cp := svc.DeepCopy()
	mode := corev1.LoadBalancerIPModeVIP
	cp.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: a.String(), IPMode: &mode}}
	_, err := b.CS.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("write load-balancer status: %w", err)
	}
	log.Printf("service %s/%s: load-balancer address %s", svc.Namespace, svc.Name, a)
	return nil
}

func ipOf(hostport string) netip.Addr {
	h, _, _ := net.SplitHostPort(hostport)
	a, _ := netip.ParseAddr(h)
	return a
}

func (b *Balancer) openListener(lk, ns, name string, p corev1.ServicePort) error {
	ip := ipOf(lk)
	if b.addrs[ip] == 0 {
		if out, err := exec.Command("ip", "addr", "replace", ip.String()+"/32", "dev", b.Interface).CombinedOutput(); err != nil {
			return fmt.Errorf("add address: %v: %s", err, strings.TrimSpace(string(out)))
		}
	}
	ln, err := net.Listen("tcp", lk)
	if err != nil {
		if b.addrs[ip] == 0 {
			_ = exec.Command("ip", "addr", "del", ip.String()+"/32", "dev", b.Interface).Run()
		}
		return err
	}
	b.addrs[ip]++
	l := &listener{ln: ln, svcNS: ns, svcName: name, port: p}
	b.listeners[lk] = l
	go b.serve(l)
	return nil
}

func (b *Balancer) closeListener(lk string) {
	l, ok := b.listeners[lk]
	if !ok {
		return
	}
	_ = l.ln.Close()
	delete(b.listeners, lk)
	ip := ipOf(lk)
	b.addrs[ip]--
	if b.addrs[ip] <= 0 {
		delete(b.addrs, ip)
		_ = exec.Command("ip", "addr", "del", ip.String()+"/32", "dev", b.Interface).Run()
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

// endpoints lists the ready endpoint addresses of a Service port (ip:port).
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
		port := int32(-1)
		for _, sp := range s.Ports {
			if sp.Port != nil && (sp.Name == nil && p.Name == "" || sp.Name != nil && *sp.Name == p.Name) {
				port = *sp.Port
			}
		}
		if port < 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
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

// Close stops every listener and removes every address.
func (b *Balancer) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	for lk := range b.listeners {
		b.closeListener(lk)
	}
}
