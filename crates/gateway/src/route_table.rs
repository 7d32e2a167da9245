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
//!
//! Beside this file: `hosts.rs` assembles a table's virtual hosts and keeps
//! them from one translation to the next, `tls.rs` makes the chains of HTTPS
//! and TLS ports, `l4.rs` the forwards of TCP, UDP and TLS passthrough ports.

use crate::attachments::Attachments;
use crate::gateway_model::GatewayModel;
use crate::hostname;
use crate::listener::ListenerProtocol;
use crate::listener_filters;
use crate::precedence::Precedence;
use crate::route::{ForwardSpec, RedirectSpec, RouteModel, RuleAction};
use crate::route_memo::GatewayMemo;
use aether_ir::{
    Cluster, Forward, HeaderModifier, Mirror, Port, PortProtocol, Redirect, Route, RouteAction,
    RouteTable, UpstreamProtocol, WeightedBackend, names,
};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The IR of one served Gateway: on each listener, the routes `attached` serves
/// there. `memo` holds each route's entries and each table's virtual hosts
/// from the Gateway's last tables (see `route_memo.rs`).
pub(crate) fn gateway(
    gw: &GatewayModel,
    routes: &[Arc<RouteModel>],
    attached: &Attachments,
    clusters: &mut BTreeMap<String, Arc<Cluster>>,
    memo: &GatewayMemo,
) -> aether_ir::Gateway {
    let (by_port, refusing) = listeners_by_port(gw);
    let mut ports = Vec::new();
    for ((udp, port), listeners) in by_port {
        let ctx = TableContext {
            gw,
            routes,
            attached,
            memo,
            port,
            protocol: port_protocol(gw, &listeners),
            refusing: if udp {
                &[]
            } else {
                refusing.get(&port).map_or(&[][..], Vec::as_slice)
            },
        };
        ports.push(ctx.port(udp, &listeners, clusters));
    }
    ports.sort_by_key(|p| (p.port, p.protocol));
    aether_ir::Gateway {
        namespace: gw.key.namespace.clone(),
        name: gw.key.name.clone(),
        addresses: gw.addresses.clone().unwrap_or_default(),
        ports,
    }
}

/// Listener indices by `(UDP?, port)`.
type ByPort = BTreeMap<(bool, u16), Vec<usize>>;

/// Programmable listeners by port, TCP and UDP ports apart (`(UDP?, port)`),
/// and by port the listeners not accepted for their filters: their hostnames
/// refuse every request on a port that is served for others.
fn listeners_by_port(gw: &GatewayModel) -> (ByPort, BTreeMap<u16, Vec<usize>>) {
    let mut by_port = ByPort::new();
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
    (by_port, refusing)
}

/// What a port serves: HTTPS listeners sharing a port with TLS listeners make
/// it a TLS port.
fn port_protocol(gw: &GatewayModel, listeners: &[usize]) -> PortProtocol {
    listeners
        .iter()
        .filter_map(|&li| {
            gw.listeners[li]
                .protocol
                .map(ListenerProtocol::port_protocol)
        })
        .max()
        .unwrap_or(PortProtocol::Http)
}

/// A route's share of one listener's route table: per host it is served on
/// there, its IR routes (one per match of each rule) with their precedence;
/// and the clusters they forward to. A function of the route model and the
/// Gateway model alone.
pub(crate) struct Entries {
    hosts: Vec<(String, Ranked)>,
    clusters: Vec<Arc<Cluster>>,
}

/// IR routes with their precedence on one virtual host.
type Ranked = Vec<(Precedence, Arc<Route>)>;

struct TableContext<'a> {
    gw: &'a GatewayModel,
    routes: &'a [Arc<RouteModel>],
    attached: &'a Attachments,
    memo: &'a GatewayMemo,
    port: u16,
    protocol: PortProtocol,
    /// Listeners on the port not accepted for their filters.
    refusing: &'a [usize],
}

impl TableContext<'_> {
    /// The port `listeners` share, with what it serves: a route table, TLS
    /// chains by SNI, or a TCP/UDP forward.
    fn port(
        &self,
        udp: bool,
        listeners: &[usize],
        clusters: &mut BTreeMap<String, Arc<Cluster>>,
    ) -> Port {
        let (gw, (ns, name), port) = (
            self.gw,
            (&self.gw.key.namespace, &self.gw.key.name),
            self.port,
        );
        let mut p = Port {
            port,
            protocol: self.protocol,
            listener_name: if udp {
                names::udp_listener(ns, name, port)
            } else {
                names::listener(ns, name, port)
            },
            route_table: None,
            tls_chains: vec![],
            forward: None,
        };
        for &li in listeners {
            for c in &gw.listeners[li].filters.clusters {
                add_cluster(clusters, c);
            }
        }
        match self.protocol {
            PortProtocol::Http => {
                let table_name = names::route_table(ns, name, port, None);
                let mut table = self.table(table_name, listeners, listeners, clusters);
                let of = |ls: &[usize]| ls.iter().map(|&li| &gw.listeners[li]).collect::<Vec<_>>();
                listener_filters::place(&mut table, &of(listeners), &of(self.refusing));
                p.route_table = Some(table);
            }
            PortProtocol::Https | PortProtocol::Tls => {
                p.tls_chains = self.tls_chains(listeners, clusters);
            }
            PortProtocol::Tcp | PortProtocol::Udp => {
                p.forward = self.oldest_forward(listeners, clusters);
            }
        }
        p
    }

    /// The route table of `listeners` (sharing a port, or one HTTPS listener);
    /// `rivals` are every listener on the port, whose more specific hostnames
    /// take their requests away (listener isolation). Each route's share is
    /// its [`Entries`] on the listener. Its virtual hosts are assembled from
    /// the table's assembly before (`hosts.rs`): a change costs the hosts it
    /// touches, and on those an edit of their precedence order.
    fn table(
        &self,
        name: String,
        listeners: &[usize],
        rivals: &[usize],
        clusters: &mut BTreeMap<String, Arc<Cluster>>,
    ) -> RouteTable {
        let shares: Vec<(usize, Arc<Entries>)> = listeners
            .iter()
            .flat_map(|&li| self.attached.served_on(li).map(move |ri| (li, ri)))
            .map(|(li, ri)| (ri, self.entries(li, ri, rivals)))
            .collect();
        for (_, share) in &shares {
            for c in &share.clusters {
                add_cluster(clusters, c);
            }
        }
        let before = self.memo.hosts.take(&name).unwrap_or_default();
        let assembled = hosts::assemble(&shares, before);
        let virtual_hosts = assembled.iter().map(|a| a.host.clone()).collect();
        self.memo.hosts.keep(name.clone(), assembled);
        RouteTable {
            name,
            virtual_hosts,
        }
    }

    /// Route `ri`'s entries on listener `li`: from the memo while the route
    /// model is the one they were made from, else made.
    fn entries(&self, li: usize, ri: usize, rivals: &[usize]) -> Arc<Entries> {
        let route = &self.routes[ri];
        self.memo.tables.get_or_make((route, li), || {
            let mut clusters = Vec::new();
            let l = &self.gw.listeners[li];
            let r: &RouteModel = route;
            let served = hostname::served_hostnames(l.hostname.as_deref(), &r.hostnames);
            let siblings = rivals
                .iter()
                .filter(|&&other| other != li)
                .map(|&other| self.gw.listeners[other].hostname.as_deref());
            let hosts = hostname::isolate(served, l.hostname.as_deref(), siblings);
            if hosts.is_empty() {
                return Entries {
                    hosts: vec![],
                    clusters,
                };
            }
            // Each match's IR route, made once: it reads no host, only its
            // precedence on a host does.
            let key = names::route_key(r.kind(), &r.key().namespace, &r.key().name);
            let mut made = Vec::new();
            for rule in r.rules.iter().filter(|rule| !rule.matches.is_empty()) {
                let action = self.action(&rule.action, &mut clusters);
                for (j, m) in rule.matches.iter().enumerate() {
                    let route = Route {
                        name: format!("{key}/rule/{}/match/{j}", rule.index),
                        matcher: m.clone(),
                        action: action.clone(),
                        request_headers: rule.request_headers.clone(),
                        response_headers: rule.response_headers.clone(),
                    };
                    made.push((rule.index, j, m, Arc::new(route)));
                }
            }
            let hosts = hosts
                .into_iter()
                .map(|host| {
                    let rank =
                        hostname::route_hostname_rank(&host, l.hostname.as_deref(), &r.hostnames);
                    let routes = made
                        .iter()
                        .map(|(rule, j, m, route)| {
                            let precedence = Precedence::new(rank, m, r.origin.clone(), *rule, *j);
                            (precedence, route.clone())
                        })
                        .collect();
                    (host, routes)
                })
                .collect();
            Entries { hosts, clusters }
        })
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

    /// The rule's action; the clusters it forwards to go into `clusters`.
    fn action(&self, action: &RuleAction, clusters: &mut Vec<Arc<Cluster>>) -> RouteAction {
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
                clusters.extend(f.backends.iter().map(|(c, _)| c).chain(mirrors).cloned());
                RouteAction::Forward(forward(f))
            }
        }
    }
}

/// Puts a cluster into the IR; a Service port named by a gRPC route and by an
/// HTTP one is served as h2c (what gRPC needs, and what the port advertises).
fn add_cluster(clusters: &mut BTreeMap<String, Arc<Cluster>>, cluster: &Arc<Cluster>) {
    clusters
        .entry(cluster.name.clone())
        .and_modify(|c| {
            // Copied only when it changes: the route models share their clusters.
            let alpn_to_h2 = |c: &Cluster| {
                c.tls
                    .as_ref()
                    .is_some_and(|t| !t.alpn.is_empty() && t.alpn != ["h2"])
            };
            if cluster.protocol == UpstreamProtocol::H2c
                && (c.protocol != UpstreamProtocol::H2c || alpn_to_h2(c))
            {
                let c = Arc::make_mut(c);
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
        session: f.session.clone().or_else(|| match f.backends.as_slice() {
            [(c, _)] => c.session.clone().map(Box::new),
            _ => None,
        }),
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

mod hosts;
pub(crate) use hosts::Assembled;
mod l4;
mod tls;

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
