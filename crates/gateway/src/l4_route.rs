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
//!
//! A TLSRoute's backends are read twice: as a Passthrough listener sends to
//! them (the client's TLS stream as is) and as a Terminate listener does (the
//! decrypted stream, encrypted again per the Service port's BackendTLSPolicy).
//! A policy that cannot be met makes its backend invalid on Terminate listeners
//! only (those connections are closed); ResolvedRefs says so for the route.

use crate::backend::{BackendError, BackendRef, Backends, Upstream};
use crate::route::{self, ForwardSpec, RouteModel, Rule, RuleAction};
use aether_ir::{ObjectRef, RouteKind};
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use gateway_api::apis::standard::udproutes::UdpRoute;

pub const TLS_KIND: RouteKind = RouteKind::Tls;
pub const TCP_KIND: RouteKind = RouteKind::Tcp;
pub const UDP_KIND: RouteKind = RouteKind::Udp;

/// `<kind>_model(backends, key, route)` for one of the three kinds: hostnames
/// (TLSRoute only), parentRefs, and the first rule's backendRefs.
macro_rules! l4_model {
    ($fn_name:ident, $ty:ty, $kind:expr, $upstream:expr, |$r:ident| $hostnames:expr) => {
        pub fn $fn_name(backends: &Backends<'_>, key: ObjectRef, $r: &$ty) -> RouteModel {
            let parents = route::parent_references!($r.spec.parent_refs);
            let mut m = RouteModel::new($kind, key, &$r.metadata, $hostnames, parents);
            let refs = $r.spec.rules.first().map(|rule| &rule.backend_refs);
            let refs = refs.into_iter().flat_map(|refs| route::backend_refs!(refs));
            read(&mut m, backends, refs, $upstream, $r.spec.rules.len());
            m
        }
    };
}

l4_model!(tls_model, TlsRoute, TLS_KIND, Upstream::Tcp, |r| Some(
    &r.spec.hostnames
));
l4_model!(tcp_model, TcpRoute, TCP_KIND, Upstream::Tcp, |r| None);
l4_model!(udp_model, UdpRoute, UDP_KIND, Upstream::Udp, |r| None);

fn read<'a>(
    m: &mut RouteModel,
    backends: &Backends<'_>,
    refs: impl Iterator<Item = (BackendRef<'a>, Option<i32>)>,
    upstream: Upstream,
    rule_count: usize,
) {
    let refs: Vec<(BackendRef<'a>, Option<i32>)> = refs.collect();
    let mut errors: Vec<BackendError> = Vec::new();
    let resolved = route::resolve_backends(
        backends,
        m.kind(),
        &m.key().namespace,
        refs.iter().copied(),
        upstream,
        &mut errors,
    );
    let mut terminated = None;
    if m.kind() == TLS_KIND
        && let Ok(plain) = &resolved
    {
        let mut tls_errors = Vec::new();
        let again = route::resolve_backends(
            backends,
            m.kind(),
            &m.key().namespace,
            refs.iter().copied(),
            Upstream::TlsTerminated,
            &mut tls_errors,
        );
        errors.extend(
            tls_errors
                .into_iter()
                .filter(|e| matches!(e, BackendError::TlsPolicy(..))),
        );
        if let Ok(again) = again
            && again != *plain
        {
            terminated = Some(Box::new(again));
        }
    }
    match resolved {
        Ok((valid, invalid_weight)) => m.rules.push(Rule {
            index: 0,
            matches: vec![],
            request_headers: Default::default(),
            response_headers: Default::default(),
            action: RuleAction::Forward(ForwardSpec {
                backends: valid,
                invalid_weight,
                terminated,
                ..ForwardSpec::default()
            }),
        }),
        Err(why) => m.invalid_rules.push(format!("rule 0: {why}")),
    }
    m.backend_errors = errors;
    for index in 1..rule_count {
        m.invalid_rules.push(format!(
            "rule {index}: a {} is served by its first rule only",
            m.kind()
        ));
    }
}
