//! The churn driver: seeded changes to routes `r<i>`, each one kept.

use super::*;

/// xorshift64: the driver's choices, replayable from the seed.
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    pub(crate) fn below(&mut self, n: usize) -> usize {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x % n as u64) as usize
    }
}

/// One change the driver made to a route.
pub(crate) struct Change {
    pub(crate) issued: Instant,
    pub(crate) returned: Instant,
    /// `(uid, generation, backend)` as the API server returned it; `None`: deleted.
    pub(crate) made: Option<(String, i64, &'static str)>,
}

impl Change {
    pub(crate) fn made(&self, uid: &str, generation: i64) -> bool {
        matches!(&self.made, Some((u, g, _)) if u == uid && *g == generation)
    }
}

/// Creates, updates, deletes and re-creates routes `r<i>`, keeping every change.
pub(crate) struct Driver {
    pub(crate) api: kube::Api<HttpRoute>,
    pub(crate) rng: XorShift,
    /// Per route name, every change in the order made.
    pub(crate) history: BTreeMap<String, Vec<Change>>,
    /// The backend each route points at, or last did before its delete.
    pub(crate) backend: BTreeMap<usize, &'static str>,
    pub(crate) live: BTreeSet<usize>,
}

impl Driver {
    /// Creates or updates `r<i>` (server-side apply) to point at `backend`.
    pub(crate) async fn apply(&mut self, i: usize, backend: &'static str) {
        let name = format!("r{i}");
        let ssa = PatchParams::apply("aether-churn").force();
        let issued = Instant::now();
        let patch = Patch::Apply(route(&name, backend));
        let r = self.api.patch(&name, &ssa, &patch).await;
        let r = r.unwrap_or_else(|e| panic!("apply {name}: {e}"));
        let (_, uid, generation) = identity(&serde_json::to_value(r).unwrap());
        self.record(name, issued, Some((uid, generation, backend)));
        self.backend.insert(i, backend);
        self.live.insert(i);
    }

    pub(crate) async fn delete(&mut self, i: usize) {
        let name = format!("r{i}");
        let issued = Instant::now();
        let r = self.api.delete(&name, &DeleteParams::default()).await;
        r.unwrap_or_else(|e| panic!("delete {name}: {e}"));
        self.record(name, issued, None);
        self.live.remove(&i);
    }

    pub(crate) fn record(
        &mut self,
        name: String,
        issued: Instant,
        made: Option<(String, i64, &'static str)>,
    ) {
        let returned = Instant::now();
        let change = Change {
            issued,
            returned,
            made,
        };
        self.history.entry(name).or_default().push(change);
    }

    /// A backend other than the one `r<i>` points at (or last did).
    pub(crate) fn other(&mut self, i: usize) -> &'static str {
        let now = self.backend.get(&i).copied().unwrap_or(BACKENDS[0]);
        let at = BACKENDS.iter().position(|b| *b == now).unwrap();
        let n = BACKENDS.len();
        BACKENDS[(at + 1 + self.rng.below(n - 1)) % n]
    }

    /// One change to a random route: (re-)create it if absent; else update it,
    /// delete it, or delete and at once re-create it.
    pub(crate) async fn step(&mut self, routes: usize) {
        let i = self.rng.below(routes);
        let roll = self.rng.below(4);
        if self.live.contains(&i) && roll >= 2 {
            self.delete(i).await;
            if roll == 2 {
                return;
            }
        }
        let backend = self.other(i);
        self.apply(i, backend).await;
    }
}
