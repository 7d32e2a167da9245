//! `compute_over` is `compute` with a cache: along a script of plan changes,
//! our writes, someone else's write and a deletion, the cached computation
//! gives exactly what a fresh one does, and the cache is actually used.

use super::compute::{Computed, Settled, StatusInputs, compute, compute_over};
use super::test_support::{apply_all, at, mk_inputs, mk_store, web_world};
use aether_gateway::{AckState, Store};
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;

/// Both computations agree; the cached one's result.
fn both(inputs: &StatusInputs, settled: &mut Settled, now: i64) -> Computed {
    let fresh = compute(inputs, &at(now));
    let cached = compute_over(inputs, None, settled, &at(now));
    assert_eq!(cached, fresh);
    cached
}

/// The store along the script and the cache the computations share.
struct Script {
    store: Store,
    settled: Settled,
}

impl Script {
    fn given_the_web_world() -> Self {
        Self {
            store: mk_store(&web_world()),
            settled: Settled::default(),
        }
    }

    /// [`both`] on the store as it is, with the plan in `ack`.
    fn both(&mut self, ack: AckState, now: i64) -> Computed {
        both(&mk_inputs(self.store.clone(), ack), &mut self.settled, now)
    }

    /// The cached computation alone.
    fn cached(&mut self, ack: AckState, now: i64) -> Computed {
        let inputs = mk_inputs(self.store.clone(), ack);
        compute_over(&inputs, None, &mut self.settled, &at(now))
    }

    fn apply(&mut self, computed: &Computed) {
        apply_all(&mut self.store, &computed.patches);
    }

    /// Someone else rewrites route `r`'s status (a new resourceVersion).
    fn given_their_rewrite_of_the_route(&mut self) {
        let mut theirs = self.store.get::<HttpRoute>("apps", "r").unwrap().clone();
        theirs.status = None;
        theirs.metadata.resource_version = Some("99".into());
        self.store.insert(theirs);
    }

    /// [`both`] on the store without Gateway `web`.
    fn both_without_the_gateway(&mut self, now: i64) -> Computed {
        let mut gone = self.store.clone();
        gone.remove::<Gateway>("infra", "web");
        both(&mk_inputs(gone, AckState::Acked), &mut self.settled, now)
    }
}

fn then_route_r_is_written(computed: &Computed) {
    assert!(
        computed.patches.iter().any(|p| p.object.name == "r"),
        "{computed:?}"
    );
}

#[test]
fn the_cache_changes_nothing_but_the_work() {
    let mut s = Script::given_the_web_world();
    let first = s.both(AckState::Pending, 100);
    assert!(!first.patches.is_empty());
    s.apply(&first);
    // As planned: nothing to write, and what the cache holds is what is unchanged.
    let again = s.both(AckState::Pending, 200);
    assert!(again.patches.is_empty() && again.unchanged > 0);
    assert_eq!(
        s.settled.len(),
        2,
        "both routes remembered as needing nothing"
    );
    let hits = s.cached(AckState::Pending, 300);
    assert_eq!(hits.unchanged, again.unchanged);

    // The plan moves on (ACKed): the cache must not hide it.
    let acked = s.both(AckState::Acked, 400);
    then_route_r_is_written(&acked);
    s.apply(&acked);
    assert!(s.both(AckState::Acked, 500).patches.is_empty());

    // Someone else rewrites the route's status: ours is written again.
    s.given_their_rewrite_of_the_route();
    let after = s.both(AckState::Acked, 600);
    then_route_r_is_written(&after);
    s.apply(&after);

    // The Gateway goes: what the routes say about it changes.
    then_route_r_is_written(&s.both_without_the_gateway(700));
}

#[test]
fn our_writes_laid_over_a_trailing_store_are_what_the_store_will_show() {
    let store = mk_store(&web_world());
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

#[test]
fn a_route_deleted_or_changed_is_settled_no_more() {
    let mut s = Script::given_the_web_world();
    let first = s.both(AckState::Pending, 100);
    s.apply(&first);
    s.both(AckState::Pending, 200);
    assert_eq!(s.settled.len(), 2, "both routes settled");
    // Route r deleted: forgotten; the GRPCRoute stays settled, read or not.
    let r = s.store.get::<HttpRoute>("apps", "r").unwrap().clone();
    s.store.remove::<HttpRoute>("apps", "r");
    let gone = s.both(AckState::Pending, 300);
    assert!(gone.patches.is_empty(), "{gone:?}");
    assert_eq!(s.settled.len(), 1);
    assert_eq!(s.both(AckState::Pending, 400).unchanged, gone.unchanged);
    assert_eq!(s.settled.len(), 1);
    // Back, and someone else's status on it: read again, written, settled.
    s.store.insert(r);
    s.given_their_rewrite_of_the_route();
    let back = s.both(AckState::Pending, 500);
    then_route_r_is_written(&back);
    assert_eq!(s.settled.len(), 1, "r needs a write: not settled");
    s.apply(&back);
    s.both(AckState::Pending, 600);
    assert_eq!(s.settled.len(), 2);
}
