//! SotW stream scripts: requests and snapshots in, responses and events out.

use super::SotwStream;
use crate::event::{Event, Output};
use crate::fixtures::*;
use aether_xds::{ResourceType, Snapshot};
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use std::collections::BTreeMap;
use std::sync::Arc;

fn types_of(responses: &[DiscoveryResponse]) -> Vec<&'static str> {
    responses
        .iter()
        .map(|r| {
            ResourceType::from_type_url(&r.type_url)
                .expect("known type")
                .short_name()
        })
        .collect()
}

/// [`BASE`] and route table r443, all at rev 1.
fn base() -> Arc<Snapshot> {
    base_with(&[])
}

/// [`base`] with `changes` (see [`mk_base_snapshot`]).
fn base_with(changes: &[(ResourceType, &str, u32)]) -> Arc<Snapshot> {
    mk_base_snapshot(&[&[(RDS, "r443", 1)], changes].concat(), &[])
}

/// Opens [`OPEN_BASE`] and ACKs each; returns the stream.
fn opened() -> SotwStream {
    let mut s = SotwStream::new(base());
    for (ty, names) in OPEN_BASE {
        let out = s.on_request(mk_request(ty, names, ""));
        let nonce = out.responses[0].nonce.clone();
        let out = s.on_request(mk_request(ty, names, &nonce));
        assert!(
            out.responses.is_empty(),
            "ACK of {} answered",
            ty.short_name()
        );
        assert!(matches!(out.events[..], [Event::Acked { .. }]));
    }
    s
}

/// Pushes `snap`: the responses must be of `types`, in that order.
fn then_pushes(s: &mut SotwStream, snap: Arc<Snapshot>, types: &[&str]) -> Vec<DiscoveryResponse> {
    let out = s.on_snapshot(snap);
    assert_eq!(types_of(&out.responses), types);
    out.responses
}

/// ACKs `nonce` for `ty`: the stream records an ACK of `ty`.
fn then_ack_is_recorded(
    s: &mut SotwStream,
    ty: ResourceType,
    names: &[&str],
    nonce: &str,
) -> Output<DiscoveryResponse> {
    let out = s.on_request(mk_request(ty, names, nonce));
    assert!(matches!(&out.events[..], [Event::Acked { ty: t, .. }] if *t == ty));
    out
}

#[test]
fn initial_requests_are_answered_with_current_resources() {
    let mut s = SotwStream::new(base());
    let out = s.on_request(mk_request(CDS, &[], ""));
    assert_eq!(s.node_id(), Some("node-a"));
    assert_eq!(types_of(&out.responses), ["CDS"]);
    let cds = &out.responses[0];
    assert_eq!(any_names(CDS, &cds.resources), ["c1", "c2"]);
    assert_eq!(cds.nonce, "1");
    assert!(out.events.is_empty());

    let out = s.on_request(mk_request(EDS, &["c2", "missing"], ""));
    let eds = &out.responses[0];
    assert_eq!(
        any_names(EDS, &eds.resources),
        ["c2"],
        "only requested names that exist"
    );
    assert_eq!(eds.nonce, "2");
    assert_ne!(eds.version_info, cds.version_info);
}

#[test]
fn ack_is_recorded_with_the_sent_versions() {
    let snap = base();
    let mut s = SotwStream::new(snap.clone());
    let out = s.on_request(mk_request(LDS, &[], ""));
    let nonce = out.responses[0].nonce.clone();
    let out = s.on_request(mk_request(LDS, &[], &nonce));
    assert!(out.responses.is_empty());
    let expected: crate::Versions = [(
        "l80".to_string(),
        snap.version_of(LDS, "l80").unwrap().to_string(),
    )]
    .into();
    assert_eq!(
        out.events,
        [Event::Acked {
            ty: LDS,
            versions: expected.clone()
        }]
    );
    assert_eq!(s.acked(LDS), Some(&expected));
}

#[test]
fn stale_nonce_is_ignored_entirely() {
    let mut s = opened();
    // A new snapshot pushes RDS with nonce n; a request with an older nonce that
    // also changes the names must neither ACK nor resubscribe.
    let pushed = then_pushes(&mut s, base_with(&[(RDS, "r80", 2)]), &["RDS"]);
    let before = s.acked(RDS).cloned();
    let out = s.on_request(mk_request(RDS, &["r80", "r443"], "1"));
    assert!(out.is_empty());
    assert_eq!(s.acked(RDS).cloned(), before);
    // The ACK of the latest nonce counts, and its names are the subscription.
    let out = then_ack_is_recorded(&mut s, RDS, &["r80", "r443"], &pushed[0].nonce);
    assert_eq!(any_names(RDS, &out.responses[0].resources), ["r443", "r80"]);
}

/// Envoy rejects LDS response `rejected` as a "duplicate listener": nothing is
/// resent, and the NACK is of that version and about `l80`, the listener it
/// changed.
fn then_the_duplicate_listener_is_nacked(s: &mut SotwStream, rejected: &DiscoveryResponse) {
    let out = s.on_request(mk_nack(LDS, &[], &rejected.nonce, "duplicate listener"));
    assert!(out.responses.is_empty(), "no resend of a rejected version");
    let Event::Nacked { ty, nack } = &out.events[0] else {
        panic!("expected a NACK event, got {:?}", out.events);
    };
    assert_eq!(*ty, LDS);
    assert_eq!(nack.message, "duplicate listener");
    assert_eq!(nack.version, rejected.version_info);
    assert_eq!(
        nack.rejected.keys().collect::<Vec<_>>(),
        ["l80"],
        "the rejection is about the changed listener"
    );
}

#[test]
fn nack_is_recorded_and_the_rejected_version_is_not_resent() {
    let mut s = opened();
    let acked_before = s.acked(LDS).cloned();
    let bad = base_with(&[(LDS, "l80", 2)]);
    let rejected = then_pushes(&mut s, bad.clone(), &["LDS"]).remove(0);
    then_the_duplicate_listener_is_nacked(&mut s, &rejected);
    assert_eq!(
        s.acked(LDS).cloned(),
        acked_before,
        "Envoy keeps the previous config"
    );
    assert_eq!(
        s.nack(LDS).map(|n| n.message.as_str()),
        Some("duplicate listener")
    );

    // The same snapshot again, or one that only changes another type: still parked.
    assert!(s.on_snapshot(bad).responses.is_empty());
    let other = base_with(&[(EDS, "c1", 2), (LDS, "l80", 2)]);
    then_pushes(&mut s, other, &["EDS"]);

    // A fixed listener is sent and its ACK clears the NACK.
    let fixed = base_with(&[(EDS, "c1", 2), (LDS, "l80", 3)]);
    let sent = then_pushes(&mut s, fixed, &["LDS"]);
    then_ack_is_recorded(&mut s, LDS, &[], &sent[0].nonce);
    assert!(s.nack(LDS).is_none());
}

#[test]
fn wildcard_cds_and_lds_follow_additions_and_removals() {
    let mut s = opened();
    // As `base`, but cluster c2 goes (its endpoints stay) and cluster c3 and
    // listener l443 come.
    let mut resources = BASE.to_vec();
    resources.retain(|r| *r != (CDS, "c2", 1));
    resources.extend([(CDS, "c3", 1), (LDS, "l443", 1), (RDS, "r443", 1)]);
    let snap = mk_snapshot(&resources, &[]);
    // EDS content for (c1, c2) did not change, but follows CDS so that updated
    // clusters get their endpoints while warming.
    let pushed = then_pushes(&mut s, snap, &["CDS", "EDS", "LDS"]);
    assert_eq!(any_names(CDS, &pushed[0].resources), ["c1", "c3"]);
    assert_eq!(any_names(EDS, &pushed[1].resources), ["c1", "c2"]);
    assert_eq!(any_names(LDS, &pushed[2].resources), ["l443", "l80"]);
}

#[test]
fn explicit_names_change_what_is_sent() {
    let mut s = opened();
    let out = s.on_request(mk_request(RDS, &["r443"], "4"));
    // `opened` sent nonces 1..=4 in CDS, EDS, LDS, RDS order and had them ACKed;
    // repeating RDS's "4" states a new name set without ACKing anything anew.
    assert!(out.events.is_empty());
    assert_eq!(types_of(&out.responses), ["RDS"]);
    assert_eq!(any_names(RDS, &out.responses[0].resources), ["r443"]);
}

#[test]
fn unchanged_snapshot_pushes_nothing_and_only_changed_types_are_resent() {
    let mut s = opened();
    assert!(s.on_snapshot(base()).is_empty());
    // A change to a route table nobody subscribed to is not a change here.
    let unrelated = base_with(&[(RDS, "r443", 9)]);
    assert!(s.on_snapshot(unrelated).is_empty());
    let routes = base_with(&[(RDS, "r80", 2), (RDS, "r443", 9)]);
    let pushed = then_pushes(&mut s, routes, &["RDS"]);
    assert_eq!(pushed[0].nonce, "5");
}

#[test]
fn push_order_is_cds_eds_lds_rds_sds() {
    let mut s = SotwStream::new(base());
    // Subscribe in the "wrong" order; pushes still go in xDS order.
    for (ty, names) in [
        (SDS, vec!["cert"]),
        (RDS, vec!["r80"]),
        (LDS, vec![]),
        (EDS, vec!["c1"]),
        (CDS, vec![]),
    ] {
        let out = s.on_request(mk_request(ty, &names, ""));
        let nonce = out.responses.last().unwrap().nonce.clone();
        s.on_request(mk_request(ty, &names, &nonce));
    }
    let everything_changed = mk_snapshot(
        &[
            (CDS, "c1", 2),
            (EDS, "c1", 2),
            (LDS, "l80", 2),
            (RDS, "r80", 2),
            (SDS, "cert", 2),
        ],
        &[],
    );
    let out = s.on_snapshot(everything_changed);
    assert_eq!(
        types_of(&out.responses),
        ["CDS", "EDS", "LDS", "RDS", "SDS"]
    );
}

#[test]
fn empty_snapshot_and_unknown_types_do_not_panic() {
    let mut s = SotwStream::new(std::sync::Arc::new(aether_xds::Snapshot::default()));
    let out = s.on_request(mk_request(LDS, &[], ""));
    assert!(out.responses[0].resources.is_empty());
    let mut odd = mk_request(LDS, &[], "");
    odd.type_url = "type.googleapis.com/envoy.service.runtime.v3.Runtime".into();
    assert!(s.on_request(odd).is_empty());
}

/// Envoy quotes what it refused, keys and all, at any length: the NACK keeps
/// it redacted and bounded, and still blames on the whole text.
pub(crate) fn hostile_nack_text(named: &str) -> String {
    format!(
        "Proto constraint validation failed: private_key {{ inline_string: \"-----BEGIN PRIVATE KEY-----\\nMIIEvSECRET\\n-----END PRIVATE KEY-----\\n\" }}\n{}rejected {named}",
        "x".repeat(4000)
    )
}

#[test]
fn nack_text_is_stored_redacted_one_line_and_bounded() {
    let mut s = opened();
    let out = s.on_snapshot(base_with(&[(LDS, "l80", 2), (LDS, "l443", 1)]));
    let nonce = out.responses[0].nonce.clone();
    let out = s.on_request(mk_nack(LDS, &[], &nonce, &hostile_nack_text("l443")));
    let [Event::Acked { .. }, Event::Nacked { nack, .. }] = &out.events[..] else {
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
fn nack_blames_the_resource_envoy_names() {
    let mut s = opened();
    let two_changed = base_with(&[(LDS, "l80", 2), (LDS, "l443", 1)]);
    let out = s.on_snapshot(two_changed.clone());
    let nonce = out.responses[0].nonce.clone();
    let out = s.on_request(mk_nack(
        LDS,
        &[],
        &nonce,
        "Error adding/updating listener(s) l443: cannot bind 0.0.0.0:443",
    ));
    // Envoy applies listeners one by one: it kept l80 at rev 2 and has no l443.
    let [Event::Acked { ty, versions }, Event::Nacked { nack, .. }] = &out.events[..] else {
        panic!("{:?}", out.events)
    };
    assert_eq!(*ty, LDS);
    assert_eq!(nack.rejected.keys().collect::<Vec<_>>(), ["l443"]);
    assert_eq!(versions.keys().collect::<Vec<_>>(), ["l80"]);
    assert_eq!(versions["l80"], two_changed.version_of(LDS, "l80").unwrap());
    assert_eq!(s.acked(LDS), Some(versions));
    assert!(
        s.on_snapshot(two_changed.clone()).is_empty(),
        "still parked"
    );

    // Route tables are all or nothing: a NACK naming one keeps none of the others.
    let routes = base_with(&[
        (LDS, "l80", 2),
        (LDS, "l443", 1),
        (RDS, "r80", 2),
        (RDS, "r443", 2),
    ]);
    let rds_before = s.acked(RDS).cloned();
    s.on_request(mk_request(RDS, &["r80", "r443"], "4"));
    let out = s.on_snapshot(routes);
    let nonce = out.responses.last().unwrap().nonce.clone();
    let out = s.on_request(mk_nack(RDS, &["r80", "r443"], &nonce, "bad route in r443"));
    assert!(matches!(&out.events[..], [Event::Nacked { nack, .. }] if nack.rejected.len() == 1));
    assert_eq!(s.acked(RDS).cloned(), rds_before);
}

#[test]
fn requests_repeating_a_nacked_nonce_are_not_acks() {
    let mut s = opened();
    let acked_before = s.acked(RDS).cloned();
    let bad = base_with(&[(RDS, "r80", 2)]);
    let pushed = s.on_snapshot(bad).responses[0].nonce.clone();
    s.on_request(mk_nack(RDS, &["r80"], &pushed, "bad route"));
    // Envoy's next RDS request keeps the nonce and drops the error detail.
    let out = s.on_request(mk_request(RDS, &["r80", "r443"], &pushed));
    assert!(out.events.is_empty(), "not an ACK: {:?}", out.events);
    assert_eq!(s.acked(RDS).cloned(), acked_before);
    assert!(s.nack(RDS).is_some());
    // The new name set is served; r80's rejected version is quarantined (left
    // out, so Envoy keeps the one it holds) and r443 goes out alone.
    assert_eq!(any_names(RDS, &out.responses[0].resources), ["r443"]);
    // Repeating the ACK of an answered nonce does not count twice either.
    let nonce = out.responses[0].nonce.clone();
    let first = s.on_request(mk_request(RDS, &["r80", "r443"], &nonce));
    assert_eq!(first.events.len(), 1);
    assert!(
        s.on_request(mk_request(RDS, &["r80", "r443"], &nonce))
            .events
            .is_empty()
    );
}

/// Two route tables of different Gateways, each at `rev_a` / `rev_b`.
fn two_tables(rev_a: u32, rev_b: u32) -> Arc<Snapshot> {
    mk_base_snapshot(
        &[(RDS, "r80", rev_a), (RDS, "r443", rev_b)],
        &[("infra/a", &[(RDS, "r80")]), ("infra/b", &[(RDS, "r443")])],
    )
}

/// Answers every response in `out` as Envoy would if `bad` (an RDS name at a
/// version) is the one route table it refuses: the whole response is rejected
/// when it carries `bad`, accepted otherwise. Returns what Envoy holds for RDS.
fn envoy_answers(
    s: &mut SotwStream,
    mut out: Output<DiscoveryResponse>,
    bad: (&str, &str),
    held: &mut BTreeMap<String, String>,
) {
    let names = ["r80", "r443"];
    while let Some(r) = out.responses.pop() {
        if r.type_url != RDS.type_url() {
            out.responses.extend(
                s.on_request(mk_request(
                    ResourceType::from_type_url(&r.type_url).unwrap(),
                    &[],
                    &r.nonce,
                ))
                .responses,
            );
            continue;
        }
        let carried: BTreeMap<String, String> = r
            .resources
            .iter()
            .zip(any_names(RDS, &r.resources))
            .map(|(any, name)| (name, hex_sha(&any.value)))
            .collect();
        let refused = carried.get(bad.0).is_some_and(|v| v == bad.1);
        let next = if refused {
            s.on_request(mk_nack(
                RDS,
                &names,
                &r.nonce,
                "route: regex program size too big",
            ))
        } else {
            held.extend(carried);
            s.on_request(mk_request(RDS, &names, &r.nonce))
        };
        out.responses.extend(next.responses);
    }
}

fn hex_sha(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

#[test]
fn a_refused_route_table_holds_back_no_other() {
    let mut s = opened();
    s.on_request(mk_request(RDS, &["r80", "r443"], ""));
    let mut held = s.acked(RDS).cloned().unwrap_or_default();
    let first = s.on_snapshot(two_tables(1, 1));
    envoy_answers(&mut s, first, ("", ""), &mut held);
    // Gateway a's table breaks in the same push as b's changes.
    let broken = two_tables(9, 2);
    let bad_version = broken.version_of(RDS, "r80").unwrap().to_string();
    let out = s.on_snapshot(broken.clone());
    envoy_answers(&mut s, out, ("r80", &bad_version), &mut held);
    assert_eq!(
        held.get("r443").map(String::as_str),
        broken.version_of(RDS, "r443")
    );
    assert_ne!(
        held.get("r80"),
        Some(&bad_version),
        "Envoy never took the bad table"
    );
    // b changes 20 more times while a stays broken: every change arrives, in
    // one response each, without the bad table.
    for rev in 3..23 {
        let next = two_tables(9, rev);
        let out = s.on_snapshot(next.clone());
        assert_eq!(out.responses.len(), 1, "rev {rev}");
        assert_eq!(any_names(RDS, &out.responses[0].resources), ["r443"]);
        envoy_answers(&mut s, out, ("r80", &bad_version), &mut held);
        assert_eq!(
            held.get("r443").map(String::as_str),
            next.version_of(RDS, "r443")
        );
        assert_eq!(s.acked(RDS).and_then(|a| a.get("r80")), held.get("r80"));
    }
    // a fixed: sent and taken.
    let fixed = two_tables(10, 22);
    let out = s.on_snapshot(fixed.clone());
    envoy_answers(&mut s, out, ("r80", &bad_version), &mut held);
    assert_eq!(
        held.get("r80").map(String::as_str),
        fixed.version_of(RDS, "r80")
    );
}
