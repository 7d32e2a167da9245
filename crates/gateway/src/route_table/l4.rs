//! TCP, UDP and TLS passthrough ports: of the routes attached to a listener,
//! the oldest is served; a route's first rule becomes the port's forward.

use super::TableContext;
use crate::listener::ListenerProtocol;
use crate::route::{ForwardSpec, RouteModel, RuleAction};
use aether_ir::{
    Cluster, EndpointsFrom, L4Forward, PortProtocol, UpstreamProtocol, WeightedBackend, names,
};
use std::collections::BTreeMap;
use std::sync::Arc;

impl TableContext<'_> {
    /// The routes attached to a listener, oldest first (then by namespace/name).
    pub(super) fn by_age(&self, li: usize) -> Vec<usize> {
        let mut on: Vec<usize> = self.attached.served_on(li).collect();
        on.sort_by(|&a, &b| self.routes[a].age().cmp(&self.routes[b].age()));
        on
    }

    /// TCP and UDP: of every route attached to the port's listener(s), the oldest
    /// is served; the others are accepted but get no traffic.
    pub(super) fn oldest_forward(
        &self,
        listeners: &[usize],
        clusters: &mut BTreeMap<String, Arc<Cluster>>,
    ) -> Option<L4Forward> {
        let ri = listeners
            .iter()
            .flat_map(|&li| self.by_age(li))
            .min_by(|&a, &b| self.routes[a].age().cmp(&self.routes[b].age()))?;
        self.forward(ri, None, clusters)
    }

    /// A route's first rule as an L4 forward, its clusters put in the IR. A UDP
    /// route with several backends gets one cluster holding all their endpoints,
    /// weighted: Envoy's UDP proxy sends a session to one cluster. A TLS
    /// listener in Terminate mode (`listener`) sends to the route's backends as
    /// terminated TLS is sent: encrypted again per BackendTLSPolicy, presenting
    /// the Gateway's backend client certificate.
    pub(super) fn forward(
        &self,
        ri: usize,
        listener: Option<ListenerProtocol>,
        clusters: &mut BTreeMap<String, Arc<Cluster>>,
    ) -> Option<L4Forward> {
        let r: &RouteModel = &self.routes[ri];
        let RuleAction::Forward(spec) = &r.rules.first()?.action else {
            return None;
        };
        let reencrypted;
        let (backends, invalid_weight) = match (&spec.terminated, listener) {
            (Some(t), Some(ListenerProtocol::TlsTerminate)) => {
                let (backends, invalid_weight) = t.as_ref().clone();
                let f = ForwardSpec {
                    backends,
                    invalid_weight,
                    ..ForwardSpec::default()
                };
                reencrypted = self.with_client_certificate(&f).into_owned();
                (&reencrypted.backends, &reencrypted.invalid_weight)
            }
            _ => (&spec.backends, &spec.invalid_weight),
        };
        let route = names::route_key(r.kind(), &r.key().namespace, &r.key().name);
        if self.protocol == PortProtocol::Udp && backends.len() > 1 {
            let folded = udp_weighted_cluster(r, backends);
            let forward = L4Forward {
                route,
                backends: vec![WeightedBackend::new(&folded.name, 1)],
                invalid_weight: 0,
            };
            clusters.insert(folded.name.clone(), Arc::new(folded));
            return Some(forward);
        }
        for (cluster, _) in backends {
            clusters
                .entry(cluster.name.clone())
                .or_insert_with(|| cluster.clone());
        }
        Some(L4Forward {
            route,
            backends: backends
                .iter()
                .map(|(c, w)| WeightedBackend::new(&c.name, *w))
                .collect(),
            invalid_weight: *invalid_weight,
        })
    }
}

/// One cluster for a UDPRoute's weighted backends: every backend's endpoints,
/// each weighted so that the backends' shares are their weights (filled
/// last, `backend/endpoints.rs`).
fn udp_weighted_cluster(r: &RouteModel, backends: &[(Arc<Cluster>, u32)]) -> Cluster {
    Cluster {
        name: names::udp_route_cluster(&r.key().namespace, &r.key().name),
        service: r.key().clone(),
        port: 0,
        protocol: UpstreamProtocol::Http1,
        endpoints: Vec::new(),
        endpoints_from: EndpointsFrom::Weighted(
            (backends.iter())
                .map(|(c, w)| (c.endpoints_from.clone(), *w))
                .collect(),
        ),
        tls: None,
        backend_kind: aether_ir::BackendKind::Service,
        discovery: aether_ir::Discovery::Eds,
        session: None,
    }
}
