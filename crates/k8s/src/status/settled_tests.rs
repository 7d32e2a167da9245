//! `compute_over` is `compute` with a cache: along a script of plan changes,
//! our writes, someone else's write and a deletion, the cached computation
//! gives exactly what a fresh one does, and the cache is actually used.

use super::patch::{Computed, Settled, StatusInputs, compute, compute_over};
use super::tests::{WORLD, apply_all, at, mk_inputs, mk_store};
use aether_gateway::{AckState, Store};
use gateway_api::apis::standard::httproutes::HttpRoute;

/// Both computations agree; the cached one's result.
fn both(inputs: &StatusInputs, settled: &mut Settled, now: i64) -> Computed {
    let fresh = compute(inputs, &at(now));
    let cached = compute_over(inputs, None, settled, &at(now));
    assert_eq!(cached, fresh);
    cached
}

#[test]
fn the_cache_changes_nothing_but_the_work() {
    let mut settled = Settled::default();
    let mut store = mk_store(WORLD);

    let first = both(
        &mk_inputs(store.clone(), AckState::Pending),
        &mut settled,
        100,
    );
    assert!(!first.patches.is_empty());
    apply_all(&mut store, &first.patches);
    // As planned: nothing to write, and what the cache holds is what is unchanged.
    let again = both(
        &mk_inputs(store.clone(), AckState::Pending),
        &mut settled,
        200,
    );
    assert!(again.patches.is_empty() && again.unchanged > 0);
    assert_eq!(
        settled.len(),
        2,
        "both routes remembered as needing nothing"
    );
    let hits = compute_over(
        &mk_inputs(store.clone(), AckState::Pending),
        None,
        &mut settled,
        &at(300),
    );
    assert_eq!(hits.unchanged, again.unchanged);

    // The plan moves on (ACKed): the cache must not hide it.
    let acked = both(
        &mk_inputs(store.clone(), AckState::Acked),
        &mut settled,
        400,
    );
    assert!(
        acked.patches.iter().any(|p| p.object.name == "r"),
        "{acked:?}"
    );
    apply_all(&mut store, &acked.patches);
    assert!(
        both(
            &mk_inputs(store.clone(), AckState::Acked),
            &mut settled,
            500
        )
        .patches
        .is_empty()
    );

    // Someone else rewrites the route's status (a new resourceVersion): ours is
    // written again.
    let mut theirs = store.get::<HttpRoute>("apps", "r").unwrap().clone();
    theirs.status = None;
    theirs.metadata.resource_version = Some("99".into());
    store.insert(theirs);
    let after = both(
        &mk_inputs(store.clone(), AckState::Acked),
        &mut settled,
        600,
    );
    assert!(
        after.patches.iter().any(|p| p.object.name == "r"),
        "{after:?}"
    );
    apply_all(&mut store, &after.patches);

    // The Gateway goes: what the routes say about it changes.
    let mut gone = store.clone();
    gone.remove::<gateway_api::apis::standard::gateways::Gateway>("infra", "web");
    let without = both(&mk_inputs(gone, AckState::Acked), &mut settled, 700);
    assert!(
        without.patches.iter().any(|p| p.object.name == "r"),
        "{without:?}"
    );
}

#[test]
fn our_writes_laid_over_a_trailing_store_are_what_the_store_will_show() {
    let store = mk_store(WORLD);
    let first = compute(&mk_inputs(store.clone(), AckState::Pending), &at(100));
    // What our writes returned; the watch has not delivered them yet.
    let mut caught_up = store.clone();
    apply_all(&mut caught_up, &first.patches);
    let top: Store = caught_up.clone();
    let trailing = mk_inputs(store, AckState::Pending);
    let over = compute_over(&trailing, Some(&top), &mut Settled::default(), &at(200));
    assert_eq!(
        over,
        compute(&mk_inputs(caught_up, AckState::Pending), &at(200))
    );
    assert!(over.patches.is_empty());
}
