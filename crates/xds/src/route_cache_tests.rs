//! An assembled table is the prost encoding of the table, byte for byte, cold
//! or warm; a warm encoding encodes only the routes that changed.

use super::*;
use std::path::Path;

/// Every route table of every golden IR (this crate's and the workspace's).
fn golden_tables() -> Vec<(String, ir::RouteTable)> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut tables = Vec::new();
    for root in [crate_dir.join("testdata"), crate_dir.join("../../testdata")] {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        let mut dirs: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        dirs.sort();
        for dir in dirs {
            let Ok(text) = std::fs::read_to_string(dir.join("ir.yaml")) else {
                continue;
            };
            let ir: ir::Ir = serde_norway::from_str(&text).expect("golden IR parses");
            for gw in &ir.gateways {
                for port in &gw.ports {
                    let chains = port
                        .tls_chains
                        .iter()
                        .filter_map(|c| c.route_table.as_ref());
                    for t in port.route_table.iter().chain(chains) {
                        tables.push((dir.display().to_string(), t.clone()));
                    }
                }
            }
        }
    }
    assert!(tables.len() > 50, "golden tables: {}", tables.len());
    tables
}

fn fresh(t: &ir::RouteTable, scheme: Scheme) -> EncodedTable {
    EncodedTable::new(t, scheme, None, &mut RouteCount::default())
}

#[test]
fn an_assembled_table_is_the_prost_encoding_of_the_table() {
    for (case, t) in golden_tables() {
        for scheme in [Scheme::Http, Scheme::Https] {
            let rc = route::route_configuration(&t, scheme);
            let encoded = fresh(&t, scheme);
            assert!(encoded.bytes() == rc.encode_to_vec(), "{case}: {}", t.name);
            assert_eq!(encoded.fragments(), route::fragments(&rc), "{case}");
        }
    }
}

/// Virtual host `i` of `t`, its own copy to change.
fn host(t: &mut ir::RouteTable, i: usize) -> &mut ir::VirtualHost {
    Arc::make_mut(&mut t.virtual_hosts[i])
}

#[test]
fn a_warm_table_encodes_only_changed_routes_and_gives_the_same_bytes() {
    let (_, table) = golden_tables()
        .into_iter()
        .max_by_key(|(_, t)| {
            t.virtual_hosts
                .iter()
                .map(|v| v.routes.len())
                .sum::<usize>()
        })
        .unwrap();
    let vh = table
        .virtual_hosts
        .iter()
        .position(|v| v.routes.len() >= 2)
        .expect("a virtual host with two routes");
    let routes = table.virtual_hosts[vh].routes.len();
    let before = fresh(&table, Scheme::Http);

    // Changed: the first route's path.
    let mut changed = table.clone();
    Arc::make_mut(&mut host(&mut changed, vh).routes[0])
        .matcher
        .path = ir::PathMatch::Exact("/changed".into());
    // Reordered: the last route first.
    let mut reordered = table.clone();
    host(&mut reordered, vh).routes.rotate_right(1);
    // Removed: the first route.
    let mut removed = table.clone();
    host(&mut removed, vh).routes.remove(0);
    // Added: a copy of the first route under a new name.
    let mut added = table.clone();
    let mut extra = added.virtual_hosts[vh].routes[0].clone();
    Arc::make_mut(&mut extra).name = "HTTPRoute/default/added/rule/0/match/0".into();
    host(&mut added, vh).routes.insert(1, extra);
    // Moved: another virtual host's domains (its redirects read them).
    let mut domains = table.clone();
    host(&mut domains, vh).domains.push("moved.example".into());

    let all: usize = table.virtual_hosts.iter().map(|v| v.routes.len()).sum();
    // Unchanged: every virtual host the same `Arc`, each taken whole.
    for (what, t, encoded) in [
        ("unchanged", &table, 0),
        ("changed", &changed, 1),
        ("reordered", &reordered, 0),
        ("removed", &removed, 0),
        ("added", &added, 1),
        ("domains", &domains, routes),
    ] {
        let mut count = RouteCount::default();
        let warm = EncodedTable::new(t, Scheme::Http, Some((&table, &before)), &mut count);
        assert_eq!(count.encoded, encoded, "{what}");
        assert_eq!(
            count.reused + count.encoded,
            t.virtual_hosts
                .iter()
                .map(|v| v.routes.len())
                .sum::<usize>(),
            "{what}"
        );
        assert!(warm.bytes() == fresh(t, Scheme::Http).bytes(), "{what}");
        assert_eq!(
            warm.fragments(),
            fresh(t, Scheme::Http).fragments(),
            "{what}"
        );
    }
    // A second virtual host (a copy under another name), then the hosts out
    // of name order (the walk by name falls back to an index) or the first
    // one gone: each host left is found where it was, nothing encoded again.
    let mut two = table.clone();
    let mut copy = ir::VirtualHost::clone(&two.virtual_hosts[vh]);
    copy.name = "zz.example".into();
    copy.domains = vec!["zz.example".into()];
    two.virtual_hosts.push(Arc::new(copy));
    let two_before = fresh(&two, Scheme::Http);
    let mut reversed = two.clone();
    reversed.virtual_hosts.reverse();
    let mut first_gone = two.clone();
    first_gone.virtual_hosts.remove(0);
    for (what, t) in [
        ("hosts reversed", &reversed),
        ("first host gone", &first_gone),
    ] {
        let mut count = RouteCount::default();
        let warm = EncodedTable::new(t, Scheme::Http, Some((&two, &two_before)), &mut count);
        assert_eq!(count.encoded, 0, "{what}");
        assert!(warm.bytes() == fresh(t, Scheme::Http).bytes(), "{what}");
        assert_eq!(
            warm.fragments(),
            fresh(t, Scheme::Http).fragments(),
            "{what}"
        );
    }
    // Another scheme: every route again (a redirect keeps the scheme).
    let mut count = RouteCount::default();
    EncodedTable::new(&table, Scheme::Https, Some((&table, &before)), &mut count);
    assert_eq!(count.encoded, all);
}

/// One key's fragment as tests compare them: its key, hash and clusters,
/// and its pieces (host, bytes).
type Compared = (String, String, Vec<Arc<str>>, Vec<(usize, Vec<u8>)>);

fn key_fragments_of(t: &EncodedTable) -> Vec<Compared> {
    t.keys()
        .iter()
        .map(|(key, f)| {
            let pieces = f.pieces.iter().map(|(i, b)| (*i, b.to_vec())).collect();
            (
                key.to_string(),
                f.hash.to_string(),
                f.clusters.forward.clone(),
                pieces,
            )
        })
        .collect()
}

#[test]
fn a_key_in_two_hosts_changed_in_one_gets_what_a_fresh_table_gives() {
    // Every golden table, its first virtual host copied under another name:
    // each key of that host has routes in both.
    for (case, table) in golden_tables() {
        let Some(vh) = table
            .virtual_hosts
            .iter()
            .position(|v| !v.routes.is_empty())
        else {
            continue;
        };
        let mut two = table.clone();
        let mut copy = ir::VirtualHost::clone(&two.virtual_hosts[vh]);
        copy.name = "zz.example".into();
        copy.domains = vec!["zz.example".into()];
        two.virtual_hosts.push(Arc::new(copy));
        let last = two.virtual_hosts.len() - 1;
        let before = fresh(&two, Scheme::Http);
        // In the copy only: the first route's path changed; then the first
        // route gone; then every route gone (its keys stay in the first host).
        let mut changed = two.clone();
        Arc::make_mut(&mut host(&mut changed, last).routes[0])
            .matcher
            .path = ir::PathMatch::Exact("/changed".into());
        let mut removed = two.clone();
        host(&mut removed, last).routes.remove(0);
        let mut emptied = two.clone();
        host(&mut emptied, last).routes.clear();
        // A route no key owns (a TLS host's misdirected request) first in
        // the copy, then the route after it changed.
        let mut keyless = two.clone();
        let mut misdirected = keyless.virtual_hosts[last].routes[0].clone();
        Arc::make_mut(&mut misdirected).name = "misdirected/zz.example".into();
        host(&mut keyless, last).routes.insert(0, misdirected);
        let keyless_before = fresh(&keyless, Scheme::Http);
        let mut keyless_changed = keyless.clone();
        Arc::make_mut(&mut host(&mut keyless_changed, last).routes[1])
            .matcher
            .path = ir::PathMatch::Exact("/changed".into());
        for (what, t, was, was_encoded) in [
            ("changed", &changed, &two, &before),
            ("removed", &removed, &two, &before),
            ("emptied", &emptied, &two, &before),
            ("keyless", &keyless_changed, &keyless, &keyless_before),
        ] {
            let mut count = RouteCount::default();
            let warm = EncodedTable::new(t, Scheme::Http, Some((was, was_encoded)), &mut count);
            let fresh = fresh(t, Scheme::Http);
            assert!(warm.bytes() == fresh.bytes(), "{case}: {what}");
            let rc = route::route_configuration(t, Scheme::Http);
            assert_eq!(warm.fragments(), route::fragments(&rc), "{case}: {what}");
            assert_eq!(
                key_fragments_of(&warm),
                key_fragments_of(&fresh),
                "{case}: {what}"
            );
        }
    }
}
