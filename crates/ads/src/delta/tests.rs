//! Delta stream scripts: requests and snapshots in, responses and events out.

use super::DeltaStream;
use crate::event::Event;
use crate::fixtures::*;
use aether_xds::{ResourceType, Snapshot};
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryResponse;
use std::sync::Arc;

fn sent_names(r: &DeltaDiscoveryResponse) -> Vec<&str> {
    r.resources.iter().map(|r| r.name.as_str()).collect()
}

fn removed(r: &DeltaDiscoveryResponse) -> Vec<&str> {
    r.removed_resources.iter().map(String::as_str).collect()
}

fn short(r: &DeltaDiscoveryResponse) -> &'static str {
    ResourceType::from_type_url(&r.type_url)
        .unwrap()
        .short_name()
}

fn base() -> Arc<Snapshot> {
    mk_base_snapshot(&[], &[])
}

/// Pushes `snap`: the responses must be of `types`, in that order.
fn then_pushes(
    s: &mut DeltaStream,
    snap: Arc<Snapshot>,
    types: &[&str],
) -> Vec<DeltaDiscoveryResponse> {
    let out = s.on_snapshot(snap);
    assert_eq!(out.responses.iter().map(short).collect::<Vec<_>>(), types);
    out.responses
}

/// ACKs the single response in `out` and returns the ACK's events.
fn ack(s: &mut DeltaStream, ty: ResourceType, r: &DeltaDiscoveryResponse) -> Vec<Event> {
    s.on_request(mk_delta(ty, &[], &[], &r.nonce)).events
}

#[test]
fn wildcard_initial_sends_everything_and_ack_covers_the_nonce() {
    let snap = base();
    let mut s = DeltaStream::new(snap.clone());
    let out = s.on_request(mk_delta(CDS, &[], &[], ""));
    assert_eq!(s.node_id(), Some("node-a"));
    let r = &out.responses[0];
    assert_eq!(sent_names(r), ["c1", "c2"]);
    assert_eq!(r.resources[0].version, snap.version_of(CDS, "c1").unwrap());
    assert_eq!(
        any_names(
            CDS,
            &r.resources
                .iter()
                .map(|x| x.resource.clone().unwrap())
                .collect::<Vec<_>>()
        ),
        ["c1", "c2"]
    );
    assert!(
        s.acked(CDS).unwrap().is_empty(),
        "nothing ACKed before the ACK"
    );
    let events = ack(&mut s, CDS, r);
    let Event::Acked { ty, versions } = &events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(*ty, CDS);
    assert_eq!(versions.keys().collect::<Vec<_>>(), ["c1", "c2"]);
}

#[test]
fn initial_resource_versions_are_not_resent() {
    let snap = base();
    let mut s = DeltaStream::new(snap.clone());
    let mut req = mk_delta(CDS, &[], &[], "");
    req.initial_resource_versions = [
        (
            "c1".to_string(),
            snap.version_of(CDS, "c1").unwrap().to_string(),
        ),
        ("c2".to_string(), "old".to_string()),
        ("gone".to_string(), "old".to_string()),
    ]
    .into();
    let out = s.on_request(req);
    // What Envoy reports holding counts as ACKed: it applied it on an earlier stream.
    assert!(matches!(&out.events[..], [Event::Acked { ty: CDS, versions }] if versions.len() == 3));
    let r = &out.responses[0];
    assert_eq!(sent_names(r), ["c2"]);
    assert_eq!(
        removed(r),
        [] as [&str; 0],
        "kept until Envoy said which listeners and route tables may name it"
    );
    ack(&mut s, CDS, r);
    s.on_request(mk_delta(LDS, &[], &[], ""));
    let out = s.on_request(mk_delta(RDS, &["r80"], &[], ""));
    let cds: Vec<_> = out.responses.iter().filter(|r| short(r) == "CDS").collect();
    assert_eq!(removed(cds[0]), ["gone"], "then removed: nothing names it");
    ack(&mut s, CDS, cds[0]);
    assert_eq!(
        s.acked(CDS).unwrap().keys().collect::<Vec<_>>(),
        ["c1", "c2"]
    );

    // Everything already held: a wildcard subscriber still gets a (empty) first answer.
    let mut s = DeltaStream::new(snap.clone());
    let mut req = mk_delta(LDS, &[], &[], "");
    req.initial_resource_versions = [(
        "l80".to_string(),
        snap.version_of(LDS, "l80").unwrap().to_string(),
    )]
    .into();
    let out = s.on_request(req);
    assert_eq!(out.responses.len(), 1);
    assert!(out.responses[0].resources.is_empty() && out.responses[0].removed_resources.is_empty());
}

#[test]
fn explicit_subscribe_and_unsubscribe() {
    let mut s = DeltaStream::new(base());
    let out = s.on_request(mk_delta(EDS, &["c1"], &[], ""));
    assert_eq!(sent_names(&out.responses[0]), ["c1"]);
    ack(&mut s, EDS, &out.responses[0]);

    let out = s.on_request(mk_delta(EDS, &["c2", "nope"], &[], &out.responses[0].nonce));
    assert_eq!(
        sent_names(&out.responses[0]),
        ["c2"],
        "only the new name is sent"
    );
    let nonce = out.responses[0].nonce.clone();
    ack(&mut s, EDS, &out.responses[0]);
    assert_eq!(s.acked(EDS).unwrap().len(), 2);

    let out = s.on_request(mk_delta(EDS, &[], &["c1"], &nonce));
    assert!(
        out.responses.is_empty(),
        "no removal for what Envoy dropped itself"
    );
    assert_eq!(s.acked(EDS).unwrap().keys().collect::<Vec<_>>(), ["c2"]);
    assert!(matches!(&out.events[..], [Event::Acked { ty: EDS, versions }] if versions.len() == 1));

    // An unsubscribed name changing is no longer sent; a subscribed one is.
    let out = s.on_snapshot(mk_snapshot(&[(EDS, "c1", 2), (EDS, "c2", 2)], &[]));
    assert_eq!(out.responses.len(), 1);
    assert_eq!(sent_names(&out.responses[0]), ["c2"]);
}

#[test]
fn removals_for_wildcard_and_explicit_names() {
    let mut s = DeltaStream::new(base());
    let lds = s.on_request(mk_delta(LDS, &[], &[], "")).responses;
    ack(&mut s, LDS, &lds[0]);
    let rds = s.on_request(mk_delta(RDS, &["r80"], &[], "")).responses;
    ack(&mut s, RDS, &rds[0]);

    let only_l443 = mk_snapshot(&[(LDS, "l443", 1)], &[]);
    let pushed = then_pushes(&mut s, only_l443, &["LDS", "RDS"]);
    assert_eq!(sent_names(&pushed[0]), ["l443"]);
    assert_eq!(removed(&pushed[0]), ["l80"]);
    assert!(pushed[1].resources.is_empty());
    assert_eq!(removed(&pushed[1]), ["r80"]);
    ack(&mut s, LDS, &pushed[0]);
    ack(&mut s, RDS, &pushed[1]);
    assert_eq!(s.acked(LDS).unwrap().keys().collect::<Vec<_>>(), ["l443"]);
    assert!(s.acked(RDS).unwrap().is_empty());

    // The route table comes back: still subscribed, so it is sent again.
    let routes_back = mk_snapshot(&[(LDS, "l443", 1), (RDS, "r80", 1)], &[]);
    let pushed = then_pushes(&mut s, routes_back, &["RDS"]);
    assert_eq!(sent_names(&pushed[0]), ["r80"]);
}

#[test]
fn unchanged_snapshot_sends_nothing_and_changes_are_per_resource() {
    let mut s = DeltaStream::new(base());
    for (ty, names) in OPEN_BASE {
        let out = s.on_request(mk_delta(ty, names, &[], ""));
        ack(&mut s, ty, &out.responses[0]);
    }
    assert!(s.on_snapshot(base()).is_empty());
    // c2 changed: it is sent alone, then its endpoints (unchanged) follow it.
    let c2_changed = mk_base_snapshot(&[(CDS, "c2", 2)], &[]);
    let pushed = then_pushes(&mut s, c2_changed, &["CDS", "EDS"]);
    assert_eq!(sent_names(&pushed[0]), ["c2"]);
    assert_eq!(sent_names(&pushed[1]), ["c2"]);
}

#[test]
fn nack_text_is_stored_redacted_one_line_and_bounded() {
    let mut s = DeltaStream::new(base());
    let out = s.on_request(mk_delta(LDS, &[], &[], ""));
    ack(&mut s, LDS, &out.responses[0]);
    let out = s.on_snapshot(mk_snapshot(&[(LDS, "l80", 2), (LDS, "l443", 1)], &[]));
    let nonce = out.responses[0].nonce.clone();
    let text = crate::sotw::tests::hostile_nack_text("l443");
    let out = s.on_request(mk_delta_nack(LDS, &nonce, &text));
    let Some(Event::Nacked { nack, .. }) = out
        .events
        .iter()
        .find(|e| matches!(e, Event::Nacked { .. }))
    else {
        panic!("{:?}", out.events)
    };
    assert_eq!(
        nack.rejected.keys().collect::<Vec<_>>(),
        ["l443"],
        "blamed on the whole text"
    );
    assert!(!nack.message.contains("SECRET"), "{}", nack.message);
    assert!(!nack.message.contains('\n'));
    assert!(nack.message.len() < 1100, "{}", nack.message.len());
}

#[test]
fn nack_parks_the_rejected_versions() {
    let mut s = DeltaStream::new(base());
    let out = s.on_request(mk_delta(LDS, &[], &[], ""));
    ack(&mut s, LDS, &out.responses[0]);
    let good = s.acked(LDS).unwrap().clone();

    let bad = mk_snapshot(&[(LDS, "l80", 2), (LDS, "l443", 1)], &[]);
    let out = s.on_snapshot(bad.clone());
    let r = out.responses[0].clone();
    assert_eq!(sent_names(&r), ["l443", "l80"]);
    let mut out = s.on_request(mk_delta_nack(LDS, &r.nonce, "bind: address in use"));
    let Event::Nacked { nack, .. } = &out.events[0] else {
        panic!("{:?}", out.events)
    };
    assert_eq!(nack.message, "bind: address in use");
    assert_eq!(nack.version, bad.version);
    assert_eq!(nack.rejected.keys().collect::<Vec<_>>(), ["l443", "l80"]);
    // Envoy named neither: each is tried alone, and each refused alone is parked.
    for suspect in ["l443", "l80"] {
        assert_eq!(out.responses.len(), 1, "{suspect}: {:?}", out.responses);
        assert_eq!(sent_names(&out.responses[0]), [suspect]);
        let nonce = out.responses[0].nonce.clone();
        out = s.on_request(mk_delta_nack(LDS, &nonce, "bind: address in use"));
        let Event::Nacked { nack, .. } = &out.events[0] else {
            panic!("{:?}", out.events)
        };
        assert_eq!(nack.rejected.keys().collect::<Vec<_>>(), [suspect]);
    }
    assert!(
        out.responses.is_empty(),
        "the rejected versions are not resent"
    );
    assert_eq!(s.acked(LDS), Some(&good));
    assert!(s.on_snapshot(bad).is_empty());

    // Only l80 is fixed: it is sent; l443 (still the rejected version) is not.
    let out = s.on_snapshot(mk_snapshot(&[(LDS, "l80", 3), (LDS, "l443", 1)], &[]));
    assert_eq!(sent_names(&out.responses[0]), ["l80"]);
    ack(&mut s, LDS, &out.responses[0]);
    assert!(s.nack(LDS).is_none());
}

#[test]
fn stale_nonce_does_not_ack_but_subscriptions_apply() {
    let mut s = DeltaStream::new(base());
    let first = s.on_request(mk_delta(RDS, &["r80"], &[], "")).responses;
    let second = s.on_snapshot(mk_snapshot(&[(RDS, "r80", 2), (RDS, "r443", 1)], &[]));
    assert_eq!(sent_names(&second.responses[0]), ["r80"]);
    // Envoy ACKs the first response late, subscribing to r443 on the way.
    ack(&mut s, RDS, &first[0]);
    let out = s.on_request(mk_delta(RDS, &["r443"], &[], "999"));
    assert!(out.events.is_empty(), "unknown nonce is not an ACK");
    assert_eq!(sent_names(&out.responses[0]), ["r443"]);
    // The ACK of the first response covered only its version of r80.
    let acked = s.acked(RDS).unwrap();
    assert_eq!(acked.len(), 1);
    assert_eq!(acked["r80"], base().version_of(RDS, "r80").unwrap());
}

#[test]
fn nack_of_an_older_response_does_not_undo_a_newer_one() {
    let mut s = DeltaStream::new(base());
    let out = s.on_request(mk_delta(LDS, &[], &[], ""));
    ack(&mut s, LDS, &out.responses[0]);
    let bad = s
        .on_snapshot(mk_snapshot(&[(LDS, "l80", 2)], &[]))
        .responses[0]
        .clone();
    let good = s
        .on_snapshot(mk_snapshot(&[(LDS, "l80", 3)], &[]))
        .responses[0]
        .clone();
    assert_eq!(sent_names(&good), ["l80"]);
    // Envoy answers in order: a NACK of the first, then an ACK of the second.
    let out = s.on_request(mk_delta_nack(LDS, &bad.nonce, "bad listener"));
    assert!(
        out.responses.is_empty(),
        "l80 at rev 3 is in flight already: {:?}",
        out.responses
    );
    let events = ack(&mut s, LDS, &good);
    assert!(matches!(&events[..], [Event::Acked { .. }]));
    let v3 = mk_snapshot(&[(LDS, "l80", 3)], &[]);
    assert_eq!(
        s.acked(LDS).unwrap()["l80"],
        v3.version_of(LDS, "l80").unwrap()
    );
    assert!(s.nack(LDS).is_none());
    assert!(s.on_snapshot(v3).is_empty());
}

#[test]
fn nack_naming_a_route_table_resends_the_others() {
    let mut s = DeltaStream::new(base());
    let out = s.on_request(mk_delta(RDS, &["r80", "r443"], &[], ""));
    ack(&mut s, RDS, &out.responses[0]);
    let next = mk_snapshot(&[(RDS, "r80", 2), (RDS, "r443", 1)], &[]);
    let r = s.on_snapshot(next.clone()).responses[0].clone();
    assert_eq!(sent_names(&r), ["r443", "r80"]);
    let out = s.on_request(mk_delta_nack(
        RDS,
        &r.nonce,
        "Only a single wildcard domain is permitted in route r443",
    ));
    // Route tables are all or nothing, whatever the message names (a real Envoy
    // 1.40 sometimes keeps r80's old table): r443 is parked, r80 sent again.
    let [Event::Nacked { nack, .. }] = &out.events[..] else {
        panic!("{:?}", out.events)
    };
    assert_eq!(nack.rejected.keys().collect::<Vec<_>>(), ["r443"]);
    assert_eq!(out.responses.len(), 1, "{:?}", out.responses);
    assert_eq!(sent_names(&out.responses[0]), ["r80"]);
    let events = ack(&mut s, RDS, &out.responses[0]);
    assert!(matches!(&events[..], [Event::Acked { .. }]));
    assert_eq!(
        s.acked(RDS).unwrap()["r80"],
        next.version_of(RDS, "r80").unwrap()
    );
    assert!(s.on_snapshot(next).is_empty(), "r443 is parked");
    // A fixed r443 is sent alone.
    let out = s.on_snapshot(mk_snapshot(&[(RDS, "r80", 2), (RDS, "r443", 2)], &[]));
    assert_eq!(sent_names(&out.responses[0]), ["r443"]);
}
