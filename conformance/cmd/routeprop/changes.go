package main

// The route changes scenario (gateway-api-bench's "route changes"): clients send
// requests without pause to one route while its rule is switched back and forth
// between two ports of a Service (two clusters) with a response header that names the
// change. Every answer but a 200 is a failure; so is a request with no answer. A
// change is "seen" when a response carries its header.
//
//	routeprop changes --kubeconfig K --gateway NS/NAME --address IP:PORT --impl X [flags]

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ChangesResult is one implementation's run of the route changes scenario.
type ChangesResult struct {
	Scenario string `json:"scenario"`
	Impl     string `json:"impl"`
	Detail   string `json:"detail,omitempty"`
	// Routes: the other HTTPRoutes in the Gateway's namespace during the run.
	Routes  int `json:"routes"`
	Changes int `json:"changes"`
	Clients int `json:"clients"`
	// MsSeen: per change, apply → the first response carrying its header (ms; only
	// the changes seen within 10 s).
	MsSeen   []float64      `json:"ms_seen"`
	Requests int            `json:"requests"`
	Failed   int            `json:"failed"`
	Codes    map[string]int `json:"codes,omitempty"`
	// LongestGapMs: the longest time one client went without a 200.
	LongestGapMs float64 `json:"longest_gap_ms"`
	Load1        float64 `json:"load1"`
}

const changeHeader = "x-bench-change"

type changeClients struct {
	mu       sync.Mutex
	requests int
	failed   int
	codes    map[string]int
	gap      time.Duration
	firstAt  map[string]time.Time // header value → first response carrying it
	stopping atomic.Bool
}

func (c *changeClients) record(code string, value string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	if code != "200" {
		c.failed++
		c.codes[code]++
	}
	if _, ok := c.firstAt[value]; value != "" && !ok {
		c.firstAt[value] = now
	}
}

func (c *changeClients) seen(value string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.firstAt[value]
	return t, ok
}

// run is one keep-alive client: requests back to back until stopped.
func (c *changeClients) run(address, host string) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 1, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}}
	last := time.Now()
	for n := 0; !c.stopping.Load(); n++ {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/%d", address, n), nil)
		req.Host = host
		resp, err := client.Do(req)
		now := time.Now()
		if err != nil {
			c.record("no answer", "", now)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.record(strconv.Itoa(resp.StatusCode), resp.Header.Get(changeHeader), now)
		if resp.StatusCode == http.StatusOK {
			c.mu.Lock()
			c.gap = max(c.gap, now.Sub(last))
			c.mu.Unlock()
			last = now
		}
	}
}

func changes(args []string) error {
	fs := flag.NewFlagSet("changes", flag.ExitOnError)
	c := commonFlags(fs)
	selector := fs.String("backend-selector", "app=echo", "the backend pods' label KEY=VALUE (the Service's selector)")
	targetPort := fs.Int("target-port", 3000, "the backend pods' port")
	n := fs.Int("changes", 20, "changes made to the route")
	clients := fs.Int("clients", 4, "keep-alive clients sending requests without pause")
	grace := fs.Duration("grace", 200*time.Millisecond, "pause after a change is seen (or not within 10 s) before the next")
	_ = fs.Parse(args)
	address, impl, detail, out := c.address, c.impl, c.detail, c.out
	ns, gwName, gw, kube, err := c.open(true)
	if err != nil {
		return err
	}
	key, value, ok := strings.Cut(*selector, "=")
	if !ok {
		return errors.New("--backend-selector KEY=VALUE")
	}
	ctx := context.Background()

	// The Service with two ports to one set of pods: a change moves the route from
	// one cluster to the other.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "change-backend", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{key: value}, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt(*targetPort)},
			{Name: "http-alt", Port: 8080, TargetPort: intstr.FromInt(*targetPort)},
		}},
	}
	if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	routes := gw.GatewayV1().HTTPRoutes(ns)
	list, err := routes.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	res := ChangesResult{Scenario: "changes", Impl: *impl, Detail: *detail, Changes: *n, Clients: *clients, Codes: map[string]int{}}
	for _, r := range list.Items {
		if r.Name != "change-under-load" {
			res.Routes++
		}
	}
	host := "change-under-load.bench.example"
	route := changeRoute(ns, gwName, host, 0)
	_ = routes.Delete(ctx, route.Name, metav1.DeleteOptions{})
	if _, err := routes.Create(ctx, route, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s: %w", route.Name, err)
	}
	cc := &changeClients{codes: map[string]int{}, firstAt: map[string]time.Time{}}
	// Served before the clients start: one probe client until the first change's
	// header comes back.
	probe := &changeClients{codes: map[string]int{}, firstAt: map[string]time.Time{}}
	go probe.run(*address, host)
	t := time.Now()
	for {
		if _, ok := probe.seen("0"); ok {
			break
		}
		if time.Since(t) > 2*time.Minute {
			probe.stopping.Store(true)
			return fmt.Errorf("%s not served within 2 min", host)
		}
		time.Sleep(10 * time.Millisecond)
	}
	probe.stopping.Store(true)
	logf("%s: %s served; %d clients, %d changes (%d other routes)", *impl, host, *clients, *n, res.Routes)

	var wg sync.WaitGroup
	for range *clients {
		wg.Go(func() { cc.run(*address, host) })
	}
	time.Sleep(time.Second)
	for i := 1; i <= *n; i++ {
		t0, err := updateRoute(ctx, gw, ns, route.Name, changeRoute(ns, gwName, host, i).Spec)
		if err != nil {
			return fmt.Errorf("change %d: %w", i, err)
		}
		for time.Since(t0) < 10*time.Second {
			if at, ok := cc.seen(strconv.Itoa(i)); ok {
				res.MsSeen = append(res.MsSeen, ms(at.Sub(t0)))
				break
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(*grace)
	}
	time.Sleep(time.Second)
	cc.stopping.Store(true)
	wg.Wait()
	res.Requests, res.Failed, res.Codes, res.LongestGapMs = cc.requests, cc.failed, cc.codes, ms(cc.gap)
	res.Load1 = load1()
	logf("%s: %d requests, %d failed %v, %d of %d changes seen, longest gap without a 200 %.1f ms",
		*impl, res.Requests, res.Failed, res.Codes, len(res.MsSeen), *n, res.LongestGapMs)
	return appendLine(*out, res)
}

// changeRoute is the route at change i: even changes go to port 80, odd ones to
// 8080, and every one sets its number as a response header.
func changeRoute(ns, gwName, host string, i int) *gwv1.HTTPRoute {
	port := gwv1.PortNumber(80)
	if i%2 == 1 {
		port = 8080
	}
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "change-under-load", Namespace: ns, Labels: map[string]string{roleLabel: "changes"}},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(gwName)}}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(host)},
			Rules: []gwv1.HTTPRouteRule{{
				Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterResponseHeaderModifier,
					ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: changeHeader, Value: strconv.Itoa(i)}}}}},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
					BackendObjectReference: gwv1.BackendObjectReference{Name: "change-backend", Port: &port}}}},
			}},
		},
	}
}

func load1() float64 {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		v, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
		return v
	}
	return 0
}

// appendLine appends v as one JSON line to path (when given) and prints it.
func appendLine(path string, v any) error {
	line, _ := json.Marshal(v)
	fmt.Println(string(line))
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(append(line, '\n'))
	return err
}

// sortedCodes: "code ×n" in code order.
func sortedCodes(codes map[string]int) string {
	var keys []string
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, codes[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// changesTable: the route changes scenario, one row per implementation, then the
// ratio of the second to the first.
func changesTable(cs []ChangesResult, label string) {
	fmt.Println()
	fmt.Println("route changes under load: one route switched between two ports of a Service (two clusters) with a")
	fmt.Println("response header naming the change, while keep-alive clients send requests without pause;")
	fmt.Println("seen: apply → first response with the change's header; gap: longest time one client went without a 200")
	fmt.Printf("%-14s %6s %7s %9s %9s %9s %8s %7s %9s  %s\n", "", "routes", "seen", "seen med", "seen p99", "seen max", "requests", "failed", "gap ms", "answers that were not 200")
	var rows [][]float64
	for _, c := range cs {
		v := []float64{quantile(c.MsSeen, 0.5), quantile(c.MsSeen, 0.99), quantile(c.MsSeen, 1), c.LongestGapMs}
		rows = append(rows, v)
		fmt.Printf("%-14s %6d %3d/%-3d %9.1f %9.1f %9.1f %8d %7d %9.1f  %s\n", trunc(c.Impl, 14), c.Routes, len(c.MsSeen), c.Changes,
			v[0], v[1], v[2], c.Requests, c.Failed, v[3], sortedCodes(c.Codes))
	}
	if len(rows) == 2 {
		fmt.Printf("%-14s %6s %7s %9s %9s %9s %8s %7s %9s\n", trunc(label, 14), "", "", ratio(rows[1][0], rows[0][0]),
			ratio(rows[1][1], rows[0][1]), ratio(rows[1][2], rows[0][2]), "", "", ratio(rows[1][3], rows[0][3]))
	}
}
