// Package node is the harness's kubelet stand-in: it registers one Node, runs the
// pods bound to it as real processes, reports their IPs and readiness, and serves their
// logs to the API server.
//
//	pod (informer, spec.nodeName = us)
//	  ├─ network: own netns + veth on the node bridge (hostNetwork: the node netns)
//	  ├─ volumes: materialized as files under <state>/pods/<uid>/volumes
//	  └─ containers: image → program (images.go), started through `container-exec`
//	     (private mount namespace with the volumes bind-mounted, then the pod netns),
//	     or, for an image given as an OCI layout, from the image's own root file
//	     system as its user (oci*.go, podexec/root.go);
//	     output to <state>/pods/<uid>/<container>.log, restarted per restartPolicy
package node

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"aether-edge/conformance/internal/podexec"
)

// Agent runs the pods of one node.
type Agent struct {
	CS       kubernetes.Interface
	NodeName string
	NodeIP   netip.Addr
	Net      *Network
	Programs Programs
	// Images are run from their own root file system (ocipod.go), not as Programs.
	Images   []*OCIImage
	StateDir string
	// APIServer is host:port of the API server as pods reach it (KUBERNETES_SERVICE_*).
	APIServerHost, APIServerPort string
	// ClusterDNS and ClusterDomain, as the kubelet's --cluster-dns and --cluster-domain:
	// when set, pods of dnsPolicy ClusterFirst (not hostNetwork) and
	// ClusterFirstWithHostNet get a resolv.conf naming that server (resolv.go).
	ClusterDNS, ClusterDomain string

	mu      sync.Mutex
	pods    map[types.UID]*podRun
	created map[string]bool // mount targets we had to create on the host file system
}

type podRun struct {
	agent  *Agent
	mu     sync.Mutex
	pod    *corev1.Pod
	dir    string
	net    *podNet
	ip     string
	start  metav1.Time
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	ctrs   []*containerRun
	kick   chan struct{} // status changed; coalesced
	failed string        // pod-level failure (volumes, network)
	vols   map[string]string
	// stopping: the pod is terminating (terminate.go); nothing starts or restarts,
	// and it reports not ready.
	stopping bool
}

func (pr *podRun) isStopping() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.stopping
}

type containerRun struct {
	spec     corev1.Container
	logPath  string
	mu       sync.Mutex
	proc     *os.Process
	running  bool
	ready    bool
	restarts int32
	started  metav1.Time
	waiting  string // reason while not running
	message  string
	exitCode *int32
	finished metav1.Time
	wg       sync.WaitGroup
}

func (a *Agent) init() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pods == nil {
		a.pods = map[types.UID]*podRun{}
		a.created = map[string]bool{}
	}
}

// Observe is called with every pod event for this node.
func (a *Agent) Observe(pod *corev1.Pod, deleted bool) {
	a.init()
	a.mu.Lock()
	pr := a.pods[pod.UID]
	a.mu.Unlock()
	switch {
	case deleted:
		if pr != nil {
			go a.stop(pr, false)
		}
	case pod.DeletionTimestamp != nil:
		if pr != nil {
			pr.mu.Lock()
			if !pr.stopping {
				pr.pod = pod // its deletion grace period
			}
			pr.mu.Unlock()
			go a.stop(pr, true)
		} else {
			go a.finalize(pod)
		}
	case pr != nil:
		pr.mu.Lock()
		pr.pod = pod
		pr.mu.Unlock()
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
	default:
		ctx, cancel := context.WithCancel(context.Background())
		pr = &podRun{agent: a, pod: pod, ctx: ctx, cancel: cancel, done: make(chan struct{}), kick: make(chan struct{}, 1),
			dir: filepath.Join(a.StateDir, "pods", string(pod.UID)), start: metav1.Now()}
		a.mu.Lock()
		a.pods[pod.UID] = pr
		a.mu.Unlock()
		go pr.run()
	}
}

// LogPath finds a container's log file for the log endpoint.
func (a *Agent) LogPath(namespace, name, container string) (string, bool) {
	a.init()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, pr := range a.pods {
		pr.mu.Lock()
		match := pr.pod.Namespace == namespace && pr.pod.Name == name
		pr.mu.Unlock()
		if !match {
			continue
		}
		for _, c := range pr.ctrs {
			if c.spec.Name == container {
				return c.logPath, true
			}
		}
	}
	return "", false
}

// StopAll stops every pod (agent shutdown).
func (a *Agent) StopAll() {
	a.init()
	a.mu.Lock()
	var all []*podRun
	for _, pr := range a.pods {
		all = append(all, pr)
	}
	a.mu.Unlock()
	var wg sync.WaitGroup
	for _, pr := range all {
		wg.Add(1)
		go func() { defer wg.Done(); a.stop(pr, false) }()
	}
	wg.Wait()
}

func (pr *podRun) logf(format string, args ...any) {
	log.Printf("pod %s/%s: %s", pr.pod.Namespace, pr.pod.Name, fmt.Sprintf(format, args...))
}

func (pr *podRun) changed() {
	select {
	case pr.kick <- struct{}{}:
	default:
	}
}

func (pr *podRun) run() {
	defer close(pr.done)
	a := pr.agent
	go pr.statusLoop()
	if err := os.MkdirAll(pr.dir, 0o755); err != nil {
		pr.fail("state dir: %v", err)
		return
	}
	if pr.pod.Spec.HostNetwork {
		pr.ip = a.NodeIP.String()
	} else {
		n, err := a.Net.add()
		if err != nil {
			pr.fail("network: %v", err)
			return
		}
		pr.mu.Lock()
		pr.net = n
		pr.ip = n.ip.String()
		pr.mu.Unlock()
	}
	pr.mu.Lock()
	pod := pr.pod.DeepCopy()
	pr.mu.Unlock()
	pod.Status.PodIP = pr.ip
	pod.Status.HostIP = a.NodeIP.String()
	// Like the kubelet, wait for missing Secrets/ConfigMaps instead of failing the pod:
	// the suite creates some of them after the Deployments that mount them.
	var vols map[string]string
	for wait := 500 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		var err error
		vols, err = volumeSource{cs: a.CS, pod: pod}.materialize(pr.ctx, filepath.Join(pr.dir, "volumes"))
		if err == nil {
			break
		}
		pr.logf("volumes not ready (retrying): %v", err)
		select {
		case <-pr.ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	for _, c := range pod.Spec.InitContainers {
		cr := &containerRun{spec: c, logPath: filepath.Join(pr.dir, c.Name+".log")}
		for {
			code, _ := pr.runOnce(pod, cr, vols)
			if pr.ctx.Err() != nil || pr.isStopping() {
				return
			}
			if code == 0 {
				break
			}
			time.Sleep(2 * time.Second)
		}
	}
	pr.mu.Lock()
	if pr.stopping {
		pr.mu.Unlock()
		return
	}
	pr.vols = vols
	for _, c := range pod.Spec.Containers {
		pr.ctrs = append(pr.ctrs, &containerRun{spec: c, logPath: filepath.Join(pr.dir, c.Name+".log"), waiting: "ContainerCreating"})
	}
	ctrs := pr.ctrs
	pr.mu.Unlock()
	for _, cr := range ctrs {
		cr.wg.Add(1)
		go pr.supervise(pod, cr, vols)
		if cr.spec.ReadinessProbe != nil {
			go pr.probe(pod, cr)
		}
	}
	for _, cr := range ctrs {
		cr.wg.Wait()
	}
}

func (pr *podRun) fail(format string, args ...any) {
	pr.mu.Lock()
	pr.failed = fmt.Sprintf(format, args...)
	pr.mu.Unlock()
	pr.logf("failed: %s", pr.failed)
	pr.changed()
}

// supervise runs a container and restarts it per the pod's restartPolicy.
func (pr *podRun) supervise(pod *corev1.Pod, cr *containerRun, vols map[string]string) {
	defer cr.wg.Done()
	backoff := time.Second
	for {
		code, started := pr.runOnce(pod, cr, vols)
		if pr.ctx.Err() != nil || pr.isStopping() {
			return
		}
		policy := pod.Spec.RestartPolicy
		if policy == corev1.RestartPolicyNever || (policy == corev1.RestartPolicyOnFailure && code == 0) {
			return
		}
		cr.mu.Lock()
		if cr.waiting == "" {
			cr.waiting, cr.message = "CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container", backoff)
		}
		cr.mu.Unlock()
		pr.changed()
		select {
		case <-pr.ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 10*time.Second {
			backoff *= 2
		}
		if started { // a container that never started (no program, bad config) is retried, not restarted
			cr.mu.Lock()
			cr.restarts++
			cr.mu.Unlock()
		}
	}
}

// runOnce starts the container's process and waits for it; it returns the exit code
// and whether the process started at all.
func (pr *podRun) runOnce(pod *corev1.Pod, cr *containerRun, vols map[string]string) (int32, bool) {
	setWaiting := func(reason, msg string) (int32, bool) {
		cr.mu.Lock()
		cr.waiting, cr.message = reason, msg
		cr.mu.Unlock()
		pr.logf("container %s: %s: %s", cr.spec.Name, reason, msg)
		pr.changed()
		return 1, false
	}
	l, reason, err := pr.launchFor(pod, cr.spec, vols)
	if err != nil {
		return setWaiting(reason, err.Error())
	}
	argv := l.argv
	// Each run of a container has its own log, as with the kubelet; the one before is
	// kept for `kubectl logs --previous`.
	cr.mu.Lock()
	restarted := cr.restarts > 0
	cr.mu.Unlock()
	if restarted {
		_ = os.Rename(cr.logPath, cr.logPath+".previous")
	}
	lw, err := openLog(cr.logPath)
	if err != nil {
		return setWaiting("CreateContainerError", err.Error())
	}
	defer lw.Close()
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	cmd := pr.command(l)
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		outW.Close()
		errW.Close()
		return setWaiting("CreateContainerError", err.Error())
	}
	outW.Close()
	errW.Close()
	var copying sync.WaitGroup
	copying.Add(2)
	go func() { defer copying.Done(); lw.copy("stdout", outR) }()
	go func() { defer copying.Done(); lw.copy("stderr", errR) }()
	cr.mu.Lock()
	cr.proc, cr.running, cr.started, cr.waiting, cr.message = cmd.Process, true, metav1.Now(), "", ""
	cr.ready = cr.spec.ReadinessProbe == nil
	cr.mu.Unlock()
	from := ""
	if l.image != nil {
		from = fmt.Sprintf(" from OCI image %s %s as %d:%d", l.image.Ref, l.image.Digest, l.root.UID, l.root.GID)
	}
	pr.logf("container %s: started %v%s (pid %d)", cr.spec.Name, argv, from, cmd.Process.Pid)
	pr.changed()
	werr := cmd.Wait()
	copying.Wait()
	outR.Close()
	errR.Close()
	code := int32(0)
	if werr != nil {
		code = 1
		if ee, ok := werr.(*exec.ExitError); ok {
			code = int32(ee.ExitCode())
		}
	}
	cr.mu.Lock()
	cr.running, cr.ready, cr.proc, cr.exitCode, cr.finished = false, false, nil, &code, metav1.Now()
	cr.mu.Unlock()
	if pr.ctx.Err() == nil && !pr.isStopping() {
		pr.logf("container %s: exited with %d", cr.spec.Name, code)
	}
	pr.changed()
	return code, true
}

// launchFor prepares a run of container c: from its OCI image when the node has
// one for it, else as the host program its image stands for. On error, the reason the
// container stays Waiting.
func (pr *podRun) launchFor(pod *corev1.Pod, c corev1.Container, vols map[string]string) (launch, string, error) {
	if img := pr.agent.imageFor(c.Image); img != nil {
		return pr.imageLaunch(pod, c, img, vols)
	}
	l, err := pr.programLaunch(pod, c, vols)
	if err != nil {
		return l, waitingReason(err), err
	}
	return l, "", nil
}

// command is the process of a launch: `container-exec` in a mount namespace of its
// own, entering the pod's network namespace, then exec'ing the program.
func (pr *podRun) command(l launch) *exec.Cmd {
	netns := ""
	if pr.net != nil {
		netns = "/run/netns/" + pr.net.netns
	}
	execArgs := []string{"container-exec"}
	if l.root != nil {
		execArgs = append(execArgs, l.root.Args()...)
	}
	cmd := exec.Command(pr.agent.Programs.Self, append(execArgs, podexec.Args(netns, l.workdir, l.mounts, l.argv)...)...)
	cmd.Env = envList(l.env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// waitingError carries the reason a container stays Waiting.
type waitingError struct {
	reason string
	err    error
}

func (e waitingError) Error() string { return e.err.Error() }

func waitingReason(err error) string {
	if we, ok := err.(waitingError); ok {
		return we.reason
	}
	return "CreateContainerError"
}

// programLaunch prepares a container run as the host program its image stands for
// (images.go).
func (pr *podRun) programLaunch(pod *corev1.Pod, c corev1.Container, vols map[string]string) (launch, error) {
	a := pr.agent
	program, progName, err := a.Programs.forImage(c.Image)
	if err != nil {
		return launch{}, waitingError{"ErrImagePull", err}
	}
	if _, err := os.Stat(program); err != nil {
		return launch{}, waitingError{"ErrImagePull", fmt.Errorf("program for image %q: %v", c.Image, err)}
	}
	env, err := containerEnv(pod, c, programEnv(filepath.Join(a.StateDir, "bin")), a.APIServerHost, a.APIServerPort, a.CS, pr.ctx)
	if err != nil {
		return launch{}, waitingError{"CreateContainerConfigError", err}
	}
	argv := commandLine(program, progName, expandAll(c.Command, env), expandAll(c.Args, env))
	if progName == "pause" && len(c.Command) == 0 {
		argv = []string{program, "pause"}
	}
	mounts, err := a.mounts(c, vols)
	if err != nil {
		return launch{}, waitingError{"CreateContainerConfigError", err}
	}
	if rc, ok, err := pr.resolvConf(pod); err != nil {
		return launch{}, waitingError{"CreateContainerConfigError", err}
	} else if ok {
		mounts = append(mounts, podexec.Mount{Source: rc, Target: "/etc/resolv.conf", ReadOnly: true})
	}
	return launch{argv: argv, env: env, mounts: mounts, workdir: c.WorkingDir}, nil
}

func (a *Agent) finalize(pod *corev1.Pod) {
	zero := int64(0)
	uid := pod.UID
	err := a.CS.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		log.Printf("pod %s/%s: finalize deletion: %v", pod.Namespace, pod.Name, err)
	}
}
