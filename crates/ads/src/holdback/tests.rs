//! Event scripts: an Envoy that refuses any route table holding `/bad`.

use super::*;
use crate::event::{Event, Nack};
use crate::fixtures::mk_routes_snapshot;
use crate::fleet::{Fleet, Protocol};
use aether_ir::ObjectRef;

const TABLE: &str = "edge_rt_infra_web_80";

/// The route table of a snapshot: (version, whether Envoy refuses it).
fn table(s: &Snapshot) -> (String, bool) {
    let r = &s.resources[&ResourceType::Route][TABLE];
    let bad = r.body.value.windows(4).any(|w| w == b"/bad");
    (r.version.clone(), bad)
}

/// The paths each route of the served table matches, by route.
fn paths(s: &Snapshot) -> Vec<String> {
    use envoy_types::pb::envoy::config::route::v3::{
        RouteConfiguration, route_match::PathSpecifier,
    };
    use prost::Message;
    let r = &s.resources[&ResourceType::Route][TABLE];
    let rc = RouteConfiguration::decode(r.body.value.as_slice()).unwrap();
    let mut out: Vec<String> = rc
        .virtual_hosts
        .iter()
        .flat_map(|vh| &vh.routes)
        .map(|r| {
            let key = aether_ir::names::route_key_of(&r.name).unwrap().to_string();
            let path = match r.r#match.as_ref().and_then(|m| m.path_specifier.as_ref()) {
                Some(PathSpecifier::PathSeparatedPrefix(p) | PathSpecifier::Prefix(p)) => p.clone(),
                other => format!("{other:?}"),
            };
            format!("{}={path}", key.rsplit('/').next().unwrap())
        })
        .collect();
    out.sort();
    out
}

/// One Envoy on node `n`: what it holds of the table, and a refusal standing.
struct Envoy {
    acked: Option<String>,
    refused: Option<String>,
}

impl Envoy {
    fn tables(&self) -> Vec<NodeTables> {
        vec![NodeTables {
            node: "n".into(),
            acked: self
                .acked
                .iter()
                .map(|v| (TABLE.to_string(), v.clone()))
                .collect(),
            refused: self
                .refused
                .iter()
                .map(|v| (TABLE.to_string(), v.clone(), "regex too big".to_string()))
                .collect(),
        }]
    }

    /// Envoy gets `served`: takes its table or refuses it.
    fn push(&mut self, served: &Snapshot) {
        let (version, bad) = table(served);
        if self.acked.as_ref() == Some(&version) {
            return;
        }
        if bad {
            self.refused = Some(version);
        } else {
            self.acked = Some(version);
        }
    }

    /// One round: the hold-back sees what Envoy holds, Envoy gets what it serves.
    fn round(&mut self, hb: &mut HoldBack, desired: &Arc<Snapshot>) -> Arc<Snapshot> {
        let (served, absorbed) = hb.update(desired, &self.tables());
        // The fleet drops refusals the holds answer for.
        if absorbed
            .iter()
            .any(|(_, v)| Some(v) == self.refused.as_ref())
        {
            self.refused = None;
        }
        self.push(&served);
        served
    }

    /// Rounds until nothing moves.
    fn settle(&mut self, hb: &mut HoldBack, desired: &Arc<Snapshot>) -> Arc<Snapshot> {
        let mut last = String::new();
        for _ in 0..20 {
            let served = self.round(hb, desired);
            let now = format!("{:?} {:?} {}", self.acked, self.refused, served.version);
            if now == last {
                return served;
            }
            last = now;
        }
        panic!("did not settle");
    }
}

fn alone(hb: &HoldBack) -> Vec<&str> {
    hb.holds()
        .into_iter()
        .filter(|(_, h)| h.alone)
        .map(|(k, _)| k)
        .collect()
}

#[test]
fn a_refused_route_is_served_as_it_was_and_the_rest_of_its_table_goes_on() {
    let mut hb = HoldBack::default();
    let mut envoy = Envoy {
        acked: None,
        refused: None,
    };
    let s1 = mk_routes_snapshot(&[("a", "/a"), ("b", "/b")]);
    envoy.settle(&mut hb, &s1);
    assert_eq!(envoy.acked, Some(table(&s1).0));

    // b turns into something Envoy refuses while c is added: one push.
    let s2 = mk_routes_snapshot(&[("a", "/a"), ("b", "/bad"), ("c", "/c")]);
    let served = envoy.settle(&mut hb, &s2);
    assert_eq!(
        paths(&served),
        ["a=/a", "b=/b", "c=/c"],
        "b as it was, c goes on"
    );
    assert_eq!(
        envoy.acked,
        Some(table(&served).0),
        "Envoy holds the table served"
    );
    assert_eq!(envoy.refused, None, "the refusal is the held route's now");
    assert_eq!(
        alone(&hb),
        ["HTTPRoute/app/b"],
        "c was tried alone and taken"
    );
    let hold = &hb.holds()["HTTPRoute/app/b"];
    assert!(hold.refusal().unwrap().message.contains("regex too big"));

    // An unrelated edit of the table goes on; b stays held.
    let s3 = mk_routes_snapshot(&[("a", "/a2"), ("b", "/bad"), ("c", "/c")]);
    let served = envoy.settle(&mut hb, &s3);
    assert_eq!(paths(&served), ["a=/a2", "b=/b", "c=/c"]);
    assert_eq!(alone(&hb), ["HTTPRoute/app/b"]);

    // b's own edit is a new try, and Envoy takes it.
    let s4 = mk_routes_snapshot(&[("a", "/a2"), ("b", "/b2"), ("c", "/c")]);
    let served = envoy.settle(&mut hb, &s4);
    assert!(
        Arc::ptr_eq(&served, &s4),
        "nothing held: the desired snapshot itself"
    );
    assert!(hb.holds().is_empty());
}

#[test]
fn a_refused_new_route_is_left_out_until_it_changes() {
    let mut hb = HoldBack::default();
    let mut envoy = Envoy {
        acked: None,
        refused: None,
    };
    envoy.settle(&mut hb, &mk_routes_snapshot(&[("a", "/a")]));
    let s2 = mk_routes_snapshot(&[("a", "/a"), ("n", "/bad")]);
    let served = envoy.settle(&mut hb, &s2);
    assert_eq!(paths(&served), ["a=/a"]);
    assert_eq!(alone(&hb), ["HTTPRoute/app/n"]);
    // Removing it ends the hold too.
    let s3 = mk_routes_snapshot(&[("a", "/a")]);
    let served = envoy.settle(&mut hb, &s3);
    assert!(Arc::ptr_eq(&served, &s3));
    assert!(hb.holds().is_empty());
}

#[test]
fn with_the_hold_back_bypassed_the_whole_table_waits() {
    // The same script as the first test, without the hold-back: Envoy keeps
    // the old table, so c (a good route) is not served.
    let mut envoy = Envoy {
        acked: None,
        refused: None,
    };
    let s1 = mk_routes_snapshot(&[("a", "/a"), ("b", "/b")]);
    envoy.push(&s1);
    let s2 = mk_routes_snapshot(&[("a", "/a"), ("b", "/bad"), ("c", "/c")]);
    envoy.push(&s2);
    assert_eq!(envoy.acked, Some(table(&s1).0));
    assert_eq!(envoy.refused, Some(table(&s2).0));
}

#[test]
fn the_fleet_puts_the_refusal_on_the_route_not_on_its_gateway() {
    let fleet = Fleet::new();
    let stream = fleet.connect("n", Protocol::Delta);
    let ack_all = |s: &Snapshot| {
        for ty in ResourceType::ALL {
            let versions: Versions = s
                .of_type(ty)
                .map(|r| (r.name.clone(), r.version.clone()))
                .collect();
            stream.record(&Event::Acked { ty, versions });
        }
    };
    let s1 = mk_routes_snapshot(&[("a", "/a"), ("b", "/b")]);
    ack_all(&fleet.serve(&s1));
    let s2 = mk_routes_snapshot(&[("a", "/a2"), ("b", "/bad")]);
    let sent = fleet.serve(&s2);
    let (version, bad) = table(&sent);
    assert!(bad);
    stream.record(&Event::Nacked {
        ty: ResourceType::Route,
        nack: Nack {
            version: version.clone(),
            message: "regex too big".into(),
            rejected: [(TABLE.to_string(), version)].into(),
        },
    });
    let gw = ObjectRef::new("infra", "web");
    // Before the hold-back answers: the Gateway carries the NACK.
    let before = &fleet.served_by("n", &s2)[&gw];
    assert!(matches!(before.gateway, aether_ir::AckState::Nacked(_)));
    // Two suspects: both held, then tried one at a time as Envoy takes each.
    for _ in 0..4 {
        let served = fleet.serve(&s2);
        let (v, bad) = table(&served);
        if bad {
            stream.record(&Event::Nacked {
                ty: ResourceType::Route,
                nack: Nack {
                    version: v.clone(),
                    message: "regex too big".into(),
                    rejected: [(TABLE.to_string(), v)].into(),
                },
            });
        } else {
            ack_all(&served);
        }
    }
    let served = fleet.serve(&s2);
    assert_eq!(paths(&served), ["a=/a2", "b=/b"]);
    let after = &fleet.served_by("n", &s2)[&gw];
    assert_eq!(after.gateway, aether_ir::AckState::Acked, "{after:?}");
    assert!(
        after.routes.contains("HTTPRoute/app/a"),
        "a's change is served"
    );
    assert!(!after.routes.contains("HTTPRoute/app/b"));
    assert!(
        after.refused["HTTPRoute/app/b"]
            .message
            .contains("regex too big")
    );
}

#[test]
fn among_many_new_routes_the_refused_one_is_found_by_halving() {
    // An Envoy that never held the table: every route is a suspect.
    let mut hb = HoldBack::default();
    let mut envoy = Envoy {
        acked: None,
        refused: None,
    };
    let names: Vec<String> = (0..32).map(|i| format!("r{i:02}")).collect();
    let mut routes: Vec<(&str, String)> = names
        .iter()
        .map(|n| (n.as_str(), format!("/{n}")))
        .collect();
    routes[13].1 = "/bad".into();
    let routes: Vec<(&str, &str)> = routes.iter().map(|(n, p)| (*n, p.as_str())).collect();
    let desired = mk_routes_snapshot(&routes);
    // Pushes (versions Envoy was sent) until only the refused route is held.
    let mut pushes = 0;
    let mut last = String::new();
    while !(alone(&hb) == ["HTTPRoute/app/r13"] && hb.holds().len() == 1) {
        let served = envoy.round(&mut hb, &desired);
        if served.version != last {
            pushes += 1;
            last = served.version.clone();
        }
        // One route at a time would take a push per route, 32 or more.
        assert!(
            pushes <= 24,
            "found by halving in ~3·log2(32) pushes, not one by one"
        );
    }
    let served = envoy.settle(&mut hb, &desired);
    assert_eq!(
        paths(&served).len(),
        31,
        "every other route served: {:?}",
        paths(&served)
    );
    println!("{pushes} pushes");
}
