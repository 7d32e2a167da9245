//! The checker: status writes as a watch sees them, first requests, verdicts.

use super::*;

/// A route status write as the watch saw it.
pub(crate) struct Write {
    pub(crate) at: Instant,
    pub(crate) uid: String,
    pub(crate) generation: i64,
    /// The observedGeneration of each of our conditions.
    pub(crate) observed: Vec<i64>,
    pub(crate) accepted: Option<(bool, i64)>,
}

/// The one request sent when a route was first seen Accepted at (uid, G).
pub(crate) struct Observation {
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) generation: i64,
    pub(crate) seen: Instant,
    pub(crate) answered: Instant,
    pub(crate) answer: String,
}

/// Fed by the watches: records status writes, requests each new Accepted claim.
#[derive(Default)]
pub(crate) struct Checker {
    /// Per name, the uid and `status.parents` last seen: a spec change is no write.
    pub(crate) last: BTreeMap<String, (String, Value)>,
    pub(crate) writes: BTreeMap<String, Vec<Write>>,
    /// When each (uid, generation) was first seen Accepted.
    pub(crate) accepted: BTreeMap<(String, i64), Instant>,
    pub(crate) requested: BTreeSet<(String, i64)>,
    pub(crate) requests: Vec<tokio::task::JoinHandle<Observation>>,
    /// The Gateway Programmed at its generation, as last seen.
    pub(crate) programmed: bool,
    /// Accepted at a new generation while the Gateway was not Programmed.
    pub(crate) unprogrammed: usize,
    /// Writes of Accepted=False at a (uid, generation) seen Accepted=True before.
    pub(crate) flips: Vec<(Instant, String)>,
    /// When the Gateway went from Programmed to not, and its Programmed then.
    pub(crate) gateway_unprogrammed: Vec<(Instant, String)>,
    /// Gateway status writes that describe a generation it does not have.
    pub(crate) gateway_errors: Vec<String>,
}

impl Checker {
    pub(crate) fn gateway(&mut self, at: Instant, gw: &Value) {
        let programmed = gateway_programmed(gw);
        if self.programmed && !programmed {
            let c = condition(&gw["status"]["conditions"], "Programmed");
            self.gateway_unprogrammed
                .push((at, c.map_or("none".into(), Value::to_string)));
        }
        self.programmed = programmed;
        let generation = identity(gw).2;
        let listeners = gw["status"]["listeners"].as_array().into_iter().flatten();
        let mut conditions = std::iter::once(&gw["status"])
            .chain(listeners)
            .flat_map(|s| s["conditions"].as_array().into_iter().flatten());
        if conditions.any(|c| c["observedGeneration"].as_i64() > Some(generation)) {
            let e = format!("Gateway at generation {generation}: {}", gw["status"]);
            self.gateway_errors.push(e);
        }
    }

    pub(crate) fn route(&mut self, at: Instant, route: &Value) {
        let (name, uid, generation) = identity(route);
        let parents = route["status"]["parents"].clone();
        let wrote = match self
            .last
            .insert(name.clone(), (uid.clone(), parents.clone()))
        {
            Some((u, p)) if u == uid => p != parents,
            _ => parents.as_array().is_some_and(|p| !p.is_empty()),
        };
        if wrote {
            let ours = our_parent(route, "gw", None).and_then(|p| p["conditions"].as_array());
            let observed = ours.into_iter().flatten();
            let write = Write {
                at,
                uid: uid.clone(),
                generation,
                observed: observed
                    .filter_map(|c| c["observedGeneration"].as_i64())
                    .collect(),
                accepted: accepted_at(route),
            };
            self.writes.entry(name.clone()).or_default().push(write);
        }
        let (ok, g) = match accepted_at(route) {
            Some((false, g)) if wrote && self.accepted.contains_key(&(uid.clone(), g)) => {
                let c = our_parent(route, "gw", None)
                    .and_then(|p| condition(&p["conditions"], "Accepted"));
                let flip = format!(
                    "{name} at generation {g}: {}",
                    c.map_or("none".into(), Value::to_string)
                );
                self.flips.push((at, flip));
                return;
            }
            Some(a) => a,
            None => return,
        };
        let key = (uid.clone(), g);
        if !ok || self.requested.contains(&key) {
            return;
        }
        self.accepted.entry(key.clone()).or_insert(at);
        if !self.programmed {
            self.unprogrammed += 1;
            return;
        }
        self.requested.insert(key);
        self.requests.push(tokio::task::spawn_blocking(move || {
            let answer = ask(80, &format!("/{name}"));
            let answered = Instant::now();
            Observation {
                name,
                uid,
                generation: g,
                seen: at,
                answered,
                answer,
            }
        }));
    }
}

/// The verdicts over a run.
#[derive(Default)]
pub(crate) struct Tally {
    /// First requests judged (not superseded).
    pub(crate) observed: usize,
    pub(crate) superseded: usize,
    /// `(route name, what is wrong)`.
    pub(crate) divergences: Vec<(String, String)>,
}

impl Tally {
    pub(crate) fn new(
        t0: Instant,
        observations: &[Observation],
        driver: &Driver,
        checker: &Checker,
    ) -> Tally {
        let ms = |t: Instant| t.saturating_duration_since(t0).as_millis();
        let mut tally = Tally::default();
        for o in observations {
            let changes = &driver.history[&o.name];
            let Some(k) = changes.iter().position(|c| c.made(&o.uid, o.generation)) else {
                let why = format!(
                    "Accepted at generation {} of uid {}, which no change made",
                    o.generation, o.uid
                );
                tally.divergences.push((o.name.clone(), why));
                continue;
            };
            // Another change issued before the answer came back may be what answered.
            if changes
                .get(k + 1)
                .is_some_and(|next| next.issued < o.answered)
            {
                tally.superseded += 1;
                continue;
            }
            tally.observed += 1;
            let want = changes[k].made.as_ref().unwrap().2;
            if o.answer != want {
                let why = format!(
                    "Accepted at generation {} (uid {}) says {want}; the first request got {:?} (seen {} ms, answered {} ms)",
                    o.generation,
                    o.uid,
                    o.answer,
                    ms(o.seen),
                    ms(o.answered)
                );
                tally.divergences.push((o.name.clone(), why));
            }
        }
        // Every status write describes its own object.
        for (name, writes) in &checker.writes {
            let changes = &driver.history[name];
            for w in writes {
                let made = |g: &i64| changes.iter().any(|c| c.made(&w.uid, *g));
                if let Some(g) = w.observed.iter().find(|g| **g > w.generation || !made(g)) {
                    let why = format!(
                        "status write on uid {} at generation {} carries observedGeneration {g} ({} ms)",
                        w.uid,
                        w.generation,
                        ms(w.at)
                    );
                    tally.divergences.push((name.clone(), why));
                }
            }
        }
        for e in &checker.gateway_errors {
            tally.divergences.push(("gw".to_string(), e.clone()));
        }
        tally
    }
}

/// A route's changes and status writes in time order, in ms from `t0`.
pub(crate) fn timeline(t0: Instant, changes: &[Change], writes: &[Write]) -> String {
    let ms = |t: Instant| t.saturating_duration_since(t0).as_millis();
    let mut lines: Vec<(Instant, String)> = Vec::new();
    for c in changes {
        let what = match &c.made {
            Some((uid, g, backend)) => format!("uid {uid} generation {g} → {backend}"),
            None => "deleted".to_string(),
        };
        let line = format!(
            "{:>7} ms change (returned {} ms): {what}",
            ms(c.issued),
            ms(c.returned)
        );
        lines.push((c.issued, line));
    }
    for w in writes {
        let line = format!(
            "{:>7} ms status: uid {} generation {}, observedGeneration {:?}, Accepted {:?}",
            ms(w.at),
            w.uid,
            w.generation,
            w.observed,
            w.accepted
        );
        lines.push((w.at, line));
    }
    lines.sort_by_key(|l| l.0);
    let lines: Vec<String> = lines.into_iter().map(|l| l.1).collect();
    lines.join("\n")
}
