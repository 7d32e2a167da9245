//! IR cluster endpoints → `ClusterLoadAssignment` (EDS), one per cluster, same name.
//!
//! All endpoints sit in one locality: EndpointSlices carry no locality we act on.
//! Endpoints are equally weighted, except in the cluster that folds a UDPRoute's
//! weighted backends into one (its endpoints carry the backend weights). A cluster with no ready endpoint gets an assignment with no
//! endpoints, so Envoy answers 503 rather than waiting for EDS forever.

use aether_ir as ir;
use envoy_types::pb::envoy::config::core::v3::{
    Address, SocketAddress, address, socket_address::PortSpecifier,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::google::protobuf::UInt32Value;

pub fn load_assignment(cluster: &ir::Cluster) -> ClusterLoadAssignment {
    let lb_endpoints: Vec<LbEndpoint> = cluster
        .endpoints
        .iter()
        .map(|e| LbEndpoint {
            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                address: Some(socket_address(&e.address, e.port)),
                ..Default::default()
            })),
            load_balancing_weight: (e.weight > 0).then_some(UInt32Value { value: e.weight }),
            ..Default::default()
        })
        .collect();
    ClusterLoadAssignment {
        cluster_name: cluster.name.clone(),
        endpoints: if lb_endpoints.is_empty() {
            Vec::new()
        } else {
            vec![LocalityLbEndpoints {
                lb_endpoints,
                ..Default::default()
            }]
        },
        ..Default::default()
    }
}

/// A TCP socket address (IP or, for STRICT_DNS clusters, a hostname).
pub(crate) fn socket_address(host: &str, port: u16) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: host.to_string(),
            port_specifier: Some(PortSpecifier::PortValue(u32::from(port))),
            ..Default::default()
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(endpoints: &[(&str, u16)]) -> ir::Cluster {
        ir::Cluster {
            name: "edge_cl_app_web_8080".into(),
            service: ir::ObjectRef::new("app", "web"),
            port: 8080,
            protocol: ir::UpstreamProtocol::Http1,
            endpoints: endpoints
                .iter()
                .map(|(a, p)| ir::Endpoint {
                    address: a.to_string(),
                    port: *p,
                    weight: 0,
                })
                .collect(),
            endpoints_from: ir::EndpointsFrom::Nowhere,
            tls: None,
            backend_kind: ir::BackendKind::Service,
            discovery: ir::Discovery::Eds,
            session: None,
        }
    }

    #[test]
    fn endpoints_keep_ir_order_in_one_locality() {
        let cla = load_assignment(&cluster(&[("10.0.0.1", 3000), ("10.0.0.2", 3000)]));
        assert_eq!(cla.cluster_name, "edge_cl_app_web_8080");
        assert_eq!(cla.endpoints.len(), 1);
        let addrs: Vec<String> = cla.endpoints[0]
            .lb_endpoints
            .iter()
            .map(|e| match &e.host_identifier {
                Some(lb_endpoint::HostIdentifier::Endpoint(ep)) => {
                    match &ep.address.as_ref().unwrap().address {
                        Some(address::Address::SocketAddress(s)) => {
                            format!("{}:{:?}", s.address, s.port_specifier)
                        }
                        other => panic!("unexpected address {other:?}"),
                    }
                }
                other => panic!("unexpected host {other:?}"),
            })
            .collect();
        assert_eq!(
            addrs,
            vec![
                "10.0.0.1:Some(PortValue(3000))",
                "10.0.0.2:Some(PortValue(3000))"
            ]
        );
    }

    #[test]
    fn no_endpoints_gives_an_empty_assignment() {
        let cla = load_assignment(&cluster(&[]));
        assert_eq!(cla.cluster_name, "edge_cl_app_web_8080");
        assert!(cla.endpoints.is_empty());
    }
}
