// Command nodeagent is the harness's node: the kubelet stand-in that runs pods as
// processes (internal/node) and the load-balancer stand-in (internal/lb), in one
// process inside the node network namespace.
//
//	nodeagent run --kubeconfig K [flags]     the node (see -h)
//	nodeagent container-exec … -- argv       internal: last step of starting a container
//	nodeagent pause                          stands in for images that only need to stay up
//	nodeagent dns-query SERVER:PORT NAME     one DNS query over UDP, as the suite's UDPRoute
//	                                         test makes it (run --smoke asks coredns)
//	nodeagent udp-send HOST:PORT PAYLOAD     one datagram from a connected socket; prints
//	                                         the reply (run --smoke: UDP through an LB address)
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"aether-edge/conformance/internal/lb"
	"aether-edge/conformance/internal/node"
	"aether-edge/conformance/internal/podexec"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nodeagent run|container-exec|pause|dns-query|udp-send [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "container-exec":
		err := podexec.Main(os.Args[2:])
		fmt.Fprintf(os.Stderr, "container-exec: %v\n", err)
		os.Exit(127)
	case "dns-query":
		if err := dnsQuery(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "dns-query: %v\n", err)
			os.Exit(1)
		}
	case "udp-send":
		if err := udpSend(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "udp-send: %v\n", err)
			os.Exit(1)
		}
	case "pause":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		<-ch
	case "run":
		if err := run(os.Args[2:]); err != nil {
			log.Fatal(err)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown subcommand %q\n", os.Args[1])
		os.Exit(2)
	}
}

// dnsQuery asks SERVER:PORT for NAME's A record over UDP (dns.Exchange, as the suite's
// UDPRoute test does) and prints the answer; an error if there is none.
func dnsQuery(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: nodeagent dns-query SERVER:PORT NAME")
	}
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(args[1]), dns.TypeA)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(msg, args[0])
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess {
		return fmt.Errorf("%s: %s", args[0], dns.RcodeToString[r.Rcode])
	}
	for _, rr := range append(r.Answer, r.Extra...) {
		fmt.Println(strings.ReplaceAll(rr.String(), "\t", " "))
	}
	return nil
}

// udpSend sends PAYLOAD to HOST:PORT from a connected UDP socket, as the suite's UDP
// echo probe does (a reply from any other address is not accepted), and prints the reply.
func udpSend(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: nodeagent udp-send HOST:PORT PAYLOAD")
	}
	c, err := net.Dial("udp", args[0])
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(args[1])); err != nil {
		return err
	}
	buf := make([]byte, 64*1024)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	fmt.Println(string(buf[:n]))
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster")
	nodeName := fs.String("node-name", "node-1", "Node name")
	nodeIP := fs.String("node-ip", "10.244.0.1", "node IP (on the bridge; pods' gateway)")
	podCIDR := fs.String("pod-cidr", "10.244.0.0/16", "pod network (the mask pods get)")
	podRange := fs.String("pod-range", "", "this node's pod IPs, within --pod-cidr (default: all of it)")
	podGateway := fs.String("pod-gateway", "", "pods' default route (default: --node-ip)")
	withLB := fs.Bool("load-balancer", true, "run the load-balancer/ClusterIP stand-in (one node of a cluster does)")
	bridge := fs.String("bridge", "br0", "bridge in the node netns")
	prefix := fs.String("netns-prefix", "ae-", "prefix of the pod network namespaces (names under /run/netns)")
	stateDir := fs.String("state-dir", "", "directory for pod files and logs")
	lbPool := fs.String("lb-pool", "10.250.0.0/24", "load-balancer address pool")
	lbIface := fs.String("lb-interface", "lo", "interface carrying Service and load-balancer addresses")
	kubeletPort := fs.Int("kubelet-port", 10250, "port of the log endpoint (kubelet API stand-in)")
	apiServer := fs.String("apiserver", "10.244.0.1:6443", "API server host:port as pods reach it")
	echoBasic := fs.String("echo-basic", os.Getenv("ECHO_BASIC_BIN"), "echo-basic binary")
	echoBasicV2 := fs.String("echo-basic-v2", os.Getenv("ECHO_BASIC_V2_BIN"), "echo-basic-v2 binary (echo-basic image v0.2.0 and later)")
	coredns := fs.String("coredns", os.Getenv("COREDNS_BIN"), "coredns binary")
	envoy := fs.String("envoy", os.Getenv("ENVOY_BIN"), "envoy binary")
	aether := fs.String("aether-edge", os.Getenv("AETHER_EDGE_BIN"), "aether-edge binary")
	clusterDNS := fs.String("cluster-dns", "", "cluster DNS server IP for the pods' resolv.conf, as the kubelet's --cluster-dns (default: pods use the node's)")
	clusterDomain := fs.String("cluster-domain", "cluster.local", "cluster domain (the pods' DNS search path, with --cluster-dns)")
	envoyGateway := fs.String("envoy-gateway", os.Getenv("EG_BIN"), "envoy-gateway binary (image envoyproxy/gateway: benches/peer/k8s)")
	traffic := fs.String("edge-traffic", os.Getenv("EDGE_TRAFFIC_BIN"), "edge-traffic binary (image aether-edge-traffic: the traffic driver's backend)")
	var ociImages []string
	fs.Func("oci-image", "IMAGE=LAYOUT-DIR: run containers of IMAGE (e.g. aether-edge:dev) from this OCI image layout, tag IMAGE's tag (repeatable)", func(v string) error {
		ociImages = append(ociImages, v)
		return nil
	})
	_ = fs.Parse(args)
	if *stateDir == "" {
		return fmt.Errorf("--state-dir is required")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(*nodeIP)
	if err != nil {
		return err
	}
	cidr, err := netip.ParsePrefix(*podCIDR)
	if err != nil {
		return err
	}
	pool, err := netip.ParsePrefix(*lbPool)
	if err != nil {
		return err
	}
	network := &node.Network{Prefix: *prefix, Bridge: *bridge, NodeIP: ip, CIDR: cidr}
	if *podRange != "" {
		if network.Range, err = netip.ParsePrefix(*podRange); err != nil {
			return err
		}
	}
	if *podGateway != "" {
		if network.Gateway, err = netip.ParseAddr(*podGateway); err != nil {
			return err
		}
	}
	apiHost, apiPort, err := net.SplitHostPort(*apiServer)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	agent := &node.Agent{
		CS: cs, NodeName: *nodeName, NodeIP: ip, StateDir: *stateDir,
		Net:           network,
		Programs:      node.Programs{EchoBasic: *echoBasic, EchoBasicV2: *echoBasicV2, CoreDNS: *coredns, Envoy: *envoy, AetherEdge: *aether, EdgeTraffic: *traffic, EnvoyGateway: *envoyGateway, Self: self},
		APIServerHost: apiHost, APIServerPort: apiPort,
		ClusterDNS: *clusterDNS, ClusterDomain: *clusterDomain,
	}
	if err := os.MkdirAll(filepath.Join(*stateDir, "pods"), 0o755); err != nil {
		return err
	}
	for _, v := range ociImages {
		ref, dir, err := node.ParseImageFlag(v)
		if err != nil {
			return err
		}
		img, err := node.OpenImage(ref, dir)
		if err != nil {
			return err
		}
		// Unpacked now, once: a broken image stops the node before any pod waits on it.
		rootfs, err := img.Rootfs(filepath.Join(*stateDir, "images"))
		if err != nil {
			return err
		}
		log.Printf("image %s: OCI image %s from %s, unpacked in %s (user %q, entrypoint %q)", ref, img.Digest, dir, rootfs, img.Config.User, img.Config.Entrypoint)
		agent.Images = append(agent.Images, img)
	}
	if err := agent.Programs.LinkPrograms(filepath.Join(*stateDir, "bin")); err != nil {
		return err
	}
	for {
		err = agent.Register(ctx, int32(*kubeletPort))
		if err == nil || ctx.Err() != nil {
			break
		}
		log.Printf("%v (retrying)", err)
		time.Sleep(time.Second)
	}
	if err != nil {
		return err
	}
	log.Printf("node %s registered (IP %s, pod IPs %s of %s)", *nodeName, ip, network.PodRange(), cidr)
	go agent.Heartbeat(ctx, int32(*kubeletPort))
	go func() {
		addr := net.JoinHostPort(ip.String(), fmt.Sprint(*kubeletPort))
		if err := node.ServeLogs(ctx, addr, agent.LogPath); err != nil {
			log.Printf("log endpoint: %v", err)
			cancel()
		}
	}()

	podInformers := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", *nodeName).String()
	}))
	podInformers.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { agent.Observe(obj.(*corev1.Pod), false) },
		UpdateFunc: func(_, obj any) { agent.Observe(obj.(*corev1.Pod), false) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				agent.Observe(p, true)
			}
		},
	})

	podInformers.Start(ctx.Done())
	var balancer *lb.Balancer
	if *withLB {
		balancer = startBalancer(ctx, cs, pool, *lbIface)
	}
	images := []string{"echo-basic=" + *echoBasic, "echo-basic:v0.2+=" + *echoBasicV2, "coredns=" + *coredns, "envoy=" + *envoy, "aether-edge=" + *aether}
	if *traffic != "" {
		images = append(images, "aether-edge-traffic="+*traffic)
	}
	for _, img := range agent.Images {
		images = append(images, img.Ref+"=OCI image "+img.Digest)
	}
	log.Printf("running pods%s; images: %s", map[bool]string{true: " and load balancers", false: ""}[*withLB], strings.Join(images, " "))
	<-ctx.Done()
	log.Printf("shutting down: stopping pods")
	if balancer != nil {
		balancer.Close()
	}
	agent.StopAll()
	agent.RemoveCreatedPaths()
	return nil
}

// startBalancer runs the load-balancer/ClusterIP stand-in until ctx ends.
func startBalancer(ctx context.Context, cs kubernetes.Interface, pool netip.Prefix, iface string) *lb.Balancer {
	shared := informers.NewSharedInformerFactory(cs, 0)
	balancer := &lb.Balancer{CS: cs, Pool: pool, Interface: iface, Slices: shared.Discovery().V1().EndpointSlices().Lister()}
	syncSvc := func(obj any, deleted bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		svc, ok := obj.(*corev1.Service)
		if !ok {
			return
		}
		if deleted {
			balancer.Sync(ctx, svc.Namespace, svc.Name, nil)
			return
		}
		balancer.Sync(ctx, svc.Namespace, svc.Name, svc)
	}
	shared.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { syncSvc(obj, false) },
		UpdateFunc: func(_, obj any) { syncSvc(obj, false) },
		DeleteFunc: func(obj any) { syncSvc(obj, true) },
	})
	shared.Discovery().V1().EndpointSlices().Informer()
	shared.Start(ctx.Done())
	return balancer
}
