//! Small builders for tests: real Envoy messages, snapshots and requests.
//!
//! `rev` changes one field of a resource so tests can move a resource to a new
//! version without changing its name; [`BASE`] is the set most tests start from.

use aether_ir::ObjectRef;
use aether_xds::{Resource, ResourceType, Snapshot};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{DataSource, Node, data_source};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, cluster_load_assignment::Policy,
};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    GenericSecret, Secret, secret,
};
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use envoy_types::pb::google::protobuf::UInt32Value;
use envoy_types::pb::google::rpc::Status;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub const CDS: ResourceType = ResourceType::Cluster;
pub const EDS: ResourceType = ResourceType::Endpoint;
pub const LDS: ResourceType = ResourceType::Listener;
pub const RDS: ResourceType = ResourceType::Route;
pub const SDS: ResourceType = ResourceType::Secret;

/// A real Envoy message of type `ty` named `name`, at revision `rev`.
pub fn mk_resource(ty: ResourceType, name: &str, rev: u32) -> Resource {
    let bytes = match ty {
        ResourceType::Cluster => Cluster {
            name: name.to_string(),
            alt_stat_name: format!("rev{rev}"),
            ..Default::default()
        }
        .encode_to_vec(),
        ResourceType::Endpoint => ClusterLoadAssignment {
            cluster_name: name.to_string(),
            policy: Some(Policy {
                overprovisioning_factor: Some(UInt32Value { value: 100 + rev }),
                ..Default::default()
            }),
            ..Default::default()
        }
        .encode_to_vec(),
        ResourceType::Listener => Listener {
            name: name.to_string(),
            stat_prefix: format!("rev{rev}"),
            ..Default::default()
        }
        .encode_to_vec(),
        ResourceType::Route => RouteConfiguration {
            name: name.to_string(),
            request_headers_to_remove: vec![format!("x-rev-{rev}")],
            ..Default::default()
        }
        .encode_to_vec(),
        ResourceType::Secret => Secret {
            name: name.to_string(),
            r#type: Some(secret::Type::GenericSecret(GenericSecret {
                secret: Some(DataSource {
                    specifier: Some(data_source::Specifier::InlineString(format!("rev{rev}"))),
                    ..Default::default()
                }),
                ..Default::default()
            })),
        }
        .encode_to_vec(),
    };
    Resource::new(name, ty.type_url(), bytes)
}

/// A snapshot of `(type, name, rev)` resources and Gateways made of `(type, name)`.
pub fn mk_snapshot(
    resources: &[(ResourceType, &str, u32)],
    gateways: &[(&str, &[(ResourceType, &str)])],
) -> Arc<Snapshot> {
    let mut by_type: BTreeMap<ResourceType, BTreeMap<String, Resource>> = BTreeMap::new();
    for (ty, name, rev) in resources {
        by_type
            .entry(*ty)
            .or_default()
            .insert(name.to_string(), mk_resource(*ty, name, *rev));
    }
    let members = gateways
        .iter()
        .map(|(gw, members)| {
            let (ns, name) = gw.split_once('/').expect("gateway as ns/name");
            let set: BTreeSet<(ResourceType, String)> =
                members.iter().map(|(t, n)| (*t, n.to_string())).collect();
            (ObjectRef::new(ns, name), set)
        })
        .collect();
    Arc::new(Snapshot::new(by_type, members))
}

/// What the stream and fleet tests start from: clusters c1 and c2 with their
/// endpoints, listener l80 and route table r80, all at rev 1.
pub const BASE: [(ResourceType, &str, u32); 6] = [
    (CDS, "c1", 1),
    (CDS, "c2", 1),
    (EDS, "c1", 1),
    (EDS, "c2", 1),
    (LDS, "l80", 1),
    (RDS, "r80", 1),
];

/// What a stream asks for to hold all of [`BASE`]: CDS and LDS as wildcards,
/// EDS and RDS by name.
pub const OPEN_BASE: [(ResourceType, &[&str]); 4] = [
    (CDS, &[]),
    (EDS, &["c1", "c2"]),
    (LDS, &[]),
    (RDS, &["r80"]),
];

/// [`BASE`] with `changes`: a resource named there takes its rev, any other is
/// added; and Gateways as [`mk_snapshot`] has them.
pub fn mk_base_snapshot(
    changes: &[(ResourceType, &str, u32)],
    gateways: &[(&str, &[(ResourceType, &str)])],
) -> Arc<Snapshot> {
    let mut resources = BASE.to_vec();
    for &(ty, name, rev) in changes {
        match resources
            .iter_mut()
            .find(|(t, n, _)| (*t, *n) == (ty, name))
        {
            Some(held) => held.2 = rev,
            None => resources.push((ty, name, rev)),
        }
    }
    mk_snapshot(&resources, gateways)
}

pub fn gw(s: &str) -> ObjectRef {
    let (ns, name) = s.split_once('/').expect("gateway as ns/name");
    ObjectRef::new(ns, name)
}

pub fn mk_node(id: &str) -> Option<Node> {
    Some(Node {
        id: id.to_string(),
        cluster: "edge".to_string(),
        ..Default::default()
    })
}

pub fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A SotW request: initial when `nonce` is empty, else an ACK of it.
pub fn mk_request(ty: ResourceType, resource_names: &[&str], nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        node: mk_node("node-a"),
        type_url: ty.type_url().to_string(),
        resource_names: names(resource_names),
        response_nonce: nonce.to_string(),
        ..Default::default()
    }
}

/// A SotW NACK of `nonce` with Envoy's `message`.
pub fn mk_nack(
    ty: ResourceType,
    resource_names: &[&str],
    nonce: &str,
    message: &str,
) -> DiscoveryRequest {
    DiscoveryRequest {
        error_detail: Some(Status {
            code: 13,
            message: message.to_string(),
            ..Default::default()
        }),
        ..mk_request(ty, resource_names, nonce)
    }
}

pub fn mk_delta(
    ty: ResourceType,
    subscribe: &[&str],
    unsubscribe: &[&str],
    nonce: &str,
) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        node: mk_node("node-a"),
        type_url: ty.type_url().to_string(),
        resource_names_subscribe: names(subscribe),
        resource_names_unsubscribe: names(unsubscribe),
        response_nonce: nonce.to_string(),
        ..Default::default()
    }
}

pub fn mk_delta_nack(ty: ResourceType, nonce: &str, message: &str) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        error_detail: Some(Status {
            code: 13,
            message: message.to_string(),
            ..Default::default()
        }),
        ..mk_delta(ty, &[], &[], nonce)
    }
}

/// The resource names carried by a list of `Any`, decoded through the type's message.
pub fn any_names(
    ty: ResourceType,
    resources: &[envoy_types::pb::google::protobuf::Any],
) -> Vec<String> {
    resources
        .iter()
        .map(|any| {
            assert_eq!(any.type_url, ty.type_url());
            let b = any.value.as_slice();
            match ty {
                ResourceType::Cluster => Cluster::decode(b).unwrap().name,
                ResourceType::Endpoint => ClusterLoadAssignment::decode(b).unwrap().cluster_name,
                ResourceType::Listener => Listener::decode(b).unwrap().name,
                ResourceType::Route => RouteConfiguration::decode(b).unwrap().name,
                ResourceType::Secret => Secret::decode(b).unwrap().name,
            }
        })
        .collect()
}

/// A built snapshot of Gateway infra/web: port 80, one route table, and per
/// `(route, path)` an HTTPRoute `app/<route>` matching that path prefix and
/// forwarding to its own cluster.
pub fn mk_routes_snapshot(routes: &[(&str, &str)]) -> Arc<Snapshot> {
    use aether_ir::{self as ir, fixtures};
    let rules = routes.iter().map(|(n, p)| fixtures::forward_route(n, p, n));
    let gateway = fixtures::http_gateway("web", rules.collect());
    let mut clusters: Vec<ir::Cluster> = routes
        .iter()
        .map(|(n, _)| fixtures::service_cluster(n, "10.1.0.1"))
        .collect();
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    Arc::new(aether_xds::build(&ir::Ir::new(vec![gateway], clusters)))
}
