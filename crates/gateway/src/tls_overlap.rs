//! `OverlappingTLSConfig`: HTTPS listeners on one port whose hostnames overlap
//! (`*.example.com` and `foo.example.com`), which HTTP/2 connection coalescing
//! can carry across listeners. The spec (gateway_types.go): controllers MUST
//! detect overlapping hostnames and MUST set the condition on every listener
//! involved; it is negative polarity (set only when True). Listeners without a
//! hostname are the port's fallback and are not counted as overlapping; equal
//! hostnames are a `HostnameConflict` already.

use crate::hostname;
use crate::listener::{Listener, ListenerProtocol};
use std::collections::BTreeMap;

/// Sets `overlapping_tls` on every HTTPS listener whose hostname overlaps
/// another's on the same port, naming the others.
pub fn mark(listeners: &mut [Listener]) {
    let mut by_port: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, l) in listeners.iter().enumerate() {
        if l.protocol == Some(ListenerProtocol::Https) && l.is_accepted() && l.hostname.is_some() {
            by_port.entry(l.port).or_default().push(i);
        }
    }
    for idx in by_port.values() {
        for &i in idx {
            let mine = listeners[i].hostname.as_deref();
            let others: Vec<String> = idx
                .iter()
                .filter(|&&j| j != i)
                .filter(|&&j| {
                    let theirs = listeners[j].hostname.as_deref().unwrap_or_default();
                    hostname::intersect(mine, theirs).is_some()
                })
                .map(|&j| {
                    format!(
                        "{} ({})",
                        listeners[j].name,
                        listeners[j].hostname.as_deref().unwrap_or_default()
                    )
                })
                .collect();
            if !others.is_empty() {
                listeners[i].overlapping_tls = Some(format!(
                    "hostname {} overlaps with listener(s) {} on port {}",
                    mine.unwrap_or_default(),
                    others.join(", "),
                    listeners[i].port
                ));
            }
        }
    }
}
