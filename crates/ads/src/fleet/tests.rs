//! Fleet scripts: streams connect, ACK, NACK and leave; what each node serves
//! follows. (The gate over nodes, one or many: `aether_report`'s tests.)

use super::{AckState, Fleet, FleetStream, Protocol};
use crate::event::{Event, Nack};
use crate::fixtures::*;
use crate::subscription::Versions;
use aether_xds::{ResourceType, Snapshot};
use std::sync::Arc;

/// Two Gateways: a/one uses c1, l80, r80; b/two uses c2, l443, r443.
fn snapshot(rev_r80: u32) -> Arc<Snapshot> {
    mk_base_snapshot(
        &[(LDS, "l443", 1), (RDS, "r80", rev_r80), (RDS, "r443", 1)],
        &[
            (
                "a/one",
                &[(CDS, "c1"), (EDS, "c1"), (LDS, "l80"), (RDS, "r80")],
            ),
            (
                "b/two",
                &[(CDS, "c2"), (EDS, "c2"), (LDS, "l443"), (RDS, "r443")],
            ),
        ],
    )
}

/// An ACK of everything of `ty` in `snap`.
fn ack_all(snap: &Snapshot, ty: ResourceType) -> Event {
    let versions: Versions = snap
        .of_type(ty)
        .map(|r| (r.name.clone(), r.version.clone()))
        .collect();
    Event::Acked { ty, versions }
}

fn ack_everything(stream: &FleetStream, snap: &Snapshot) {
    for ty in [CDS, EDS, LDS, RDS] {
        stream.record(&ack_all(snap, ty));
    }
}

/// What node `node` serves of Gateway `gateway` of `snap`: whole, and its own state.
fn of(fleet: &Fleet, node: &str, snap: &Snapshot, gateway: &str) -> (bool, AckState) {
    let s = fleet.served_by(node, snap).remove(&gw(gateway)).unwrap();
    (s.whole, s.gateway)
}

#[test]
fn each_node_serves_what_its_own_envoy_acked() {
    let fleet = Fleet::new();
    let snap = snapshot(1);
    let one = gw("a/one");
    let a = fleet.connect("node-a", Protocol::Sotw);
    let b = fleet.connect("node-b", Protocol::Delta);
    ack_everything(&a, &snap);
    assert_eq!(
        of(&fleet, "node-a", &snap, "a/one"),
        (true, AckState::Acked)
    );
    assert_eq!(
        of(&fleet, "node-b", &snap, "a/one"),
        (false, AckState::Pending),
        "node-b has ACKed nothing"
    );
    let acks = fleet.gateway_acks(&snap);
    assert_eq!(
        acks["node-a"][&one].as_deref(),
        Some(snap.gateways[&one].hash.as_str())
    );
    assert_eq!(acks["node-b"][&one], None);

    // A new route table for a/one: b/two stays whole, a/one is not.
    ack_everything(&b, &snap);
    let next = snapshot(2);
    assert!(!of(&fleet, "node-a", &next, "a/one").0);
    assert!(of(&fleet, "node-a", &next, "b/two").0);
    assert_ne!(
        fleet.gateway_acks(&next)["node-a"][&one].as_deref(),
        Some(next.gateways[&one].hash.as_str()),
        "the old ACK hashes to the old Gateway hash"
    );
}

#[test]
fn a_nack_is_its_nodes_and_its_gateways_until_that_node_acks() {
    let fleet = Fleet::new();
    let snap = snapshot(1);
    let next = snapshot(2);
    let a = fleet.connect("node-a", Protocol::Sotw);
    let b = fleet.connect("node-b", Protocol::Sotw);
    ack_everything(&a, &snap);
    ack_everything(&b, &snap);

    // node-a takes the new route table; node-b rejects it.
    a.record(&ack_all(&next, RDS));
    b.record(&Event::Nacked {
        ty: RDS,
        nack: Nack {
            version: "0123456789abcdef".into(),
            message: "duplicate domain".into(),
            rejected: [(
                "r80".to_string(),
                next.version_of(RDS, "r80").unwrap().to_string(),
            )]
            .into(),
        },
    });
    let (_, AckState::Nacked(rejection)) = of(&fleet, "node-b", &next, "a/one") else {
        panic!(
            "expected Nacked: {:?}",
            of(&fleet, "node-b", &next, "a/one")
        );
    };
    assert_eq!(rejection.node, "node-b");
    assert_eq!(
        rejection.message,
        "RDS version 0123456789ab: duplicate domain"
    );
    assert_eq!(
        of(&fleet, "node-a", &next, "a/one"),
        (true, AckState::Acked)
    );
    // The rejection is about a/one's route table, not b/two.
    assert_eq!(
        of(&fleet, "node-b", &next, "b/two"),
        (true, AckState::Acked)
    );

    let view = fleet.debug_view();
    let nack = view.nodes["node-b"]
        .last_nack
        .as_ref()
        .expect("last NACK shown");
    assert_eq!(nack.message, "duplicate domain");
    assert_eq!(nack.resources, ["r80"]);
    assert!(view.nodes["node-a"].last_nack.is_none());

    b.record(&ack_all(&next, RDS));
    assert_eq!(
        of(&fleet, "node-b", &next, "a/one"),
        (true, AckState::Acked)
    );
    assert!(fleet.debug_view().nodes["node-b"].last_nack.is_none());
}

#[test]
fn a_disconnected_node_drops_out_and_a_reconnect_starts_empty() {
    let fleet = Fleet::new();
    let snap = snapshot(1);
    let one = gw("a/one");
    let mut changes = fleet.subscribe();
    let a = fleet.connect("node-a", Protocol::Sotw);
    let b = fleet.connect("node-b", Protocol::Sotw);
    ack_everything(&a, &snap);
    assert!(changes.has_changed().unwrap());
    changes.mark_unchanged();

    drop(b);
    assert!(changes.has_changed().unwrap(), "a disconnect is a change");
    assert_eq!(fleet.nodes().into_iter().collect::<Vec<_>>(), ["node-a"]);
    assert_eq!(
        fleet.debug_view().nodes.keys().collect::<Vec<_>>(),
        ["node-a"]
    );

    drop(a);
    assert!(fleet.nodes().is_empty());
    let again = fleet.connect("node-a", Protocol::Delta);
    assert_eq!(fleet.gateway_acks(&snap)["node-a"][&one], None);
    assert_eq!(
        of(&fleet, "node-a", &snap, "a/one"),
        (false, AckState::Pending)
    );
    ack_everything(&again, &snap);
    assert_eq!(
        of(&fleet, "node-a", &snap, "a/one"),
        (true, AckState::Acked)
    );
}

#[test]
fn streams_of_one_node_merge() {
    let fleet = Fleet::new();
    let snap = snapshot(1);
    let old = fleet.connect("node-a", Protocol::Sotw);
    let new = fleet.connect("node-a", Protocol::Sotw);
    for ty in [CDS, EDS] {
        old.record(&ack_all(&snap, ty));
    }
    for ty in [LDS, RDS] {
        new.record(&ack_all(&snap, ty));
    }
    assert_eq!(
        of(&fleet, "node-a", &snap, "a/one"),
        (true, AckState::Acked)
    );
    let view = fleet.debug_view();
    assert_eq!(view.nodes.len(), 1);
    assert_eq!(view.nodes["node-a"].streams, 2);
    assert_eq!(
        view.nodes["node-a"].acked.keys().collect::<Vec<_>>(),
        ["CDS", "EDS", "LDS", "RDS"]
    );
}

#[test]
fn debug_view_serializes_and_metrics_count() {
    let fleet = Fleet::new();
    let snap = snapshot(1);
    let a = fleet.connect("node-a", Protocol::Delta);
    a.record(&ack_all(&snap, LDS));
    a.record_push(LDS, Protocol::Delta);
    a.record(&Event::Nacked {
        ty: CDS,
        nack: Nack {
            version: "v".into(),
            message: "bad cluster".into(),
            rejected: Versions::new(),
        },
    });
    let json = serde_json::to_value(fleet.debug_view()).unwrap();
    let node = &json["nodes"]["node-a"];
    assert_eq!(node["last_nack"]["message"], "bad cluster");
    assert_eq!(node["last_nack"]["type"], "CDS");
    assert_eq!(
        node["acked"]["LDS"]["resources"]["l80"],
        snap.version_of(LDS, "l80").unwrap()
    );

    let m = fleet.metrics();
    assert_eq!(m.connected(Protocol::Delta), 1);
    assert_eq!(m.connected(Protocol::Sotw), 0);
    assert_eq!((m.acks(LDS), m.nacks(CDS), m.acks(CDS)), (1, 1, 0));
    assert_eq!(m.pushes(LDS, Protocol::Delta), 1);
    assert_eq!(m.pushes(LDS, Protocol::Sotw), 0);
    drop(a);
    assert_eq!(m.connected(Protocol::Delta), 0);
    assert_eq!(m.streams(Protocol::Delta), 1);
}

/// The whole-Gateway view at the scale the design names: 1,000 Gateways × 100 nodes.
#[test]
fn gateway_state_at_fleet_scale() {
    let gateways = 1000;
    let mut resources = Vec::new();
    let names: Vec<[String; 4]> = (0..gateways)
        .map(|i| {
            [
                format!("c{i}"),
                format!("c{i}"),
                format!("l{i}"),
                format!("r{i}"),
            ]
        })
        .collect();
    for n in &names {
        resources.push((CDS, n[0].as_str(), 1));
        resources.push((EDS, n[1].as_str(), 1));
        resources.push((LDS, n[2].as_str(), 1));
        resources.push((RDS, n[3].as_str(), 1));
    }
    let members: Vec<(String, [(ResourceType, &str); 4])> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            (
                format!("ns/gw{i}"),
                [
                    (CDS, n[0].as_str()),
                    (EDS, n[1].as_str()),
                    (LDS, n[2].as_str()),
                    (RDS, n[3].as_str()),
                ],
            )
        })
        .collect();
    let gw_refs: Vec<(&str, &[(ResourceType, &str)])> =
        members.iter().map(|(g, m)| (g.as_str(), &m[..])).collect();
    let snap = mk_snapshot(&resources, &gw_refs);

    let fleet = Fleet::new();
    let streams: Vec<_> = (0..100)
        .map(|i| fleet.connect(&format!("node-{i}"), Protocol::Delta))
        .collect();
    for s in &streams {
        ack_everything(s, &snap);
    }
    let states = || -> std::collections::BTreeMap<_, _> {
        snap.gateways
            .keys()
            .map(|gw| (gw.clone(), fleet.gateway_state(&snap, gw)))
            .collect()
    };
    let started = std::time::Instant::now();
    let all = states();
    eprintln!("1000 Gateways × 100 nodes: {:?}", started.elapsed());
    assert_eq!(all.len(), gateways);
    assert!(all.values().all(|s| *s == AckState::Acked));
    // One node holding an older route table of one Gateway: only that one waits.
    let Event::Acked { ty, mut versions } = ack_all(&snap, RDS) else {
        unreachable!()
    };
    versions.insert("r7".to_string(), "older".to_string());
    streams[42].record(&Event::Acked { ty, versions });
    let all = states();
    assert_eq!(all[&gw("ns/gw7")], AckState::Pending);
    assert_eq!(
        all.values().filter(|s| **s == AckState::Acked).count(),
        gateways - 1
    );
}

mod served {
    use super::*;
    use aether_ir as ir;
    use aether_ir::ObjectRef;
    use std::collections::BTreeSet;

    /// A fleet, Gateway infra/web and its snapshot v1 with routes a and b.
    fn given_web_at_v1() -> (Fleet, ObjectRef, Arc<Snapshot>) {
        let v1 = mk_routes_snapshot(&[("a", "/a"), ("b", "/b")]);
        (Fleet::new(), gw("infra/web"), v1)
    }

    fn keys(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| format!("HTTPRoute/app/{n}")).collect()
    }

    /// The route keys a node serves, as strings to compare with [`keys`].
    fn owned(routes: &BTreeSet<&str>) -> BTreeSet<String> {
        routes.iter().map(|k| k.to_string()).collect()
    }

    /// A NACK of Gateway infra/web's route table at its version in `snapshot`.
    fn nack_web_routes(snapshot: &Snapshot, message: &str) -> Event {
        let rds = ir::names::route_table("infra", "web", 80, None);
        let version = snapshot.version_of(RDS, &rds).unwrap().to_string();
        Event::Nacked {
            ty: RDS,
            nack: Nack {
                version: "0123456789abcdef".into(),
                message: message.into(),
                rejected: [(rds, version)].into(),
            },
        }
    }

    /// Routes a and b of [`mk_routes_snapshot`], cluster b changed by `edit`.
    fn web_with_b(edit: impl FnOnce(&mut ir::Cluster)) -> Arc<Snapshot> {
        use aether_ir::fixtures;
        let rules = [("a", "/a"), ("b", "/b")].map(|(n, p)| fixtures::forward_route(n, p, n));
        let gateway = fixtures::http_gateway("web", rules.into());
        let mut b = fixtures::service_cluster("b", "10.1.0.1");
        edit(&mut b);
        let clusters = vec![fixtures::service_cluster("a", "10.1.0.1"), b];
        Arc::new(aether_xds::build(&ir::Ir::new(vec![gateway], clusters)))
    }

    fn web_with_b_h2c() -> Arc<Snapshot> {
        web_with_b(|b| b.protocol = ir::UpstreamProtocol::H2c)
    }

    #[test]
    fn endpoints_in_flight_hold_back_no_route_but_the_whole_gateway_state_waits() {
        let (fleet, web, v1) = given_web_at_v1();
        let v2 = web_with_b(|b| b.endpoints[0].address = "10.1.0.2".into());
        assert_eq!(v1.gateways[&web].hash, v2.gateways[&web].hash);
        let node = fleet.connect("node", Protocol::Delta);
        fleet.remember(&v1);
        ack_everything(&node, &v1);
        fleet.remember(&v2);
        // Any version of a cluster's endpoints serves its routes.
        let serves = &fleet.served_by("node", &v2)[&web];
        assert!(serves.whole);
        assert_eq!(owned(&serves.routes), keys(&["a", "b"]));
        // The ADS server's own "every member at its version" still waits;
        // the Gateway's config, which the agent's log follows, does not.
        assert_eq!(fleet.gateway_state(&v2, &web), AckState::Pending);
        assert_eq!(fleet.gateway_config_state(&v2, &web), AckState::Acked);
        ack_everything(&node, &v2);
        assert_eq!(fleet.gateway_state(&v2, &web), AckState::Acked);
    }

    #[test]
    fn a_cluster_whose_endpoints_were_never_acked_holds_its_routes_back() {
        let (fleet, web, v1) = given_web_at_v1();
        let node = fleet.connect("node", Protocol::Delta);
        fleet.remember(&v1);
        // Everything but the endpoints.
        for ty in [CDS, LDS, RDS] {
            node.record(&ack_all(&v1, ty));
        }
        let serves = &fleet.served_by("node", &v1)[&web];
        assert!(!serves.whole);
        assert!(serves.routes.is_empty(), "{:?}", serves.routes);
    }

    #[test]
    fn a_route_that_reads_nothing_in_flight_is_served_beside_one_that_does() {
        let (fleet, web, v1) = given_web_at_v1();
        let v2 = web_with_b_h2c();
        let node = fleet.connect("node", Protocol::Delta);
        fleet.remember(&v1);
        ack_everything(&node, &v1);
        fleet.remember(&v2);
        // Cluster b is in flight: route b waits for it, route a does not.
        let serves = &fleet.served_by("node", &v2)[&web];
        assert!(!serves.whole);
        assert_eq!(owned(&serves.routes), keys(&["a"]));
        ack_everything(&node, &v2);
        let serves = &fleet.served_by("node", &v2)[&web];
        assert!(serves.whole);
        assert_eq!(owned(&serves.routes), keys(&["a", "b"]));
    }

    #[test]
    fn a_changed_route_waits_and_an_older_version_is_read_from_history() {
        let (fleet, web, v1) = given_web_at_v1();
        let v2 = mk_routes_snapshot(&[("a", "/a"), ("b", "/b"), ("c", "/c")]);
        let v3 = mk_routes_snapshot(&[("a", "/a2"), ("b", "/b"), ("c", "/c")]);
        let slow = fleet.connect("node-slow", Protocol::Sotw);
        let quick = fleet.connect("node-quick", Protocol::Delta);
        fleet.remember(&v1);
        ack_everything(&slow, &v1);
        ack_everything(&quick, &v1);
        fleet.remember(&v2);
        ack_everything(&quick, &v2);
        // v3 changes a: neither serves it; b is served by v1 (slow) and v2
        // (quick) alike; c only by quick, whose v2 carries it.
        let slow_serves = &fleet.served_by("node-slow", &v3)[&web];
        assert_eq!(owned(&slow_serves.routes), keys(&["b"]));
        assert_eq!(slow_serves.gateway, AckState::Acked);
        assert_eq!(
            owned(&fleet.served_by("node-quick", &v3)[&web].routes),
            keys(&["b", "c"])
        );
        ack_everything(&slow, &v3);
        assert_eq!(
            owned(&fleet.served_by("node-slow", &v3)[&web].routes),
            keys(&["a", "b", "c"])
        );
    }

    #[test]
    fn a_route_table_version_never_seen_serves_nothing_but_what_is_current() {
        let (fleet, web, v1) = given_web_at_v1();
        let v2 = mk_routes_snapshot(&[("a", "/a"), ("b", "/b2")]);
        let node = fleet.connect("node-a", Protocol::Sotw);
        // v1 was never remembered: its fragments are unknown, so only
        // the resources at v2's version count.
        ack_everything(&node, &v1);
        assert!(fleet.served_by("node-a", &v2)[&web].routes.is_empty());
    }

    #[test]
    fn a_stray_client_counts_for_its_own_node_only() {
        let fleet = Fleet::new();
        let web = gw("infra/web");
        let v1 = mk_routes_snapshot(&[("a", "/a")]);
        fleet.remember(&v1);
        let ours = fleet.connect("node-a", Protocol::Sotw);
        ack_everything(&ours, &v1);
        // Another local process on the ADS socket: never ACKs, NACKs routes.
        let stray = fleet.connect("intruder", Protocol::Sotw);
        stray.record(&nack_web_routes(&v1, "text of the intruder's choosing"));
        assert!(matches!(
            &fleet.served_by("intruder", &v1)[&web].gateway,
            AckState::Nacked(r) if r.node == "intruder"
        ));
        let s = fleet.served_by("node-a", &v1);
        assert!(s[&web].whole);
        assert_eq!(s[&web].gateway, AckState::Acked);
        assert_eq!(owned(&s[&web].routes), keys(&["a"]));
        assert!(
            fleet.served_by("node-b", &v1)[&web].routes.is_empty(),
            "not connected"
        );
        assert_eq!(
            fleet.nodes().into_iter().collect::<Vec<_>>(),
            ["intruder", "node-a"]
        );
    }
}
