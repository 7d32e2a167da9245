package main

import (
	"errors"
	"flag"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// common is what every scenario is told: the cluster, the Gateway, who runs it,
// the processes to measure, where the result goes.
type common struct {
	kubeconfig, gateway, address, impl, detail, controller, ctlPids, envoyPids, out *string
}

func commonFlags(fs *flag.FlagSet) common {
	return common{
		kubeconfig: fs.String("kubeconfig", "", "kubeconfig"),
		gateway:    fs.String("gateway", "bench/gw", "the Gateway, NAMESPACE/NAME (what the scenario creates goes to its namespace)"),
		address:    fs.String("address", "", "the Gateway's address (IP:PORT; IP alone for listenersets, which uses 443)"),
		impl:       fs.String("impl", "", "implementation name for the table"),
		detail:     fs.String("detail", "", "one line on how it runs, for the table"),
		controller: fs.String("controller", "", "controllerName whose Accepted condition counts (default: any)"),
		ctlPids:    fs.String("ctl-pids", "", "comma-separated [NAME=]PID: the control plane's processes"),
		envoyPids:  fs.String("envoy-pids", "", "comma-separated [NAME=]PID: the Envoy processes"),
		out:        fs.String("out", "", "append the result as a JSON line to this file"),
	}
}

// open: the Gateway's namespace and name, and clients of the cluster. Their rate
// limit is raised: client-go's default (5 requests a second) would hold a timed
// create or update back by up to 200 ms after its time is taken.
func (c common) open(needAddress bool) (string, string, gwclient.Interface, kubernetes.Interface, error) {
	ns, name, ok := strings.Cut(*c.gateway, "/")
	if !ok || *c.impl == "" || (needAddress && *c.address == "") {
		return "", "", nil, nil, errors.New("--gateway NS/NAME and --impl are required (and --address, to send requests)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *c.kubeconfig)
	if err != nil {
		return "", "", nil, nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	gw, err := gwclient.NewForConfig(cfg)
	if err != nil {
		return "", "", nil, nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	return ns, name, gw, kube, err
}
