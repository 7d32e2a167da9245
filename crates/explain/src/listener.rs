//! The "listener" step: which Gateway takes address:port (and which others
//! bind it too), or, when none does, which planned ones would and why not.

use crate::request::{Request, Scheme};
use crate::{Answer, Step, View, said};
use aether_gateway::StatusPlan;
use aether_gateway::status::{GatewayStatus, condition};
use aether_gateway::store::Store;
use aether_gateway::vocabulary::{Word, gateway as gw_words};
use aether_ir::{ObjectRef, PortProtocol};
use gateway_api::apis::experimental::gateways::Gateway;

/// The Gateways whose port takes the request (binding its address), with
/// that port; the first one serves it.
pub(crate) fn serving<'a>(
    t: &View<'a>,
    r: &Request,
) -> Vec<(&'a aether_ir::Gateway, &'a aether_ir::Port)> {
    let udp = false;
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
        .collect()
}

/// The step of the Gateway `key` that takes the request (the first of
/// `served`): its listeners on the port, and what a user should know (the
/// address is a name, other Gateways bind the port, it is not Programmed).
pub(crate) fn step(
    t: &View<'_>,
    r: &Request,
    served: &[(&aether_ir::Gateway, &aether_ir::Port)],
    key: &ObjectRef,
) -> Step {
    let port = served[0].1;
    let mut step = Step::new(
        "listener",
        format!(
            "Gateway {key} takes {}:{} ({} {})",
            r.address,
            r.port,
            protocol_name(port.protocol),
            listeners_text(t.store, key, r)
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
    if let Some(s) = t.plan.gateways.get(key)
        && let Some(c) = condition(&s.conditions, gw_words::Type::Programmed)
        && !c.ok
    {
        step.notes
            .push(format!("Gateway is not Programmed: {}", said(c)));
    }
    step
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
pub(crate) fn not_served(t: &View<'_>, r: &Request, steps: &mut Vec<Step>) -> Answer {
    let mut step = Step::new(
        "listener",
        format!("no Gateway serves {}:{}", r.address, r.port),
    );
    for (key, status) in &t.plan.gateways {
        why_not_on_port(t, key, status, r, &mut step.notes);
    }
    if step.notes.is_empty() {
        step.notes.push(served_ports(t, r));
    }
    steps.push(step);
    Answer::Closed {
        why: format!(
            "connection refused: nothing listens on {}:{}",
            r.address, r.port
        ),
    }
}

/// Why planned Gateway `key`, if it has a listener on the request's port,
/// does not take the request: it is not Accepted or Programmed, a listener
/// there has a bad condition, or it binds other addresses.
fn why_not_on_port(
    t: &View<'_>,
    key: &ObjectRef,
    status: &GatewayStatus,
    r: &Request,
    notes: &mut Vec<String>,
) {
    let store = t.store;
    let Some(spec) = store.get::<Gateway>(&key.namespace, &key.name) else {
        return;
    };
    let on_port: Vec<&str> = spec
        .spec
        .listeners
        .iter()
        .filter(|l| l.port == i32::from(r.port))
        .map(|l| l.name.as_str())
        .collect();
    if on_port.is_empty() {
        return;
    }
    let failed = [gw_words::Type::Accepted, gw_words::Type::Programmed]
        .into_iter()
        .filter_map(|ty| condition(&status.conditions, ty))
        .find(|c| !c.ok);
    if let Some(c) = failed {
        notes.push(format!(
            "Gateway {key} has listener {} on port {}, but is not {}: {}",
            on_port.join(", "),
            r.port,
            c.type_.as_str(),
            said(c)
        ));
        return;
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
            notes.push(format!(
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
        notes.push(format!(
            "Gateway {key} binds {}, not {}",
            g.addresses.join(", "),
            r.address
        ));
    }
}

/// The ports some Gateway serves, when none has a listener on the request's.
fn served_ports(t: &View<'_>, r: &Request) -> String {
    let ports: std::collections::BTreeSet<u16> =
        t.ir.gateways
            .iter()
            .flat_map(|g| g.ports.iter().map(|p| p.port))
            .collect();
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    if ports.is_empty() {
        "no Gateway is served at all".to_string()
    } else {
        format!(
            "no Gateway has a listener on port {}; served ports: {}",
            r.port,
            ports.join(", ")
        )
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
pub(crate) fn chain_text(listener: &str) -> String {
    match listener.split_once('/') {
        Some((l, route)) => match route.split_once('/') {
            Some((kind, rest)) => format!("listener {l} ({kind} {rest})"),
            None => format!("listener {l} ({route})"),
        },
        None => format!("listener {listener}"),
    }
}

pub(crate) fn protocol_name(p: PortProtocol) -> &'static str {
    match p {
        PortProtocol::Http => "HTTP",
        PortProtocol::Https => "HTTPS",
        PortProtocol::Tls => "TLS",
        PortProtocol::Tcp => "TCP",
        PortProtocol::Udp => "UDP",
    }
}
