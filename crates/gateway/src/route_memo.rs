//! What one Gateway computed per route, kept from one translation of the
//! Gateway to the next: a route model that did not change (the same `Arc`)
//! costs a lookup, and what it gives is the same `Arc`, which the stages after
//! tell apart by identity.
//!
//! ```text
//!  (route model, listener)  ─► its entries in a route table   (route_table)
//!  (route model, parentRef) ─► its attachment and status       (attach)
//!  route table name         ─► its virtual hosts, each with the entries it
//!                               was assembled from             (route_table)
//! ```
//!
//! Valid for one Gateway model only: what it holds read the model. The
//! translator hands a Gateway the memo of its last translation while the
//! model stands (`incremental/reuse.rs`), else an empty one.

use crate::route::RouteModel;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// One Gateway's memos.
#[derive(Default)]
pub struct GatewayMemo {
    pub(crate) tables: Memo<crate::route_table::Entries>,
    pub(crate) attachments: Memo<crate::attach::Attached>,
    pub(crate) hosts: ByName<Vec<crate::route_table::Assembled>>,
}

impl GatewayMemo {
    /// A new translation of the Gateway: what the last one used is what this
    /// one may take; the rest goes.
    pub(crate) fn start(&self) {
        self.tables.start();
        self.attachments.start();
        self.hosts.start();
    }

    /// The translation is done: what it did not take from the last one goes,
    /// and with it the room it took (about a map of every route's, twice).
    pub(crate) fn finish(&self) {
        self.tables.before.take();
        self.attachments.before.take();
        self.hosts.before.take();
    }

    /// How many values this translation took from the memo.
    pub(crate) fn kept(&self) -> usize {
        self.tables.kept.get() + self.attachments.kept.get()
    }
}

/// Values by (route model, index): a listener's or a parentRef's.
pub(crate) struct Memo<V> {
    /// What the translation before used, taken from as this one goes.
    before: RefCell<ByRoute<V>>,
    /// What this translation used.
    now: RefCell<ByRoute<V>>,
    /// Of those, how many were kept (not made).
    kept: Cell<usize>,
}

/// By (route model address, index); each value holds its route model, so the
/// address is not reused while it is a key.
type ByRoute<V> = HashMap<(usize, usize), (Arc<RouteModel>, Arc<V>), BuildHasherDefault<WordMix>>;

/// A hasher for keys of machine words no one else chooses (addresses and
/// indices): a multiply-and-rotate per word. The default SipHash guards a
/// map against keys picked to collide, which these cannot be, and cost a
/// tenth of a one-route change on a Gateway with 10,000 routes.
#[derive(Default)]
pub(crate) struct WordMix(u64);

impl Hasher for WordMix {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }

    /// The product's high bits are its best mixed: a map indexes by the low.
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

impl<V> Default for Memo<V> {
    fn default() -> Self {
        Memo {
            before: RefCell::default(),
            now: RefCell::default(),
            kept: Cell::default(),
        }
    }
}

impl<V> Memo<V> {
    fn start(&self) {
        let now = self.now.take();
        // About as many values again: no growing while they are put back.
        *self.now.borrow_mut() = ByRoute::with_capacity_and_hasher(now.len(), Default::default());
        *self.before.borrow_mut() = now;
        self.kept.set(0);
    }

    /// The value for `route` at `index`: kept, or made by `make`.
    pub(crate) fn get_or_make(
        &self,
        (route, index): (&Arc<RouteModel>, usize),
        make: impl FnOnce() -> V,
    ) -> Arc<V> {
        let key = (Arc::as_ptr(route) as usize, index);
        if let Some((_, v)) = self.now.borrow().get(&key) {
            self.kept.set(self.kept.get() + 1);
            return v.clone();
        }
        let kept = self.before.borrow_mut().remove(&key);
        if kept.is_some() {
            self.kept.set(self.kept.get() + 1);
        }
        let (route, v) = kept.unwrap_or_else(|| (route.clone(), Arc::new(make())));
        self.now.borrow_mut().insert(key, (route, v.clone()));
        v
    }
}

/// Values by name (a route table's), each taken once per translation.
pub(crate) struct ByName<V> {
    before: RefCell<HashMap<String, V>>,
    now: RefCell<HashMap<String, V>>,
}

impl<V> Default for ByName<V> {
    fn default() -> Self {
        ByName {
            before: RefCell::default(),
            now: RefCell::default(),
        }
    }
}

impl<V> ByName<V> {
    fn start(&self) {
        *self.before.borrow_mut() = self.now.take();
    }

    /// What the translation before kept under `name`, taken.
    pub(crate) fn take(&self, name: &str) -> Option<V> {
        self.before.borrow_mut().remove(name)
    }

    /// Kept under `name` for the next translation.
    pub(crate) fn keep(&self, name: String, value: V) {
        self.now.borrow_mut().insert(name, value);
    }
}
