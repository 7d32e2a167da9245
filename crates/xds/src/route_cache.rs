//! Route tables encoded route by route, so that a changed route costs its own
//! encoding and not its table's.
//!
//! ```text
//!  RouteConfiguration bytes
//!   ├─ head: the table's name                        (frame, see route.rs)
//!   ├─ per virtual host, in IR order: field 2 {
//!   │     head: its name and domains                 (frame)
//!   │     per IR route, in precedence order: field 3 { encoded route }   ◄─ cached
//!   │     the frame's own routes: field 3 { … }
//!   │     tail: every field after `routes`           (frame)
//!   │  }
//!   └─ tail: every field after `virtual_hosts`       (frame)
//! ```
//!
//! Protobuf concatenates: a message's encoding is its fields' encodings one
//! after another, and prost writes them in declaration order (`name`, then
//! `virtual_hosts` in a RouteConfiguration; `name`, `domains`, then `routes`
//! in a VirtualHost). So the assembled bytes are exactly those of
//! `route::route_configuration(..).encode_to_vec()` (tested below), and the
//! table's version, a sha256 over them, is what a fresh build gives.
//!
//! An IR route's encoding reads the route, the table's scheme and its virtual
//! host (the domains, for redirects). A warm build reuses an encoding when all
//! three equal what it was encoded from: the same scheme, the same virtual
//! host frame (compared encoded), an equal IR route of the same name.
//! Precedence is the IR's order: the assembly walks the new IR and picks each
//! route's encoding by name, so reordering a table encodes nothing.
//!
//! Each route key's fragment (the hash over its routes, and its clusters) is
//! kept too. When the table's virtual hosts are the ones it had, in the same
//! places, only the keys with a route in a host that changed (now or before)
//! are looked at again ([`ChangedHosts`]): a route's change on a Gateway of
//! 10,000 routes walks its own virtual host, not all of them.

use crate::action::Scheme;
use crate::in_order::InOrder;
use crate::parts::{Fragments, KeyHashes};
use crate::route;
use aether_ir as ir;
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// `RouteConfiguration.virtual_hosts`.
const VIRTUAL_HOSTS: u32 = 2;
/// `VirtualHost.routes`.
const ROUTES: u32 = 3;

/// One route table, its virtual hosts and routes each encoded.
#[derive(Debug)]
pub(crate) struct EncodedTable {
    scheme: Scheme,
    frame: Frame,
    /// Aligned with the IR table's virtual hosts.
    virtual_hosts: Vec<EncodedVirtualHost>,
    /// Per route key, its fragment of the table and what it was hashed from.
    fragments: BTreeMap<Arc<str>, KeyFragment>,
}

/// One route key's fragment: the pieces hashed (its Envoy routes' encodings
/// in table order, each with the index of its virtual host), the hash, and
/// the clusters its routes name. A warm build keeps the hash and the
/// clusters while the pieces are the same encodings (the same `Arc`s, so
/// encodings of equal IR routes) in virtual hosts of the same name and
/// domains.
#[derive(Debug, Clone)]
pub(crate) struct KeyFragment {
    pieces: Pieces,
    pub(crate) hash: Arc<str>,
    pub(crate) clusters: Arc<KeyClusters>,
}

/// The clusters a route key's routes forward requests to, and those they
/// copy requests to; each sorted, no name twice. A name is one `Arc` for
/// every key of the table that names it, and the shares take it on.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct KeyClusters {
    pub(crate) forward: Vec<Arc<str>>,
    pub(crate) mirror: Vec<Arc<str>>,
}

/// Encoded Envoy routes, each with the index of its virtual host.
type Pieces = Vec<(usize, Arc<[u8]>)>;

#[derive(Debug, Clone)]
struct EncodedVirtualHost {
    name: Arc<str>,
    /// Its domains as the fragments hash them (see `route::fragments`).
    domains: Arc<str>,
    /// Shared with the encoding before while the frame is the same.
    frame: Arc<Frame>,
    /// Aligned with the IR virtual host's routes.
    routes: Arc<[Arc<[u8]>]>,
    /// Aligned with them too: the length of each route's key, the prefix of
    /// its name (`names::route_key_of`), found once per virtual host encoded.
    key_lens: Arc<[Option<u32>]>,
}

/// A message with one repeated field taken out: the encoded fields before it,
/// the elements the frame brings itself (name, encoding), the fields after.
#[derive(Debug, PartialEq, Eq)]
struct Frame {
    head: Vec<u8>,
    own: Vec<(String, Vec<u8>)>,
    tail: Vec<u8>,
}

/// How many IR routes an encoding took from the cache, and how many it encoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RouteCount {
    pub reused: usize,
    pub encoded: usize,
}

impl EncodedTable {
    /// `table` encoded, taking from `before` (an earlier table and its
    /// encoding) every route encoding that still holds.
    pub(crate) fn new(
        table: &ir::RouteTable,
        scheme: Scheme,
        before: Option<(&ir::RouteTable, &EncodedTable)>,
        count: &mut RouteCount,
    ) -> Self {
        let rc = route::route_configuration_frame(table);
        let head = RouteConfiguration {
            name: rc.name.clone(),
            ..Default::default()
        }
        .encode_to_vec();
        let tail = RouteConfiguration {
            name: String::new(),
            ..rc
        }
        .encode_to_vec();
        let before = before.filter(|(_, b)| b.scheme == scheme);
        let mut earlier_host = EarlierHost::new(before.map(|(t, _)| t));
        let virtual_hosts: Vec<EncodedVirtualHost> = table
            .virtual_hosts
            .iter()
            .map(|vh| {
                let old = before.and_then(|(t, b)| {
                    let i = earlier_host.find(&vh.name)?;
                    Some((&t.virtual_hosts[i], &b.virtual_hosts[i]))
                });
                // The same virtual host (the same `Arc`): the same encoding.
                if let Some((_, encoded)) = old.filter(|(was, _)| Arc::ptr_eq(was, vh)) {
                    count.reused += vh.routes.len();
                    return encoded.clone();
                }
                // A frame reads the virtual host's name, domains and
                // pre-routing filters: equal ones, the same frame.
                let frame = match old {
                    Some((was, encoded))
                        if was.domains == vh.domains && was.pre_routing == vh.pre_routing =>
                    {
                        encoded.frame.clone()
                    }
                    _ => Arc::new(virtual_host_frame(vh)),
                };
                let earlier = old
                    .filter(|(_, encoded)| encoded.frame == frame)
                    .map(|(was, encoded)| (&**was, encoded));
                // Same frame, same name and domains: share the strings.
                let (name, domains) = match earlier {
                    Some((_, encoded)) => (encoded.name.clone(), encoded.domains.clone()),
                    None => (vh.name.as_str().into(), vh.domains.join("\n").into()),
                };
                let key_len =
                    |r: &Arc<ir::Route>| Some(ir::names::route_key_of(&r.name)?.len() as u32);
                EncodedVirtualHost {
                    name,
                    domains,
                    routes: encode_routes(vh, scheme, earlier, count).into(),
                    key_lens: vh.routes.iter().map(key_len).collect(),
                    frame,
                }
            })
            .collect();
        // Only the keys of the virtual hosts that changed, when the others
        // are where they were; else every key.
        let changed = before.and_then(|b| Some((ChangedHosts::between(&virtual_hosts, b)?, b)));
        let fragments = match changed {
            Some((changed, b)) => changed.patch(&virtual_hosts, table, b),
            None => key_fragments(&virtual_hosts, table, before.map(|(_, b)| b)),
        };
        EncodedTable {
            scheme,
            frame: Frame {
                head,
                own: vec![],
                tail,
            },
            virtual_hosts,
            fragments,
        }
    }

    /// The RouteConfiguration, encoded.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        let vh_len: Vec<usize> = self.virtual_hosts.iter().map(|v| v.len()).collect();
        let total = self.frame.head.len()
            + vh_len.iter().map(|&l| field_len(l)).sum::<usize>()
            + self.frame.tail.len();
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&self.frame.head);
        for (vh, len) in self.virtual_hosts.iter().zip(vh_len) {
            field(&mut out, VIRTUAL_HOSTS, len);
            out.extend_from_slice(&vh.frame.head);
            for r in vh.routes() {
                field(&mut out, ROUTES, r.len());
                out.extend_from_slice(r);
            }
            out.extend_from_slice(&vh.frame.tail);
        }
        out.extend_from_slice(&self.frame.tail);
        debug_assert_eq!(out.len(), total);
        out
    }

    /// Per route key, the hash over the routes it owns: what
    /// [`route::fragments`] gives of the decoded table.
    pub(crate) fn fragments(&self) -> KeyHashes {
        self.fragments
            .iter()
            .map(|(key, f)| (key.clone(), f.hash.clone()))
            .collect()
    }

    /// Each route key's fragment, in key order.
    pub(crate) fn keys(&self) -> &BTreeMap<Arc<str>, KeyFragment> {
        &self.fragments
    }
}

/// Each route key's fragment of a table: kept from `before` (the table's
/// encoding before) where its pieces are the same, else hashed.
fn key_fragments(
    virtual_hosts: &[EncodedVirtualHost],
    table: &ir::RouteTable,
    before: Option<&EncodedTable>,
) -> BTreeMap<Arc<str>, KeyFragment> {
    let mut pieces: BTreeMap<&str, Pieces> = BTreeMap::new();
    for (i, (vh, ir_vh)) in virtual_hosts.iter().zip(&table.virtual_hosts).enumerate() {
        let ir_routes = keyed_routes(vh, ir_vh).map(|(key, r)| (key, r.clone()));
        // The frame's own routes are encoded anew each time: never kept.
        let own = vh
            .frame
            .own
            .iter()
            .filter_map(|(n, r)| Some((ir::names::route_key_of(n)?, Arc::from(r.as_slice()))));
        for (key, encoded) in ir_routes.chain(own) {
            pieces.entry(key).or_default().push((i, encoded));
        }
    }
    let mut fragment_before = InOrder::new(before.map(|b| &b.fragments));
    let with_before: Vec<(&str, Pieces, Option<&KeyFragment>)> = pieces
        .into_iter()
        .map(|(key, pieces)| (key, pieces, before.and(fragment_before.get(key))))
        .collect();
    let hosts = 0..table.virtual_hosts.len();
    fragments_of(virtual_hosts, table, before, with_before, hosts)
        .map(|(key, fragment)| (Arc::from(key), fragment))
        .collect()
}

/// Each key's fragment from its pieces: the one it had before (`was`, in
/// `before`) when the pieces are the same encodings in virtual hosts of the
/// same name and domains, else hashed, its clusters read from the routes of
/// `hosts` (which hold every route of those keys).
fn fragments_of<'k>(
    virtual_hosts: &[EncodedVirtualHost],
    table: &ir::RouteTable,
    before: Option<&EncodedTable>,
    keys: Vec<(&'k str, Pieces, Option<&KeyFragment>)>,
    hosts: impl Iterator<Item = usize>,
) -> impl Iterator<Item = (&'k str, KeyFragment)> {
    let same_host = |i: usize, j: usize, b: &EncodedTable| {
        let (now, was) = (&virtual_hosts[i], &b.virtual_hosts[j]);
        now.name == was.name && now.domains == was.domains
    };
    let kept: Vec<(&str, Pieces, Option<&KeyFragment>)> = keys
        .into_iter()
        .map(|(key, pieces, was)| {
            let kept = before.zip(was).filter(|(b, was)| {
                was.pieces.len() == pieces.len()
                    && was
                        .pieces
                        .iter()
                        .zip(&pieces)
                        .all(|((j, x), (i, y))| Arc::ptr_eq(x, y) && same_host(*i, *j, b))
            });
            (key, pieces, kept.map(|(_, was)| was))
        })
        .collect();
    // The clusters of the keys whose routes changed, from their IR routes.
    let changed: BTreeSet<&str> = kept
        .iter()
        .filter(|(_, _, kept)| kept.is_none())
        .map(|(key, _, _)| *key)
        .collect();
    let mut clusters = if changed.is_empty() {
        BTreeMap::new()
    } else {
        key_clusters(table, hosts, &changed)
    };
    kept.into_iter().map(move |(key, pieces, kept)| {
        let fragment = match kept {
            Some(was) => KeyFragment {
                pieces,
                hash: was.hash.clone(),
                clusters: was.clusters.clone(),
            },
            None => {
                let mut f = Fragments::default();
                for (i, encoded) in &pieces {
                    let vh = &virtual_hosts[*i];
                    f.add(key, &[vh.name.as_bytes(), vh.domains.as_bytes(), encoded]);
                }
                KeyFragment {
                    pieces,
                    hash: f.finish().into_values().next().unwrap_or_else(|| "".into()),
                    clusters: Arc::new(clusters.remove(key).unwrap_or_default()),
                }
            }
        };
        (key, fragment)
    })
}

/// The virtual hosts of a table whose routes may have moved since the
/// table's encoding before, when its virtual hosts are otherwise the same:
/// as many, each with the name and domains it had at its place, and no
/// frame bringing routes of its own (those are encoded anew every time).
/// Every other host is the same encoding (the same `Arc`s): a key with no
/// route in a changed host, now or before, has the fragment it had.
struct ChangedHosts {
    /// Ascending.
    hosts: Vec<usize>,
}

impl ChangedHosts {
    fn between(
        now: &[EncodedVirtualHost],
        (table, was): (&ir::RouteTable, &EncodedTable),
    ) -> Option<Self> {
        let before = &was.virtual_hosts;
        if now.len() != before.len() || table.virtual_hosts.len() != before.len() {
            return None;
        }
        let mut hosts = Vec::new();
        for (i, (n, b)) in now.iter().zip(before).enumerate() {
            if n.name != b.name || n.domains != b.domains {
                return None;
            }
            if !n.frame.own.is_empty() || !b.frame.own.is_empty() {
                return None;
            }
            if !Arc::ptr_eq(&n.routes, &b.routes) || !Arc::ptr_eq(&n.frame, &b.frame) {
                hosts.push(i);
            }
        }
        Some(ChangedHosts { hosts })
    }

    /// The fragments before (`was`, the table's encoding before, whose IR is
    /// `table_before`) with those of the keys that have a route in a changed
    /// host, now or before, made again: what [`key_fragments`] gives, at the
    /// cost of the changed hosts' routes.
    fn patch(
        &self,
        virtual_hosts: &[EncodedVirtualHost],
        table: &ir::RouteTable,
        (table_before, was): (&ir::RouteTable, &EncodedTable),
    ) -> BTreeMap<Arc<str>, KeyFragment> {
        let mut fragments = was.fragments.clone();
        if self.hosts.is_empty() {
            return fragments;
        }
        let changed = |i: usize| self.hosts.binary_search(&i).is_ok();
        // Each changed host's pieces now, by key, in host then route order.
        let mut pieces: BTreeMap<&str, Pieces> = BTreeMap::new();
        for &i in &self.hosts {
            for (key, encoded) in keyed_routes(&virtual_hosts[i], &table.virtual_hosts[i]) {
                pieces.entry(key).or_default().push((i, encoded.clone()));
            }
            // Keys that had a route there before, and may have none now.
            for (key, _) in keyed_routes(&was.virtual_hosts[i], &table_before.virtual_hosts[i]) {
                pieces.entry(key).or_default();
            }
        }
        let keys: Vec<(&str, Pieces, Option<&KeyFragment>)> = pieces
            .into_iter()
            .map(|(key, in_changed)| {
                fragments.remove(key);
                let was = was.fragments.get(key);
                // Its pieces in unchanged hosts are where they were.
                let mut all: Pieces = was
                    .iter()
                    .flat_map(|w| &w.pieces)
                    .filter(|(j, _)| !changed(*j))
                    .cloned()
                    .chain(in_changed)
                    .collect();
                all.sort_by_key(|(i, _)| *i);
                (key, all, was)
            })
            .filter(|(_, all, _)| !all.is_empty())
            .collect();
        let hosts: BTreeSet<usize> = keys
            .iter()
            .flat_map(|(_, all, _)| all.iter().map(|(i, _)| *i))
            .collect();
        let made = fragments_of(virtual_hosts, table, Some(was), keys, hosts.into_iter());
        for (key, fragment) in made {
            fragments.insert(Arc::from(key), fragment);
        }
        fragments
    }
}

/// A virtual host's IR routes that a route key owns, each with its key and
/// encoding, in route order.
fn keyed_routes<'a>(
    vh: &'a EncodedVirtualHost,
    ir_vh: &'a ir::VirtualHost,
) -> impl Iterator<Item = (&'a str, &'a Arc<[u8]>)> {
    (ir_vh.routes.iter().zip(vh.key_lens.iter()))
        .zip(vh.routes.iter())
        .filter_map(|((r, len), encoded)| Some((&r.name[..(*len)? as usize], encoded)))
}

/// The clusters the routes of each of `keys` name in `table`;
/// `hosts` are the virtual hosts to read: at least every one with a route of
/// those keys.
fn key_clusters<'t>(
    table: &'t ir::RouteTable,
    hosts: impl Iterator<Item = usize>,
    keys: &BTreeSet<&str>,
) -> BTreeMap<String, KeyClusters> {
    let mut named: BTreeMap<&str, (BTreeSet<&'t str>, BTreeSet<&'t str>)> = BTreeMap::new();
    let routes = hosts.flat_map(|i| &table.virtual_hosts[i].routes);
    for r in routes {
        let ir::RouteAction::Forward(f) = &r.action else {
            continue;
        };
        let key = ir::names::route_key_of(&r.name).unwrap_or(&r.name);
        if !keys.contains(key) {
            continue;
        }
        let (forward, mirror) = named.entry(key).or_default();
        forward.extend(f.backends.iter().map(|b| b.cluster.as_str()));
        mirror.extend(f.mirrors.iter().map(|m| m.cluster.as_str()));
    }
    let mut shared: HashMap<&str, Arc<str>> = HashMap::new();
    let mut owned = |names: BTreeSet<&'t str>| -> Vec<Arc<str>> {
        names
            .into_iter()
            .map(|n| shared.entry(n).or_insert_with(|| n.into()).clone())
            .collect()
    };
    named
        .into_iter()
        .map(|(key, (forward, mirror))| {
            let clusters = KeyClusters {
                forward: owned(forward),
                mirror: owned(mirror),
            };
            (key.to_string(), clusters)
        })
        .collect()
}

impl EncodedVirtualHost {
    /// Its Envoy routes' encodings, in order: the IR routes', then the frame's.
    fn routes(&self) -> impl Iterator<Item = &[u8]> {
        self.routes
            .iter()
            .map(|r| &r[..])
            .chain(self.frame.own.iter().map(|(_, r)| &r[..]))
    }

    /// The length of its encoding.
    fn len(&self) -> usize {
        self.frame.head.len()
            + self.routes().map(|r| field_len(r.len())).sum::<usize>()
            + self.frame.tail.len()
    }
}

/// The encodings of `vh`'s routes, each taken from `earlier` (the same
/// virtual host before, and its encodings) when the route there is equal.
fn encode_routes(
    vh: &ir::VirtualHost,
    scheme: Scheme,
    earlier: Option<(&ir::VirtualHost, &EncodedVirtualHost)>,
    count: &mut RouteCount,
) -> Vec<Arc<[u8]>> {
    // Built only when a route is not where it was.
    let mut by_name: Option<HashMap<&str, usize>> = None;
    vh.routes
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let cached = earlier.and_then(|(old, encoded)| {
                let j = if old.routes.get(i).is_some_and(|o| o.name == r.name) {
                    i
                } else {
                    let index = by_name.get_or_insert_with(|| {
                        old.routes
                            .iter()
                            .enumerate()
                            .map(|(j, o)| (o.name.as_str(), j))
                            .collect()
                    });
                    *index.get(r.name.as_str())?
                };
                (old.routes[j] == *r).then(|| encoded.routes[j].clone())
            });
            match cached {
                Some(bytes) => {
                    count.reused += 1;
                    bytes
                }
                None => {
                    count.encoded += 1;
                    route::route(r, vh, scheme).encode_to_vec().into()
                }
            }
        })
        .collect()
}

/// Where a virtual host was in the table before, by name. Tables list their
/// virtual hosts sorted by name, so a walk finds each one where the last left
/// off; an index is built only if a name is not found that way.
struct EarlierHost<'t> {
    table: Option<&'t ir::RouteTable>,
    next: usize,
    by_name: Option<HashMap<&'t str, usize>>,
}

impl<'t> EarlierHost<'t> {
    fn new(table: Option<&'t ir::RouteTable>) -> Self {
        EarlierHost {
            table,
            next: 0,
            by_name: None,
        }
    }

    fn find(&mut self, name: &str) -> Option<usize> {
        let hosts = &self.table?.virtual_hosts;
        while self.next < hosts.len() && hosts[self.next].name.as_str() < name {
            self.next += 1;
        }
        if hosts.get(self.next).is_some_and(|h| h.name == name) {
            return Some(self.next);
        }
        let index = self.by_name.get_or_insert_with(|| {
            hosts
                .iter()
                .enumerate()
                .map(|(i, h)| (h.name.as_str(), i))
                .collect()
        });
        index.get(name).copied()
    }
}

/// `vh`'s frame: its Envoy virtual host with the routes taken out.
fn virtual_host_frame(vh: &ir::VirtualHost) -> Frame {
    let v = route::virtual_host_frame(vh);
    let head = VirtualHost {
        name: v.name.clone(),
        domains: v.domains.clone(),
        ..Default::default()
    }
    .encode_to_vec();
    let own = v
        .routes
        .iter()
        .map(|r| (r.name.clone(), r.encode_to_vec()))
        .collect();
    let tail = VirtualHost {
        name: String::new(),
        domains: vec![],
        routes: vec![],
        ..v
    }
    .encode_to_vec();
    Frame { head, own, tail }
}

/// The length of a length-delimited field of `len` bytes (tags below 16).
fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// Writes the key and length of a length-delimited field.
fn field(out: &mut Vec<u8>, tag: u32, len: usize) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
}

/// The route table of `gw` named `name`.
pub(crate) fn route_table<'a>(gw: &'a ir::Gateway, name: &str) -> Option<&'a ir::RouteTable> {
    gw.ports
        .iter()
        .flat_map(|p| {
            p.route_table
                .iter()
                .chain(p.tls_chains.iter().filter_map(|c| c.route_table.as_ref()))
        })
        .find(|t| t.name == name)
}

#[cfg(test)]
#[path = "route_cache_tests.rs"]
mod tests;
