package node

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// statusLoop writes the pod's status whenever something changed (coalesced).
func (pr *podRun) statusLoop() {
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	pr.changed()
	for {
		select {
		case <-pr.ctx.Done():
			return
		case <-pr.kick:
		case <-tick.C:
		}
		if !pr.writeStatus() {
			return
		}
	}
}

// writeStatus writes the pod's status now (a few tries); false once the object is gone.
func (pr *podRun) writeStatus() bool {
	a := pr.agent
	for attempt := 0; attempt < 5 && pr.ctx.Err() == nil; attempt++ {
		cur, err := a.CS.CoreV1().Pods(pr.pod.Namespace).Get(pr.ctx, pr.pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != pr.pod.UID) {
			return false
		}
		if err == nil {
			cur.Status = pr.status(cur.Status)
			_, err = a.CS.CoreV1().Pods(cur.Namespace).UpdateStatus(pr.ctx, cur, metav1.UpdateOptions{})
		}
		if err == nil {
			return true
		}
		if pr.ctx.Err() == nil && !apierrors.IsConflict(err) {
			pr.logf("status update: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return true
}

func cond(t corev1.PodConditionType, ok bool, old []corev1.PodCondition) corev1.PodCondition {
	s := corev1.ConditionFalse
	if ok {
		s = corev1.ConditionTrue
	}
	for _, c := range old {
		if c.Type == t && c.Status == s {
			return c
		}
	}
	return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: metav1.Now()}
}

// status computes the pod status from the processes' state.
func (pr *podRun) status(old corev1.PodStatus) corev1.PodStatus {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	st := corev1.PodStatus{
		HostIP:    pr.agent.NodeIP.String(),
		HostIPs:   []corev1.HostIP{{IP: pr.agent.NodeIP.String()}},
		StartTime: &pr.start,
		Phase:     corev1.PodPending,
		QOSClass:  old.QOSClass,
	}
	if pr.ip != "" {
		st.PodIP = pr.ip
		st.PodIPs = []corev1.PodIP{{IP: pr.ip}}
	}
	if pr.failed != "" {
		st.Phase, st.Reason, st.Message = corev1.PodFailed, "NodeAgentError", pr.failed
	}
	allReady, anyRunning, allDone, anyFailed := len(pr.ctrs) > 0, false, len(pr.ctrs) > 0, false
	for _, cr := range pr.ctrs {
		cr.mu.Lock()
		// A terminating pod is not ready, whatever its probes say (as the kubelet
		// reports it): it takes no new connections.
		ready := cr.ready && !pr.stopping
		cs := corev1.ContainerStatus{
			Name: cr.spec.Name, Image: cr.spec.Image, ImageID: cr.spec.Image,
			Ready: ready, RestartCount: cr.restarts,
		}
		started := cr.running
		cs.Started = &started
		switch {
		case cr.running:
			cs.ContainerID = fmt.Sprintf("process://%d", cr.proc.Pid)
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: cr.started}
			anyRunning = true
			allDone = false
		case cr.waiting != "":
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: cr.waiting, Message: cr.message}
			allDone = false
		case cr.exitCode != nil:
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: *cr.exitCode, StartedAt: cr.started, FinishedAt: cr.finished}
			if *cr.exitCode != 0 {
				anyFailed = true
			}
			if pr.pod.Spec.RestartPolicy == corev1.RestartPolicyAlways {
				allDone = false
			}
		default:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
			allDone = false
		}
		if !ready {
			allReady = false
		}
		cr.mu.Unlock()
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	if pr.failed == "" {
		switch {
		case allDone && anyFailed:
			st.Phase = corev1.PodFailed
		case allDone:
			st.Phase = corev1.PodSucceeded
		case anyRunning:
			st.Phase = corev1.PodRunning
		}
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, pr.ip != "", old.Conditions),
		cond(corev1.PodInitialized, len(pr.ctrs) > 0, old.Conditions),
		cond(corev1.ContainersReady, allReady, old.Conditions),
		cond(corev1.PodReady, allReady, old.Conditions),
		cond(corev1.PodScheduled, true, old.Conditions),
	}
	return st
}

// probe runs a container's readiness probe (httpGet, tcpSocket, grpc as a TCP check;
// exec probes count as passing while the process runs).
func (pr *podRun) probe(pod *corev1.Pod, cr *containerRun) {
	p := cr.spec.ReadinessProbe
	period := time.Duration(p.PeriodSeconds) * time.Second
	if period <= 0 {
		period = 10 * time.Second
	}
	failThreshold := int(p.FailureThreshold)
	if failThreshold <= 0 {
		failThreshold = 3
	}
	select {
	case <-pr.ctx.Done():
		return
	case <-time.After(time.Duration(p.InitialDelaySeconds) * time.Second):
	}
	failures := 0
	for {
		cr.mu.Lock()
		running, ready := cr.running, cr.ready
		cr.mu.Unlock()
		ok := running && pr.check(pod, cr.spec, p)
		if ok {
			failures = 0
		} else {
			failures++
		}
		next := ready
		if ok {
			next = true
		} else if !running || failures >= failThreshold {
			next = false
		}
		if next != ready {
			cr.mu.Lock()
			cr.ready = next && cr.running
			cr.mu.Unlock()
			pr.changed()
		}
		wait := period
		if !next {
			wait = 500 * time.Millisecond // not ready yet: look again soon
		}
		select {
		case <-pr.ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func portOf(c corev1.Container, p intstr.IntOrString) string {
	if p.Type == intstr.Int {
		return strconv.Itoa(p.IntValue())
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return strconv.Itoa(int(cp.ContainerPort))
		}
	}
	return p.StrVal
}

func (pr *podRun) check(pod *corev1.Pod, c corev1.Container, p *corev1.Probe) bool {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	pr.mu.Lock()
	ip := pr.ip
	pr.mu.Unlock()
	switch {
	case p.HTTPGet != nil:
		host := p.HTTPGet.Host
		if host == "" {
			host = ip
		}
		scheme := "http"
		if p.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, portOf(c, p.HTTPGet.Port)), p.HTTPGet.Path)
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		for _, h := range p.HTTPGet.HTTPHeaders {
			req.Header.Set(h.Name, h.Value)
		}
		client := &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400
	case p.TCPSocket != nil || p.GRPC != nil:
		port := ""
		if p.TCPSocket != nil {
			port = portOf(c, p.TCPSocket.Port)
		} else {
			port = strconv.Itoa(int(p.GRPC.Port))
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, port), timeout)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	}
	return true
}
