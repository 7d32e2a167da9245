//! A route table's virtual hosts, assembled from the entries of the routes
//! served there and kept from one translation of the Gateway to the next.
//!
//! ```text
//!  entries (one per route on the table's listeners, in table order)
//!    └─ by host ─► Assembled { from: the entries naming the host,
//!                              order: its routes as (entry, rank) in precedence order,
//!                              host: the IR virtual host }
//!  the same entries as before   → the same host (`Arc`), nothing sorted
//!  a few entries gone or new    → the order before, edited: the routes of
//!                                 entries gone taken out, those of new ones
//!                                 inserted where their precedence puts them
//!  otherwise                    → sorted anew
//! ```
//!
//! An edited order is the order a sort gives: precedence is a total order over
//! distinct routes. Where one route has two entries on a host (served on two
//! listeners of the table), its first entry stands for it, and the host is
//! sorted anew.

use super::{Entries, Ranked};
use aether_ir::{VirtualHost, names};
use std::collections::HashMap;
use std::sync::Arc;

/// A virtual host as the table's assembly made it, with what it was made of.
pub(crate) struct Assembled {
    /// The entries naming the host, in table order, each with the host's
    /// place among the entries' hosts.
    from: Box<[(Arc<Entries>, u32)]>,
    /// The host's routes, in precedence order: (place in `from`, place in
    /// that entry's ranked routes on the host).
    order: Box<[(u32, u32)]>,
    /// Whether a route met twice was left out (its other entry would come
    /// back if one went).
    deduped: bool,
    pub(crate) host: Arc<VirtualHost>,
}

/// One entry naming a host: its share (see [`assemble`]) and the host's place
/// among the share's hosts.
type OnHost<'a> = (&'a str, usize, u32);

/// The virtual hosts of one table, sorted by name with `*` always there, from
/// `shares` (each route's entries with the route's index, in table order),
/// taking from `before` (the table's assembly before) what still holds.
pub(crate) fn assemble(shares: &[(usize, Arc<Entries>)], before: Vec<Assembled>) -> Vec<Assembled> {
    let mut on_host: Vec<OnHost> = Vec::new();
    for (si, (_, entries)) in shares.iter().enumerate() {
        let hosts = entries.hosts.iter().enumerate();
        on_host.extend(hosts.map(|(hi, (host, _))| (host.as_str(), si, hi as u32)));
    }
    on_host.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let mut groups: Vec<&[OnHost]> = on_host.chunk_by(|a, b| a.0 == b.0).collect();
    if let Err(at) = groups.binary_search_by(|g| g[0].0.cmp(names::CATCH_ALL_VHOST)) {
        groups.insert(at, &[]);
    }
    let mut before = before.into_iter().peekable();
    groups
        .into_iter()
        .map(|group| {
            let host = group.first().map_or(names::CATCH_ALL_VHOST, |g| g.0);
            while before.next_if(|a| a.host.name.as_str() < host).is_some() {}
            let was = before.next_if(|a| a.host.name == host);
            host_of(host, group, shares, was)
        })
        .collect()
}

/// The host `host` of the entries in `group`: `was` (the host before) while
/// it is made of the same entries, else its order edited or sorted anew.
fn host_of(
    host: &str,
    group: &[OnHost],
    shares: &[(usize, Arc<Entries>)],
    was: Option<Assembled>,
) -> Assembled {
    let entries = |&(_, si, _): &OnHost| &shares[si].1;
    let same = |w: &Assembled| {
        w.from.len() == group.len()
            && (w.from.iter().zip(group)).all(|((e, _), g)| Arc::ptr_eq(e, entries(g)))
    };
    let was = match was {
        Some(w) if same(&w) => return w,
        was => was,
    };
    let from: Box<[(Arc<Entries>, u32)]> =
        group.iter().map(|g| (entries(g).clone(), g.2)).collect();
    let edited = was
        .filter(|w| !w.deduped && !route_twice(group, shares))
        .and_then(|w| edit(&w, &from));
    let (order, deduped) = match edited {
        Some(order) => (order, false),
        None => sort(&from),
    };
    let routes = order
        .iter()
        .map(|&(p, r)| ranked(&from, p)[r as usize].1.clone())
        .collect();
    Assembled {
        host: Arc::new(VirtualHost {
            pre_routing: Vec::new(),
            name: host.to_string(),
            domains: vec![host.to_string()],
            routes,
        }),
        from,
        order,
        deduped,
    }
}

/// Entry `p`'s ranked routes on the host.
fn ranked(from: &[(Arc<Entries>, u32)], p: u32) -> &Ranked {
    let (entries, hi) = &from[p as usize];
    &entries.hosts[*hi as usize].1
}

/// Whether one route has two entries in `group` (it is served on two of the
/// table's listeners).
fn route_twice(group: &[OnHost], shares: &[(usize, Arc<Entries>)]) -> bool {
    if group.len() < 2 {
        return false;
    }
    let mut routes: Vec<usize> = group.iter().map(|&(_, si, _)| shares[si].0).collect();
    routes.sort_unstable();
    routes.windows(2).any(|w| w[0] == w[1])
}

/// Every route of `from` in precedence order; a route name met twice keeps
/// its first entry in table order (and says one was left out).
fn sort(from: &[(Arc<Entries>, u32)]) -> (Box<[(u32, u32)]>, bool) {
    let mut order: Vec<(u32, u32)> = (0..from.len() as u32)
        .flat_map(|p| (0..ranked(from, p).len() as u32).map(move |r| (p, r)))
        .collect();
    let at = |&(p, r): &(u32, u32)| &ranked(from, p)[r as usize];
    let all = order.len();
    if from.len() > 1 {
        // Stable: of equal names, the first in table order stays.
        order.sort_by(|a, b| at(a).1.name.cmp(&at(b).1.name));
        order.dedup_by(|b, a| at(a).1.name == at(b).1.name);
    }
    let deduped = order.len() < all;
    order.sort_by(|a, b| at(a).0.cmp(&at(b).0));
    (order.into(), deduped)
}

/// `was`'s order edited to the entries `from`: the routes of entries that
/// went taken out, those of new entries inserted by precedence. `None` when
/// so many are new that sorting anew costs less.
fn edit(was: &Assembled, from: &[(Arc<Entries>, u32)]) -> Option<Box<[(u32, u32)]>> {
    let now: HashMap<*const Entries, u32> = (from.iter().enumerate())
        .map(|(p, (e, _))| (Arc::as_ptr(e), p as u32))
        .collect();
    let moved: Vec<Option<u32>> = (was.from.iter())
        .map(|(e, _)| now.get(&Arc::as_ptr(e)).copied())
        .collect();
    let mut order: Vec<(u32, u32)> = (was.order.iter())
        .filter_map(|&(p, r)| Some((moved[p as usize]?, r)))
        .collect();
    let mut kept = vec![false; from.len()];
    for &p in moved.iter().flatten() {
        kept[p as usize] = true;
    }
    let new: Vec<(u32, u32)> = (0..from.len() as u32)
        .filter(|&p| !kept[p as usize])
        .flat_map(|p| (0..ranked(from, p).len() as u32).map(move |r| (p, r)))
        .collect();
    if new.len() > 16 + order.len() / 8 {
        return None;
    }
    for (p, r) in new {
        let precedence = &ranked(from, p)[r as usize].0;
        let at = order.partition_point(|&(q, s)| ranked(from, q)[s as usize].0 < *precedence);
        order.insert(at, (p, r));
    }
    Some(order.into())
}
