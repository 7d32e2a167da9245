package lb

import (
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

func ptr[T any](v T) *T { return &v }

func slice(name, svc string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
		Endpoints:   eps,
	}
}

func TestEndpointsPicksReadyAddressesAtTheSlicePortForTheServicePort(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	ports := []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(3000))}, {Name: ptr("h2c"), Port: ptr(int32(3001))}}
	_ = idx.Add(slice("a", "web", ports,
		discoveryv1.Endpoint{Addresses: []string{"10.244.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
		discoveryv1.Endpoint{Addresses: []string{"10.244.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}},
		discoveryv1.Endpoint{Addresses: []string{"10.244.0.4"}}, // ready unset counts as ready
	))
	_ = idx.Add(slice("b", "other", ports, discoveryv1.Endpoint{Addresses: []string{"10.244.0.9"}}))
	_ = idx.Add(slice("c", "unnamed", []discoveryv1.EndpointPort{{Name: ptr(""), Port: ptr(int32(8080))}},
		discoveryv1.Endpoint{Addresses: []string{"10.244.0.5"}}))
	b := &Balancer{Slices: discoverylisters.NewEndpointSliceLister(idx)}

	got := b.endpoints(&listener{svcNS: "ns", svcName: "web", port: corev1.ServicePort{Name: "h2c", Port: 8081}})
	sort.Strings(got)
	if want := []string{"10.244.0.2:3001", "10.244.0.4:3001"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("web/h2c endpoints = %v, want %v", got, want)
	}
	got = b.endpoints(&listener{svcNS: "ns", svcName: "unnamed", port: corev1.ServicePort{Port: 80}})
	if len(got) != 1 || got[0] != "10.244.0.5:8080" {
		t.Errorf("unnamed endpoints = %v", got)
	}
	if got := b.endpoints(&listener{svcNS: "ns", svcName: "web", port: corev1.ServicePort{Name: "nope"}}); len(got) != 0 {
		t.Errorf("unknown port name got endpoints %v", got)
	}
}
