package node

import (
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// resolvConf writes the pod's resolv.conf as the kubelet does with --cluster-dns: the
// cluster DNS server, the search path of the pod's namespace, ndots 5. Only with a
// cluster DNS (Agent.ClusterDNS) and for the pods that use it: dnsPolicy ClusterFirst
// (the default) unless hostNetwork, and ClusterFirstWithHostNet. Others (false) keep
// the node's resolv.conf.
func (pr *podRun) resolvConf(pod *corev1.Pod) (string, bool, error) {
	a := pr.agent
	if a.ClusterDNS == "" {
		return "", false, nil
	}
	switch pod.Spec.DNSPolicy {
	case corev1.DNSClusterFirst, "":
		if pod.Spec.HostNetwork {
			return "", false, nil
		}
	case corev1.DNSClusterFirstWithHostNet:
	default:
		return "", false, nil
	}
	domain := a.ClusterDomain
	if domain == "" {
		domain = "cluster.local"
	}
	dir := filepath.Join(pr.dir, "etc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	path := filepath.Join(dir, "resolv.conf")
	content := fmt.Sprintf("search %s.svc.%s svc.%s %s\nnameserver %s\noptions ndots:5\n", pod.Namespace, domain, domain, domain, a.ClusterDNS)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return "", false, err
	}
	return path, true, nil
}
