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

mod listener;
pub mod matching;
mod redirect;
mod render;
pub mod request;
mod route;
mod served;

pub use request::{Request, RequestError, Scheme};
pub use served::NodeAck;

use aether_gateway::StatusPlan;
use aether_gateway::status::Condition;
use aether_gateway::store::Store;
use aether_gateway::vocabulary::Word;
use aether_ir::{Ir, ObjectRef, PortProtocol};
use listener::{chain_text, protocol_name};
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
    let served = listener::serving(t, r);
    let Some(&(gw, port)) = served.first() else {
        return listener::not_served(t, r, steps);
    };
    let key = gw.object_ref();
    *gateway = Some(key.clone());
    steps.push(listener::step(t, r, &served, &key));
    match (port.protocol, r.scheme) {
        (PortProtocol::Http, Scheme::Http) => match &port.route_table {
            Some(table) => route::http(t, &key, table, r, steps),
            None => Answer::Respond {
                status: 404,
                why: "the port has no route table".into(),
            },
        },
        (PortProtocol::Https | PortProtocol::Tls, Scheme::Https | Scheme::Tls) => {
            tls(t, &key, port, r, steps)
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

/// An HTTPS or TLS port: the TLS chain the SNI selects, then its route table
/// (HTTPS) or its forward (TLS).
fn tls(
    t: &View<'_>,
    key: &ObjectRef,
    port: &aether_ir::Port,
    r: &Request,
    steps: &mut Vec<Step>,
) -> Answer {
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
        (Some(table), _, Scheme::Https) => route::http(t, key, table, r, steps),
        (Some(_), _, _) => Answer::Closed {
            why: "TLS is terminated and HTTP expected: give an https:// URL".into(),
        },
        (None, Some(forward), _) => route::l4(t, forward, steps),
        (None, None, _) => Answer::Closed {
            why: "no route is attached to this listener: connections are closed".into(),
        },
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
