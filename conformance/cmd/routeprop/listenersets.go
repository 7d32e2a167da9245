package main

// The ListenerSet scale scenario (gateway-api-bench's "ListenerSet scale", at the
// size issue 31 names): L ListenerSets on the Gateway, each with one HTTPS listener
// on port 443 for its own hostname (one certificate Secret for all), and R routes
// attached to each. It measures the time until every route is Accepted and every
// hostname answers 200 over HTTPS (SNI = the hostname) through the Gateway's
// address, the CPU seconds that cost the control plane and the Envoys, then one
// route edited a second for a while (gateway-api-bench refreshes its routes), and
// resident memory sampled every second.
//
//	routeprop listenersets --kubeconfig K --gateway NS/NAME --address IP --impl X --ctl-pids … --envoy-pids … [flags]

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ListenerSetResult is one implementation's run of the ListenerSet scale scenario.
type ListenerSetResult struct {
	Scenario     string `json:"scenario"`
	Impl         string `json:"impl"`
	Detail       string `json:"detail,omitempty"`
	ListenerSets int    `json:"listener_sets"`
	Routes       int    `json:"routes"`
	// AcceptedS and ServedS: the first create → every route Accepted, and every
	// hostname answering 200 over HTTPS.
	AcceptedS float64 `json:"accepted_s"`
	ServedS   float64 `json:"served_s"`
	// CPU seconds until both; then CPU cores during the edits.
	CtlLoadCPU     float64    `json:"ctl_load_cpu_s"`
	EnvoyLoadCPU   float64    `json:"envoy_load_cpu_s"`
	EditS          float64    `json:"edit_s"`
	Edits          int        `json:"edits"`
	CtlEditCores   float64    `json:"ctl_edit_cores"`
	EnvoyEditCores float64    `json:"envoy_edit_cores"`
	CtlMiBMax      float64    `json:"ctl_mib_max"`
	EnvoyMiBMax    float64    `json:"envoy_mib_max"`
	RSS            []NamedRSS `json:"rss"`
	Load1          float64    `json:"load1"`
}

func listenerSets(args []string) error {
	fs := flag.NewFlagSet("listenersets", flag.ExitOnError)
	c := commonFlags(fs)
	nSets := fs.Int("listener-sets", 100, "ListenerSets, each one HTTPS listener for its own hostname")
	perSet := fs.Int("routes", 16, "HTTPRoutes attached to each ListenerSet")
	edit := fs.Duration("edit", time.Minute, "how long routes are edited (one a second) after the load")
	backend := fs.String("backend", "echo:8080", "backend Service NAME:PORT")
	_ = fs.Parse(args)
	address, impl, detail, controller, ctlPids, envoyPids, out := c.address, c.impl, c.detail, c.controller, c.ctlPids, c.envoyPids, c.out
	ns, gwName, gw, kube, err := c.open(true)
	if err != nil {
		return err
	}
	svc, port, ok := strings.Cut(*backend, ":")
	if !ok || *nSets < 1 || *perSet < 1 {
		return errors.New("--backend NAME:PORT, --listener-sets ≥ 1 and --routes ≥ 1")
	}
	var backendPort int
	if _, err := fmt.Sscan(port, &backendPort); err != nil {
		return fmt.Errorf("--backend NAME:PORT, not %q", *backend)
	}
	ctx := context.Background()
	b := &bench{gw: gw, ns: ns, gwName: gwName}
	if _, err := b.prepare(ctx, 0); err != nil {
		return err
	}
	res := ListenerSetResult{Scenario: "listenersets", Impl: *impl, Detail: *detail, ListenerSets: *nSets, Routes: *nSets * *perSet}

	// The certificate for every hostname, and the Gateway open to ListenerSets of
	// its namespace.
	certPEM, keyPEM, err := selfSigned("*.ls.bench.example")
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ls-cert", Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	allow := func(from gwv1.FromNamespaces) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			g, err := gw.GatewayV1().Gateways(ns).Get(ctx, gwName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			g.Spec.AllowedListeners = &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: &from}}
			_, err = gw.GatewayV1().Gateways(ns).Update(ctx, g, metav1.UpdateOptions{})
			return err
		})
	}
	if err := allow(gwv1.NamespacesFromSame); err != nil {
		return fmt.Errorf("allow ListenerSets on %s/%s: %w", ns, gwName, err)
	}

	waitQuiet(*ctlPids, time.Minute)
	mem := startSampling(*ctlPids, *envoyPids)
	ctl0, envoy0 := cpuSeconds(*ctlPids), cpuSeconds(*envoyPids)
	t0 := time.Now()
	logf("%s: creating %d ListenerSets (HTTPS :443, one hostname each) and %d HTTPRoutes", *impl, *nSets, res.Routes)
	err = parallel(16, *nSets, func(i int) error {
		if _, err := gw.GatewayV1().ListenerSets(ns).Create(ctx, listenerSet(ns, gwName, i), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ListenerSet ls-%d: %w", i, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = parallel(16, res.Routes, func(k int) error {
		r := lsRoute(ns, k / *perSet, k%*perSet, 0, svc, backendPort)
		_, err := gw.GatewayV1().HTTPRoutes(ns).Create(ctx, r, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	if err := waitAllAccepted(ctx, gw, ns, *controller, 15*time.Minute); err != nil {
		return err
	}
	res.AcceptedS = time.Since(t0).Seconds()
	if err := waitHTTPS(*address, *nSets, 10*time.Minute); err != nil {
		return err
	}
	res.ServedS = time.Since(t0).Seconds()
	res.CtlLoadCPU, res.EnvoyLoadCPU = cpuSeconds(*ctlPids)-ctl0, cpuSeconds(*envoyPids)-envoy0
	logf("%s: %d routes Accepted %.1f s, %d hostnames served over HTTPS %.1f s after the first create (CPU: control plane %.1f s, Envoy %.1f s)",
		*impl, res.Routes, res.AcceptedS, *nSets, res.ServedS, res.CtlLoadCPU, res.EnvoyLoadCPU)
	logf("%s: control plane quiet %.0f s later; the edits start", *impl, waitQuiet(*ctlPids, time.Minute).Seconds())

	// One route edited a second (its path moves), as gateway-api-bench refreshes
	// its routes.
	ctl0, envoy0 = cpuSeconds(*ctlPids), cpuSeconds(*envoyPids)
	t1 := time.Now()
	tick := time.NewTicker(time.Second)
	for time.Since(t1) < *edit {
		<-tick.C
		k := res.Edits * 7919 % res.Routes
		res.Edits++
		name := fmt.Sprintf("ls-%d-%d", k / *perSet, k%*perSet)
		if _, err := updateRoute(ctx, gw, ns, name, lsRoute(ns, k / *perSet, k%*perSet, res.Edits, svc, backendPort).Spec); err != nil {
			return fmt.Errorf("edit %s: %w", name, err)
		}
	}
	tick.Stop()
	res.EditS = time.Since(t1).Seconds()
	res.CtlEditCores = (cpuSeconds(*ctlPids) - ctl0) / res.EditS
	res.EnvoyEditCores = (cpuSeconds(*envoyPids) - envoy0) / res.EditS
	if err := waitAllAccepted(ctx, gw, ns, *controller, 5*time.Minute); err != nil {
		return err
	}
	res.CtlMiBMax, res.EnvoyMiBMax = mem.stop()
	_, each := rssMiB(*ctlPids)
	res.RSS = append(res.RSS, each...)
	_, each = rssMiB(*envoyPids)
	res.RSS = append(res.RSS, each...)
	res.Load1 = load1()
	logf("%s: %d edits in %.0f s: control plane %.3f cores, Envoy %.3f cores; RSS max ctl %.1f, Envoy %.1f MiB",
		*impl, res.Edits, res.EditS, res.CtlEditCores, res.EnvoyEditCores, res.CtlMiBMax, res.EnvoyMiBMax)
	if err := appendLine(*out, res); err != nil {
		return err
	}
	// The next scenario gets the Gateway as it was: its routes, ListenerSets and
	// permission go.
	if _, err := b.prepare(ctx, 0); err != nil {
		return err
	}
	err = parallel(16, *nSets, func(i int) error {
		err := gw.GatewayV1().ListenerSets(ns).Delete(ctx, fmt.Sprintf("ls-%d", i), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return allow(gwv1.NamespacesFromNone)
}

func lsHost(i int) string { return fmt.Sprintf("ls-%d.ls.bench.example", i) }

func listenerSet(ns, gwName string, i int) *gwv1.ListenerSet {
	host := gwv1.Hostname(lsHost(i))
	terminate := gwv1.TLSModeTerminate
	return &gwv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ls-%d", i), Namespace: ns},
		Spec: gwv1.ListenerSetSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: gwv1.ObjectName(gwName)},
			Listeners: []gwv1.ListenerEntry{{Name: "https", Hostname: &host, Port: 443, Protocol: gwv1.HTTPSProtocolType,
				TLS: &gwv1.ListenerTLSConfig{Mode: &terminate, CertificateRefs: []gwv1.SecretObjectReference{{Name: "ls-cert"}}}}},
		},
	}
}

// lsRoute is route r of ListenerSet i after its e-th edit (its path moves).
func lsRoute(ns string, i, r, e int, svc string, port int) *gwv1.HTTPRoute {
	p := gwv1.PortNumber(port)
	prefix := gwv1.PathMatchPathPrefix
	path := fmt.Sprintf("/%d", r)
	if r == 0 && e == 0 {
		path = "/" // route 0 of each set answers the probes
	} else if e > 0 {
		path = fmt.Sprintf("/%d/edit-%d", r, e)
	}
	kind := gwv1.Kind("ListenerSet")
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ls-%d-%d", i, r), Namespace: ns, Labels: map[string]string{roleLabel: "listenersets"}},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Kind: &kind, Name: gwv1.ObjectName(fmt.Sprintf("ls-%d", i))}}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(lsHost(i))},
			Rules: []gwv1.HTTPRouteRule{{
				Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &prefix, Value: &path}}},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
					BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(svc), Port: &p}}}},
			}},
		},
	}
}

// waitHTTPS: every ListenerSet's hostname answers 200 over HTTPS on address:443
// (SNI and Host = the hostname; the certificate is not checked: it is our own).
func waitHTTPS(address string, n int, timeout time.Duration) error {
	// Every connection goes to the Gateway; the URL's host is the SNI and Host.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DisableCompression: true, MaxIdleConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, address+":443")
		},
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // our own self-signed certificate
	}}
	deadline := time.Now().Add(timeout)
	pending := make([]int, n)
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d ListenerSet hostnames not served over HTTPS after %s", len(pending), n, timeout)
		}
		var mu sync.Mutex
		var still []int
		_ = parallel(8, len(pending), func(k int) error {
			i := pending[k]
			req, _ := http.NewRequest(http.MethodGet, "https://"+lsHost(i)+"/", nil)
			resp, err := client.Do(req)
			ok := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if !ok {
				mu.Lock()
				still = append(still, i)
				mu.Unlock()
			}
			return nil
		})
		pending = still
		if len(pending) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// selfSigned: a certificate and key (PEM) for host, valid for a day.
func selfSigned(host string) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// listenerSetTable: the ListenerSet scale scenario, one row per implementation,
// then the ratio of the second to the first.
func listenerSetTable(ls []ListenerSetResult, label string) {
	fmt.Println()
	fmt.Println("ListenerSet scale: L ListenerSets (one HTTPS listener each, its own hostname), R routes on them; acc / served:")
	fmt.Println("first create → every route Accepted / every hostname 200 over HTTPS, and the CPU seconds until then;")
	fmt.Println("edits: one route edited a second, CPU in cores; MiB: the largest resident memory sampled")
	fmt.Printf("%-14s %5s %6s %7s %8s %8s %9s %9s %9s %8s %9s\n", "", "sets", "routes", "acc s", "served s", "ctl cpu",
		"envoy cpu", "ctl cores", "env cores", "ctl MiB", "envoy MiB")
	var rows [][]float64
	for _, l := range ls {
		v := []float64{l.AcceptedS, l.ServedS, l.CtlLoadCPU, l.EnvoyLoadCPU, l.CtlEditCores, l.EnvoyEditCores, l.CtlMiBMax, l.EnvoyMiBMax}
		rows = append(rows, v)
		fmt.Printf("%-14s %5d %6d %7.1f %8.1f %8.1f %9.1f %9.3f %9.3f %8.1f %9.1f\n", trunc(l.Impl, 14), l.ListenerSets, l.Routes,
			v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7])
	}
	if len(rows) == 2 {
		ratioRow(label, fmt.Sprintf("%5s %6s", "", ""), rows, []int{7, 8, 8, 9, 9, 9, 8, 9})
	}
	for _, l := range ls {
		fmt.Printf("  %s: %d edits in %.0f s; RSS at the end:%s; load %.2f\n", l.Impl, l.Edits, l.EditS, rssList(l.RSS), l.Load1)
	}
}
