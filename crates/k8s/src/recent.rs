//! Read your writes: our recent writes, laid over a store that has not shown
//! them yet (pure). The one overlay both the status writer and the Service
//! reconciler use.
//!
//! ```text
//!  write based on what the store showed (a resourceVersion, or nothing)
//!     └─ returned `after` at its own resourceVersion ──record──► RecentWrites
//!  store shows ─ a version one of our writes replaced ─────────► still trailing: lay `after` over it
//!              ├ our write's version ──────────────────────────► caught up: forgotten
//!              └ any other (or nothing) ── covers(after)? ──yes─► forgotten
//!                                                      └─no──► still trailing
//! ```
//!
//! resourceVersions are opaque: they are compared for equality only, never
//! ordered. A watch delivers our own writes one by one, so a store showing an
//! earlier write of ours is as stale as one showing the version the first write
//! was based on: a write based on our previous one inherits what that replaced.

use std::collections::{BTreeMap, BTreeSet};

/// What a store shows of an object: `None` when it has none, else its
/// resourceVersion (`Some(None)`: present without one).
pub type Seen = Option<Option<String>>;

#[derive(Debug, Clone)]
struct Written<T> {
    /// A store showing one of these has not seen our write yet.
    stale: BTreeSet<Seen>,
    after: T,
    /// `after`'s own version.
    shows: Seen,
}

/// Our writes a store may not show yet, by key.
#[derive(Debug, Clone)]
pub struct RecentWrites<K, T> {
    writes: BTreeMap<K, Written<T>>,
}

impl<K, T> Default for RecentWrites<K, T> {
    fn default() -> Self {
        RecentWrites {
            writes: BTreeMap::new(),
        }
    }
}

impl<K: Ord, T> RecentWrites<K, T> {
    /// A write of `key`, made when the store showed `based_on`, that returned
    /// `after` at resourceVersion `after_version`.
    pub fn record(&mut self, key: K, based_on: Seen, after: T, after_version: Option<String>) {
        let shows = Some(after_version);
        let mut stale = BTreeSet::from([based_on.clone()]);
        if let Some(previous) = self.writes.get(&key)
            && (previous.shows == based_on || previous.stale.contains(&based_on))
        {
            stale.extend(previous.stale.iter().cloned());
            stale.insert(previous.shows.clone());
        }
        // A write that changed nothing returns the version it was applied to.
        stale.remove(&shows);
        self.writes.insert(
            key,
            Written {
                stale,
                after,
                shows,
            },
        );
    }

    /// Forgets every write `keep` refuses.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &T) -> bool) {
        self.writes.retain(|k, w| keep(k, &w.after));
    }

    /// The writes the store still trails, given what it `shows` of each key;
    /// forgets the others. A store showing something our writes did not
    /// replace has caught up when it `covers` our write (for status: always,
    /// the newer status is the truth; for a Service: it carries what we set).
    pub fn trailing(
        &mut self,
        shows: impl Fn(&K) -> Seen,
        covers: impl Fn(&K, &T) -> bool,
    ) -> impl Iterator<Item = (&K, &T)> {
        self.writes.retain(|k, w| {
            let now = shows(k);
            w.stale.contains(&now) || (now != w.shows && !covers(k, &w.after))
        });
        self.writes.iter().map(|(k, w)| (k, &w.after))
    }

    pub fn len(&self) -> usize {
        self.writes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(v: &str) -> Seen {
        Some(Some(v.to_string()))
    }

    fn rv(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    /// One key, `k`; the store shows `now`; nothing but our own version covers.
    fn trailing(w: &mut RecentWrites<&'static str, &'static str>, now: Seen) -> Vec<&'static str> {
        w.trailing(|_| now.clone(), |_, _| false)
            .map(|(_, t)| *t)
            .collect()
    }

    #[test]
    fn a_lagging_store_sees_our_writes_until_it_shows_the_last_one() {
        let mut w = RecentWrites::default();
        w.record("k", at("1"), "first", rv("2"));
        // Based on our own write (the overlay showed rv 2).
        w.record("k", at("2"), "second", rv("3"));
        for now in [at("1"), at("2")] {
            assert_eq!(
                trailing(&mut w, now.clone()),
                ["second"],
                "store at {now:?}"
            );
        }
        assert!(trailing(&mut w, at("3")).is_empty(), "caught up");
        assert!(w.is_empty());
    }

    #[test]
    fn a_write_based_on_someone_elses_version_starts_a_new_chain() {
        let mut w = RecentWrites::default();
        w.record("k", at("1"), "first", rv("2"));
        w.record("k", at("9"), "other", rv("10"));
        // Any version but the replaced ones covers (the status writer's rule).
        let status_rule = |w: &mut RecentWrites<&str, &str>, now: Seen| {
            w.trailing(|_| now.clone(), |_, _| true).count()
        };
        assert_eq!(
            status_rule(&mut w.clone(), at("9")),
            1,
            "9 is what we replaced"
        );
        assert_eq!(
            status_rule(&mut w, at("1")),
            0,
            "1 is no longer ours to hide"
        );
    }

    #[test]
    fn a_no_op_write_leaves_its_version_not_stale() {
        let mut w = RecentWrites::default();
        w.record("k", at("1"), "first", rv("2"));
        w.record("k", at("2"), "same", rv("2"));
        assert_eq!(trailing(&mut w.clone(), at("1")), ["same"]);
        assert!(trailing(&mut w, at("2")).is_empty());
    }

    #[test]
    fn another_version_ends_the_overlay_only_when_it_covers_our_write() {
        let mut w: RecentWrites<&str, &str> = RecentWrites::default();
        w.record("k", at("1"), "ours", rv("2"));
        let lacks: Vec<_> = w.trailing(|_| at("7"), |_, _| false).collect();
        assert_eq!(lacks.len(), 1, "7 lacks what we wrote: still trailing");
        let covers: Vec<_> = w.trailing(|_| at("7"), |_, _| true).collect();
        assert!(covers.is_empty(), "7 carries it: caught up");
    }

    #[test]
    fn a_create_trails_while_the_store_shows_nothing() {
        let mut w = RecentWrites::default();
        w.record("k", None, "created", rv("5"));
        assert_eq!(trailing(&mut w.clone(), None), ["created"]);
        // Gone after it was seen (not what we replaced): up to `covers`.
        let mut seen = w.clone();
        assert!(trailing(&mut seen, at("5")).is_empty());
        w.retain(|_, _| false);
        assert!(w.is_empty());
    }
}
