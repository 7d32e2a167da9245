//! The one path, end to end: Envoys connected to one ADS server ACK and NACK
//! ([`Fleet`]), each one's [`local_report`] is joined ([`fleet_served`]); the
//! gate's behaviours as standalone sees them, one test each. (The join over
//! hand-written reports, as the leader sees them: `join_tests.rs`.)

use super::*;
use aether_ads::{Event, FleetStream, Nack, Protocol, Versions};
use aether_ir::{self as ir, Pending, Rejection, fixtures};
use aether_xds::ResourceType;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Gateways `infra/<name>`, each one HTTP port whose route table carries the
/// given routes (`HTTPRoute/app/<route>`, path prefix).
fn mk_fleet_snapshot(gateways: &[(&str, &[(&str, &str)])]) -> Arc<Snapshot> {
    let names: BTreeSet<&str> = gateways
        .iter()
        .flat_map(|(_, routes)| routes.iter().map(|(n, _)| *n))
        .collect();
    let clusters = names
        .into_iter()
        .map(|name| fixtures::service_cluster(name, "10.1.0.1"))
        .collect();
    let gateways = gateways
        .iter()
        .map(|(gw, routes)| {
            let rules = routes.iter().map(|(n, p)| fixtures::forward_route(n, p, n));
            fixtures::http_gateway(gw, rules.collect())
        })
        .collect();
    Arc::new(aether_xds::build(&ir::Ir::new(gateways, clusters)))
}

fn web() -> ObjectRef {
    ObjectRef::new("infra", "web")
}

fn keys(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| format!("HTTPRoute/app/{n}")).collect()
}

fn ack_everything(stream: &FleetStream, snapshot: &Snapshot) {
    ack(stream, snapshot, &ResourceType::ALL);
}

fn ack(stream: &FleetStream, snapshot: &Snapshot, types: &[ResourceType]) {
    for &ty in types {
        let versions: Versions = snapshot
            .of_type(ty)
            .map(|r| (r.name.clone(), r.version.clone()))
            .collect();
        stream.record(&Event::Acked { ty, versions });
    }
}

/// Envoy rejects Gateway `gw`'s route table as `snapshot` has it.
fn nack_routes(stream: &FleetStream, snapshot: &Snapshot, gw: &str, message: &str) {
    let table = ir::names::route_table("infra", gw, 80, None);
    let version = snapshot
        .version_of(ResourceType::Route, &table)
        .unwrap()
        .to_string();
    stream.record(&Event::Nacked {
        ty: ResourceType::Route,
        nack: Nack {
            version: version.clone(),
            message: message.into(),
            rejected: [(table, version)].into(),
        },
    });
}

#[test]
fn an_envoy_that_has_not_acked_holds_the_gateway_back_and_one_gone_counts_no_more() {
    let v1 = mk_fleet_snapshot(&[("web", &[("a", "/a")])]);
    let fleet = Fleet::new();
    fleet.remember(&v1);
    assert_eq!(
        fleet_served(&fleet, &v1)[&web()],
        Served::whole(AckState::Pending),
        "no Envoy connected"
    );
    let a = fleet.connect("node-a", Protocol::Sotw);
    let b = fleet.connect("node-b", Protocol::Delta);
    ack_everything(&a, &v1);
    let s = &fleet_served(&fleet, &v1)[&web()];
    assert_eq!(s.gateway, AckState::Pending, "node-b has ACKed nothing");
    assert!(!s.serves_route("HTTPRoute/app/a"));

    drop(b);
    let s = &fleet_served(&fleet, &v1)[&web()];
    assert_eq!(s.gateway, AckState::Acked, "only node-a is left");
    assert_eq!(s.pending, Pending::Only(BTreeSet::new()));

    drop(a);
    assert_eq!(
        fleet_served(&fleet, &v1)[&web()],
        Served::whole(AckState::Pending),
        "a reconnect starts from nothing"
    );
}

#[test]
fn a_partial_ack_serves_the_routes_it_left_unchanged() {
    let v1 = mk_fleet_snapshot(&[("web", &[("a", "/a"), ("b", "/b")])]);
    let v2 = mk_fleet_snapshot(&[("web", &[("a", "/a"), ("b", "/b2"), ("c", "/c")])]);
    let fleet = Fleet::new();
    let node = fleet.connect("node-a", Protocol::Sotw);
    fleet.remember(&v1);
    ack_everything(&node, &v1);
    fleet.remember(&v2);
    let s = &fleet_served(&fleet, &v2)[&web()];
    assert_eq!(s.gateway, AckState::Acked, "the listener is unchanged");
    assert_eq!(s.pending, Pending::Only(keys(&["b", "c"])), "a is served");

    ack_everything(&node, &v2);
    let s = &fleet_served(&fleet, &v2)[&web()];
    assert_eq!(s.pending, Pending::Only(BTreeSet::new()));
}

#[test]
fn a_nack_stays_on_its_gateway_naming_the_node_and_envoys_words() {
    let v1 = mk_fleet_snapshot(&[("other", &[("o", "/o")]), ("web", &[("a", "/a")])]);
    let v2 = mk_fleet_snapshot(&[
        ("other", &[("o", "/o2")]),
        ("web", &[("a", "/a"), ("bad", "/bad")]),
    ]);
    let fleet = Fleet::new();
    let node = fleet.connect("node-a", Protocol::Delta);
    fleet.remember(&v1);
    ack_everything(&node, &v1);
    fleet.remember(&v2);
    // Envoy takes all of v2 but web's route table (Delta: per resource),
    // which it keeps at v1.
    let web_table = ir::names::route_table("infra", "web", 80, None);
    let but_web_table: Versions = v2
        .of_type(ResourceType::Route)
        .map(|r| {
            let at = if r.name == web_table { &v1 } else { &v2 };
            let version = at.version_of(ResourceType::Route, &r.name).unwrap();
            (r.name.clone(), version.to_string())
        })
        .collect();
    let others: Vec<ResourceType> = ResourceType::ALL
        .into_iter()
        .filter(|t| *t != ResourceType::Route)
        .collect();
    ack(&node, &v2, &others);
    node.record(&Event::Acked {
        ty: ResourceType::Route,
        versions: but_web_table,
    });
    nack_routes(&node, &v2, "web", "invalid regex");

    let served = fleet_served(&fleet, &v2);
    let AckState::Nacked(Rejection { node, message }) = &served[&web()].gateway else {
        panic!("expected Nacked, got {:?}", served[&web()].gateway);
    };
    assert_eq!(node, "node-a");
    assert!(message.starts_with("RDS version ") && message.ends_with(": invalid regex"));
    assert!(
        served[&web()].serves_route("HTTPRoute/app/a"),
        "from before"
    );
    let other = &served[&ObjectRef::new("infra", "other")];
    assert_eq!(other.gateway, AckState::Acked, "the NACK is not about it");
    assert!(other.serves_route("HTTPRoute/app/o"));
}

#[test]
fn a_refused_route_is_served_as_it_was_with_envoys_words() {
    let fleet = Fleet::new();
    let node = fleet.connect("node-a", Protocol::Delta);
    let s1 = mk_fleet_snapshot(&[("web", &[("a", "/a"), ("b", "/b")])]);
    ack_everything(&node, &fleet.serve(&s1));
    let s2 = mk_fleet_snapshot(&[("web", &[("a", "/a2"), ("b", "/bad")])]);
    // Envoy refuses every table with b's change; the hold-back finds it.
    for _ in 0..6 {
        let sent = fleet.serve(&s2);
        let table = ir::names::route_table("infra", "web", 80, None);
        let rt = &sent.resources[&ResourceType::Route][&table];
        if rt.body.value.windows(4).any(|w| w == b"/bad") {
            nack_routes(&node, &sent, "web", "regex too big");
        } else {
            ack_everything(&node, &sent);
        }
    }
    let s = &fleet_served(&fleet, &s2)[&web()];
    assert_eq!(s.gateway, AckState::Acked, "{s:?}");
    assert!(s.serves_route("HTTPRoute/app/a"), "a's change is served");
    assert!(!s.serves_route("HTTPRoute/app/b"));
    assert!(
        s.refused["HTTPRoute/app/b"] == Rejection::new("node-a", "regex too big"),
        "{s:?}"
    );
}

#[test]
fn a_node_serving_everything_reports_its_snapshot_and_each_gateways_hash() {
    let v1 = mk_fleet_snapshot(&[("web", &[("a", "/a")]), ("api", &[("b", "/b")])]);
    let fleet = Fleet::new();
    fleet.remember(&v1);
    let a = fleet.connect("node-a", Protocol::Delta);
    ack_everything(&a, &v1);
    let report = local_report("node-a", &fleet, &v1);
    assert_eq!(report.acked_snapshot, v1.version);
    let hashes: BTreeMap<String, String> = v1
        .gateways
        .iter()
        .map(|(gw, r)| (gw.to_string(), r.hash.clone()))
        .collect();
    assert_eq!(
        report.acked.clone().into_iter().collect::<BTreeMap<_, _>>(),
        hashes
    );
}
