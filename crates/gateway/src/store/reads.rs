//! Which objects of the kinds read by reference a translation looked at.
//!
//! Most Secrets, ConfigMaps, Services and Namespaces of a cluster are no
//! Gateway's input: a Secret is read because a listener names it, a Service
//! because a backendRef does. The incremental translator
//! (`crate::incremental`) keeps its cache while the ones it read stay the
//! same, so another application's ConfigMap changing every few seconds costs
//! no translation. A translation records what it reads ([`recording`]): each
//! key it looks up, found or not (one created later is a change), and each of
//! these kinds it walks whole.
//!
//! Recording is per thread: a translation runs on one.

use aether_ir::{Kind, ObjectRef};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

/// The kinds read by reference, sorted.
pub(crate) const BY_REFERENCE: [Kind; 4] = [
    Kind::Service,
    Kind::Secret,
    Kind::ConfigMap,
    Kind::Namespace,
];

/// What one translation read of the kinds [`BY_REFERENCE`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Reads {
    /// Each object looked up, by kind.
    pub keys: BTreeMap<Kind, BTreeSet<ObjectRef>>,
    /// The kinds walked whole ([`crate::Store::all`]).
    pub whole: BTreeSet<Kind>,
}

thread_local! {
    static READS: RefCell<Option<Reads>> = const { RefCell::new(None) };
}

/// `kind` `key` was looked up.
pub(crate) fn note(kind: Kind, key: &ObjectRef) {
    READS.with(|r| {
        if let Some(reads) = r.borrow_mut().as_mut() {
            let keys = reads.keys.entry(kind).or_default();
            if !keys.contains(key) {
                keys.insert(key.clone());
            }
        }
    });
}

/// Every object of `kind` was walked.
pub(crate) fn note_all(kind: Kind) {
    READS.with(|r| {
        if let Some(reads) = r.borrow_mut().as_mut() {
            reads.whole.insert(kind);
        }
    });
}

/// Runs `f`, recording what it reads.
pub(crate) fn recording<R>(f: impl FnOnce() -> R) -> (R, Reads) {
    let outer = READS.with(|r| r.borrow_mut().replace(Reads::default()));
    let out = f();
    let reads = READS.with(|r| std::mem::replace(&mut *r.borrow_mut(), outer));
    (out, reads.unwrap_or_default())
}
