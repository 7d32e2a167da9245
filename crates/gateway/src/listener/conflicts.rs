//! Listener conflicts: which listeners on one port cannot be told apart.
//!
//! One Gateway's listeners: HTTP, the TLS family and TCP cannot share a port
//! (`ProtocolConflict`), nor can two listeners with the same hostname (or none)
//! (`HostnameConflict`); no winner is picked. A ListenerSet's listeners come
//! after and lose to the first listener they clash with.

use super::{Conflict, Listener, ListenerProtocol};
use std::collections::{BTreeMap, BTreeSet};

/// Marks indistinct listeners. Among listeners on one port that we serve: HTTP
/// and HTTPS together conflict on protocol (all of them); otherwise listeners
/// sharing a hostname (or both without) conflict on hostname. No winner is picked.
pub(crate) fn mark(listeners: &mut [Listener]) {
    let mut by_port: BTreeMap<(bool, u16), Vec<usize>> = BTreeMap::new();
    for (i, l) in listeners.iter().enumerate() {
        if let Some(p) = l.protocol
            && l.not_accepted.is_none()
        {
            by_port
                .entry((p == ListenerProtocol::Udp, l.port))
                .or_default()
                .push(i);
        }
    }
    for ((_, port), idx) in by_port {
        let classes: BTreeSet<u8> = idx
            .iter()
            .filter_map(|&i| listeners[i].protocol.map(ListenerProtocol::port_class))
            .collect();
        if classes.len() > 1 {
            let mut protocols: Vec<&str> = idx
                .iter()
                .filter_map(|&i| listeners[i].protocol.map(protocol_name))
                .collect();
            protocols.sort_unstable();
            protocols.dedup();
            for &i in &idx {
                listeners[i].conflicted = Some(Conflict::Protocol(format!(
                    "{} listeners share port {port}",
                    protocols.join(" and ")
                )));
            }
            continue;
        }
        let mut by_host: BTreeMap<Option<String>, Vec<usize>> = BTreeMap::new();
        for &i in &idx {
            by_host
                .entry(listeners[i].hostname.clone())
                .or_default()
                .push(i);
        }
        for (host, same) in by_host.into_iter().filter(|(_, v)| v.len() > 1) {
            let names: Vec<&str> = same.iter().map(|&i| listeners[i].name.as_str()).collect();
            let msg = format!(
                "listeners {} share port {port} and hostname {}",
                names.join(", "),
                host.as_deref().unwrap_or("(none)")
            );
            for &i in &same {
                listeners[i].conflicted = Some(Conflict::Hostname(msg.clone()));
            }
        }
    }
}

/// ListenerSets: listeners from `from` on are checked, in order, against every
/// accepted listener before them, and lose to it (the first in precedence
/// wins, unlike listeners of one Gateway).
pub(crate) fn mark_later_conflicts(listeners: &mut [Listener], from: usize) {
    for i in from..listeners.len() {
        let (earlier, rest) = listeners.split_at_mut(i);
        let l = &mut rest[0];
        let Some(p) = l.protocol.filter(|_| l.not_accepted.is_none()) else {
            continue;
        };
        let same_port = |e: &&Listener| {
            e.is_accepted()
                && e.port == l.port
                && e.protocol.is_some_and(|q| q.is_udp() == p.is_udp())
        };
        for e in earlier.iter().filter(same_port) {
            let q = e.protocol.expect("filtered on a protocol");
            if q.port_class() != p.port_class() {
                l.conflicted = Some(Conflict::Protocol(format!(
                    "port {} is served as {} by listener {}, which comes first",
                    l.port,
                    protocol_name(q),
                    e.name
                )));
                break;
            }
            if e.hostname == l.hostname {
                l.conflicted = Some(Conflict::Hostname(format!(
                    "listener {} comes first with port {} and hostname {}",
                    e.name,
                    l.port,
                    l.hostname.as_deref().unwrap_or("(none)")
                )));
                break;
            }
        }
    }
}

impl ListenerProtocol {
    fn is_udp(self) -> bool {
        self == ListenerProtocol::Udp
    }
}

fn protocol_name(p: ListenerProtocol) -> &'static str {
    match p {
        ListenerProtocol::Http => "HTTP",
        ListenerProtocol::Https => "HTTPS",
        ListenerProtocol::TlsPassthrough | ListenerProtocol::TlsTerminate => "TLS",
        ListenerProtocol::Tcp => "TCP",
        ListenerProtocol::Udp => "UDP",
    }
}
