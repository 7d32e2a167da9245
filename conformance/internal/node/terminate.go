package node

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Stopping a pod, as the kubelet does when its object is being deleted:
//
//	deletionTimestamp ─► stopping: Ready=False written at once (its endpoints go not-ready)
//	                 ─► per container, in parallel: preStop hook (exec in the container's
//	                    namespaces, sleep, httpGet) ─► SIGTERM to its process group
//	                 ─► grace period over (deletionGracePeriodSeconds, else the pod's
//	                    terminationGracePeriodSeconds, counted from the start): SIGKILL
//	                 ─► last status written, netns and files removed, object finalized
//
// The node agent shutting down (teardown) or a pod object already gone skips the hooks
// and caps the grace period at ShutdownGrace: nobody waits on a drain then.

// ShutdownGrace caps the grace period when no deletion asked for one.
const ShutdownGrace = 5 * time.Second

// DefaultGrace is the pod's terminationGracePeriodSeconds when it sets none.
const DefaultGrace = 30 * time.Second

// gracePeriod of a pod being deleted.
func gracePeriod(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return DefaultGrace
}

// stop ends a pod. graceful: its object is being deleted (hooks, full grace period,
// finalized after); else the agent shuts down or the object is gone.
func (a *Agent) stop(pr *podRun, graceful bool) {
	pr.mu.Lock()
	if pr.stopping {
		pr.mu.Unlock()
		return
	}
	pr.stopping = true
	if graceful && pr.pod.DeletionTimestamp == nil {
		graceful = false
	}
	pod := pr.pod
	ctrs := pr.ctrs
	vols := pr.vols
	pr.mu.Unlock()
	pr.changed() // not ready from now on (status.go)
	grace := gracePeriod(pod)
	if !graceful {
		grace = min(grace, ShutdownGrace)
	}
	deadline := time.Now().Add(grace)
	pr.logf("terminating (grace %s%s)", grace, map[bool]string{true: ", preStop hooks", false: ""}[graceful])

	var hooks sync.WaitGroup
	for _, cr := range ctrs {
		hooks.Add(1)
		go func() {
			defer hooks.Done()
			if graceful && cr.spec.Lifecycle != nil && cr.spec.Lifecycle.PreStop != nil {
				pr.preStop(pod, cr, vols, deadline)
			}
			cr.signal(syscall.SIGTERM)
		}()
	}
	exited := make(chan struct{})
	go func() {
		hooks.Wait()
		for _, cr := range ctrs {
			cr.wg.Wait()
		}
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(time.Until(deadline)):
		pr.logf("grace period over: SIGKILL")
		for _, cr := range ctrs {
			cr.signal(syscall.SIGKILL)
		}
		<-exited
	}
	pr.writeStatus() // the containers' last state, before the object goes
	pr.cancel()
	<-pr.done
	if pr.net != nil {
		a.Net.remove(pr.net)
	}
	_ = os.RemoveAll(pr.dir)
	a.mu.Lock()
	delete(a.pods, pod.UID)
	a.mu.Unlock()
	pr.logf("stopped")
	if graceful {
		a.finalize(pod)
	}
}

// signal sends sig to the container's process group, if it runs.
func (cr *containerRun) signal(sig syscall.Signal) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.proc != nil {
		_ = syscall.Kill(-cr.proc.Pid, sig)
	}
}

// preStop runs a container's preStop hook, cut short at the deadline. Its output goes
// to <container>.prestop.log beside the container's log.
func (pr *podRun) preStop(pod *corev1.Pod, cr *containerRun, vols map[string]string, deadline time.Time) {
	h := cr.spec.Lifecycle.PreStop
	start := time.Now()
	switch {
	case h.Sleep != nil:
		select {
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		case <-time.After(time.Until(deadline)):
		}
		pr.logf("container %s: preStop sleep %ds done", cr.spec.Name, h.Sleep.Seconds)
	case h.HTTPGet != nil:
		ok := pr.check(pod, cr.spec, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: h.HTTPGet}, TimeoutSeconds: int32(max(1, time.Until(deadline)/time.Second))})
		pr.logf("container %s: preStop httpGet %s (ok %v) in %s", cr.spec.Name, h.HTTPGet.Path, ok, time.Since(start).Round(time.Millisecond))
	case h.Exec != nil:
		spec := cr.spec
		spec.Command, spec.Args = h.Exec.Command, nil
		l, _, err := pr.launchFor(pod, spec, vols)
		if err != nil {
			pr.logf("container %s: preStop exec %v: %v", cr.spec.Name, h.Exec.Command, err)
			return
		}
		out, err := os.Create(filepath.Join(pr.dir, cr.spec.Name+".prestop.log"))
		if err != nil {
			pr.logf("container %s: preStop log: %v", cr.spec.Name, err)
			return
		}
		defer out.Close()
		cmd := pr.command(l)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			pr.logf("container %s: preStop exec %v: %v", cr.spec.Name, h.Exec.Command, err)
			return
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(time.Until(deadline)):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			err = <-done
		}
		pr.logf("container %s: preStop exec %v: %v in %s", cr.spec.Name, h.Exec.Command, exitText(err), time.Since(start).Round(time.Millisecond))
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}
