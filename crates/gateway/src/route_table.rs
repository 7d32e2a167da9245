//! Placing attached routes into the IR: ports, route tables, virtual hosts.
//!
//! ```text
//!  Gateway ─ port 80 (HTTP)  ─ one route table for every HTTP listener on the port
//!          ├ port 443 (HTTPS) ─ one TLS chain + route table per HTTPS listener
//!          ├ port 8443 (TLS)  ─ HTTPS chains + a chain per (TLS listener, TLSRoute)
//!          └ port 9000 (TCP|UDP) ─ the oldest attached route's backends
//!  route table ─ virtual host per served hostname (`*` always present), a
//!                hostname going only to the most specific listener that claims it
//!              └ routes: every match of every rule of every route on that host,
//!                        in one precedence order
//! ```
//!
//! Each virtual host carries the pre-routing filters of the listener that owns
//! its host (`listener_filters::place`); their authorization servers' clusters
//! go into the IR with the port.
//!
//! A cluster is put in the IR only when a served route forwards to it. A cluster
//! shared by an HTTP/1.1 and an h2c consumer becomes h2c (the Service port is one
//! upstream; prior-knowledge HTTP/2 is what gRPC needs).

use crate::attachments::Attachments;
use crate::gateway_model::GatewayModel;
use crate::hostname;
use crate::listener::ListenerProtocol;
use crate::listener_filters;
use crate::precedence::{Precedence, RouteOrigin};
use crate::route::{ForwardSpec, RedirectSpec, RouteModel, RuleAction};
use aether_ir::{
    Cluster, Endpoint, Forward, HeaderModifier, L4Forward, Mirror, ObjectRef, PathMatch, Port,
    PortProtocol, Redirect, Route, RouteAction, RouteMatch, RouteTable, TlsChain, UpstreamProtocol,
    VirtualHost, WeightedBackend, names,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The IR of one served Gateway: on each listener, the routes `attached` serves there.
pub fn gateway(
    gw: &GatewayModel,
    routes: &[Arc<RouteModel>],
    attached: &Attachments,
    clusters: &mut BTreeMap<String, Cluster>,
) -> aether_ir::Gateway {
    let (ns, name) = (&gw.key.namespace, &gw.key.name);
    // TCP and UDP ports apart: (UDP?, port).
    let mut by_port: BTreeMap<(bool, u16), Vec<usize>> = BTreeMap::new();
    // Listeners not accepted for their filters: their hostnames refuse every
    // request on a port that is served for others.
    let mut refusing: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, l) in gw.listeners.iter().enumerate() {
        if l.fails_closed() {
            refusing.entry(l.port).or_default().push(i);
        }
        if let Some(p) = l.protocol.filter(|_| l.is_programmable()) {
            by_port
                .entry((p == ListenerProtocol::Udp, l.port))
                .or_default()
                .push(i);
        }
    }
    let mut ports = Vec::new();
    for ((udp, port), listeners) in by_port {
        let protocols: BTreeSet<PortProtocol> = listeners
            .iter()
            .filter_map(|&li| {
                gw.listeners[li]
                    .protocol
                    .map(ListenerProtocol::port_protocol)
            })
            .collect();
        // HTTPS listeners sharing a port with TLS listeners: a TLS port.
        let protocol = protocols
            .iter()
            .copied()
            .max()
            .unwrap_or(PortProtocol::Http);
        let mut p = Port {
            port,
            protocol,
            listener_name: if udp {
                names::udp_listener(ns, name, port)
            } else {
                names::listener(ns, name, port)
            },
            route_table: None,
            tls_chains: vec![],
            forward: None,
        };
        let ctx = TableContext {
            gw,
            routes,
            attached,
            port,
            protocol,
            refusing: if udp {
                &[]
            } else {
                refusing.get(&port).map_or(&[][..], Vec::as_slice)
            },
        };
        for &li in &listeners {
            for c in &gw.listeners[li].filters.clusters {
                add_cluster(clusters, c);
            }
        }
        match protocol {
            PortProtocol::Http => {
                let table_name = names::route_table(ns, name, port, None);
                let mut table = ctx.table(table_name, &listeners, &listeners, clusters);
                let of = |ls: &[usize]| ls.iter().map(|&li| &gw.listeners[li]).collect::<Vec<_>>();
                listener_filters::place(&mut table, &of(&listeners), &of(ctx.refusing));
                p.route_table = Some(table);
            }
            PortProtocol::Https | PortProtocol::Tls => {
                p.tls_chains = ctx.tls_chains(&listeners, clusters);
            }
            PortProtocol::Tcp | PortProtocol::Udp => {
                p.forward = ctx.oldest_forward(&listeners, clusters);
            }
        }
        ports.push(p);
    }
    ports.sort_by_key(|p| (p.port, p.protocol));
    aether_ir::Gateway {
        namespace: ns.clone(),
        name: name.clone(),
        addresses: gw.addresses.clone().unwrap_or_default(),
        ports,
    }
}

struct TableContext<'a> {
    gw: &'a GatewayModel,
    routes: &'a [Arc<RouteModel>],
    attached: &'a Attachments,
    port: u16,
    protocol: PortProtocol,
    /// Listeners on the port not accepted for their filters.
    refusing: &'a [usize],
}

impl TableContext<'_> {
    /// The route table of `listeners` (sharing a port, or one HTTPS listener);
    /// `rivals` are every listener on the port, whose more specific hostnames
    /// take their requests away (listener isolation).
    fn table(
        &self,
        name: String,
        listeners: &[usize],
        rivals: &[usize],
        clusters: &mut BTreeMap<String, Cluster>,
    ) -> RouteTable {
        let mut vhosts: BTreeMap<String, BTreeMap<String, (Precedence, Route)>> = BTreeMap::new();
        vhosts.insert(names::CATCH_ALL_VHOST.to_string(), BTreeMap::new());
        for &li in listeners {
            let l = &self.gw.listeners[li];
            let on_listener = self.attached.served_on(li);
            for ri in on_listener {
                let r: &RouteModel = &self.routes[ri];
                let served = hostname::served_hostnames(l.hostname.as_deref(), &r.hostnames);
                let siblings = rivals
                    .iter()
                    .filter(|&&other| other != li)
                    .map(|&other| self.gw.listeners[other].hostname.as_deref());
                for host in hostname::isolate(served, l.hostname.as_deref(), siblings) {
                    let vhost = vhosts.entry(host.clone()).or_default();
                    for rule in &r.rules {
                        for (j, m) in rule.matches.iter().enumerate() {
                            let route_name = format!(
                                "{}/rule/{}/match/{}",
                                names::route_key(r.kind, &r.key.namespace, &r.key.name),
                                rule.index,
                                j
                            );
                            if vhost.contains_key(&route_name) {
                                continue;
                            }
                            let origin = RouteOrigin {
                                created: r.created.clone(),
                                route: r.key.clone(),
                                kind: r.kind,
                            };
                            let route = Route {
                                name: route_name.clone(),
                                matcher: m.clone(),
                                action: self.action(&rule.action, clusters),
                                request_headers: rule.request_headers.clone(),
                                response_headers: rule.response_headers.clone(),
                            };
                            let rank = hostname::route_hostname_rank(
                                &host,
                                l.hostname.as_deref(),
                                &r.hostnames,
                            );
                            vhost.insert(
                                route_name,
                                (Precedence::new(rank, m, origin, rule.index, j), route),
                            );
                        }
                    }
                }
            }
        }
        let virtual_hosts = vhosts
            .into_iter()
            .map(|(host, routes)| {
                let mut routes: Vec<(Precedence, Route)> = routes.into_values().collect();
                routes.sort_by(|a, b| a.0.cmp(&b.0));
                VirtualHost {
                    pre_routing: Vec::new(),
                    name: host.clone(),
                    domains: vec![host],
                    routes: routes.into_iter().map(|(_, r)| r).collect(),
                }
            })
            .collect();
        RouteTable {
            name,
            virtual_hosts,
        }
    }

    /// The SNI-selected chains of an HTTPS or TLS port: one per HTTPS listener
    /// (its route table), one per (TLS listener, TLSRoute) with the hostnames the
    /// route serves there. A hostname goes to the most specific listener, then to
    /// the oldest route; a port with nothing to serve closes connections.
    fn tls_chains(
        &self,
        listeners: &[usize],
        clusters: &mut BTreeMap<String, Cluster>,
    ) -> Vec<TlsChain> {
        let (ns, name) = (&self.gw.key.namespace, &self.gw.key.name);
        let mut chains = Vec::new();
        let mut claimed: BTreeSet<String> = BTreeSet::new();
        for &li in listeners {
            let l = &self.gw.listeners[li];
            if l.protocol == Some(ListenerProtocol::Https) {
                let table_name = names::route_table(ns, name, self.port, Some(&l.ir_name()));
                let mut table = self.table(table_name, &[li], listeners, clusters);
                self.misdirected(&mut table, li, listeners);
                // The chain is this listener's: every request on it is filtered.
                for vh in &mut table.virtual_hosts {
                    vh.pre_routing.clone_from(&l.filters.pre_routing);
                }
                chains.push(TlsChain {
                    listener: l.ir_name(),
                    server_names: l.hostname.iter().cloned().collect(),
                    certificates: l.certificates.clone(),
                    client_validation: l.client_validation.clone(),
                    route_table: Some(table),
                    forward: None,
                });
                claimed.insert(l.hostname.clone().unwrap_or_else(|| "*".into()));
            }
        }
        for &li in self.refusing {
            let l = &self.gw.listeners[li];
            if l.protocol == Some(ListenerProtocol::Https) {
                let table = names::route_table(ns, name, self.port, Some(&l.ir_name()));
                chains.push(listener_filters::refusing_chain(l, table));
                claimed.insert(l.hostname.clone().unwrap_or_else(|| "*".into()));
            }
        }
        for &li in listeners {
            let l = &self.gw.listeners[li];
            if l.protocol == Some(ListenerProtocol::Https) {
                continue;
            }
            let siblings = listeners
                .iter()
                .filter(|&&other| other != li)
                .map(|&other| self.gw.listeners[other].hostname.as_deref());
            // Each SNI name goes to one route: the one whose own hostname for it
            // is the most specific, then the oldest.
            let mut candidates: Vec<((bool, usize), usize, String)> = Vec::new();
            for (age_rank, ri) in self.by_age(li).into_iter().enumerate() {
                let r: &RouteModel = &self.routes[ri];
                let served = hostname::served_hostnames(l.hostname.as_deref(), &r.hostnames);
                for host in hostname::isolate(served, l.hostname.as_deref(), siblings.clone()) {
                    if claimed.contains(&host) {
                        continue;
                    }
                    let rank =
                        hostname::route_hostname_rank(&host, l.hostname.as_deref(), &r.hostnames);
                    candidates.push((rank, age_rank, host));
                }
            }
            candidates.sort_by(|a, b| (&a.2, Reverse(a.0), a.1).cmp(&(&b.2, Reverse(b.0), b.1)));
            let mut won: BTreeMap<usize, Vec<String>> = BTreeMap::new();
            for (_, age_rank, host) in candidates {
                if claimed.insert(host.clone()) {
                    won.entry(age_rank).or_default().push(host);
                }
            }
            let by_age = self.by_age(li);
            for (age_rank, mut hosts) in won {
                let ri = by_age[age_rank];
                let r: &RouteModel = &self.routes[ri];
                hosts.sort();
                let catch_all = hosts.iter().any(|h| h == "*");
                chains.push(TlsChain {
                    listener: format!(
                        "{}/{}",
                        l.ir_name(),
                        names::route_key(r.kind, &r.key.namespace, &r.key.name)
                    ),
                    server_names: if catch_all { vec![] } else { hosts },
                    certificates: l.certificates.clone(),
                    client_validation: None,
                    route_table: None,
                    forward: self.forward(ri, l.protocol, clusters),
                });
            }
        }
        chains.sort_by(|a, b| a.listener.cmp(&b.listener));
        if chains.is_empty() {
            // Bound, as status says it is programmed, but with nothing to reach:
            // every connection is closed.
            chains.push(TlsChain {
                listener: "no-route".into(),
                server_names: vec![],
                certificates: vec![],
                client_validation: None,
                route_table: None,
                forward: Some(L4Forward {
                    route: String::new(),
                    backends: vec![],
                    invalid_weight: 0,
                }),
            });
        }
        chains
    }

    /// The rule as this Gateway sends it: with a backend client certificate
    /// (`spec.tls.backend`), each TLS cluster becomes this Gateway's own
    /// variant presenting it (clusters are shared across Gateways otherwise).
    fn with_client_certificate<'f>(&self, f: &'f ForwardSpec) -> Cow<'f, ForwardSpec> {
        let Some(Ok(cert)) = &self.gw.backend_client_certificate else {
            return Cow::Borrowed(f);
        };
        let (ns, gw) = (&self.gw.key.namespace, &self.gw.key.name);
        let variant = |c: &Arc<Cluster>| {
            // An XBackend's `tls.mode` says whether a client certificate is
            // presented, and which: the Gateway's is not added to it.
            let Some(tls) = c.tls.as_ref().filter(|_| c.backend_kind.is_service()) else {
                return c.clone();
            };
            let mut tls = tls.clone();
            tls.client_certificate = Some(cert.clone());
            Arc::new(Cluster {
                name: names::cluster_of_gateway(&c.name, ns, gw),
                tls: Some(tls),
                ..Cluster::clone(c)
            })
        };
        let mut f = f.clone();
        let mirrors = f.mirrors.iter_mut().map(|(c, _)| c);
        for c in f.backends.iter_mut().map(|(c, _)| c).chain(mirrors) {
            *c = variant(c);
        }
        Cow::Owned(f)
    }

    /// An HTTPS listener's table answers 421 Misdirected Request for the hosts
    /// that belong to another listener on the port: the connection's SNI chose
    /// this listener, the Host names another. Those are the hostnames of more
    /// specific rivals this listener would otherwise cover, and, when the
    /// listener has a hostname, every host outside it (the `*` virtual host).
    fn misdirected(&self, table: &mut RouteTable, li: usize, rivals: &[usize]) {
        let own = self.gw.listeners[li].hostname.as_deref();
        let answer = |host: &str| Route {
            name: format!("misdirected/{host}"),
            matcher: RouteMatch {
                path: PathMatch::Prefix("/".into()),
                method: None,
                headers: vec![],
                query_params: vec![],
            },
            action: RouteAction::DirectResponse { status: 421 },
            request_headers: HeaderModifier::default(),
            response_headers: HeaderModifier::default(),
        };
        let taken = rivals
            .iter()
            .filter(|&&other| other != li)
            .filter_map(|&other| self.gw.listeners[other].hostname.as_deref())
            .filter(|h| hostname::specificity(Some(h)) > hostname::specificity(own))
            .filter(|h| hostname::listener_claims(own, h))
            .map(str::to_ascii_lowercase);
        for host in taken {
            if !table.virtual_hosts.iter().any(|v| v.name == host) {
                table.virtual_hosts.push(VirtualHost {
                    pre_routing: Vec::new(),
                    name: host.clone(),
                    domains: vec![host.clone()],
                    routes: vec![answer(&host)],
                });
            }
        }
        if own.is_some()
            && let Some(any) = table
                .virtual_hosts
                .iter_mut()
                .find(|v| v.name == names::CATCH_ALL_VHOST)
        {
            any.routes.push(answer(names::CATCH_ALL_VHOST));
        }
        table.virtual_hosts.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// The routes attached to a listener, oldest first (then by namespace/name).
    fn by_age(&self, li: usize) -> Vec<usize> {
        let mut on: Vec<usize> = self.attached.served_on(li).collect();
        on.sort_by_key(|&ri| age(&self.routes[ri]));
        on
    }

    /// TCP and UDP: of every route attached to the port's listener(s), the oldest
    /// is served; the others are accepted but get no traffic.
    fn oldest_forward(
        &self,
        listeners: &[usize],
        clusters: &mut BTreeMap<String, Cluster>,
    ) -> Option<L4Forward> {
        let ri = listeners
            .iter()
            .flat_map(|&li| self.by_age(li))
            .min_by_key(|&ri| age(&self.routes[ri]))?;
        self.forward(ri, None, clusters)
    }

    /// A route's first rule as an L4 forward, its clusters put in the IR. A UDP
    /// route with several backends gets one cluster holding all their endpoints,
    /// weighted: Envoy's UDP proxy sends a session to one cluster. A TLS
    /// listener in Terminate mode (`listener`) sends to the route's backends as
    /// terminated TLS is sent: encrypted again per BackendTLSPolicy, presenting
    /// the Gateway's backend client certificate.
    fn forward(
        &self,
        ri: usize,
        listener: Option<ListenerProtocol>,
        clusters: &mut BTreeMap<String, Cluster>,
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
        let route = names::route_key(r.kind, &r.key.namespace, &r.key.name);
        if self.protocol == PortProtocol::Udp && backends.len() > 1 {
            let folded = udp_weighted_cluster(r, backends);
            let forward = L4Forward {
                route,
                backends: vec![WeightedBackend::new(&folded.name, 1)],
                invalid_weight: 0,
            };
            clusters.insert(folded.name.clone(), folded);
            return Some(forward);
        }
        for (cluster, _) in backends {
            clusters
                .entry(cluster.name.clone())
                .or_insert_with(|| Cluster::clone(cluster));
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

    fn action(&self, action: &RuleAction, clusters: &mut BTreeMap<String, Cluster>) -> RouteAction {
        match action {
            RuleAction::Redirect(spec) => {
                RouteAction::Redirect(redirect(spec, self.protocol, self.port))
            }
            RuleAction::Forward(f) if f.backends.is_empty() => {
                RouteAction::DirectResponse { status: 500 }
            }
            RuleAction::Forward(f) => {
                let f: &ForwardSpec = &self.with_client_certificate(f);
                let mirrors = f.mirrors.iter().map(|(c, _)| c);
                for cluster in f.backends.iter().map(|(c, _)| c).chain(mirrors) {
                    add_cluster(clusters, cluster);
                }
                RouteAction::Forward(forward(f))
            }
        }
    }
}

/// Puts a cluster into the IR; a Service port named by a gRPC route and by an
/// HTTP one is served as h2c (what gRPC needs, and what the port advertises).
fn add_cluster(clusters: &mut BTreeMap<String, Cluster>, cluster: &Cluster) {
    clusters
        .entry(cluster.name.clone())
        .and_modify(|c| {
            if cluster.protocol == UpstreamProtocol::H2c {
                c.protocol = UpstreamProtocol::H2c;
                // An XBackend's ALPN follows (`h2`, as gRPC needs).
                if let Some(tls) = c.tls.as_mut().filter(|t| !t.alpn.is_empty()) {
                    tls.alpn = vec!["h2".into()];
                }
            }
        })
        .or_insert_with(|| cluster.clone());
}

fn forward(f: &ForwardSpec) -> Forward {
    let no_headers = (HeaderModifier::default(), HeaderModifier::default());
    let backends = f.backends.iter().enumerate().map(|(i, (c, w))| {
        let (request, response) = f.backend_headers.get(i).unwrap_or(&no_headers);
        WeightedBackend {
            request_headers: request.clone(),
            response_headers: response.clone(),
            ..WeightedBackend::new(&c.name, *w)
        }
    });
    Forward {
        backends: backends.collect(),
        invalid_weight: f.invalid_weight,
        rewrite: f.rewrite.clone(),
        timeouts: f.timeouts.clone(),
        retry: f.retry.clone(),
        mirrors: f
            .mirrors
            .iter()
            .map(|(c, fraction)| Mirror {
                cluster: c.name.clone(),
                fraction: *fraction,
            })
            .collect(),
        cors: f.cors.clone(),
        // A backend with session persistence is its rule's only one (see
        // `route::resolve_backends_with`).
        session: f
            .session
            .as_deref()
            .cloned()
            .or_else(|| match f.backends.as_slice() {
                [(c, _)] => c.session.clone(),
                _ => None,
            }),
    }
}

/// Older first: by creationTimestamp (none last), then namespace/name.
fn age(r: &RouteModel) -> (bool, Option<Time>, ObjectRef) {
    (r.created.is_none(), r.created.clone(), r.key.clone())
}

/// One cluster for a UDPRoute's weighted backends: every backend's endpoints,
/// each weighted so that the backends' shares are their weights (a backend's
/// weight spread over its endpoints). Endpoints named by two backends add up.
fn udp_weighted_cluster(r: &RouteModel, backends: &[(Arc<Cluster>, u32)]) -> Cluster {
    /// Per-endpoint weights are integers: scale before dividing by the count.
    const SCALE: u64 = 1000;
    let mut weights: BTreeMap<(String, u16), u64> = BTreeMap::new();
    for (cluster, weight) in backends {
        let n = cluster.endpoints.len() as u64;
        for e in &cluster.endpoints {
            let share = (u64::from(*weight) * SCALE / n).max(1);
            *weights.entry((e.address.clone(), e.port)).or_default() += share;
        }
    }
    Cluster {
        name: names::udp_route_cluster(&r.key.namespace, &r.key.name),
        service: r.key.clone(),
        port: 0,
        protocol: UpstreamProtocol::Http1,
        endpoints: weights
            .into_iter()
            .map(|((address, port), w)| Endpoint {
                address,
                port,
                weight: u32::try_from(w).unwrap_or(u32::MAX),
            })
            .collect(),
        tls: None,
        backend_kind: aether_ir::BackendKind::Service,
        discovery: aether_ir::Discovery::Eds,
        session: None,
    }
}

fn well_known_port(scheme: &str) -> u16 {
    if scheme == "https" { 443 } else { 80 }
}

/// The spec's redirect port rules: the explicit port, else the well-known port of
/// the redirect scheme, else the listener's port; left out (`None`) when it is the
/// default port of the effective scheme (redirect scheme, else the listener's).
pub fn redirect(
    spec: &RedirectSpec,
    listener_protocol: PortProtocol,
    listener_port: u16,
) -> Redirect {
    let listener_scheme = match listener_protocol {
        PortProtocol::Https | PortProtocol::Tls => "https",
        PortProtocol::Http | PortProtocol::Tcp | PortProtocol::Udp => "http",
    };
    let effective_scheme = spec.scheme.as_deref().unwrap_or(listener_scheme);
    let port = spec
        .port
        .or_else(|| spec.scheme.as_deref().map(well_known_port))
        .unwrap_or(listener_port);
    Redirect {
        scheme: spec.scheme.clone(),
        hostname: spec.hostname.clone(),
        port: (port != well_known_port(effective_scheme)).then_some(port),
        path: spec.path.clone(),
        status_code: spec.status_code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(scheme: Option<&str>, port: Option<u16>) -> RedirectSpec {
        RedirectSpec {
            scheme: scheme.map(str::to_string),
            hostname: None,
            port,
            path: None,
            status_code: 302,
        }
    }

    #[test]
    fn redirect_port_table() {
        use PortProtocol::{Http, Https};
        let cases = [
            // (scheme, explicit port, listener protocol, listener port, Location port)
            (None, None, Http, 80, None),
            (None, None, Http, 8080, Some(8080)),
            (Some("https"), None, Http, 8080, None),
            (Some("http"), None, Https, 8443, None),
            (Some("https"), Some(8443), Http, 80, Some(8443)),
            (Some("https"), Some(443), Http, 80, None),
            (None, Some(80), Http, 8080, None),
            (None, Some(80), Https, 443, Some(80)),
            (None, None, Https, 443, None),
            (None, None, Https, 8443, Some(8443)),
        ];
        for (scheme, port, proto, lport, want) in cases {
            assert_eq!(
                redirect(&spec(scheme, port), proto, lport).port,
                want,
                "scheme {scheme:?} port {port:?} on {proto:?}:{lport}"
            );
        }
    }
}
