// Command selftest-gateways is a harness self-test aid, NOT a Gateway implementation:
// it lets the suite get past its setup without aether-edge, to exercise everything
// around it (base manifests, backends, LB addresses, the suite's own report, the
// summary, the exit status). It marks GatewayClass "aether" Accepted and every Gateway
// of that class Accepted + Programmed with an address: for each Gateway a selector-less
// LoadBalancer Service (one port per distinct listener port) gets an address from the
// harness's pool, and that address goes into Gateway.status.addresses. No route is
// served: every traffic check of the suite fails, as it must.
//
//	selftest-gateways --kubeconfig K [--gateway-class aether]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

const controllerName = "gateway.aether.io/edge"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig")
	class := flag.String("gateway-class", "aether", "GatewayClass name")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	gw := gwclient.NewForConfigOrDie(cfg)
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	for ctx.Err() == nil {
		if err := syncOnce(ctx, cs, gw, *class); err != nil && ctx.Err() == nil {
			log.Print(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func setCond(conds *[]metav1.Condition, t, reason string, gen int64) bool {
	old := meta.FindStatusCondition(*conds, t)
	if old != nil && old.Status == metav1.ConditionTrue && old.ObservedGeneration == gen && old.Reason == reason {
		return false
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason,
		Message: "harness self-test stand-in, not aether-edge", ObservedGeneration: gen})
	return true
}

func syncOnce(ctx context.Context, cs kubernetes.Interface, gw gwclient.Interface, class string) error {
	gc, err := gw.GatewayV1().GatewayClasses().Get(ctx, class, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		gc, err = gw.GatewayV1().GatewayClasses().Create(ctx, &gwv1.GatewayClass{
			ObjectMeta: metav1.ObjectMeta{Name: class},
			Spec:       gwv1.GatewayClassSpec{ControllerName: controllerName},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	// The core features of the GATEWAY-HTTP, -GRPC and -TLS profiles, sorted by name as
	// the API requires; without any the suite refuses to start.
	var sf []gwv1.SupportedFeature
	for _, f := range []string{"GRPCRoute", "Gateway", "HTTPRoute", "ReferenceGrant", "TLSRoute"} {
		sf = append(sf, gwv1.SupportedFeature{Name: gwv1.FeatureName(f)})
	}
	changed := len(gc.Status.SupportedFeatures) != len(sf)
	gc.Status.SupportedFeatures = sf
	if setCond(&gc.Status.Conditions, "Accepted", "Accepted", gc.Generation) || changed {
		if _, err := gw.GatewayV1().GatewayClasses().UpdateStatus(ctx, gc, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	gws, err := gw.GatewayV1().Gateways("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range gws.Items {
		g := &gws.Items[i]
		if string(g.Spec.GatewayClassName) != class {
			continue
		}
		if err := syncGateway(ctx, cs, gw, g); err != nil {
			log.Printf("gateway %s/%s: %v", g.Namespace, g.Name, err)
		}
	}
	return nil
}

func syncGateway(ctx context.Context, cs kubernetes.Interface, gw gwclient.Interface, g *gwv1.Gateway) error {
	name := "selftest-" + g.Name
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway", Name: g.Name, UID: g.UID}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	seen := map[int32]bool{}
	for _, l := range g.Spec.Listeners {
		if p := int32(l.Port); !seen[p] {
			seen[p] = true
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: p})
		}
	}
	cur, err := cs.CoreV1().Services(g.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cur, err = cs.CoreV1().Services(g.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	changed := setCond(&g.Status.Conditions, "Accepted", "Accepted", g.Generation)
	changed = setCond(&g.Status.Conditions, "Programmed", "Programmed", g.Generation) || changed
	if ing := cur.Status.LoadBalancer.Ingress; len(ing) > 0 && ing[0].IP != "" {
		ip := gwv1.IPAddressType
		if len(g.Status.Addresses) != 1 || g.Status.Addresses[0].Value != ing[0].IP {
			g.Status.Addresses = []gwv1.GatewayStatusAddress{{Type: &ip, Value: ing[0].IP}}
			changed = true
		}
	}
	if len(g.Status.Listeners) != len(g.Spec.Listeners) {
		g.Status.Listeners = nil
		for _, l := range g.Spec.Listeners {
			ls := gwv1.ListenerStatus{Name: l.Name, SupportedKinds: []gwv1.RouteGroupKind{}}
			for _, t := range []string{"Accepted", "Programmed", "ResolvedRefs"} {
				setCond(&ls.Conditions, t, t, g.Generation)
			}
			g.Status.Listeners = append(g.Status.Listeners, ls)
		}
		changed = true
	}
	if !changed {
		return nil
	}
	_, err = gw.GatewayV1().Gateways(g.Namespace).UpdateStatus(ctx, g, metav1.UpdateOptions{})
	return err
}
