//! Gateway addresses: per-Gateway `LoadBalancer` Services and Envoy port allocations.
//!
//! Two address modes ([`AddressMode`]):
//!
//! - **service** (default). Every Gateway of our class gets one Service of type
//!   `LoadBalancer` in the edge namespace, selecting the edge DaemonSet pods. It has
//!   exactly one port per distinct (listener port, L4 protocol) — HTTP, HTTPS, TLS
//!   and TCP listeners are TCP, UDP listeners UDP — named `p-<port>` (TCP) or
//!   `p-<port>-udp`, whose `targetPort` is the Envoy port allocated to that
//!   (Gateway, listener port). Envoy binds every Gateway on the bind address
//!   (`0.0.0.0`) at its allocated ports, so Gateways never collide inside the one
//!   Envoy they share.
//! - **static**. No Services: listeners bind directly on the Gateway's
//!   `spec.addresses` (or the configured default address) at the listener port.
//!   This is what translation already produces (`aether_gateway::Config::default_address`),
//!   for hostNetwork/VIP setups and standalone use; nothing here runs.
//!
//! ```text
//!  Store ──desired_services (leader: allocate lowest free)──► Vec<Service> ──reconcile──► API server
//!    ▲                                                                               │
//!    └──────────────── watch (edge Services, with annotation + targetPorts) ◄────────┘
//!  Store ──allocations (every agent)──► apply_allocations(Ir) ──► Envoy binds 0.0.0.0:<envoy port>
//!  Store (Service LB ingress) ──assignments──► Addresses (for aether_gateway::assemble)
//! ```
//!
//! Wiring (per store generation; `t = translate(&store, &config)`):
//!
//! ```text
//!  leader:  desired = desired_services(&recent.overlay(&store, ns), &t.ir, &cfg)
//!           reconcile(&client, desired, store.all::<Service>().values(), ns)
//!             → recent.record(&result, &store); errors per Gateway
//!  every agent:  unallocated = apply_allocations(&mut t.ir, &allocations(&store, ns), &cfg.bind_address)
//!                then build the snapshot from t.ir (the leader does the same to hash it),
//!                published with problems(None, &unallocated), what it lacks
//!  leader status:  addresses = assignments(t.status.gateways.keys(), &store,
//!                                          &(that publication's problems + errors))
//!                  plan = assemble(&t.status, ack, &addresses)
//! ```
//!
//! Allocations are recorded on the Service itself (annotation
//! [`ALLOCATIONS_ANNOTATION`] plus the targetPorts), so they survive restarts and
//! leader changes: the leader keeps every existing allocation and gives a new
//! (Gateway, port) the lowest port of the range that no edge Service uses. Only the
//! leader allocates; every agent reads allocations back from the Services it
//! watches, so the Envoy fleet binds exactly what the Services target.

pub mod addresses;
pub mod allocate;
pub mod desired;
pub mod members;
pub mod metrics;
pub mod public;
pub mod recent;
pub mod reconcile;
pub mod reconcile_public;

pub use addresses::{assignments, problems};
pub use allocate::{Allocations, Unallocated, allocations, apply_allocations};
pub use desired::{L4, desired_services, port_name};
pub use members::members;
pub use metrics::ServiceMetrics;
pub use public::{Public, desired_public};
pub use recent::RecentWrites;
pub use reconcile::{ReconcileErrors, ReconcileReport, reconcile};
pub use reconcile_public::reconcile_public;

use aether_ir::ObjectRef;
use std::collections::BTreeMap;

/// The label every edge Service carries; its value names the Gateway (see
/// [`label_value`]). The API server selects edge Services by this key.
pub const GATEWAY_LABEL: &str = "aether.io/edge-gateway";
/// The Gateway's namespace, in full (label values are limited to 63 characters).
pub const GATEWAY_NAMESPACE_ANNOTATION: &str = "aether.io/gateway-namespace";
/// The Gateway's name, in full.
pub const GATEWAY_NAME_ANNOTATION: &str = "aether.io/gateway-name";
/// The allocation record: `"<listener port>=<envoy port>,..."`, sorted by listener port.
pub const ALLOCATIONS_ANNOTATION: &str = "aether.io/port-allocations";
/// The addresses a Gateway asks for (`spec.addresses`), for the load balancer:
/// MetalLB's annotation (comma-separated IPs), which the conformance harness's
/// load balancer reads too. `spec.loadBalancerIP` is deprecated and takes one.
pub const REQUESTED_IPS_ANNOTATION: &str = "metallb.io/loadBalancerIPs";

/// The IP addresses a Gateway's `spec.addresses` name (type IPAddress or none,
/// with a value that is an IP), in spec order, once each.
pub fn requested_ips(gw: &gateway_api::apis::experimental::gateways::Gateway) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in gw.spec.addresses.iter().flatten() {
        if a.r#type.as_deref().is_some_and(|t| t != "IPAddress") {
            continue;
        }
        // Only the default scope's addresses come from the load balancer; a
        // Cluster one is the Service's ClusterIP (`aether_gateway::routability`).
        let scope = a.routability.as_deref().unwrap_or_default();
        if !scope.is_empty() && scope != aether_gateway::routability::SENTINEL {
            continue;
        }
        let ip = a
            .value
            .as_deref()
            .and_then(|v| v.parse::<std::net::IpAddr>().ok());
        if let Some(ip) = ip.map(|ip| ip.to_string())
            && !out.contains(&ip)
        {
            out.push(ip);
        }
    }
    out
}
/// The label a Gateway's public Service carries instead of [`GATEWAY_LABEL`]
/// (same value), so the record and the public Service of a Gateway in the edge
/// namespace itself are never taken for one another.
pub const PUBLIC_LABEL: &str = "aether.io/edge-gateway-public";
/// Gateway API's label for what an implementation makes for a Gateway: the
/// Gateway's name (set when the name fits in a label value).
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";
/// `endpointslice.kubernetes.io/managed-by` on the public Services' slices: not
/// the EndpointSlice controller's value, so it leaves them to us.
pub const SLICE_MANAGER_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
pub const SLICE_MANAGER: &str = "edge.gateway.aether.io";

/// The field manager of every write we make.
pub const FIELD_MANAGER: &str = "aether-edge";

/// Where Gateway addresses come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressMode {
    /// One `LoadBalancer` Service per Gateway; Envoy binds allocated ports.
    Service(ServiceConfig),
    /// Listeners bind on `spec.addresses` (or the configured default address) at
    /// the listener port; no Services are made.
    Static,
}

impl Default for AddressMode {
    fn default() -> Self {
        AddressMode::Service(ServiceConfig::default())
    }
}

/// Service mode settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfig {
    /// GatewayClasses with this `spec.controllerName` are ours.
    pub controller_name: String,
    /// Where the edge Services live (and the edge DaemonSet runs).
    pub namespace: String,
    /// The edge DaemonSet pods' labels: the Services' selector.
    pub selector: BTreeMap<String, String>,
    /// Envoy ports are allocated from this inclusive range.
    pub port_range: (u16, u16),
    /// The address Envoy binds every Gateway's ports on.
    pub bind_address: String,
    /// `spec.loadBalancerClass` of the Services, if any.
    pub load_balancer_class: Option<String>,
    /// `spec.allocateLoadBalancerNodePorts`; `None` leaves the API default (true).
    pub allocate_node_ports: Option<bool>,
    /// `spec.externalTrafficPolicy` of the load-balanced Services: `Local`
    /// keeps the client's source address (the load balancer sends only to
    /// nodes with an edge pod, and kube-proxy does not hop); `None` leaves the
    /// API default (`Cluster`).
    pub external_traffic_policy: Option<String>,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            controller_name: "gateway.aether.io/edge".into(),
            namespace: "aether-ingress".into(),
            selector: BTreeMap::from([(
                "app.kubernetes.io/name".to_string(),
                "aether-edge".to_string(),
            )]),
            port_range: (20000, 29999),
            bind_address: "0.0.0.0".into(),
            load_balancer_class: None,
            allocate_node_ports: None,
            external_traffic_policy: None,
        }
    }
}

/// Kubernetes caps names (DNS-1035 labels) and label values at 63 characters.
const MAX_NAME: usize = 63;

/// The edge Service of a Gateway: `edge-<ns>-<name>-<hash>`, a valid DNS-1035 label.
///
/// The hash (of `ns/name`) is always there: `a-b/c` and `a/b-c` would otherwise
/// share a name, and so would names that differ only past the 63rd character or
/// in `.` (not allowed in a Service name). The readable part is truncated to fit.
pub fn service_name(gateway: &ObjectRef) -> String {
    let hash = short_hash(gateway);
    let readable = sanitize(&format!("edge-{}-{}", gateway.namespace, gateway.name));
    let keep = MAX_NAME - hash.len() - 1;
    let readable = truncate(&readable, keep);
    format!("{readable}-{hash}")
}

/// The public Service of a Gateway, in the Gateway's namespace:
/// `<name>-edge-<hash>`, a valid DNS-1035 label (a name that does not start
/// with a letter gets `gw-` in front). Never the record's name: that one starts
/// with `edge-` and carries the namespace.
pub fn public_name(gateway: &ObjectRef) -> String {
    let hash = short_hash(gateway);
    let mut readable = sanitize(&gateway.name);
    if !readable.starts_with(|c: char| c.is_ascii_lowercase()) {
        readable = format!("gw-{readable}");
    }
    let readable = truncate(&readable, MAX_NAME - hash.len() - "-edge-".len());
    format!("{readable}-edge-{hash}")
}

/// Whether a Service is the public Service of the Gateway its annotations name:
/// it carries [`PUBLIC_LABEL`], lives in that Gateway's namespace and has the
/// Gateway's public name.
pub fn is_public_service(svc: &k8s_openapi::api::core::v1::Service) -> bool {
    let labelled = svc
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(PUBLIC_LABEL));
    labelled
        && gateway_of(svc).is_some_and(|gw| {
            svc.metadata.namespace.as_deref() == Some(gw.namespace.as_str())
                && svc.metadata.name.as_deref() == Some(public_name(&gw).as_str())
        })
}

/// The [`GATEWAY_LABEL`] value: `<ns>.<name>` when it fits in 63 characters,
/// else a truncated prefix and the hash. Identity comes from the annotations;
/// the label is for selecting.
pub fn label_value(gateway: &ObjectRef) -> String {
    let full = format!("{}.{}", gateway.namespace, gateway.name);
    if full.len() <= MAX_NAME {
        return full;
    }
    let hash = short_hash(gateway);
    let prefix = truncate(&full, MAX_NAME - hash.len() - 1);
    format!("{prefix}-{hash}")
}

/// The Gateway an edge Service was made for, from its annotations.
pub fn gateway_of(svc: &k8s_openapi::api::core::v1::Service) -> Option<ObjectRef> {
    let ann = svc.metadata.annotations.as_ref()?;
    Some(ObjectRef::new(
        ann.get(GATEWAY_NAMESPACE_ANNOTATION)?,
        ann.get(GATEWAY_NAME_ANNOTATION)?,
    ))
}

/// Whether a Service is an edge Service (in `namespace`, carrying [`GATEWAY_LABEL`]).
pub fn is_edge_service(svc: &k8s_openapi::api::core::v1::Service, namespace: &str) -> bool {
    svc.metadata.namespace.as_deref() == Some(namespace)
        && svc
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(GATEWAY_LABEL))
}

/// Lower-case alphanumerics and `-` only (the name already starts with a letter).
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() { c } else { '-' }
        })
        .collect()
}

/// At most `max` characters, not ending in `-` or `.` (names and label values
/// must end alphanumeric). The input is ASCII.
fn truncate(s: &str, max: usize) -> String {
    let cut = &s[..s.len().min(max)];
    cut.trim_end_matches(['-', '.']).to_string()
}

/// 10 hex digits of FNV-1a over `ns/name`: stable across builds and Rust
/// versions (names must survive upgrades), short, and collision-free in practice
/// for the Gateways one cluster holds (40 bits).
fn short_hash(gateway: &ObjectRef) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("{}/{}", gateway.namespace, gateway.name).bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:010x}", h >> 24)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_dns1035_label(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= 63
            && s.starts_with(|c: char| c.is_ascii_lowercase())
            && s.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    }

    fn is_label_value(s: &str) -> bool {
        s.len() <= 63
            && (s.is_empty()
                || (s.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && s.ends_with(|c: char| c.is_ascii_alphanumeric())
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))))
    }

    #[test]
    fn names_are_readable_hashed_and_distinct() {
        let name = service_name(&ObjectRef::new("infra", "web"));
        assert!(name.starts_with("edge-infra-web-"), "{name}");
        assert!(is_dns1035_label(&name), "{name}");
        assert_eq!(name, service_name(&ObjectRef::new("infra", "web")));
        assert_ne!(
            service_name(&ObjectRef::new("a-b", "c")),
            service_name(&ObjectRef::new("a", "b-c"))
        );
        assert_ne!(
            service_name(&ObjectRef::new("a", "b.c")),
            service_name(&ObjectRef::new("a", "b-c"))
        );
    }

    #[test]
    fn long_names_fit_in_63_characters_and_stay_distinct() {
        let ns = "gateway-conformance-infra";
        let a = ObjectRef::new(ns, "same-namespace-with-https-listener");
        let long = "x".repeat(253);
        let b = ObjectRef::new(ns, format!("{long}-1"));
        let c = ObjectRef::new(ns, format!("{long}-2"));
        let dotted = ObjectRef::new("n", format!("{}.{}", "a".repeat(57), "b"));
        for g in [&a, &b, &c, &dotted] {
            let name = service_name(g);
            assert!(is_dns1035_label(&name), "{name}");
            assert!(is_label_value(&label_value(g)), "{}", label_value(g));
        }
        assert_ne!(service_name(&b), service_name(&c));
        assert_ne!(label_value(&b), label_value(&c));
        assert!(service_name(&a).starts_with("edge-gateway-conformance-infra-same-"));
    }

    #[test]
    fn public_names_are_valid_distinct_and_never_the_records() {
        let web = ObjectRef::new("infra", "web");
        assert_eq!(public_name(&web), "web-edge-2e38ad17c7");
        assert_ne!(public_name(&web), service_name(&web));
        let digit = ObjectRef::new("infra", "1st.gateway");
        assert!(public_name(&digit).starts_with("gw-1st-gateway-edge-"));
        let long = "x".repeat(253);
        let (b, c) = (
            ObjectRef::new("n", format!("{long}-1")),
            ObjectRef::new("n", format!("{long}-2")),
        );
        for g in [&web, &digit, &b, &c] {
            assert!(is_dns1035_label(&public_name(g)), "{}", public_name(g));
        }
        assert_ne!(public_name(&b), public_name(&c));
        // A Gateway named like another's record still gets a name of its own.
        let tricky = ObjectRef::new("infra", service_name(&web));
        assert_ne!(public_name(&tricky), service_name(&web));
    }

    #[test]
    fn short_label_values_name_the_gateway() {
        assert_eq!(
            label_value(&ObjectRef::new("infra", "web")),
            "infra.web".to_string()
        );
    }

    #[test]
    fn the_hash_is_pinned() {
        // Names are stored in the cluster: a different hash renames every Service
        // (and drops every allocation) on upgrade. FNV-1a 64 of "infra/web", >> 24,
        // checked against an independent implementation.
        assert_eq!(
            service_name(&ObjectRef::new("infra", "web")),
            "edge-infra-web-2e38ad17c7"
        );
        assert_eq!(short_hash(&ObjectRef::new("", "")).len(), 10);
    }
}
