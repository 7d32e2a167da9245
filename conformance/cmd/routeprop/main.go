// Command routeprop is the route propagation scenario of benches/peer/k8s (after
// gateway-api-bench's "route propagation"), run against whichever Gateway
// implementation serves the Gateway it is given, in Kubernetes mode:
//
//	routeprop run --kubeconfig K --gateway NS/NAME --address IP:PORT --base N [flags]
//	routeprop changes … (changes.go: route changes under load)
//	routeprop scale … (scale.go: route scale with pod churn)
//	routeprop failover … (failover.go: backend failover)
//	routeprop listenersets … (listenersets.go: ListenerSet scale)
//	routeprop table [--ratio LABEL] FILE
//
// run: N HTTPRoutes (each its own hostname) are attached to the Gateway first and
// every one of them is served (HTTP 200 through the Gateway's address); then
// --changes more are created one at a time, each timed from just before its Create
// call to the first HTTP 200 for its hostname through the Gateway's address (a tight
// probe loop, Host header = the hostname), and to its first Accepted=True status
// (watched). Status writes are counted as the watch events that changed a route's
// status. The routes created by an earlier run with another N are reused or deleted
// so that exactly N base routes are attached. One JSON line is appended to --out.
//
// table: the lines of FILE as one table per scenario, and for each row the ratio of
// the second implementation to the first.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

const roleLabel = "bench.aether-edge/role"

// Result is one implementation at one size.
type Result struct {
	Impl    string `json:"impl"`
	Detail  string `json:"detail,omitempty"`
	Size    int    `json:"size"`
	Changes int    `json:"changes"`
	// Served: changes that answered 200 within the timeout.
	Served int `json:"served"`
	// Ms200 and MsAccepted: per change, apply → first 200 and → Accepted=True (ms;
	// only the changes that got there).
	Ms200      []float64 `json:"ms_200"`
	MsAccepted []float64 `json:"ms_accepted"`
	// StatusWrites: watch events that changed a change route's status, per route.
	StatusWrites float64 `json:"status_writes_per_route"`
	// LoadS: the last base route created by this run (LoadCreated of them) → every
	// base route served.
	LoadS       float64 `json:"load_s"`
	LoadCreated int     `json:"load_created"`
	// LoadAcceptedS: the same → every base route Accepted=True.
	LoadAcceptedS float64 `json:"load_accepted_s"`
	// LoadStatusWrites: watch events that changed a base route's status while the
	// base routes were created, served and Accepted, per route created by this run
	// (gateway-api-bench's attached-routes counts these).
	LoadStatusWrites float64 `json:"load_status_writes_per_route"`
	CtlMiB           float64 `json:"ctl_mib"`
	EnvoyMiB         float64 `json:"envoy_mib"`
	// RSS: each named process at the end (MiB), the control plane's, the Envoys' and
	// --other-pids' (not in the columns).
	RSS []NamedRSS `json:"rss"`
	// Load1: the machine's 1-minute load average at the end.
	Load1 float64 `json:"load1"`
}

// NamedRSS is one process's resident set at the end of a run.
type NamedRSS struct {
	Name string  `json:"name"`
	MiB  float64 `json:"mib"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: routeprop run|changes|scale|failover|listenersets|table [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = run(os.Args[2:])
	case "changes":
		err = changes(os.Args[2:])
	case "scale":
		err = scale(os.Args[2:])
	case "failover":
		err = failover(os.Args[2:])
	case "listenersets":
		err = listenerSets(os.Args[2:])
	case "table":
		err = table(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (run, changes, scale, failover, listenersets or table)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "routeprop:", err)
		os.Exit(1)
	}
}

type bench struct {
	gw         gwclient.Interface
	ns, gwName string
	backend    string
	port       int32
	address    string
	client     *http.Client
	interval   time.Duration
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] routeprop: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	c := commonFlags(fs) // the ctl and Envoy processes: RSS summed at the end
	backend := fs.String("backend", "echo:8080", "backend Service NAME:PORT in the Gateway's namespace")
	base := fs.Int("base", 0, "routes attached before the changes")
	changes := fs.Int("changes", 100, "routes added one at a time, each timed")
	otherPids := fs.String("other-pids", "", "comma-separated [NAME=]PID: other processes whose RSS is reported apart")
	interval := fs.Duration("probe-interval", time.Millisecond, "pause between two probes of one hostname")
	timeout := fs.Duration("timeout", 5*time.Minute, "longest wait for one change's 200")
	trace := fs.Int("trace-status", 0, "log every status change of the first N added routes (time since apply, conditions)")
	loadTimeout := fs.Duration("load-timeout", 60*time.Minute, "longest wait for the base routes to be served")
	_ = fs.Parse(args)
	address, impl, detail, controller, ctlPids, envoyPids, out := c.address, c.impl, c.detail, c.controller, c.ctlPids, c.envoyPids, c.out
	ns, name, gw, _, err := c.open(true)
	if err != nil {
		return err
	}
	svc, portStr, ok := strings.Cut(*backend, ":")
	port, err := strconv.Atoi(portStr)
	if !ok || err != nil {
		return fmt.Errorf("--backend NAME:PORT, not %q", *backend)
	}
	b := &bench{gw: gw, ns: ns, gwName: name, backend: svc, port: int32(port), address: *address, interval: *interval,
		client: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			MaxIdleConnsPerHost: 8, DisableCompression: true,
			DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}}}
	ctx := context.Background()
	res := Result{Impl: *impl, Detail: *detail, Size: *base, Changes: *changes}

	// 1. Exactly N base routes, every one served; no change routes. Their status
	// writes are counted from before the first is created.
	bw := newWatcher(*controller)
	bctx, stopBase := context.WithCancel(ctx)
	defer stopBase()
	if err := bw.start(bctx, gw, ns, "base"); err != nil {
		return err
	}
	created, err := b.prepare(ctx, *base)
	if err != nil {
		return err
	}
	res.LoadCreated = created
	t := time.Now()
	if err := b.waitServed(ctx, *base, *loadTimeout); err != nil {
		return err
	}
	res.LoadS = time.Since(t).Seconds()
	logf("%s: %d base routes served (%d created by this run, %.1f s after their creation)", *impl, *base, created, res.LoadS)
	// Their statuses too: the changes start on a quiet control plane, not behind a
	// backlog of status writes.
	if err := b.waitAccepted(ctx, *base, *controller, *loadTimeout); err != nil {
		return err
	}
	res.LoadAcceptedS = time.Since(t).Seconds()
	logf("%s: %d base routes Accepted (%.1f s after their creation)", *impl, *base, res.LoadAcceptedS)
	time.Sleep(time.Second)
	stopBase()
	res.LoadStatusWrites = float64(bw.writes()) / float64(max(created, 1))

	// 2. The watch on the change routes: first Accepted=True, status writes.
	w := newWatcher(*controller)
	w.trace = *trace
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := w.start(wctx, gw, ns, "change"); err != nil {
		return err
	}

	// 3. The changes, one at a time.
	for i := range *changes {
		host := fmt.Sprintf("change-%d.bench.example", i)
		r := b.route(fmt.Sprintf("change-%d", i), host, "change")
		t0 := time.Now()
		w.expect(r.Name, t0)
		if _, err := gw.GatewayV1().HTTPRoutes(ns).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s: %w", r.Name, err)
		}
		d, ok := b.probe(ctx, host, t0, *timeout)
		if !ok {
			logf("%s: change %d: no 200 within %s", *impl, i, *timeout)
			continue
		}
		res.Served++
		res.Ms200 = append(res.Ms200, ms(d))
		if a, ok := w.accepted(r.Name, 60*time.Second); ok {
			res.MsAccepted = append(res.MsAccepted, ms(a))
			if a > 10*time.Second {
				logf("%s: change %d: Accepted only %.1f s after apply", *impl, i, a.Seconds())
			}
		} else {
			logf("%s: change %d: not Accepted within 60 s of apply (served after %.1f ms)", *impl, i, ms(d))
		}
		if (i+1)%20 == 0 {
			logf("%s at %d: %d changes, last apply → 200 %.1f ms", *impl, *base, i+1, ms(d))
		}
	}
	time.Sleep(2 * time.Second) // the last status writes
	stop()
	res.StatusWrites = float64(w.writes()) / float64(max(*changes, 1))
	var each []NamedRSS
	res.CtlMiB, each = rssMiB(*ctlPids)
	res.RSS = append(res.RSS, each...)
	res.EnvoyMiB, each = rssMiB(*envoyPids)
	res.RSS = append(res.RSS, each...)
	_, each = rssMiB(*otherPids)
	res.RSS = append(res.RSS, each...)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.Load1, _ = strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	}
	line, _ := json.Marshal(res)
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	fmt.Println(string(line))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (b *bench) route(name, host, role string) *gwv1.HTTPRoute {
	port := gwv1.PortNumber(b.port)
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns, Labels: map[string]string{roleLabel: role}},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(b.gwName)}}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(host)},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(b.backend), Port: &port}}}}}},
		},
	}
}

func baseHost(i int) string { return fmt.Sprintf("base-%d.bench.example", i) }

// prepare leaves exactly n base routes (base-0 … base-n-1) and no change routes; it
// returns how many base routes it created.
func (b *bench) prepare(ctx context.Context, n int) (int, error) {
	routes := b.gw.GatewayV1().HTTPRoutes(b.ns)
	list, err := routes.List(ctx, metav1.ListOptions{LabelSelector: roleLabel})
	if err != nil {
		return 0, err
	}
	have := map[string]bool{}
	var del []string
	for _, r := range list.Items {
		i, err := strconv.Atoi(strings.TrimPrefix(r.Name, "base-"))
		if r.Labels[roleLabel] == "base" && err == nil && i < n {
			have[r.Name] = true
		} else {
			del = append(del, r.Name)
		}
	}
	var want []*gwv1.HTTPRoute
	for i := range n {
		if name := fmt.Sprintf("base-%d", i); !have[name] {
			want = append(want, b.route(name, baseHost(i), "base"))
		}
	}
	if len(del) > 0 {
		logf("deleting %d routes of an earlier size", len(del))
	}
	err = parallel(16, len(del), func(i int) error {
		err := routes.Delete(ctx, del[i], metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	if len(want) > 0 {
		logf("creating %d base routes", len(want))
	}
	err = parallel(16, len(want), func(i int) error {
		_, err := routes.Create(ctx, want[i], metav1.CreateOptions{})
		return err
	})
	return len(want), err
}

func parallel(workers, n int, f func(int) error) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		next  = make(chan int)
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// get is one probe: the status code, or 0 when there was no answer.
func (b *bench) get(ctx context.Context, host string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.address+"/", nil)
	if err != nil {
		return 0
	}
	req.Host = host
	resp, err := b.client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// probe: the time from t0 to the first 200 for host.
func (b *bench) probe(ctx context.Context, host string, t0 time.Time, timeout time.Duration) (time.Duration, bool) {
	for time.Since(t0) < timeout {
		if b.get(ctx, host) == http.StatusOK {
			return time.Since(t0), true
		}
		time.Sleep(b.interval)
	}
	return 0, false
}

// waitServed: every base route answers 200 (8 probers over the ones still missing).
func (b *bench) waitServed(ctx context.Context, n int, timeout time.Duration) error {
	if n == 0 {
		return nil
	}
	deadline := time.Now().Add(timeout)
	pending := make([]int, n)
	for i := range pending {
		pending[i] = i
	}
	last := time.Now()
	for len(pending) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d base routes not served after %s", len(pending), n, timeout)
		}
		var mu sync.Mutex
		var still []int
		_ = parallel(8, len(pending), func(k int) error {
			if b.get(ctx, baseHost(pending[k])) != http.StatusOK {
				mu.Lock()
				still = append(still, pending[k])
				mu.Unlock()
			}
			return nil
		})
		sort.Ints(still)
		if len(still) > 0 {
			if time.Since(last) > 15*time.Second {
				logf("%d of %d base routes served", n-len(still), n)
				last = time.Now()
			}
			time.Sleep(100 * time.Millisecond)
		}
		pending = still
	}
	return nil
}

// waitAccepted: every base route has Accepted=True (from controller, if given).
func (b *bench) waitAccepted(ctx context.Context, n int, controller string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		list, err := b.gw.GatewayV1().HTTPRoutes(b.ns).List(ctx, metav1.ListOptions{LabelSelector: roleLabel + "=base"})
		if err != nil {
			return err
		}
		ok := 0
		for i := range list.Items {
			if accepted(&list.Items[i], controller) {
				ok++
			}
		}
		if ok >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d base routes not Accepted after %s", n-ok, n, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// accepted: the route has Accepted=True from controller (any, if "").
func accepted(r *gwv1.HTTPRoute, controller string) bool {
	for _, p := range r.Status.Parents {
		if controller != "" && string(p.ControllerName) != controller {
			continue
		}
		for _, c := range p.Conditions {
			if c.Type == string(gwv1.RouteConditionAccepted) && c.Status == metav1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

// watcher follows the change routes: when each was first Accepted=True, and how many
// events changed a status.
type watcher struct {
	controller string
	trace      int // log the status changes of change-0 … change-<trace-1>
	mu         sync.Mutex
	t0         map[string]time.Time
	acc        map[string]time.Duration
	status     map[string]gwv1.HTTPRouteStatus
	nWrites    int
	kick       chan struct{}
}

func newWatcher(controller string) *watcher {
	return &watcher{controller: controller, t0: map[string]time.Time{}, acc: map[string]time.Duration{},
		status: map[string]gwv1.HTTPRouteStatus{}, kick: make(chan struct{}, 1)}
}

func (w *watcher) expect(name string, t0 time.Time) {
	w.mu.Lock()
	w.t0[name] = t0
	w.mu.Unlock()
}

func (w *watcher) writes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nWrites
}

func (w *watcher) accepted(name string, timeout time.Duration) (time.Duration, bool) {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		d, ok := w.acc[name]
		w.mu.Unlock()
		if ok {
			return d, true
		}
		select {
		case <-w.kick:
		case <-deadline:
			return 0, false
		}
	}
}

// start follows the routes labelled `role` (base or change).
func (w *watcher) start(ctx context.Context, gw gwclient.Interface, ns, role string) error {
	routes := gw.GatewayV1().HTTPRoutes(ns)
	selector := roleLabel + "=" + role
	list, err := routes.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	rv := list.ResourceVersion
	go func() {
		for ctx.Err() == nil {
			wi, err := routes.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range wi.ResultChan() {
				r, ok := ev.Object.(*gwv1.HTTPRoute)
				if !ok {
					if st, ok := ev.Object.(*metav1.Status); ok && st.Code == http.StatusGone {
						// Expired: start over from a list (a status written in between
						// is seen in it, though not counted as a write if there were two).
						if l, err := routes.List(ctx, metav1.ListOptions{LabelSelector: selector}); err == nil {
							rv = l.ResourceVersion
							for i := range l.Items {
								w.observe(&l.Items[i])
							}
						}
					}
					continue
				}
				rv = r.ResourceVersion
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					w.observe(r)
				}
			}
			wi.Stop()
		}
	}()
	return nil
}

func (w *watcher) observe(r *gwv1.HTTPRoute) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.status[r.Name]; (ok || len(r.Status.Parents) > 0) && !reflect.DeepEqual(old, r.Status) {
		w.nWrites++
		if i, err := strconv.Atoi(strings.TrimPrefix(r.Name, "change-")); err == nil && i < w.trace {
			var conds []string
			for _, p := range r.Status.Parents {
				for _, c := range p.Conditions {
					conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
				}
			}
			logf("%s status +%.1f ms (rv %s): %s", r.Name, ms(now.Sub(w.t0[r.Name])), r.ResourceVersion, strings.Join(conds, " "))
		}
	}
	w.status[r.Name] = r.Status
	if _, done := w.acc[r.Name]; done {
		return
	}
	t0, ok := w.t0[r.Name]
	if !ok {
		return
	}
	if accepted(r, w.controller) {
		w.acc[r.Name] = now.Sub(t0)
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// rssMiB sums VmRSS of the processes, given as comma-separated [NAME=]PID, and lists
// each (0 and none when none is given or readable).
func rssMiB(pids string) (float64, []NamedRSS) {
	var sum float64
	var each []NamedRSS
	for p := range strings.SplitSeq(pids, ",") {
		name, pid, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			name, pid = "pid "+name, name
		}
		if pid == "" {
			continue
		}
		f, err := os.Open("/proc/" + pid + "/status")
		if err != nil {
			logf("rss of %s: %v", name, err)
			continue
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				sum += kb / 1024
				each = append(each, NamedRSS{Name: name, MiB: kb / 1024})
			}
		}
		f.Close()
	}
	return sum, each
}

// quantile: nearest rank (p99 of 100 samples is the 99th smallest).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64{}, xs...)
	sort.Float64s(s)
	if q == 0.5 && len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	k := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(k, len(s)-1))]
}

func table(args []string) error {
	fs := flag.NewFlagSet("table", flag.ExitOnError)
	label := fs.String("ratio", "ratio 2nd/1st", "label of the ratio rows (second implementation / first)")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("usage: routeprop table [--ratio LABEL] FILE")
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	var rs []Result
	var cs []ChangesResult
	var ss []ScaleResult
	var fo []FailoverResult
	var ls []ListenerSetResult
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var kind struct {
			Scenario string `json:"scenario"`
		}
		if err := json.Unmarshal([]byte(line), &kind); err != nil {
			return err
		}
		var err error
		switch kind.Scenario {
		case "changes":
			var c ChangesResult
			err = json.Unmarshal([]byte(line), &c)
			cs = append(cs, c)
		case "scale":
			var c ScaleResult
			err = json.Unmarshal([]byte(line), &c)
			ss = append(ss, c)
		case "failover":
			var c FailoverResult
			err = json.Unmarshal([]byte(line), &c)
			fo = append(fo, c)
		case "listenersets":
			var c ListenerSetResult
			err = json.Unmarshal([]byte(line), &c)
			ls = append(ls, c)
		default:
			var r Result
			err = json.Unmarshal([]byte(line), &r)
			rs = append(rs, r)
		}
		if err != nil {
			return err
		}
	}
	if len(rs) > 0 {
		propagationTable(rs, *label)
	}
	if len(cs) > 0 {
		changesTable(cs, *label)
	}
	if len(ss) > 0 {
		scaleTable(ss, *label)
	}
	if len(fo) > 0 {
		failoverTable(fo, *label)
	}
	if len(ls) > 0 {
		listenerSetTable(ls, *label)
	}
	return nil
}

// propagationTable: the route propagation scenario (run), one row per
// implementation and size.
func propagationTable(rs []Result, label string) {
	var impls []string
	var sizes []int
	by := map[string]map[int]Result{}
	for _, r := range rs {
		if by[r.Impl] == nil {
			by[r.Impl] = map[int]Result{}
			impls = append(impls, r.Impl)
			if r.Detail != "" {
				fmt.Printf("%s: %s\n", r.Impl, r.Detail)
			}
		}
		if !contains(sizes, r.Size) {
			sizes = append(sizes, r.Size)
		}
		by[r.Impl][r.Size] = r
	}
	sort.Ints(sizes)
	fmt.Println("median/p99/max: apply → first 200 through the Gateway's LoadBalancer address; acc: apply → Accepted=True;")
	fmt.Println("writes: status changes per added route; base s: last base route created → every base route served / Accepted;")
	fmt.Println("base w: status changes per base route created, until all Accepted")
	head := fmt.Sprintf("%-14s %6s %7s %9s %9s %9s %9s %9s %7s %8s %8s %6s %8s %9s", "", "routes", "served", "median ms", "p99 ms", "max ms", "acc med", "acc p99", "writes", "base s", "base acc", "base w", "ctl MiB", "envoy MiB")
	fmt.Println(head)
	for _, n := range sizes {
		var row [][]float64
		for _, impl := range impls {
			r, ok := by[impl][n]
			if !ok {
				continue
			}
			v := []float64{quantile(r.Ms200, 0.5), quantile(r.Ms200, 0.99), quantile(r.Ms200, 1),
				quantile(r.MsAccepted, 0.5), quantile(r.MsAccepted, 0.99), r.StatusWrites, r.LoadS, r.LoadAcceptedS, r.LoadStatusWrites, r.CtlMiB, r.EnvoyMiB}
			row = append(row, v)
			fmt.Printf("%-14s %6d %3d/%-3d %9.1f %9.1f %9.1f %9.1f %9.1f %7.2f %8.1f %8.1f %6.2f %8.1f %9.1f\n", trunc(impl, 14), n, r.Served, r.Changes,
				v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10])
		}
		if len(row) == 2 {
			fmt.Printf("%-14s %6d %7s", trunc(label, 14), n, "")
			for k := range row[0] {
				w := 9
				switch k {
				case 5:
					w = 7
				case 6, 7, 9:
					w = 8
				case 8:
					w = 6
				}
				fmt.Printf(" %*s", w, ratio(row[1][k], row[0][k]))
			}
			fmt.Println()
		}
	}
	for _, n := range sizes {
		for _, impl := range impls {
			if r, ok := by[impl][n]; ok && len(r.MsAccepted) < r.Served {
				fmt.Printf("%s %d: %d of the %d served routes Accepted within 60 s of apply (acc columns: those)\n", impl, n, len(r.MsAccepted), r.Served)
			}
		}
	}
	fmt.Println("RSS at the end of each size (MiB), and the 1-minute load average then:")
	for _, n := range sizes {
		for _, impl := range impls {
			r, ok := by[impl][n]
			if !ok {
				continue
			}
			var parts []string
			for _, x := range r.RSS {
				parts = append(parts, fmt.Sprintf("%s %.1f", x.Name, x.MiB))
			}
			fmt.Printf("  %s %d: %s; load %.2f\n", impl, n, strings.Join(parts, ", "), r.Load1)
		}
	}
}

// ratioRow: the ratio row under a table of two rows, the second implementation's
// numbers over the first's, each in a cell of the width given, after the blank
// cells lead.
func ratioRow(label, lead string, rows [][]float64, widths []int) {
	fmt.Printf("%-14s %s", trunc(label, 14), lead)
	for k, w := range widths {
		fmt.Printf(" %*s", w, ratio(rows[1][k], rows[0][k]))
	}
	fmt.Println()
}

// rssList: " NAME MiB" for each process.
func rssList(rss []NamedRSS) string {
	var b strings.Builder
	for _, x := range rss {
		fmt.Fprintf(&b, " %s %.1f", x.Name, x.MiB)
	}
	return b.String()
}

// ratio a/b, "-" when either is missing or both print as 0.0 (e.g. the base
// columns with no base route).
func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 || (math.Abs(a) < 0.05 && math.Abs(b) < 0.05) {
		return "-"
	}
	if a/b < 0.1 {
		return fmt.Sprintf("%.2fx", a/b)
	}
	return fmt.Sprintf("%.1fx", a/b)
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
