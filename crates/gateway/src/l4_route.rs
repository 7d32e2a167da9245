//! TLSRoute, TCPRoute and UDPRoute → [`RouteModel`]: a rule is only backends.
//!
//! ```text
//!  TLSRoute  hostnames (SNI) ─┐
//!  TCPRoute  (no hostnames) ──┼─ rules[0].backendRefs ─► Rule { Forward(weighted) }
//!  UDPRoute  (no hostnames) ──┘     (UDP: the Service port must be UDP)
//! ```
//!
//! A stream cannot be split across rules, so only the first rule is served; the
//! API allows a single rule in v1. No backendRefs, or none valid: connections
//! are closed (status says why in ResolvedRefs).

use crate::backend::{BackendError, BackendRef, Backends, Upstream};
use crate::route::{self, RouteModel, Rule, RuleAction};
use aether_ir::ObjectRef;
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use gateway_api::apis::standard::udproutes::UdpRoute;

pub const TLS_KIND: &str = "TLSRoute";
pub const TCP_KIND: &str = "TCPRoute";
pub const UDP_KIND: &str = "UDPRoute";

/// The same fields in the three generated backendRef types.
macro_rules! l4_refs {
    ($refs:expr) => {
        $refs.iter().map(|b| {
            (
                BackendRef {
                    group: b.group.as_deref(),
                    kind: b.kind.as_deref(),
                    name: &b.name,
                    namespace: b.namespace.as_deref(),
                    port: b.port,
                },
                b.weight,
            )
        })
    };
}

pub fn tls_model(backends: &Backends<'_>, key: ObjectRef, r: &TlsRoute) -> RouteModel {
    let parents = route::parent_references!(r.spec.parent_refs);
    let hostnames = Some(&r.spec.hostnames);
    let mut m = RouteModel::new(TLS_KIND, key, &r.metadata, hostnames, parents);
    let refs = r.spec.rules.first().map(|rule| &rule.backend_refs);
    let refs = refs.into_iter().flat_map(|refs| l4_refs!(refs));
    read(&mut m, backends, refs, Upstream::Tcp, r.spec.rules.len());
    m
}

pub fn tcp_model(backends: &Backends<'_>, key: ObjectRef, r: &TcpRoute) -> RouteModel {
    let parents = route::parent_references!(r.spec.parent_refs);
    let mut m = RouteModel::new(TCP_KIND, key, &r.metadata, None, parents);
    let refs = r.spec.rules.first().map(|rule| &rule.backend_refs);
    let refs = refs.into_iter().flat_map(|refs| l4_refs!(refs));
    read(&mut m, backends, refs, Upstream::Tcp, r.spec.rules.len());
    m
}

pub fn udp_model(backends: &Backends<'_>, key: ObjectRef, r: &UdpRoute) -> RouteModel {
    let parents = route::parent_references!(r.spec.parent_refs);
    let mut m = RouteModel::new(UDP_KIND, key, &r.metadata, None, parents);
    let refs = r.spec.rules.first().map(|rule| &rule.backend_refs);
    let refs = refs.into_iter().flat_map(|refs| l4_refs!(refs));
    read(&mut m, backends, refs, Upstream::Udp, r.spec.rules.len());
    m
}

fn read<'a>(
    m: &mut RouteModel,
    backends: &Backends<'_>,
    refs: impl Iterator<Item = (BackendRef<'a>, Option<i32>)>,
    upstream: Upstream,
    rule_count: usize,
) {
    let mut errors: Vec<BackendError> = Vec::new();
    let (valid, invalid_weight) = route::resolve_backends(
        backends,
        m.kind,
        &m.key.namespace,
        refs,
        upstream,
        &mut errors,
    );
    m.backend_errors = errors;
    m.rules.push(Rule {
        index: 0,
        matches: vec![],
        request_headers: Default::default(),
        response_headers: Default::default(),
        action: RuleAction::Forward {
            backends: valid,
            invalid_weight,
            rewrite: None,
        },
    });
    for index in 1..rule_count {
        m.invalid_rules.push(format!(
            "rule {index}: a {} is served by its first rule only",
            m.kind
        ));
    }
}
