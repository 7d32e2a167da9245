//! Endpoints: the one phase of a translation that reads EndpointSlices.
//!
//! ```text
//!  Cluster.endpoints_from ─► PortNamed{Service, name}    the slice port so named
//!                            PortNumbered{Service, port} the slice port of that number
//!                            Weighted[(from, weight)]    each one's, weighted
//!                         ─► ready endpoints (or, when none is, those still serving
//!                            while terminating), IPv4/IPv6 slices only
//! ```
//!
//! Everything before this phase (route and Gateway models, route tables,
//! statuses) says only where a cluster's endpoints come from, so a pod's
//! change costs the clusters of its Service, not the routes that name them.

use super::BackendIndex;
use aether_ir::{Endpoint, EndpointsFrom, ObjectRef};
use k8s_openapi::api::discovery::v1::EndpointPort;
use std::collections::BTreeMap;

impl BackendIndex {
    /// The endpoints `from` names, sorted and deduplicated.
    pub fn endpoints(&self, from: &EndpointsFrom) -> Vec<Endpoint> {
        match from {
            EndpointsFrom::Nowhere => Vec::new(),
            EndpointsFrom::PortNamed { service, name } => {
                self.ready(service, |p| p.name.as_deref().unwrap_or("") == name)
            }
            EndpointsFrom::PortNumbered { service, port } => {
                self.ready(service, |p| p.port == Some(i32::from(*port)))
            }
            EndpointsFrom::Weighted(backends) => self.weighted(backends),
        }
    }

    /// Ready endpoints of a Service port (the slice port `port` picks),
    /// sorted and deduplicated. A pod being deleted turns not ready at once
    /// and leaves the load balancing while its process still finishes what it
    /// has; when every endpoint is terminating (a rollout's last moments),
    /// those still serving take the traffic rather than none, as kube-proxy
    /// does.
    fn ready(&self, service: &ObjectRef, port: impl Fn(&EndpointPort) -> bool) -> Vec<Endpoint> {
        let mut out = Vec::new();
        let mut terminating = Vec::new();
        let slices = self.slices.get(service).into_iter().flatten();
        // FQDN slices name hosts, not addresses: a static upstream cannot use them.
        for slice in slices.filter(|s| matches!(s.address_type.as_str(), "IPv4" | "IPv6")) {
            // An address that is not an IP of the slice's type is no endpoint:
            // the API server refuses it, and so does the loader, but a
            // static upstream Envoy cannot parse must never get this far.
            let v4 = slice.address_type == "IPv4";
            let is_ip = |a: &str| {
                if v4 {
                    a.parse::<std::net::Ipv4Addr>().is_ok()
                } else {
                    a.parse::<std::net::Ipv6Addr>().is_ok()
                }
            };
            let port = slice
                .ports
                .iter()
                .flatten()
                .find(|p| port(p))
                .and_then(|p| p.port)
                .and_then(|p| u16::try_from(p).ok());
            let Some(port) = port else { continue };
            for ep in &slice.endpoints {
                let conditions = ep.conditions.as_ref();
                let into = if conditions.and_then(|c| c.ready) != Some(false) {
                    &mut out
                } else if conditions
                    .is_some_and(|c| c.serving == Some(true) && c.terminating == Some(true))
                {
                    &mut terminating
                } else {
                    continue;
                };
                for address in ep.addresses.iter().filter(|a| is_ip(a)) {
                    into.push(Endpoint {
                        address: address.clone(),
                        port,
                        weight: 0,
                    });
                }
            }
        }
        if out.is_empty() {
            out = terminating;
        }
        out.sort();
        out.dedup();
        out.shrink_to_fit();
        out
    }

    /// Every backend's endpoints, each weighted so that the backends' shares
    /// are their weights (a backend's weight spread over its endpoints).
    /// Endpoints named by two backends add up.
    fn weighted(&self, backends: &[(EndpointsFrom, u32)]) -> Vec<Endpoint> {
        /// Per-endpoint weights are integers: scale before dividing by the count.
        const SCALE: u64 = 1000;
        let mut weights: BTreeMap<(String, u16), u64> = BTreeMap::new();
        for (from, weight) in backends {
            let endpoints = self.endpoints(from);
            let n = endpoints.len() as u64;
            for e in endpoints {
                let share = (u64::from(*weight) * SCALE / n).max(1);
                *weights.entry((e.address, e.port)).or_default() += share;
            }
        }
        weights
            .into_iter()
            .map(|((address, port), w)| Endpoint {
                address,
                port,
                weight: u32::try_from(w).unwrap_or(u32::MAX),
            })
            .collect()
    }
}
