package node

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestResolvConf(t *testing.T) {
	pod := func(policy corev1.DNSPolicy, hostNet bool) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "p"}, Spec: corev1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet}}
	}
	pr := &podRun{agent: &Agent{ClusterDNS: "10.96.0.10"}, dir: t.TempDir()}
	path, ok, err := pr.resolvConf(pod("", false))
	if err != nil || !ok {
		t.Fatalf("ClusterFirst pod: %v %v", ok, err)
	}
	b, _ := os.ReadFile(path)
	if want := "search ns1.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"; string(b) != want {
		t.Errorf("resolv.conf = %q, want %q", b, want)
	}
	for _, c := range []struct {
		policy  corev1.DNSPolicy
		hostNet bool
		want    bool
	}{{corev1.DNSClusterFirst, true, false}, {corev1.DNSClusterFirstWithHostNet, true, true}, {corev1.DNSDefault, false, false}, {corev1.DNSNone, false, false}} {
		if _, ok, _ := pr.resolvConf(pod(c.policy, c.hostNet)); ok != c.want {
			t.Errorf("dnsPolicy %q hostNetwork %v: cluster DNS %v, want %v", c.policy, c.hostNet, ok, c.want)
		}
	}
	if _, ok, _ := (&podRun{agent: &Agent{}, dir: t.TempDir()}).resolvConf(pod("", false)); ok {
		t.Errorf("without --cluster-dns a pod got a resolv.conf of its own")
	}
}
