//! Fuzzing the second input surface: what an ADS client sends. Random sequences
//! of SotW and Delta requests (any type, any names, fresh, current, stale or
//! made-up nonces, ACKs and NACKs) interleaved with snapshot changes drive the
//! stream state machines. Whatever the client does, they must not panic, answer
//! only types the client asked for, send only resources the snapshot holds, and
//! number their responses in increasing nonces.
//!
//! Bounded by `AETHER_FUZZ_SECONDS` (default 3), as the loader's fuzz test is.

use crate::fixtures::{CDS, EDS, LDS, RDS, SDS, any_names, mk_delta, mk_request, mk_snapshot};
use crate::{DeltaStream, Output, SotwStream};
use aether_ir::fuzz::fuzz_for;
use aether_xds::{ResourceType, Snapshot};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::rpc::Status;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::BTreeSet;
use std::sync::Arc;

const TYPES: [ResourceType; 5] = [CDS, EDS, LDS, RDS, SDS];
const NAMES: [&str; 5] = ["a", "b", "c", "routes", ""];

#[derive(Debug, Clone)]
enum Nonce {
    Empty,
    Last,
    Stale(u8),
    Garbage(String),
}

#[derive(Debug, Clone)]
enum Step {
    Request {
        ty: usize,
        names: Vec<usize>,
        unsubscribe: Vec<usize>,
        nonce: Nonce,
        nack: Option<String>,
    },
    Snapshot(u8),
}

fn step() -> impl Strategy<Value = Step> {
    let nonce = prop_oneof![
        Just(Nonce::Empty),
        Just(Nonce::Last),
        any::<u8>().prop_map(Nonce::Stale),
        "\\PC{0,6}".prop_map(Nonce::Garbage),
    ];
    prop_oneof![
        3 => (
            0..TYPES.len(),
            prop::collection::vec(0..NAMES.len(), 0..4),
            prop::collection::vec(0..NAMES.len(), 0..2),
            nonce,
            prop::option::of("\\PC{0,12}"),
        )
            .prop_map(|(ty, names, unsubscribe, nonce, nack)| Step::Request {
                ty,
                names,
                unsubscribe,
                nonce,
                nack,
            }),
        1 => any::<u8>().prop_map(Step::Snapshot),
    ]
}

/// One of a few snapshots: which resources exist, at which revisions.
fn snapshot(n: u8) -> Arc<Snapshot> {
    let rev = u32::from(n % 3);
    let mut resources = vec![(CDS, "a", rev), (EDS, "a", rev), (LDS, "a", rev)];
    if n.is_multiple_of(2) {
        resources.extend([(CDS, "b", 1), (EDS, "b", 1), (RDS, "routes", rev)]);
    }
    if n.is_multiple_of(5) {
        resources.push((SDS, "c", rev));
    }
    let members: &[(ResourceType, &str)] = if n.is_multiple_of(2) {
        &[(LDS, "a"), (RDS, "routes")]
    } else {
        &[(LDS, "a")]
    };
    mk_snapshot(&resources, &[("infra/web", members)])
}

fn names_of(ids: &[usize]) -> Vec<String> {
    ids.iter().map(|i| NAMES[*i].to_string()).collect()
}

fn nonce_for(nonce: &Nonce, last: u64) -> String {
    match nonce {
        Nonce::Empty => String::new(),
        Nonce::Last => last.to_string(),
        Nonce::Stale(n) => (last.saturating_sub(u64::from(*n))).to_string(),
        Nonce::Garbage(s) => s.clone(),
    }
}

/// What every response must be, whatever the client sent.
struct Checker {
    asked: BTreeSet<ResourceType>,
    last_nonce: u64,
    /// Every (type, name, version) published so far: make-before-break may
    /// still send what a later snapshot dropped, never anything else.
    published: BTreeSet<(ResourceType, String, String)>,
}

impl Checker {
    fn response(
        &mut self,
        type_url: &str,
        nonce: &str,
        names: Vec<String>,
    ) -> Result<(), TestCaseError> {
        let ty = ResourceType::from_type_url(type_url);
        prop_assert!(ty.is_some(), "a type we serve: {type_url}");
        let ty = ty.unwrap();
        prop_assert!(self.asked.contains(&ty), "{ty:?} was never asked for");
        let n: u64 = nonce
            .parse()
            .map_err(|_| TestCaseError::fail(format!("nonce {nonce:?}")))?;
        prop_assert!(n > self.last_nonce, "nonce {n} after {}", self.last_nonce);
        self.last_nonce = n;
        for name in names {
            prop_assert!(
                self.published
                    .iter()
                    .any(|(t, n, _)| *t == ty && *n == name),
                "{ty:?} {name:?} was never published"
            );
        }
        Ok(())
    }

    fn publish(&mut self, snapshot: &Snapshot) {
        for (ty, by_name) in &snapshot.resources {
            for (name, r) in by_name.iter() {
                self.published
                    .insert((*ty, name.clone(), r.version.clone()));
            }
        }
    }
}

fn status(message: &Option<String>) -> Option<Status> {
    message.as_ref().map(|m| Status {
        code: 13,
        message: m.clone(),
        ..Default::default()
    })
}

/// What one step does to a stream: a request, or a new snapshot.
enum Move<'a> {
    /// A request of `ty` for `names` (Delta also drops `unsubscribe`) answering
    /// `nonce`, a NACK if it carries `nack`.
    Ask {
        ty: ResourceType,
        names: &'a [&'a str],
        unsubscribe: &'a [&'a str],
        nonce: &'a str,
        nack: Option<Status>,
    },
    Publish(Arc<Snapshot>),
}

/// A stream state machine as the fuzzer drives it.
trait Fuzzed {
    type Response;
    fn play(&mut self, step: Move<'_>) -> Output<Self::Response>;
    /// A response's type URL, nonce and resource names.
    fn sent(r: &Self::Response) -> (&str, &str, Vec<String>);
}

impl Fuzzed for SotwStream {
    type Response = DiscoveryResponse;
    fn play(&mut self, step: Move<'_>) -> Output<DiscoveryResponse> {
        match step {
            Move::Ask {
                ty,
                names,
                nonce,
                nack,
                ..
            } => self.on_request(DiscoveryRequest {
                error_detail: nack,
                ..mk_request(ty, names, nonce)
            }),
            Move::Publish(snapshot) => self.on_snapshot(snapshot),
        }
    }
    fn sent(r: &DiscoveryResponse) -> (&str, &str, Vec<String>) {
        let ty = ResourceType::from_type_url(&r.type_url).unwrap_or(CDS);
        (&r.type_url, &r.nonce, any_names(ty, &r.resources))
    }
}

impl Fuzzed for DeltaStream {
    type Response = DeltaDiscoveryResponse;
    fn play(&mut self, step: Move<'_>) -> Output<DeltaDiscoveryResponse> {
        match step {
            Move::Ask {
                ty,
                names,
                unsubscribe,
                nonce,
                nack,
            } => self.on_request(DeltaDiscoveryRequest {
                error_detail: nack,
                ..mk_delta(ty, names, unsubscribe, nonce)
            }),
            Move::Publish(snapshot) => self.on_snapshot(snapshot),
        }
    }
    fn sent(r: &DeltaDiscoveryResponse) -> (&str, &str, Vec<String>) {
        let names = r.resources.iter().map(|res| res.name.clone()).collect();
        (&r.type_url, &r.nonce, names)
    }
}

/// Plays `steps` on `stream`, which starts at `snapshot(0)`, checking every
/// response.
fn drive<S: Fuzzed>(mut stream: S, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let mut current = snapshot(0);
    let mut check = Checker {
        asked: BTreeSet::new(),
        last_nonce: 0,
        published: BTreeSet::new(),
    };
    check.publish(&current);
    for step in steps {
        let out = match step {
            Step::Request {
                ty,
                names,
                unsubscribe,
                nonce,
                nack,
            } => {
                check.asked.insert(TYPES[ty]);
                let (sub, unsub) = (names_of(&names), names_of(&unsubscribe));
                let sub: Vec<&str> = sub.iter().map(String::as_str).collect();
                let unsub: Vec<&str> = unsub.iter().map(String::as_str).collect();
                stream.play(Move::Ask {
                    ty: TYPES[ty],
                    names: &sub,
                    unsubscribe: &unsub,
                    nonce: &nonce_for(&nonce, check.last_nonce),
                    nack: status(&nack),
                })
            }
            Step::Snapshot(n) => {
                current = snapshot(n);
                check.publish(&current);
                stream.play(Move::Publish(current.clone()))
            }
        };
        for r in &out.responses {
            let (type_url, nonce, names) = S::sent(r);
            check.response(type_url, nonce, names)?;
        }
    }
    Ok(())
}

#[test]
fn sotw_streams_survive_any_client() {
    let cases = fuzz_for(prop::collection::vec(step(), 1..40), |steps| {
        drive(SotwStream::new(snapshot(0)), steps)
    });
    eprintln!("SotW: {cases} request sequences");
}

#[test]
fn delta_streams_survive_any_client() {
    let cases = fuzz_for(prop::collection::vec(step(), 1..40), |steps| {
        drive(DeltaStream::new(snapshot(0)), steps)
    });
    eprintln!("Delta: {cases} request sequences");
}
