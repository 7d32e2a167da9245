//! An HTTPS or TLS port's chains, chosen by SNI: one per HTTPS listener (its
//! route table, answering 421 for hosts another listener owns), one per (TLS
//! listener, TLSRoute) with the hostnames the route serves there.

use super::TableContext;
use crate::hostname;
use crate::listener::{Listener, ListenerProtocol};
use crate::listener_filters;
use crate::route::RouteModel;
use aether_ir::{
    Cluster, HeaderModifier, L4Forward, PathMatch, Route, RouteAction, RouteMatch, RouteTable,
    TlsChain, VirtualHost, names,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

impl TableContext<'_> {
    /// The SNI-selected chains of an HTTPS or TLS port. A hostname goes to
    /// the most specific listener, then to the oldest route; a port with
    /// nothing to serve closes connections.
    pub(super) fn tls_chains(
        &self,
        listeners: &[usize],
        clusters: &mut BTreeMap<String, Arc<Cluster>>,
    ) -> Vec<TlsChain> {
        let mut claimed: BTreeSet<String> = BTreeSet::new();
        let mut chains = self.https_chains(listeners, &mut claimed, clusters);
        for &li in listeners {
            if self.gw.listeners[li].protocol != Some(ListenerProtocol::Https) {
                chains.extend(self.tls_route_chains(li, listeners, &mut claimed, clusters));
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

    /// One chain per HTTPS listener on the port, with its route table, and
    /// one refusing every request per HTTPS listener not accepted for its
    /// filters; their hostnames go into `claimed`.
    fn https_chains(
        &self,
        listeners: &[usize],
        claimed: &mut BTreeSet<String>,
        clusters: &mut BTreeMap<String, Arc<Cluster>>,
    ) -> Vec<TlsChain> {
        let (ns, name) = (&self.gw.key.namespace, &self.gw.key.name);
        let https = |li: &usize| -> Option<(usize, &Listener)> {
            let l = &self.gw.listeners[*li];
            (l.protocol == Some(ListenerProtocol::Https)).then_some((*li, l))
        };
        let mut chains = Vec::new();
        for (li, l) in listeners.iter().filter_map(https) {
            let table_name = names::route_table(ns, name, self.port, Some(&l.ir_name()));
            let mut table = self.table(table_name, &[li], listeners, clusters);
            self.misdirected(&mut table, li, listeners);
            // The chain is this listener's: every request on it is filtered.
            for vh in &mut table.virtual_hosts {
                if vh.pre_routing != l.filters.pre_routing {
                    Arc::make_mut(vh)
                        .pre_routing
                        .clone_from(&l.filters.pre_routing);
                }
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
        for (_, l) in self.refusing.iter().filter_map(https) {
            let table = names::route_table(ns, name, self.port, Some(&l.ir_name()));
            chains.push(listener_filters::refusing_chain(l, table));
            claimed.insert(l.hostname.clone().unwrap_or_else(|| "*".into()));
        }
        chains
    }

    /// A TLS listener's chains: each SNI name not `claimed` yet goes to one
    /// route, the one whose own hostname for it is the most specific, then
    /// the oldest; one chain per route that won a name.
    fn tls_route_chains(
        &self,
        li: usize,
        listeners: &[usize],
        claimed: &mut BTreeSet<String>,
        clusters: &mut BTreeMap<String, Arc<Cluster>>,
    ) -> Vec<TlsChain> {
        let l = &self.gw.listeners[li];
        let siblings = listeners
            .iter()
            .filter(|&&other| other != li)
            .map(|&other| self.gw.listeners[other].hostname.as_deref());
        let by_age = self.by_age(li);
        let mut candidates: Vec<((bool, usize), usize, String)> = Vec::new();
        for (age_rank, &ri) in by_age.iter().enumerate() {
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
        let mut chains = Vec::new();
        for (age_rank, mut hosts) in won {
            let ri = by_age[age_rank];
            let r: &RouteModel = &self.routes[ri];
            hosts.sort();
            let catch_all = hosts.iter().any(|h| h == "*");
            chains.push(TlsChain {
                listener: format!(
                    "{}/{}",
                    l.ir_name(),
                    names::route_key(r.kind(), &r.key().namespace, &r.key().name)
                ),
                server_names: if catch_all { vec![] } else { hosts },
                certificates: l.certificates.clone(),
                client_validation: None,
                route_table: None,
                forward: self.forward(ri, l.protocol, clusters),
            });
        }
        chains
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
                table.virtual_hosts.push(Arc::new(VirtualHost {
                    pre_routing: Vec::new(),
                    name: host.clone(),
                    domains: vec![host.clone()],
                    routes: vec![Arc::new(answer(&host))],
                }));
            }
        }
        if own.is_some()
            && let Some(any) = table
                .virtual_hosts
                .iter_mut()
                .find(|v| v.name == names::CATCH_ALL_VHOST)
        {
            Arc::make_mut(any)
                .routes
                .push(Arc::new(answer(names::CATCH_ALL_VHOST)));
        }
        table.virtual_hosts.sort_by(|a, b| a.name.cmp(&b.name));
    }
}
