//! The leader's join: per node, per Gateway, per route.

use super::*;
use crate::test_support::{mk_report, mk_snapshot};
use aether_xds::ResourceType;

fn state(reports: &Reports, snapshot: &Snapshot) -> AckState {
    reports.served(snapshot, &Members::default())[&ObjectRef::new("ns", "gw")]
        .gateway
        .clone()
}

#[test]
fn acked_only_when_every_connected_node_has_the_leaders_hash() {
    let snapshot = mk_snapshot(b"v2");
    let old = mk_snapshot(b"v1");
    let hash = snapshot.gateways[&ObjectRef::new("ns", "gw")].hash.clone();
    let reports = Reports::default();
    assert_eq!(
        state(&reports, &snapshot),
        AckState::Pending,
        "no node at all"
    );

    let mut a = mk_report("a", true);
    a.acked_snapshot = snapshot.version.clone();
    reports.apply(a);
    assert_eq!(state(&reports, &snapshot), AckState::Acked);

    // Node b is caught up on an older snapshot only.
    let mut b = mk_report("b", true);
    b.acked_snapshot = old.version.clone();
    reports.apply(b.clone());
    assert_eq!(state(&reports, &snapshot), AckState::Pending);

    // ...then ACKs this Gateway's current hash.
    b.acked_snapshot.clear();
    b.acked.insert("ns/gw".into(), hash);
    reports.apply(b);
    assert_eq!(state(&reports, &snapshot), AckState::Acked);

    // A node whose agent reports but whose Envoy is not connected (yet)
    // serves nothing: it holds the Gateway back until it ACKs.
    reports.apply(mk_report("c", false));
    assert_eq!(state(&reports, &snapshot), AckState::Pending);
    let mut c = mk_report("c", true);
    c.acked_snapshot = snapshot.version.clone();
    reports.apply(c);
    assert_eq!(state(&reports, &snapshot), AckState::Acked);
}

/// Gateway ns/gw with routes a and b, each owning a fragment of table "rt".
fn mk_parted_snapshot() -> Snapshot {
    mk_parted("fa", "fb", b"v1")
}

/// [`mk_parted_snapshot`] with the given fragments and route table body.
fn mk_parted(fa: &str, fb: &str, body: &[u8]) -> Snapshot {
    use aether_xds::{ObjectParts, Part};
    let part = |f: &str| {
        let mut p = ObjectParts::default();
        p.require(ResourceType::Route, "rt", Part::Fragment(f.into()));
        p
    };
    let own = {
        let mut p = ObjectParts::default();
        p.require(ResourceType::Route, "rt", Part::Present);
        p
    };
    let routes = BTreeMap::from([
        ("HTTPRoute/ns/a".into(), part(fa)),
        ("HTTPRoute/ns/b".into(), part(fb)),
    ]);
    mk_snapshot(body).with_parts(
        BTreeMap::from([(ObjectRef::new("ns", "gw"), (own, routes))]),
        BTreeMap::new(),
    )
}

/// A node's listed parts are read per Gateway as one sorted range: those of
/// Gateways whose names sort right beside this one's ("gw-2", "gwx", "g")
/// count for nothing here, whatever they list.
#[test]
fn a_neighbouring_gateways_parts_do_not_serve_this_ones_routes() {
    let snapshot = mk_parted_snapshot();
    let g = &snapshot.gateways[&ObjectRef::new("ns", "gw")];
    let reports = Reports::default();
    let mut a = mk_report("a", true);
    for other in ["ns/gw-2", "ns/gwx", "ns/g", "ns/gw/", "ns/gw{"] {
        a.acked_parts
            .insert(format!("{other}|Gateway"), g.own.fingerprint.clone());
        a.acked_parts.insert(
            format!("{other}|HTTPRoute/ns/a"),
            g.routes["HTTPRoute/ns/a"].fingerprint.clone(),
        );
    }
    reports.apply(a.clone());
    let served = &reports.served(&snapshot, &Members::default())[&ObjectRef::new("ns", "gw")];
    assert_eq!(served.gateway, AckState::Pending);
    assert!(!served.serves_route("HTTPRoute/ns/a"));

    a.acked_parts
        .insert("ns/gw|Gateway".into(), g.own.fingerprint.clone());
    a.acked_parts.insert(
        "ns/gw|HTTPRoute/ns/a".into(),
        g.routes["HTTPRoute/ns/a"].fingerprint.clone(),
    );
    reports.apply(a);
    let served = &reports.served(&snapshot, &Members::default())[&ObjectRef::new("ns", "gw")];
    assert_eq!(served.gateway, AckState::Acked);
    assert!(served.serves_route("HTTPRoute/ns/a"));
    assert!(!served.serves_route("HTTPRoute/ns/b"), "not listed");
}

#[test]
fn a_route_is_served_when_every_node_reports_its_fingerprint() {
    let snapshot = mk_parted_snapshot();
    let g = &snapshot.gateways[&ObjectRef::new("ns", "gw")];
    let reports = Reports::default();
    let mut a = mk_report("a", true);
    a.acked_parts
        .insert("ns/gw|Gateway".into(), g.own.fingerprint.clone());
    a.acked_parts.insert(
        "ns/gw|HTTPRoute/ns/a".into(),
        g.routes["HTTPRoute/ns/a"].fingerprint.clone(),
    );
    a.acked_parts
        .insert("ns/gw|HTTPRoute/ns/b".into(), "another config".into());
    reports.apply(a.clone());
    let served = &reports.served(&snapshot, &Members::default())[&ObjectRef::new("ns", "gw")];
    assert_eq!(served.gateway, AckState::Acked);
    assert!(served.serves_route("HTTPRoute/ns/a"));
    assert!(
        !served.serves_route("HTTPRoute/ns/b"),
        "fingerprint differs"
    );

    // A second node that serves nothing holds everything back.
    reports.apply(mk_report("b", true));
    let served = &reports.served(&snapshot, &Members::default())[&ObjectRef::new("ns", "gw")];
    assert_eq!(served.gateway, AckState::Pending);
    assert!(!served.serves_route("HTTPRoute/ns/a"));

    // ...until it reports the whole snapshot.
    let mut b = mk_report("b", true);
    b.acked_snapshot = snapshot.version.clone();
    reports.apply(b);
    let served = &reports.served(&snapshot, &Members::default())[&ObjectRef::new("ns", "gw")];
    assert!(served.serves_route("HTTPRoute/ns/a"));
    assert!(
        !served.serves_route("HTTPRoute/ns/b"),
        "node a still differs"
    );
}

#[test]
fn a_report_of_an_older_snapshot_serves_what_it_left_unchanged() {
    let gw = ObjectRef::new("ns", "gw");
    let old = mk_parted("fa", "fb", b"v1");
    let new = mk_parted("fa", "fb2", b"v2");
    let reports = Reports::default();
    reports.remember(&old);
    let mut a = mk_report("a", true);
    a.acked_snapshot = old.version.clone();
    reports.apply(a);
    let served = &reports.served(&new, &Members::default())[&gw];
    assert_eq!(served.gateway, AckState::Acked, "own share unchanged");
    assert!(served.serves_route("HTTPRoute/ns/a"), "a unchanged");
    assert!(!served.serves_route("HTTPRoute/ns/b"), "b changed");

    // The same through the Gateway's hash.
    let mut b = mk_report("a", true);
    b.acked
        .insert("ns/gw".into(), old.gateways[&gw].hash.clone());
    reports.apply(b);
    let served = &reports.served(&new, &Members::default())[&gw];
    assert!(served.serves_route("HTTPRoute/ns/a"));
    assert!(!served.serves_route("HTTPRoute/ns/b"));

    // A snapshot the leader never saw tells nothing.
    let unknown = mk_parted("fa", "fb", b"v0");
    let mut c = mk_report("a", true);
    c.acked_snapshot = unknown.version.clone();
    reports.apply(c);
    let served = &reports.served(&new, &Members::default())[&gw];
    assert_eq!(served.gateway, AckState::Pending);
    assert!(!served.serves_route("HTTPRoute/ns/a"));
}

#[test]
fn an_unchanged_report_does_not_notify() {
    let reports = Reports::default();
    let rx = reports.subscribe();
    reports.apply(mk_report("a", true));
    let seen = *rx.borrow();
    reports.apply(mk_report("a", true));
    assert_eq!(*rx.borrow(), seen);
}

#[test]
fn the_nodes_that_take_the_traffic_must_serve_reported_or_not() {
    let gw = ObjectRef::new("ns", "gw");
    let snapshot = mk_parted_snapshot();
    let old = mk_parted("fa", "fb", b"v0");
    let reports = Reports::default();
    let members = Members {
        per_gateway: BTreeMap::from([(gw.clone(), BTreeSet::from(["a".into(), "b".into()]))]),
        ..Default::default()
    };
    let mut a = mk_report("a", true);
    a.acked_snapshot = snapshot.version.clone();
    reports.apply(a);
    // Node c reports another config but takes no traffic of this Gateway.
    let mut c = mk_report("c", true);
    c.acked_snapshot = old.version.clone();
    reports.apply(c);

    let served = &reports.served(&snapshot, &members)[&gw];
    assert_eq!(served.gateway, AckState::Pending, "b has not reported");
    assert_eq!(served.unreported, BTreeSet::from(["b".to_string()]));
    assert!(!served.serves_route("HTTPRoute/ns/a"));

    let mut b = mk_report("b", true);
    b.acked_snapshot = snapshot.version.clone();
    reports.apply(b.clone());
    let served = &reports.served(&snapshot, &members)[&gw];
    assert_eq!(served.gateway, AckState::Acked, "c is not a member");
    assert!(served.unreported.is_empty());
    assert!(served.serves_route("HTTPRoute/ns/a"));

    // b's stream drops: it is still in the Service's endpoints.
    reports.remove("b");
    let served = &reports.served(&snapshot, &members)[&gw];
    assert_eq!(served.gateway, AckState::Pending);
    assert_eq!(served.unreported, BTreeSet::from(["b".to_string()]));

    // A NACK from a member is told even while another member is silent.
    let mut a = mk_report("a", true);
    a.nacked.insert("ns/gw".into(), "bad regex".into());
    reports.apply(a);
    let served = &reports.served(&snapshot, &members)[&gw];
    assert_eq!(
        served.gateway,
        AckState::Nacked(Rejection::new("a", "bad regex"))
    );
    assert!(!served.serves_route("HTTPRoute/ns/a"));

    // Static mode: the Ready edge pods take every Gateway's traffic; a
    // Gateway with no member falls back to every reporting node.
    let every = Members {
        every_gateway: BTreeSet::from(["b".into()]),
        ..Default::default()
    };
    reports.apply(b);
    let served = &reports.served(&snapshot, &every)[&gw];
    assert_eq!(served.gateway, AckState::Acked, "only b must serve");
    let served = &reports.served(&snapshot, &Members::default())[&gw];
    assert_ne!(served.gateway, AckState::Acked, "a NACKs, c serves v0");
}

#[test]
fn status_waits_after_a_restart_until_the_members_have_answered() {
    let snapshot = mk_snapshot(b"v1");
    let mut answered = mk_report("a", true);
    answered.acked_snapshot = snapshot.version.clone();
    let connected_only = mk_report("b", true);
    let nodes = |rs: &[&AckReport]| -> BTreeMap<String, AckReport> {
        rs.iter().map(|r| (r.node.clone(), (*r).clone())).collect()
    };
    let none = Members::default();
    assert!(!none.have_answered(&nodes(&[])));
    assert!(
        !none.have_answered(&nodes(&[&connected_only])),
        "ACKed nothing yet"
    );
    assert!(none.have_answered(&nodes(&[&answered, &connected_only])));

    let both = Members {
        per_gateway: BTreeMap::from([(
            ObjectRef::new("ns", "gw"),
            BTreeSet::from(["a".into(), "b".into()]),
        )]),
        ..Default::default()
    };
    assert!(
        !both.have_answered(&nodes(&[&answered])),
        "b has not reported"
    );
    assert!(!both.have_answered(&nodes(&[&answered, &connected_only])));
    let mut b = connected_only.clone();
    b.nacked.insert("ns/gw".into(), "bad".into());
    assert!(
        both.have_answered(&nodes(&[&answered, &b])),
        "a NACK is an answer"
    );
}

#[test]
fn a_snapshot_a_node_still_reports_is_not_forgotten() {
    let gw = ObjectRef::new("ns", "gw");
    let held = mk_parted("fa", "fb", b"v0");
    let reports = Reports::default();
    reports.remember(&held);
    let mut a = mk_report("a", true);
    a.acked_snapshot = held.version.clone();
    reports.apply(a);
    // Many newer snapshots (b changes each time) before node a catches up.
    let mut newest = held.clone();
    for i in 1..40 {
        newest = mk_parted("fa", &format!("fb{i}"), format!("v{i}").as_bytes());
        reports.remember(&newest);
    }
    let served = &reports.served(&newest, &Members::default())[&gw];
    assert_eq!(
        served.gateway,
        AckState::Acked,
        "own share unchanged since v0"
    );
    assert!(
        served.serves_route("HTTPRoute/ns/a"),
        "a unchanged since v0"
    );
    assert!(!served.serves_route("HTTPRoute/ns/b"));
}

/// Gateway ns/gw, and a leader that remembered it at v0 and then at v1,
/// where route b changed.
fn route_b_changed() -> (ObjectRef, Reports, Snapshot, Snapshot) {
    let reports = Reports::default();
    let v0 = mk_parted("fa", "fb", b"v0");
    reports.remember(&v0);
    let v1 = mk_parted("fa", "fb1", b"v1");
    reports.remember(&v1);
    (ObjectRef::new("ns", "gw"), reports, v0, v1)
}

#[test]
fn a_node_many_endpoint_changes_behind_still_serves_what_it_served() {
    // Route b changed (v0 → v1), then pods came and went: 40 snapshots that
    // change endpoints only, each remembered before node a's Envoy has
    // ACKed v1 (or even v0), so no report held them.
    let (gw, reports, v0, v1) = route_b_changed();
    let mut newest = v1.clone();
    for i in 0..40 {
        let pods = aether_xds::Resource::new(
            "pods",
            ResourceType::Endpoint.type_url(),
            format!("pod {i}").into_bytes(),
        );
        newest = newest.replacing(ResourceType::Endpoint, [(pods, BTreeMap::new())]);
        reports.remember(&newest);
    }
    assert_ne!(newest.version, v1.version, "endpoints moved the version");
    let mut a = mk_report("a", true);
    a.acked_snapshot = v1.version.clone();
    reports.apply(a.clone());
    let served = &reports.served(&newest, &Members::default())[&gw];
    assert_eq!(served.gateway, AckState::Acked, "v1 is what is served now");
    assert!(served.serves_route("HTTPRoute/ns/a"));
    assert!(served.serves_route("HTTPRoute/ns/b"));
    a.acked_snapshot = v0.version.clone();
    reports.apply(a);
    let served = &reports.served(&newest, &Members::default())[&gw];
    assert!(
        served.serves_route("HTTPRoute/ns/a"),
        "a unchanged since v0"
    );
    assert!(!served.serves_route("HTTPRoute/ns/b"), "b changed since v0");
}

#[test]
fn a_snapshot_the_leader_never_made_is_read_by_its_gateway_hash() {
    // The node's agent translates on its own: its snapshot (pods coalesced
    // another way) has a version the leader never made, with the Gateway
    // as the leader had it at v0, or as it has it now.
    let (gw, reports, v0, v1) = route_b_changed();
    let mut a = mk_report("a", true);
    a.acked_snapshot = "a version of the agent's own".into();
    a.acked
        .insert("ns/gw".into(), v0.gateways[&gw].hash.clone());
    reports.apply(a.clone());
    let served = &reports.served(&v1, &Members::default())[&gw];
    assert!(
        served.serves_route("HTTPRoute/ns/a"),
        "a unchanged since v0"
    );
    assert!(!served.serves_route("HTTPRoute/ns/b"), "b changed since v0");
    a.acked
        .insert("ns/gw".into(), v1.gateways[&gw].hash.clone());
    reports.apply(a);
    let served = &reports.served(&v1, &Members::default())[&gw];
    assert_eq!(served.gateway, AckState::Acked);
    assert!(served.serves_route("HTTPRoute/ns/b"));
}

/// Node `node` serving all of `snapshot`, as its agent reports it: every
/// part listed (`local_report`).
fn serving(node: &str, snapshot: &Snapshot) -> AckReport {
    let mut r = mk_report(node, true);
    r.every_part = true;
    r.acked_snapshot = snapshot.version.clone();
    for (gw, resources) in &snapshot.gateways {
        let key = gw.to_string();
        r.acked.insert(key.clone(), resources.hash.clone());
        crate::local::every_part_of(&mut r, &key, resources);
    }
    r
}

#[test]
fn a_node_on_a_config_the_leader_never_made_is_read_by_the_parts_it_lists() {
    // The leader saw route b change (v0 → v1). Node a's agent saw route a
    // change first, b's change with it: a snapshot the leader never made,
    // whose Gateway hash tells it nothing. Its stream carries what changed
    // since v0, the last hash of it the leader knew.
    let (gw, reports, v0, v1) = route_b_changed();
    let first = serving("a", &v0);
    reports.apply(first.clone());
    assert!(
        reports.nodes()["a"].acked_parts.is_empty(),
        "a known hash needs no part listed"
    );
    let ahead = mk_parted("fa2", "fb1", b"agent");
    let now = serving("a", &ahead);
    reports.apply(crate::client::delta(&first, &now));
    assert_eq!(
        reports.nodes()["a"].acked_parts.len(),
        2,
        "the parts changed since v0: routes a and b"
    );
    let served = &reports.served(&v1, &Members::default())[&gw];
    assert_eq!(served.gateway, AckState::Acked, "its listeners are v0's");
    assert!(
        served.serves_route("HTTPRoute/ns/b"),
        "b as the leader has it"
    );
    assert!(
        !served.serves_route("HTTPRoute/ns/a"),
        "a not as the leader has it"
    );

    // The leader sees a's change too, in a snapshot of its own.
    let v2 = mk_parted("fa2", "fb1", b"v2");
    reports.remember(&v2);
    let served = &reports.served(&v2, &Members::default())[&gw];
    assert!(served.serves_route("HTTPRoute/ns/a"));
    assert!(served.serves_route("HTTPRoute/ns/b"));

    // The Gateway goes: its anchor and what is listed of it go with it.
    reports.remember(&Snapshot::new(BTreeMap::new(), BTreeMap::new()));
    assert!(reports.nodes()["a"].acked_parts.is_empty());
}

#[test]
fn a_part_a_node_serves_no_more_is_not_read_from_its_anchor() {
    let (gw, reports, _, v1) = route_b_changed();
    let first = serving("a", &v1);
    reports.apply(first.clone());
    assert!(reports.served(&v1, &Members::default())[&gw].serves_route("HTTPRoute/ns/a"));
    // Its agent has a new route a, which its Envoy has not ACKed: the part
    // leaves the report (behind, every Gateway listed by parts). The anchor,
    // v1, still has a as the leader has it.
    let mut behind = first.clone();
    behind.acked.clear();
    behind.acked_snapshot.clear();
    behind.acked_parts.remove("ns/gw|HTTPRoute/ns/a");
    reports.apply(crate::client::delta(&first, &behind));
    let served = &reports.served(&v1, &Members::default())[&gw];
    assert!(!served.serves_route("HTTPRoute/ns/a"), "a served no more");
    assert!(served.serves_route("HTTPRoute/ns/b"));
    assert_eq!(served.gateway, AckState::Acked);
}

#[test]
fn a_node_that_lists_no_parts_is_not_read_from_an_anchor() {
    // An agent of the release before `every_part`: a caught-up report of a
    // hash the leader does not know tells nothing, as it did.
    let (gw, reports, v0, v1) = route_b_changed();
    let mut first = serving("a", &v0);
    first.every_part = false;
    first.acked_parts.clear();
    reports.apply(first.clone());
    let mut now = first.clone();
    now.acked_snapshot = "the agent's own".into();
    now.acked.insert("ns/gw".into(), "an unknown hash".into());
    reports.apply(crate::client::delta(&first, &now));
    let served = &reports.served(&v1, &Members::default())[&gw];
    assert_eq!(served.gateway, AckState::Pending);
    assert!(!served.serves_route("HTTPRoute/ns/a"));
}

#[test]
fn a_stream_of_deltas_reads_as_its_last_report_read_whole() {
    // Whatever a node's agent went through (snapshots the leader knows,
    // ones it never made, Envoys behind on some parts), the leader's reading
    // of the stream's deltas, through anchors, is its reading of the last
    // report alone, every part listed.
    let (gw, _, v0, v1) = route_b_changed();
    let ahead = mk_parted("fa2", "fb1", b"agent");
    let without = |r: &AckReport, parts: &[&str]| {
        let mut r = r.clone();
        r.acked.clear();
        r.acked_snapshot.clear();
        for p in parts {
            r.acked_parts.remove(&format!("ns/gw|{p}"));
        }
        r
    };
    let states = [
        serving("a", &v0),
        serving("a", &ahead),
        serving("a", &v1),
        without(&serving("a", &ahead), &["HTTPRoute/ns/a"]),
        without(&serving("a", &v0), &["HTTPRoute/ns/b", "Gateway"]),
    ];
    let read = |reports: &Reports| {
        let served = &reports.served(&v1, &Members::default())[&gw];
        (
            served.gateway.clone(),
            served.serves_route("HTTPRoute/ns/a"),
            served.serves_route("HTTPRoute/ns/b"),
        )
    };
    let n = states.len();
    for sequence in 0..n.pow(4) {
        let path: Vec<&AckReport> = (0..4).map(|i| &states[sequence / n.pow(i) % n]).collect();
        let (_, streamed, _, _) = route_b_changed();
        streamed.apply(path[0].clone());
        for pair in path.windows(2) {
            streamed.apply(crate::client::delta(pair[0], pair[1]));
        }
        let (_, whole, _, _) = route_b_changed();
        whole.apply(path[3].clone());
        assert_eq!(read(&streamed), read(&whole), "through {sequence} (base 5)");
    }
}
