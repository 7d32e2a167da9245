package main

// The backend failover scenario (gateway-api-bench's "backend failover"): a Service
// of four pods, three always healthy and one that flips between healthy and refusing
// every connection, behind 16 HTTPRoutes of 16 rules each on one hostname. A client
// sends a request every 5 ms, to a different rule each time. It counts the requests
// that failed while the pod refused, and the share of requests the pod got back once
// healthy again. The rules set no retries (each implementation's default), or, with
// --retries-off, `retry.attempts: 0` as gateway-api-bench's rules do (Gateway API
// v1.7.0 allows 0; v1.6's CRDs want at least 1).
//
// The pod stays Ready in Kubernetes (it has no readiness probe), so its endpoint
// stays: what happens to its requests is the data plane's doing alone. It "refuses"
// as gateway-api-bench's iptables REJECT with tcp-reset makes it refuse: every
// connection to it from the Envoys fails at once. Here (this machine has no iptables)
// by a `prohibit` route to its address in each Envoy's network namespace, so a new
// connection fails as it is opened, and `ss -K` there, so the open ones are reset.
//
//	routeprop failover --kubeconfig K --gateway NS/NAME --address IP:PORT --impl X --envoy-pids … [flags]

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// FailoverPhase is one healthy or refusing period of the flipping pod.
type FailoverPhase struct {
	Refusing bool `json:"refusing"`
	Requests int  `json:"requests"`
	Failed   int  `json:"failed"`
	// ToFlaky: requests the flipping pod answered.
	ToFlaky int `json:"to_flaky"`
}

// FailoverResult is one implementation's run of the backend failover scenario.
type FailoverResult struct {
	Scenario string  `json:"scenario"`
	Impl     string  `json:"impl"`
	Detail   string  `json:"detail,omitempty"`
	PhaseS   float64 `json:"phase_s"`
	// RetriesOff: the rules said `retry.attempts: 0`; else they set no retries.
	RetriesOff bool            `json:"retries_off,omitempty"`
	Phases     []FailoverPhase `json:"phases"`
	Load1      float64         `json:"load1"`
}

func failover(args []string) error {
	fs := flag.NewFlagSet("failover", flag.ExitOnError)
	c := commonFlags(fs)
	image := fs.String("image", "", "the backend pods' image (echo-basic)")
	phase := fs.Duration("phase", 15*time.Second, "how long the pod is healthy, then refusing, in each cycle")
	cycles := fs.Int("cycles", 2, "healthy + refusing cycles")
	retriesOff := fs.Bool("retries-off", false, "the rules set retry.attempts: 0 (else no retries: the implementation's default)")
	_ = fs.Parse(args)
	// The Envoys' network namespaces get the refusal.
	address, envoyPids, impl, detail, out := c.address, c.envoyPids, c.impl, c.detail, c.out
	ns, gwName, gw, kube, err := c.open(true)
	if err != nil {
		return err
	}
	if *image == "" || *envoyPids == "" {
		return errors.New("--image and --envoy-pids are required")
	}
	ctx := context.Background()
	b := &bench{gw: gw, ns: ns, gwName: gwName}
	if _, err := b.prepare(ctx, 0); err != nil {
		return err
	}

	// Three healthy pods (a Deployment with a readiness probe), one that will flip
	// (a Pod with none), one Service over the four.
	labels := map[string]string{"app": "failover"}
	container := func(probe bool) corev1.Container {
		c := corev1.Container{Name: "echo", Image: *image, Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		}}
		if probe {
			c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt(3000)}}}
		}
		return c
	}
	three := int32(3)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "failover-healthy", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &three, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "failover", "mode": "healthy"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "failover", "mode": "healthy"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{container(true)}}}},
	}
	flaky := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "failover-flaky", Namespace: ns, Labels: map[string]string{"app": "failover", "mode": "flaky"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{container(false)}},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "failover", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt(3000)}}},
	}
	// (An earlier run on this cluster left them: they are the same.)
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, flaky, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for i := range 16 {
		if _, err := gw.GatewayV1().HTTPRoutes(ns).Create(ctx, failoverRoute(ns, gwName, i, *retriesOff), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	// Ready: the flaky pod has an address and every pod has answered through the
	// Gateway on every route's rules.
	var flakyIP string
	host := "failover.bench.example"
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 4, DisableCompression: true, DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}}
	t := time.Now()
	for seen := map[string]bool{}; len(seen) < 4; {
		if time.Since(t) > 3*time.Minute {
			return fmt.Errorf("the four failover pods not all answering through the Gateway within 3 min (%d did)", len(seen))
		}
		if p, err := kube.CoreV1().Pods(ns).Get(ctx, flaky.Name, metav1.GetOptions{}); err == nil {
			flakyIP = p.Status.PodIP
		}
		for i := range 256 {
			if code, pod := failoverGet(client, *address, host, i); code == http.StatusOK {
				seen[pod] = true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if flakyIP == "" {
		return errors.New("the flaky pod has no address")
	}
	logf("%s: failover routes served by the four pods (flaky %s); %d cycles of %s healthy, %s refusing", *impl, flakyIP, *cycles, *phase, *phase)

	refuse := func(on bool) error {
		op := "del"
		if on {
			op = "add"
		}
		for p := range strings.SplitSeq(*envoyPids, ",") {
			_, pid, ok := strings.Cut(p, "=")
			if !ok {
				pid = p
			}
			netns := "--net=/proc/" + pid + "/ns/net"
			cmds := []*exec.Cmd{exec.Command("nsenter", netns, "ip", "route", op, "prohibit", flakyIP+"/32")}
			if on {
				// The connections already open are reset too, as a REJECT with
				// tcp-reset answers their next packet.
				cmds = append(cmds, exec.Command("nsenter", netns, "ss", "-K", "-t", "dst", flakyIP))
			}
			for _, cmd := range cmds {
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, out)
				}
			}
		}
		return nil
	}
	defer func() { _ = refuse(false) }()

	res := FailoverResult{Scenario: "failover", Impl: *impl, Detail: *detail, PhaseS: phase.Seconds(), RetriesOff: *retriesOff}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	n := 0
	for c := range *cycles * 2 {
		refusing := c%2 == 1
		if err := refuse(refusing); err != nil && refusing {
			return err
		}
		ph := FailoverPhase{Refusing: refusing}
		end := time.Now().Add(*phase)
		for time.Now().Before(end) {
			<-tick.C
			code, pod := failoverGet(client, *address, host, n)
			n++
			ph.Requests++
			if code != http.StatusOK {
				ph.Failed++
			} else if pod == flaky.Name {
				ph.ToFlaky++
			}
		}
		res.Phases = append(res.Phases, ph)
		logf("%s: %s phase: %d requests, %d failed, %d answered by the flaky pod", *impl,
			map[bool]string{true: "refusing", false: "healthy"}[refusing], ph.Requests, ph.Failed, ph.ToFlaky)
	}
	res.Load1 = load1()
	return appendLine(*out, res)
}

// failoverRoute is route i of 16: 16 rules, paths /16i … /16i+15; with retriesOff,
// each says `retry.attempts: 0`.
func failoverRoute(ns, gwName string, i int, retriesOff bool) *gwv1.HTTPRoute {
	port := gwv1.PortNumber(8080)
	prefix := gwv1.PathMatchPathPrefix
	zero := 0
	var rules []gwv1.HTTPRouteRule
	for r := range 16 {
		path := fmt.Sprintf("/%d", 16*i+r)
		rule := gwv1.HTTPRouteRule{
			Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &prefix, Value: &path}}},
			BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "failover", Port: &port}}}},
		}
		if retriesOff {
			rule.Retry = &gwv1.HTTPRouteRetry{Attempts: &zero}
		}
		rules = append(rules, rule)
	}
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("failover-%d", i), Namespace: ns, Labels: map[string]string{roleLabel: "failover"}},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(gwName)}}},
			Hostnames:       []gwv1.Hostname{"failover.bench.example"},
			Rules:           rules,
		},
	}
}

// failoverGet: one request to rule n%256; the status and the pod that answered
// (echo-basic names it in its JSON answer).
func failoverGet(client *http.Client, address, host string, n int) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/%d", address, n%256), nil)
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var answer struct {
		Pod string `json:"pod"`
	}
	_ = json.Unmarshal(body, &answer)
	return resp.StatusCode, answer.Pod
}

// failoverTable: the backend failover scenario, one row per implementation and
// retry setting; the ratio compares the two runs that set no retries.
func failoverTable(fs []FailoverResult, label string) {
	fmt.Println()
	fmt.Println("backend failover: 4 pods behind one Service, one of them refusing every connection in every second phase;")
	fmt.Println("a request every 5 ms over 256 rules (16 routes) that set no retries, or retry.attempts 0 (\"attempts 0\");")
	fmt.Println("fail %: of the requests while the pod refused; flaky: requests the flipping pod answered while healthy")
	fmt.Printf("%-24s %7s %9s %9s %9s %9s %9s\n", "", "phase s", "requests", "failed", "fail %", "flaky ok", "flaky %")
	var rows [][]float64
	for _, f := range fs {
		var req, failed, refusingReq, healthyReq, flaky int
		for _, p := range f.Phases {
			req += p.Requests
			failed += p.Failed
			if p.Refusing {
				refusingReq += p.Requests
			} else {
				healthyReq += p.Requests
				flaky += p.ToFlaky
			}
		}
		// fail %: of the requests while the pod refused; flaky %: of the requests
		// while it was healthy (a quarter is its fair share).
		v := []float64{float64(failed), 100 * float64(failed) / float64(max(refusingReq, 1)), 100 * float64(flaky) / float64(max(healthyReq, 1))}
		name := f.Impl
		if f.RetriesOff {
			name += " attempts 0"
		} else {
			rows = append(rows, v)
		}
		fmt.Printf("%-24s %7.0f %9d %9d %8.1f%% %9d %8.1f%%\n", trunc(name, 24), f.PhaseS, req, failed, v[1], flaky, v[2])
	}
	if len(rows) == 2 {
		fmt.Printf("%-24s %7s %9s %9s %9s\n", trunc(label, 24), "", "", ratio(rows[1][0], rows[0][0]), ratio(rows[1][1], rows[0][1]))
	}
	for _, f := range fs {
		name := f.Impl
		if f.RetriesOff {
			name += " attempts 0"
		}
		fmt.Printf("  %s, per phase (requests/failed/flaky):", name)
		for _, p := range f.Phases {
			fmt.Printf(" %s %d/%d/%d", map[bool]string{true: "refusing", false: "healthy"}[p.Refusing], p.Requests, p.Failed, p.ToFlaky)
		}
		fmt.Println()
	}
}
