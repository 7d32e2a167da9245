package main

// The route scale scenario (gateway-api-bench's "route scale", at the size issue 31
// names): R HTTPRoutes, each to its own Service, and P backend pods behind them; once
// every route is Accepted, the pods churn (a pod replaced: its endpoint's address
// changes) at a steady rate with now and then a route edited, as a cluster's pods
// scale up and down. It measures what that costs the control plane and the Envoys:
// CPU seconds (from /proc) while loading and per second of churn, and resident memory
// sampled every second.
//
// The pods are simulated as gateway-api-bench's load generator simulates them: each
// Service has no selector and its EndpointSlice is written here, with addresses no
// process listens on (no request goes to these routes). Both implementations read
// endpoints from EndpointSlices, so they see what a cluster's pod churn shows them.
//
//	routeprop scale --kubeconfig K --gateway NS/NAME --impl X --ctl-pids … --envoy-pids … [flags]

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// ScaleResult is one implementation's run of the route scale scenario.
type ScaleResult struct {
	Scenario string `json:"scenario"`
	Impl     string `json:"impl"`
	Detail   string `json:"detail,omitempty"`
	Routes   int    `json:"routes"`
	Pods     int    `json:"pods"`
	// LoadS: the first object created → every route Accepted.
	LoadS float64 `json:"load_s"`
	// ChurnS, PodChanges, RouteEdits: the churn phase.
	ChurnS     float64 `json:"churn_s"`
	PodChanges int     `json:"pod_changes"`
	RouteEdits int     `json:"route_edits"`
	// SettledS: churn's end → every route Accepted at its current generation.
	SettledS float64 `json:"settled_s"`
	// CPU seconds while loading; CPU cores (seconds per second) during the churn.
	CtlLoadCPU     float64 `json:"ctl_load_cpu_s"`
	EnvoyLoadCPU   float64 `json:"envoy_load_cpu_s"`
	CtlChurnCores  float64 `json:"ctl_churn_cores"`
	EnvoyChurnCore float64 `json:"envoy_churn_cores"`
	// Resident memory, the largest sample and the last.
	CtlMiBMax   float64    `json:"ctl_mib_max"`
	EnvoyMiBMax float64    `json:"envoy_mib_max"`
	CtlMiBEnd   float64    `json:"ctl_mib_end"`
	EnvoyMiBEnd float64    `json:"envoy_mib_end"`
	RSS         []NamedRSS `json:"rss"`
	Load1       float64    `json:"load1"`
}

const sliceManager = "routeprop.bench.aether-edge"

func scale(args []string) error {
	fs := flag.NewFlagSet("scale", flag.ExitOnError)
	c := commonFlags(fs)
	nRoutes := fs.Int("routes", 1000, "HTTPRoutes, each to its own Service")
	nPods := fs.Int("pods", 1000, "backend pods, spread over the Services")
	churn := fs.Duration("churn", time.Minute, "how long the pods churn")
	podRate := fs.Float64("pod-rate", 10, "pods replaced per second during the churn")
	routeRate := fs.Float64("route-rate", 1, "routes edited per second during the churn")
	_ = fs.Parse(args)
	impl, detail, controller, ctlPids, envoyPids, out := c.impl, c.detail, c.controller, c.ctlPids, c.envoyPids, c.out
	ns, gwName, gw, kube, err := c.open(false)
	if err != nil {
		return err
	}
	if *nRoutes < 1 || *nPods < *nRoutes {
		return errors.New("--pods ≥ --routes ≥ 1")
	}
	ctx := context.Background()
	b := &bench{gw: gw, ns: ns, gwName: gwName}
	res := ScaleResult{Scenario: "scale", Impl: *impl, Detail: *detail, Routes: *nRoutes, Pods: *nPods}

	// The routes of the other scenarios go, so that the Gateway carries these alone.
	if _, err := b.prepare(ctx, 0); err != nil {
		return err
	}
	// What an earlier scenario left the control plane to do is not counted.
	waitQuiet(*ctlPids, time.Minute)
	mem := startSampling(*ctlPids, *envoyPids)
	ctl0, envoy0 := cpuSeconds(*ctlPids), cpuSeconds(*envoyPids)
	t0 := time.Now()

	// Services, their pods (one EndpointSlice each), routes.
	pods := newPodSet(*nRoutes, *nPods)
	slices := make([]*discoveryv1.EndpointSlice, *nRoutes)
	logf("%s: creating %d Services, %d EndpointSlices (%d pods), %d HTTPRoutes", *impl, *nRoutes, *nRoutes, *nPods, *nRoutes)
	err = parallel(16, *nRoutes, func(i int) error {
		name := fmt.Sprintf("scale-%d", i)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{roleLabel: "scale"}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt(3000)}}},
		}
		if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Service %s: %w", name, err)
		}
		s, err := kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, pods.slice(ns, i), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create EndpointSlice of %s: %w", name, err)
		}
		slices[i] = s
		_, err = gw.GatewayV1().HTTPRoutes(ns).Create(ctx, scaleRoute(ns, gwName, i, 0), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	if err := waitAllAccepted(ctx, gw, ns, *controller, 15*time.Minute); err != nil {
		return err
	}
	res.LoadS = time.Since(t0).Seconds()
	res.CtlLoadCPU, res.EnvoyLoadCPU = cpuSeconds(*ctlPids)-ctl0, cpuSeconds(*envoyPids)-envoy0
	logf("%s: %d routes Accepted %.1f s after the first create (CPU: control plane %.1f s, Envoy %.1f s)",
		*impl, *nRoutes, res.LoadS, res.CtlLoadCPU, res.EnvoyLoadCPU)
	logf("%s: control plane quiet %.0f s later; the churn starts", *impl, waitQuiet(*ctlPids, time.Minute).Seconds())

	// The churn: pods replaced at --pod-rate, routes edited at --route-rate.
	rng := rand.New(rand.NewPCG(1, 2))
	ctl0, envoy0 = cpuSeconds(*ctlPids), cpuSeconds(*envoyPids)
	t1 := time.Now()
	edits := make([]int, *nRoutes)
	podTick := time.NewTicker(time.Duration(float64(time.Second) / *podRate))
	routeTick := time.NewTicker(time.Duration(float64(time.Second) / *routeRate))
	for time.Since(t1) < *churn {
		select {
		case <-podTick.C:
			i := rng.IntN(*nRoutes)
			pods.replace(i, rng)
			s := slices[i].DeepCopy()
			s.Endpoints = pods.endpoints(i)
			got, err := kube.DiscoveryV1().EndpointSlices(ns).Update(ctx, s, metav1.UpdateOptions{})
			if err != nil {
				return fmt.Errorf("update EndpointSlice of scale-%d: %w", i, err)
			}
			slices[i] = got
			res.PodChanges++
		case <-routeTick.C:
			i := rng.IntN(*nRoutes)
			edits[i]++
			if _, err := updateRoute(ctx, gw, ns, fmt.Sprintf("scale-%d", i), scaleRoute(ns, gwName, i, edits[i]).Spec); err != nil {
				return fmt.Errorf("edit scale-%d: %w", i, err)
			}
			res.RouteEdits++
		}
	}
	podTick.Stop()
	routeTick.Stop()
	res.ChurnS = time.Since(t1).Seconds()
	res.CtlChurnCores = (cpuSeconds(*ctlPids) - ctl0) / res.ChurnS
	res.EnvoyChurnCore = (cpuSeconds(*envoyPids) - envoy0) / res.ChurnS
	t2 := time.Now()
	if err := waitAllAccepted(ctx, gw, ns, *controller, 5*time.Minute); err != nil {
		return err
	}
	res.SettledS = time.Since(t2).Seconds()
	res.CtlMiBMax, res.EnvoyMiBMax = mem.stop()
	var each []NamedRSS
	res.CtlMiBEnd, each = rssMiB(*ctlPids)
	res.RSS = append(res.RSS, each...)
	res.EnvoyMiBEnd, each = rssMiB(*envoyPids)
	res.RSS = append(res.RSS, each...)
	res.Load1 = load1()
	logf("%s: churn %.0f s (%d pods replaced, %d route edits): control plane %.3f cores, Envoy %.3f cores; settled %.1f s after; RSS max ctl %.1f, Envoy %.1f MiB",
		*impl, res.ChurnS, res.PodChanges, res.RouteEdits, res.CtlChurnCores, res.EnvoyChurnCore, res.SettledS, res.CtlMiBMax, res.EnvoyMiBMax)
	return appendLine(*out, res)
}

// updateRoute gives a route a new spec, reading it again when a write came
// between its read and the update (a status write, most likely); it returns when
// the update that went through was sent.
func updateRoute(ctx context.Context, gw gwclient.Interface, ns, name string, spec gwv1.HTTPRouteSpec) (time.Time, error) {
	var sent time.Time
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec = spec
		sent = time.Now()
		_, err = gw.GatewayV1().HTTPRoutes(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	return sent, err
}

// scaleRoute is route i after its e-th edit: an edit moves its rule's path prefix.
func scaleRoute(ns, gwName string, i, e int) *gwv1.HTTPRoute {
	port := gwv1.PortNumber(8080)
	prefix := gwv1.PathMatchPathPrefix
	path := "/"
	if e > 0 {
		path = fmt.Sprintf("/edit-%d", e)
	}
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%d", i), Namespace: ns, Labels: map[string]string{roleLabel: "scale"}},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(gwName)}}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("scale-%d.bench.example", i))},
			Rules: []gwv1.HTTPRouteRule{{
				Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &prefix, Value: &path}}},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
					BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(fmt.Sprintf("scale-%d", i)), Port: &port}}}},
			}},
		},
	}
}

// podSet: each Service's pods, as addresses in 10.128.0.0/9 that no process has.
type podSet struct {
	next  uint32
	bySvc [][]string
}

func newPodSet(services, pods int) *podSet {
	p := &podSet{bySvc: make([][]string, services)}
	for k := range pods {
		p.bySvc[k%services] = append(p.bySvc[k%services], p.address())
	}
	return p
}

func (p *podSet) address() string {
	p.next++
	n := p.next
	return fmt.Sprintf("10.%d.%d.%d", 128+(n>>16)&127, (n>>8)&255, n&255)
}

// replace: one pod of Service i goes, another comes.
func (p *podSet) replace(i int, rng *rand.Rand) {
	pods := p.bySvc[i]
	pods[rng.IntN(len(pods))] = p.address()
}

func (p *podSet) endpoints(i int) []discoveryv1.Endpoint {
	ready := true
	var eps []discoveryv1.Endpoint
	for _, a := range p.bySvc[i] {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready}})
	}
	return eps
}

func (p *podSet) slice(ns string, i int) *discoveryv1.EndpointSlice {
	name, port, proto := "http", int32(3000), corev1.ProtocolTCP
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%d-pods", i), Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: fmt.Sprintf("scale-%d", i), discoveryv1.LabelManagedBy: sliceManager, roleLabel: "scale"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
		Endpoints:   p.endpoints(i),
	}
}

// waitAllAccepted: every HTTPRoute of the namespace has Accepted=True (from
// controller, if given) for its current generation.
func waitAllAccepted(ctx context.Context, gw gwclient.Interface, ns, controller string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := time.Now()
	for {
		list, err := gw.GatewayV1().HTTPRoutes(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		waiting := 0
		for i := range list.Items {
			if !acceptedNow(&list.Items[i], controller) {
				waiting++
			}
		}
		if waiting == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d routes not Accepted after %s", waiting, len(list.Items), timeout)
		}
		if time.Since(last) > 15*time.Second {
			logf("%d of %d routes Accepted", len(list.Items)-waiting, len(list.Items))
			last = time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// acceptedNow: Accepted=True observed at the route's current generation.
func acceptedNow(r *gwv1.HTTPRoute, controller string) bool {
	for _, p := range r.Status.Parents {
		if controller != "" && string(p.ControllerName) != controller {
			continue
		}
		for _, c := range p.Conditions {
			if c.Type == string(gwv1.RouteConditionAccepted) && c.Status == metav1.ConditionTrue && c.ObservedGeneration == r.Generation {
				return true
			}
		}
	}
	return false
}

// cpuSeconds: user + system CPU time of the processes, given as comma-separated
// [NAME=]PID (clock ticks of 1/100 s, as Linux reports them in /proc/PID/stat).
func cpuSeconds(pids string) float64 {
	var sum float64
	for p := range strings.SplitSeq(pids, ",") {
		_, pid, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			pid = strings.TrimSpace(p)
		}
		if pid == "" {
			continue
		}
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			logf("cpu of %s: %v", p, err)
			continue
		}
		sum += statCPU(string(b))
	}
	return sum
}

// statCPU: utime + stime of a /proc/PID/stat line, in seconds. The fields after
// "(comm)" (which may hold spaces and parentheses): state is the first, utime the
// 12th, stime the 13th.
func statCPU(stat string) float64 {
	f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

// waitQuiet waits until the processes used less than a tenth of a core over 2 s
// (the work a load left, such as status writes, done), at most limit; it returns
// how long it waited.
func waitQuiet(pids string, limit time.Duration) time.Duration {
	t0 := time.Now()
	for time.Since(t0) < limit {
		c0 := cpuSeconds(pids)
		time.Sleep(2 * time.Second)
		if cpuSeconds(pids)-c0 < 0.2 {
			break
		}
	}
	return time.Since(t0)
}

// sampler: the largest resident memory of the control plane and the Envoys, sampled
// every second.
type sampler struct {
	mu                 sync.Mutex
	ctlMax, envoyMax   float64
	done               chan struct{}
	wg                 sync.WaitGroup
	ctlPids, envoyPids string
}

func startSampling(ctlPids, envoyPids string) *sampler {
	s := &sampler{done: make(chan struct{}), ctlPids: ctlPids, envoyPids: envoyPids}
	s.sample()
	s.wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.sample()
			}
		}
	})
	return s
}

func (s *sampler) sample() {
	c, _ := rssMiB(s.ctlPids)
	e, _ := rssMiB(s.envoyPids)
	s.mu.Lock()
	s.ctlMax, s.envoyMax = max(s.ctlMax, c), max(s.envoyMax, e)
	s.mu.Unlock()
}

func (s *sampler) stop() (float64, float64) {
	close(s.done)
	s.wg.Wait()
	s.sample()
	return s.ctlMax, s.envoyMax
}

// scaleTable: the route scale scenario, one row per implementation, then the ratio of
// the second to the first.
func scaleTable(ss []ScaleResult, label string) {
	fmt.Println()
	fmt.Println("route scale with pod churn: R routes, each to its own Service, P pods behind them; load: first create →")
	fmt.Println("every route Accepted, and the CPU seconds spent; churn: pods replaced (EndpointSlice updates) and routes")
	fmt.Println("edited at a steady rate, CPU in cores; settled: churn's end → every route Accepted at its generation")
	fmt.Printf("%-14s %6s %6s %7s %8s %8s %9s %9s %8s %8s %9s\n", "", "routes", "pods", "load s", "ctl cpu", "envoy cpu",
		"ctl cores", "env cores", "settled", "ctl MiB", "envoy MiB")
	var rows [][]float64
	for _, s := range ss {
		v := []float64{s.LoadS, s.CtlLoadCPU, s.EnvoyLoadCPU, s.CtlChurnCores, s.EnvoyChurnCore, s.SettledS, s.CtlMiBMax, s.EnvoyMiBMax}
		rows = append(rows, v)
		fmt.Printf("%-14s %6d %6d %7.1f %8.1f %9.1f %9.3f %9.3f %8.1f %8.1f %9.1f\n", trunc(s.Impl, 14), s.Routes, s.Pods,
			v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7])
	}
	if len(rows) == 2 {
		ratioRow(label, fmt.Sprintf("%6s %6s", "", ""), rows, []int{7, 8, 9, 9, 9, 8, 8, 9})
	}
	for _, s := range ss {
		fmt.Printf("  %s: churn %.0f s, %d pods replaced, %d route edits; RSS at the end:%s; load %.2f\n",
			s.Impl, s.ChurnS, s.PodChanges, s.RouteEdits, rssList(s.RSS), s.Load1)
	}
}
