package node

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Register creates (or takes over) the Node object: Ready, with the pod CIDR, the
// node IP and the log endpoint port. The API server's TaintNodesByCondition admission
// adds a not-ready taint at creation; with no node-lifecycle controller running (the
// harness disables it), we clear the taints ourselves.
func (a *Agent) Register(ctx context.Context, kubeletPort int32) error {
	nodes := a.CS.CoreV1().Nodes()
	n, err := nodes.Get(ctx, a.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err = nodes.Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: a.NodeName, Labels: map[string]string{
				"kubernetes.io/hostname": a.NodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			}},
			Spec: corev1.NodeSpec{PodCIDR: a.Net.PodRange().String(), PodCIDRs: []string{a.Net.PodRange().String()}},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	if len(n.Spec.Taints) > 0 {
		n.Spec.Taints = nil
		if n, err = nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("clear node taints: %w", err)
		}
	}
	return a.heartbeat(ctx, kubeletPort)
}

func (a *Agent) heartbeat(ctx context.Context, kubeletPort int32) error {
	n, err := a.CS.CoreV1().Nodes().Get(ctx, a.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity
	n.Status.Phase = corev1.NodeRunning
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: a.NodeIP.String()},
		{Type: corev1.NodeHostName, Address: a.NodeName},
	}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = kubeletPort
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion: "v1.34.0-aether-edge-conformance", OperatingSystem: "linux", Architecture: "amd64",
		ContainerRuntimeVersion: "process://aether-edge-conformance",
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "pods run as processes", LastHeartbeatTime: now, LastTransitionTime: now}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready.LastTransitionTime = c.LastTransitionTime
		}
	}
	n.Status.Conditions = []corev1.NodeCondition{ready}
	_, err = a.CS.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

// Heartbeat keeps the Node's Ready condition fresh until ctx ends.
func (a *Agent) Heartbeat(ctx context.Context, kubeletPort int32) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Second):
		}
		if err := a.heartbeat(ctx, kubeletPort); err != nil && ctx.Err() == nil {
			fmt.Printf("node heartbeat: %v\n", err)
		}
	}
}
