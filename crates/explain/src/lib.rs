//! `aether-edge explain`: what the edge does with one request, and why, in the
//! words of the Gateway API (pure: a store, its translation and a request in,
//! an [`Explanation`] out).
//!
//! ```text
//!  address:port ──► Gateway + listener(s) (or: none, and why)       step "listener"
//!  SNI          ──► TLS chain (HTTPS / TLS ports)                    step "tls"
//!  Host         ──► virtual host of the route table                  step "virtual host"
//!  request      ──► routes in precedence order: the winner, the ones
//!                   before it (why each did not match), the ones after
//!                   it that match too                                step "route"
//!  routes naming this Gateway that are not attached, and why        step "not attached"
//!  the winner   ──► filters, then backends with weights / redirect /
//!                   a fixed answer (404, 421, 500)                   steps "filters", "backend"
//! ```
//!
//! It walks the IR Envoy is given (the same one `translate` prints), with the
//! matching rules of the Envoy config built from it (see [`matching`]), so its
//! answer is what that config does. What was planned but is not in the IR (a
//! Gateway or listener that is not programmed) is explained from the status plan.

pub mod matching;
mod render;
pub mod request;
mod route;
mod served;

pub use request::{Request, RequestError, Scheme};
pub use served::NodeAck;

use aether_gateway::StatusPlan;
use aether_gateway::status::{Condition, condition};
use aether_gateway::store::Store;
use aether_gateway::vocabulary::{Word, gateway as gw_words};
use aether_ir::{Ir, ObjectRef, PortProtocol};
use gateway_api::apis::experimental::gateways::Gateway;
use matching::HostMatch;
use serde::Serialize;

/// What the edge does with the request, step by step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    pub request: String,
    /// The Gateway that takes the request, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<ObjectRef>,
    pub steps: Vec<Step>,
    pub answer: Answer,
    /// Live: where an Envoy does not serve what the answer describes (behind,
    /// NACKed, not connected). Empty offline, and when every Envoy serves it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub stage: &'static str,
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Step {
    pub(crate) fn new(stage: &'static str, text: impl Into<String>) -> Self {
        Step {
            stage,
            text: text.into(),
            notes: Vec::new(),
        }
    }
}

/// How the request ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Answer {
    /// Proxied to these backends (one is picked per request, by weight).
    #[serde(rename_all = "camelCase")]
    Forwarded { backends: Vec<Share> },
    /// A redirect, with the Location it carries.
    Redirect { status: u16, location: String },
    /// An answer from Envoy itself (404, 421, 500, 503).
    Respond { status: u16, why: String },
    /// No HTTP answer: the connection is refused or closed, or TLS fails.
    Closed { why: String },
}

/// One backend and its share of the requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Share {
    /// `Service <ns>/<name>:<port>`.
    pub backend: String,
    pub cluster: String,
    pub weight: u32,
    /// The sum of the weights (invalid backendRefs' share included).
    pub of: u32,
    pub endpoints: usize,
}

impl Explanation {
    /// Human text: one numbered line per step, its notes indented, the answer last.
    pub fn to_text(&self) -> String {
        render::text(self)
    }
}

/// Explains `request` against what the translation (`ir`, `plan`) of `store`
/// serves. A Gateway takes the request when the address is one it binds or one
/// of its status addresses (a load balancer's) in `plan`.
pub fn explain(store: &Store, ir: &Ir, plan: &StatusPlan, request: &Request) -> Explanation {
    let mut steps = Vec::new();
    let mut gateway = None;
    let answer = walk(&View { store, ir, plan }, request, &mut steps, &mut gateway);
    Explanation {
        request: request.summary(),
        gateway,
        steps,
        answer,
        caveats: Vec::new(),
    }
}

/// What the explanation reads.
pub(crate) struct View<'a> {
    pub store: &'a Store,
    pub ir: &'a Ir,
    pub plan: &'a StatusPlan,
}

fn walk(
    t: &View<'_>,
    r: &Request,
    steps: &mut Vec<Step>,
    gateway: &mut Option<ObjectRef>,
) -> Answer {
    let store = t.store;
    let udp = false;
    let served: Vec<(&aether_ir::Gateway, &aether_ir::Port)> =
        t.ir.gateways
            .iter()
            .filter(|g| binds(g, t.plan, &r.address))
            .filter_map(|g| {
                let p = g
                    .ports
                    .iter()
                    .find(|p| p.port == r.port && p.protocol.is_udp() == udp)?;
                Some((&**g, p))
            })
            .collect();
    let Some(&(gw, port)) = served.first() else {
        return not_served(store, t, r, steps);
    };
    let key = gw.object_ref();
    *gateway = Some(key.clone());
    let mut step = Step::new(
        "listener",
        format!(
            "Gateway {key} takes {}:{} ({} {})",
            r.address,
            r.port,
            protocol_name(port.protocol),
            listeners_text(store, &key, r)
        ),
    );
    if r.address.parse::<std::net::IpAddr>().is_err() {
        step.notes.push(format!(
            "{} is a name, not an address: any Gateway with a listener on port {} could be the one",
            r.address, r.port
        ));
    }
    for (other, _) in served.iter().skip(1) {
        step.notes.push(format!(
            "Gateway {} also binds port {}",
            other.object_ref(),
            r.port
        ));
    }
    if let Some(s) = t.plan.gateways.get(&key)
        && let Some(c) = condition(&s.conditions, gw_words::Type::Programmed)
        && !c.ok
    {
        step.notes
            .push(format!("Gateway is not Programmed: {}", said(c)));
    }
    steps.push(step);
    match (port.protocol, r.scheme) {
        (PortProtocol::Http, Scheme::Http) => match &port.route_table {
            Some(table) => route::http(t, &key, table, r, steps),
            None => Answer::Respond {
                status: 404,
                why: "the port has no route table".into(),
            },
        },
        (PortProtocol::Https | PortProtocol::Tls, Scheme::Https | Scheme::Tls) => {
            let Some((chain, how)) = matching::tls_chain(&port.tls_chains, r.sni.as_deref()) else {
                let sni = r.sni.as_deref().unwrap_or("(none)");
                steps.push(Step::new("tls", format!("no listener takes SNI {sni}")));
                return Answer::Closed {
                    why: format!(
                        "no listener on port {} takes SNI {sni}: the TLS handshake fails",
                        r.port
                    ),
                };
            };
            steps.push(Step::new(
                "tls",
                format!(
                    "SNI {} selects {} ({})",
                    r.sni.as_deref().unwrap_or("(none)"),
                    chain_text(&chain.listener),
                    how_text(&how)
                ),
            ));
            match (&chain.route_table, &chain.forward, r.scheme) {
                (Some(table), _, Scheme::Https) => route::http(t, &key, table, r, steps),
                (Some(_), _, _) => Answer::Closed {
                    why: "TLS is terminated and HTTP expected: give an https:// URL".into(),
                },
                (None, Some(forward), _) => route::l4(t, forward, steps),
                (None, None, _) => Answer::Closed {
                    why: "no route is attached to this listener: connections are closed".into(),
                },
            }
        }
        (PortProtocol::Tcp, Scheme::Tcp) => match &port.forward {
            Some(forward) => route::l4(t, forward, steps),
            None => Answer::Closed {
                why: "no TCPRoute is attached to this listener: connections are closed".into(),
            },
        },
        (protocol, scheme) => Answer::Closed {
            why: format!(
                "port {} is {}, the request is {}: give a URL of the listener's protocol",
                r.port,
                protocol_name(protocol),
                serde_json::to_value(scheme)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ),
        },
    }
}

/// Whether Gateway `g` listens on `address` (a name cannot be checked: yes),
/// bound there or given it by a load balancer (its status addresses).
fn binds(g: &aether_ir::Gateway, plan: &StatusPlan, address: &str) -> bool {
    let Ok(ip) = address.parse::<std::net::IpAddr>() else {
        return true;
    };
    let status = plan.gateways.get(&g.object_ref());
    let given = status
        .into_iter()
        .flat_map(|s| s.addresses.iter().map(|a| &a.value));
    g.addresses.iter().chain(given).any(|a| {
        a.parse::<std::net::IpAddr>()
            .is_ok_and(|have| have == ip || have.is_unspecified())
    })
}

/// No Gateway in the IR takes address:port: which planned ones would, and why not.
fn not_served(store: &Store, t: &View<'_>, r: &Request, steps: &mut Vec<Step>) -> Answer {
    let mut step = Step::new(
        "listener",
        format!("no Gateway serves {}:{}", r.address, r.port),
    );
    for (key, status) in &t.plan.gateways {
        let Some(spec) = store.get::<Gateway>(&key.namespace, &key.name) else {
            continue;
        };
        let on_port: Vec<&str> = spec
            .spec
            .listeners
            .iter()
            .filter(|l| l.port == i32::from(r.port))
            .map(|l| l.name.as_str())
            .collect();
        if on_port.is_empty() {
            continue;
        }
        let failed = [gw_words::Type::Accepted, gw_words::Type::Programmed]
            .into_iter()
            .filter_map(|ty| condition(&status.conditions, ty))
            .find(|c| !c.ok);
        if let Some(c) = failed {
            step.notes.push(format!(
                "Gateway {key} has listener {} on port {}, but is not {}: {}",
                on_port.join(", "),
                r.port,
                c.type_.as_str(),
                said(c)
            ));
            continue;
        }
        for l in status
            .listeners
            .iter()
            .filter(|l| on_port.contains(&l.name.as_str()))
        {
            // Conflicted is the one condition that is bad when True.
            let bad = |c: &&aether_gateway::status::ListenerCondition| {
                (c.type_.as_str() == "Conflicted") == c.ok
            };
            if let Some(c) = l.conditions.iter().find(bad) {
                step.notes.push(format!(
                    "Gateway {key} listener {} on port {}: {} is {}: {}",
                    l.name,
                    r.port,
                    c.type_.as_str(),
                    if c.ok { "True" } else { "False" },
                    said(c)
                ));
            }
        }
        if let Some(g) = t.ir.gateways.iter().find(|g| g.object_ref() == *key) {
            step.notes.push(format!(
                "Gateway {key} binds {}, not {}",
                g.addresses.join(", "),
                r.address
            ));
        }
    }
    if step.notes.is_empty() {
        let ports: std::collections::BTreeSet<u16> =
            t.ir.gateways
                .iter()
                .flat_map(|g| g.ports.iter().map(|p| p.port))
                .collect();
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        step.notes.push(if ports.is_empty() {
            "no Gateway is served at all".to_string()
        } else {
            format!(
                "no Gateway has a listener on port {}; served ports: {}",
                r.port,
                ports.join(", ")
            )
        });
    }
    steps.push(step);
    Answer::Closed {
        why: format!(
            "connection refused: nothing listens on {}:{}",
            r.address, r.port
        ),
    }
}

/// `listener http, hostname *.example.com`: of the Gateway's listeners on the
/// request's port, the most specific one whose hostname takes the name routing
/// sees (the Host, or the SNI of a TLS connection; a TCP connection has none).
fn listeners_text(store: &Store, key: &ObjectRef, r: &Request) -> String {
    use aether_gateway::hostname::{listener_claims, specificity};
    let Some(spec) = store.get::<Gateway>(&key.namespace, &key.name) else {
        return "listener".into();
    };
    let mut on_port: Vec<(&str, Option<&str>)> = spec
        .spec
        .listeners
        .iter()
        .filter(|l| l.port == i32::from(r.port))
        .map(|l| (l.name.as_str(), l.hostname.as_deref()))
        .collect();
    let name = match r.scheme {
        Scheme::Http | Scheme::Https => Some(r.host.as_str()),
        Scheme::Tls => r.sni.as_deref(),
        Scheme::Tcp => None,
    };
    let Some(name) = name else {
        let names: Vec<&str> = on_port.iter().map(|(n, _)| *n).collect();
        return format!("listener {}", names.join(", "));
    };
    on_port.sort_by_key(|(n, h)| {
        (
            std::cmp::Reverse((listener_claims(*h, name), specificity(*h))),
            *n,
        )
    });
    match on_port.first() {
        Some((n, h)) if listener_claims(*h, name) => {
            let h = h.map(|h| format!(", hostname {h}")).unwrap_or_default();
            format!("listener {n}{h}")
        }
        _ => {
            let names: Vec<String> = on_port
                .iter()
                .map(|(n, h)| format!("{n} ({})", h.unwrap_or("any hostname")))
                .collect();
            format!(
                "listeners {}; none of their hostnames takes {name}",
                names.join(", ")
            )
        }
    }
}

/// A TLS chain as a user reads it: `listener passthrough (TLSRoute apps/web)`.
fn chain_text(listener: &str) -> String {
    match listener.split_once('/') {
        Some((l, route)) => match route.split_once('/') {
            Some((kind, rest)) => format!("listener {l} ({kind} {rest})"),
            None => format!("listener {l} ({route})"),
        },
        None => format!("listener {listener}"),
    }
}

fn protocol_name(p: PortProtocol) -> &'static str {
    match p {
        PortProtocol::Http => "HTTP",
        PortProtocol::Https => "HTTPS",
        PortProtocol::Tls => "TLS",
        PortProtocol::Tcp => "TCP",
        PortProtocol::Udp => "UDP",
    }
}

fn how_text(how: &HostMatch) -> String {
    match how {
        HostMatch::Exact => "exact".into(),
        HostMatch::Wildcard(w) => format!("wildcard {w}"),
        HostMatch::CatchAll => "no more specific one takes it".into(),
    }
}

/// `Reason: message`.
fn said<T: Word, R: Word>(c: &Condition<T, R>) -> String {
    format!("{}: {}", c.reason.as_str(), c.message)
}
