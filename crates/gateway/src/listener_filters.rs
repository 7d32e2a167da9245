//! A listener's pre-routing filters (`filters.requests`, GEP-5224): resolved
//! to what runs before route matching on every request of that listener.
//!
//! ```text
//!  filters.requests[i] ─┬─ ExternalAuth ── backendRef (a Service port, ReferenceGrant
//!                       │                  from Gateway/ListenerSet) ──► ExternalAuth { cluster }
//!                       │                  └ does not resolve ──► ResolvedRefs=False
//!                       │                    (InvalidListenerFilterRef | RefNotPermitted),
//!                       │                    served refusing every request (cluster: None, 500)
//!                       └─ ExtensionRef ── we have no extension kinds ──► Accepted=False
//!                                          (UnsupportedValue): not served
//! ```
//!
//! Never fail open: a listener is never served without a filter it asked for.
//! A filter whose server cannot be resolved stays in place and refuses every
//! request; a listener whose filter we cannot run at all is not accepted, and
//! `route_table` still gives its hostname a virtual host that refuses every
//! request, so its traffic does not fall through to a sibling listener.

use crate::backend::{BackendRef, Backends, Upstream};
use crate::hostname;
use crate::listener::Listener;
use crate::vocabulary::listener;
use aether_ir::{
    Cluster, ExternalAuth, ExternalAuthProtocol, Kind, RouteTable, TlsChain, VirtualHost, names,
};
use gateway_api::apis::experimental::gateways::{
    GatewayListeners, GatewayListenersFiltersRequests, GatewayListenersFiltersRequestsExternalAuth,
    GatewayListenersFiltersRequestsExternalAuthProtocol as Protocol,
    GatewayListenersFiltersRequestsType as FilterType,
};
use std::sync::Arc;

/// Why a listener's filters cannot be served as asked; the message names the filter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// A filter type we do not run (ExtensionRef): the listener is not accepted.
    #[error("filters.requests[{0}]: {1}")]
    Unsupported(usize, String),
    /// A filter we cannot encode as written: the listener is not accepted.
    #[error("filters.requests[{0}]: {1}")]
    Invalid(usize, String),
    /// The ExternalAuth backendRef does not resolve: served, refusing everything.
    #[error("filters.requests[{0}]: ExternalAuth.{1}")]
    Ref(usize, crate::backend::BackendError),
}

impl FilterError {
    pub fn reason(&self) -> listener::Reason {
        match self {
            FilterError::Unsupported(..) => listener::Reason::UnsupportedValue,
            FilterError::Invalid(..) => listener::Reason::InvalidListenerFilter,
            FilterError::Ref(_, crate::backend::BackendError::RefNotPermitted(_)) => {
                listener::Reason::RefNotPermitted
            }
            FilterError::Ref(..) => listener::Reason::InvalidListenerFilterRef,
        }
    }

    /// Does this error keep the listener from being accepted?
    pub fn rejects_listener(&self) -> bool {
        !matches!(self, FilterError::Ref(..))
    }
}

/// A listener's filters as resolved: what runs, the clusters it needs, and what
/// is wrong.
#[derive(Debug, Clone, Default)]
pub struct ListenerFilters {
    /// In list order.
    pub pre_routing: Vec<ExternalAuth>,
    /// The authorization servers' clusters, for the IR.
    pub clusters: Vec<Arc<Cluster>>,
    pub errors: Vec<FilterError>,
}

impl ListenerFilters {
    /// Does the listener ask for any filter?
    pub fn is_empty(&self) -> bool {
        self.pre_routing.is_empty() && self.errors.is_empty()
    }

    /// A filter that refuses every request: what a listener gets when one of
    /// its filters cannot run.
    pub fn refuse_all() -> ExternalAuth {
        ExternalAuth {
            protocol: ExternalAuthProtocol::Http,
            cluster: None,
            path_prefix: String::new(),
            allowed_headers: vec![],
            allowed_response_headers: vec![],
            max_body_bytes: 0,
        }
    }
}

/// Resolves `spec.filters` of one listener held by a `holder_kind` (Gateway or
/// ListenerSet) in `holder_ns`. `http`: the listener speaks HTTP (HTTP or HTTPS).
pub fn resolve(
    backends: &Backends<'_>,
    holder_kind: Kind,
    holder_ns: &str,
    spec: &GatewayListeners,
    http: bool,
) -> ListenerFilters {
    let mut out = ListenerFilters::default();
    let requests = spec
        .filters
        .as_ref()
        .and_then(|f| f.requests.as_deref())
        .unwrap_or_default();
    if !requests.is_empty() && !http {
        let why = "filters are only valid on HTTP and HTTPS listeners".to_string();
        out.errors.push(FilterError::Invalid(0, why));
        return out;
    }
    for (i, f) in requests.iter().enumerate() {
        match one(backends, holder_kind, holder_ns, i, f) {
            Ok((auth, cluster)) => {
                out.pre_routing.push(auth);
                out.clusters.extend(cluster);
            }
            Err(e @ FilterError::Ref(..)) => {
                out.pre_routing.push(ListenerFilters::refuse_all());
                out.errors.push(e);
            }
            Err(e) => out.errors.push(e),
        }
    }
    out
}

fn one(
    backends: &Backends<'_>,
    holder_kind: Kind,
    holder_ns: &str,
    i: usize,
    f: &GatewayListenersFiltersRequests,
) -> Result<(ExternalAuth, Option<Arc<Cluster>>), FilterError> {
    let auth = match (&f.r#type, &f.external_auth, &f.extension_ref) {
        (FilterType::ExternalAuth, Some(auth), _) => auth,
        (FilterType::ExternalAuth, None, _) => {
            let why = "type ExternalAuth without externalAuth".to_string();
            return Err(FilterError::Invalid(i, why));
        }
        (FilterType::ExtensionRef, _, r) => {
            let named = r.as_ref().map_or(String::new(), |r| {
                let gk = crate::status::group_kind(&r.group, &r.kind);
                format!(" {gk} {}", r.name)
            });
            let why = format!("ExtensionRef{named} is not supported (no extension kinds are)");
            return Err(FilterError::Unsupported(i, why));
        }
    };
    let mut ir = external_auth(auth).map_err(|why| FilterError::Invalid(i, why))?;
    let r = &auth.backend_ref;
    let backend = BackendRef {
        group: r.group.as_deref(),
        kind: r.kind.as_deref(),
        name: &r.name,
        namespace: r.namespace.as_deref(),
        port: r.port,
    };
    let upstream = match ir.protocol {
        ExternalAuthProtocol::Http => Upstream::Http,
        ExternalAuthProtocol::Grpc => Upstream::Grpc,
    };
    let cluster = backends
        .resolve(holder_kind, holder_ns, backend, upstream)
        .map_err(|e| FilterError::Ref(i, e))?;
    ir.cluster = Some(cluster.name.clone());
    Ok((ir, Some(cluster)))
}

/// An HTTP port's route table: each virtual host gets the filters of the
/// listener that owns its host (the most specific one on the port that claims
/// it, as listener selection goes by Host). A listener with filters always has
/// a virtual host of its own hostname, so none of its requests fall to another
/// listener's; a `refusing` listener (not accepted for its filters) owns one
/// that refuses every request.
pub fn place(table: &mut RouteTable, listeners: &[&Listener], refusing: &[&Listener]) {
    let owners: Vec<(Option<&str>, Vec<ExternalAuth>)> = listeners
        .iter()
        .map(|l| (l.hostname.as_deref(), l.filters.pre_routing.clone()))
        .chain(
            refusing
                .iter()
                .map(|l| (l.hostname.as_deref(), vec![ListenerFilters::refuse_all()])),
        )
        .collect();
    if owners.iter().all(|(_, f)| f.is_empty()) {
        return;
    }
    for (host, filters) in &owners {
        let host = host.unwrap_or(names::CATCH_ALL_VHOST);
        if !filters.is_empty() && !table.virtual_hosts.iter().any(|v| v.name == host) {
            table.virtual_hosts.push(Arc::new(VirtualHost {
                name: host.to_string(),
                domains: vec![host.to_string()],
                routes: vec![],
                pre_routing: vec![],
            }));
        }
    }
    table.virtual_hosts.sort_by(|a, b| a.name.cmp(&b.name));
    for vh in &mut table.virtual_hosts {
        let owner = owners
            .iter()
            .filter(|(h, _)| hostname::listener_claims(*h, &vh.name))
            .max_by_key(|(h, _)| hostname::specificity(*h));
        if let Some((_, filters)) = owner.filter(|(_, f)| *f != vh.pre_routing) {
            Arc::make_mut(vh).pre_routing.clone_from(filters);
        }
    }
}

/// The chain of an HTTPS listener not accepted for its filters: its SNI and
/// certificates, and a route table that refuses every request.
pub fn refusing_chain(l: &Listener, table: String) -> TlsChain {
    let any = VirtualHost {
        name: names::CATCH_ALL_VHOST.to_string(),
        domains: vec![names::CATCH_ALL_VHOST.to_string()],
        routes: vec![],
        pre_routing: vec![ListenerFilters::refuse_all()],
    };
    TlsChain {
        listener: l.ir_name(),
        server_names: l.hostname.iter().cloned().collect(),
        certificates: l.certificates.clone(),
        client_validation: l.client_validation.clone(),
        route_table: Some(RouteTable {
            name: table,
            virtual_hosts: vec![Arc::new(any)],
        }),
        forward: None,
    }
}

/// The filter's settings, checked; the cluster is filled in by the caller.
fn external_auth(a: &GatewayListenersFiltersRequestsExternalAuth) -> Result<ExternalAuth, String> {
    let protocol = match a.protocol {
        Protocol::Http => ExternalAuthProtocol::Http,
        Protocol::Grpc => ExternalAuthProtocol::Grpc,
    };
    let names = |list: Option<&Vec<String>>, field: &str| -> Result<Vec<String>, String> {
        let mut out: Vec<String> = Vec::new();
        for h in list.into_iter().flatten() {
            if h.is_empty() || !h.bytes().all(is_token_byte) {
                return Err(format!("{field}: {h:?} is not a header name"));
            }
            let h = h.to_ascii_lowercase();
            if !out.contains(&h) {
                out.push(h);
            }
        }
        Ok(out)
    };
    let (allowed_headers, allowed_response_headers, path) = match protocol {
        ExternalAuthProtocol::Http => {
            let http = a.http.as_ref();
            (
                names(
                    http.and_then(|h| h.allowed_headers.as_ref()),
                    "allowedHeaders",
                )?,
                names(
                    http.and_then(|h| h.allowed_response_headers.as_ref()),
                    "allowedResponseHeaders",
                )?,
                http.and_then(|h| h.path.clone()).unwrap_or_default(),
            )
        }
        ExternalAuthProtocol::Grpc => (
            names(
                a.grpc.as_ref().and_then(|g| g.allowed_headers.as_ref()),
                "allowedHeaders",
            )?,
            vec![],
            String::new(),
        ),
    };
    let path_prefix = path_prefix(&path)?;
    let max_body_bytes = a
        .forward_body
        .as_ref()
        .and_then(|b| b.max_size)
        .unwrap_or(0);
    let max_body_bytes = u32::try_from(max_body_bytes)
        .map_err(|_| format!("forwardBody.maxSize {max_body_bytes} is negative"))?;
    Ok(ExternalAuth {
        protocol,
        cluster: None,
        path_prefix,
        allowed_headers,
        allowed_response_headers,
        max_body_bytes,
    })
}

/// `http.path` as Envoy's path prefix: the characters the API's pattern allows
/// (a percent sign only before two hex digits), starting with `/`.
fn path_prefix(path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Ok(String::new());
    }
    let bytes = path.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let ok = b.is_ascii_alphanumeric()
            || b"-/._~!$&'()*+,;=:@".contains(&b)
            || (b == b'%'
                && bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit));
        if !ok {
            return Err(format!("http.path {path:?} is not a valid path"));
        }
    }
    Ok(if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    })
}

/// An RFC 9110 token character (what a header name is made of).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_prefix_starts_with_a_slash_and_refuses_what_the_pattern_does() {
        assert_eq!(path_prefix("").unwrap(), "");
        assert_eq!(path_prefix("/auth").unwrap(), "/auth");
        assert_eq!(path_prefix("auth/v1").unwrap(), "/auth/v1");
        assert_eq!(path_prefix("/a%2Fb").unwrap(), "/a%2Fb");
        assert!(path_prefix("/a b").is_err());
        assert!(path_prefix("/a%zz").is_err());
        assert!(path_prefix("/a\r\nx").is_err());
    }
}
