//! Inside a route table: the virtual host, the winning route and its rivals,
//! the routes that are not attached, then what the winner does.

use crate::matching::{self, HostMatch};
use crate::request::Request;
use crate::{Answer, Share, Step, View, how_text, said};
use aether_gateway::RouteKind;
use aether_gateway::status::condition;
use aether_gateway::vocabulary::route;
use aether_ir::{
    Forward, HeaderModifier, L4Forward, ObjectRef, PathRewrite, Route, RouteAction, RouteTable,
    WeightedBackend,
};
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use std::collections::BTreeMap;

/// At most this many rivals are listed each side of the winner.
const LISTED: usize = 10;

pub(crate) fn http(
    t: &View<'_>,
    gw: &ObjectRef,
    table: &RouteTable,
    r: &Request,
    steps: &mut Vec<Step>,
) -> Answer {
    let vhost = match virtual_host(table, r, steps) {
        Ok(vhost) => vhost,
        Err(answer) => return answer,
    };
    if let Some(answer) = pre_routing(vhost, steps) {
        return answer;
    }

    let verdicts: Vec<(&Route, Result<(), String>)> = vhost
        .routes
        .iter()
        .map(|route| (&**route, matching::route_matches(&route.matcher, r)))
        .collect();
    let winner = verdicts.iter().position(|(_, v)| v.is_ok());
    let refused = not_attached(t, gw, r);
    let Some(w) = winner else {
        return no_route_matches(vhost, &verdicts, &refused, steps);
    };
    let route = verdicts[w].0;
    steps.push(winner_step(&verdicts, w));
    push_refused(steps, &refused);
    action(t, route, r, steps)
}

/// The virtual host whose domains take the Host (the "virtual host" step),
/// or the 404 when none does.
fn virtual_host<'a>(
    table: &'a RouteTable,
    r: &Request,
    steps: &mut Vec<Step>,
) -> Result<&'a aether_ir::VirtualHost, Answer> {
    let Some((vhost, how)) = matching::virtual_host(table, &r.host) else {
        steps.push(Step::new(
            "virtual host",
            format!("no virtual host takes Host {}", r.host),
        ));
        return Err(Answer::Respond {
            status: 404,
            why: format!("no virtual host takes Host {}", r.host),
        });
    };
    let what = match &how {
        HostMatch::CatchAll => format!(
            "virtual host * (no more specific one takes Host {})",
            r.host
        ),
        other => format!(
            "virtual host {} ({} match of Host {})",
            vhost.name,
            how_text(other),
            r.host
        ),
    };
    steps.push(Step::new("virtual host", what));
    Ok(vhost)
}

/// The 404 when no route of the virtual host matches: why each did not, and
/// the routes for this host that were refused.
fn no_route_matches(
    vhost: &aether_ir::VirtualHost,
    verdicts: &[(&Route, Result<(), String>)],
    refused: &[(String, String)],
    steps: &mut Vec<Step>,
) -> Answer {
    let refused_reason = refused.first().map(|(_, reason)| reason.clone());
    let mut step = Step::new(
        "route",
        format!(
            "no route of virtual host {} matches ({} considered)",
            vhost.name,
            verdicts.len()
        ),
    );
    step.notes = listed(verdicts.iter().map(|(route, v)| rival(route, v)));
    steps.push(step);
    push_refused(steps, refused);
    let why = match refused_reason {
        Some(reason) => {
            format!("no attached route matches; a route for this host was refused: {reason}")
        }
        None => "no attached route matches".to_string(),
    };
    Answer::Respond { status: 404, why }
}

/// The "route" step of the winner `w`: why each route before it did not
/// match, and which after it match too.
fn winner_step(verdicts: &[(&Route, Result<(), String>)], w: usize) -> Step {
    let route = verdicts[w].0;
    let mut step = Step::new(
        "route",
        format!(
            "{} wins: {}",
            origin(&route.name),
            matching::describe(&route.matcher)
        ),
    );
    let before = verdicts[..w].iter().map(|(route, v)| rival(route, v));
    let after = verdicts[w + 1..]
        .iter()
        .filter(|(_, v)| v.is_ok())
        .map(|(route, _)| {
            format!(
                "{} matches too, but comes later in precedence",
                origin(&route.name)
            )
        });
    step.notes = listed(before);
    step.notes.extend(listed(after));
    step
}

/// What the winning route does.
fn action(t: &View<'_>, route: &Route, r: &Request, steps: &mut Vec<Step>) -> Answer {
    let mut filters = Vec::new();
    modifier("request header", &route.request_headers, &mut filters);
    modifier("response header", &route.response_headers, &mut filters);
    let answer = match &route.action {
        RouteAction::Forward(f) => {
            forward_filters(f, &mut filters);
            let answer = shares(t, &f.backends, f.invalid_weight, steps);
            push_filters(steps, filters);
            return answer;
        }
        RouteAction::Redirect(redirect) => Answer::Redirect {
            status: redirect.status_code,
            location: crate::redirect::location(redirect, &route.matcher.path, r),
        },
        RouteAction::DirectResponse { status: 421 } => Answer::Respond {
            status: 421,
            why:
                "Host belongs to another listener than the one the SNI chose (misdirected request)"
                    .into(),
        },
        RouteAction::DirectResponse { status: 500 } => Answer::Respond {
            status: 500,
            why: "the rule has no valid backend (see the route's ResolvedRefs condition)".into(),
        },
        RouteAction::DirectResponse { status } => Answer::Respond {
            status: *status,
            why: "a fixed answer".into(),
        },
    };
    push_filters(steps, filters);
    answer
}

fn push_filters(steps: &mut Vec<Step>, filters: Vec<String>) {
    if !filters.is_empty() {
        let mut step = Step::new("filters", format!("{} applied", filters.len()));
        step.notes = filters;
        // Before the backend step, where they act.
        let at = steps
            .iter()
            .position(|s| s.stage == "backend")
            .unwrap_or(steps.len());
        steps.insert(at, step);
    }
}

fn modifier(what: &str, m: &HeaderModifier, out: &mut Vec<String>) {
    for h in &m.set {
        out.push(format!("{what} set {}: {}", h.name, h.value));
    }
    for h in &m.add {
        out.push(format!("{what} add {}: {}", h.name, h.value));
    }
    for name in &m.remove {
        out.push(format!("{what} remove {name}"));
    }
}

fn forward_filters(f: &Forward, out: &mut Vec<String>) {
    if let Some(rw) = &f.rewrite {
        if let Some(h) = &rw.hostname {
            out.push(format!("URL rewrite: hostname {h}"));
        }
        match &rw.path {
            Some(PathRewrite::ReplaceFullPath(p)) => out.push(format!("URL rewrite: path {p}")),
            Some(PathRewrite::ReplacePrefixMatch(p)) => {
                out.push(format!("URL rewrite: matched prefix → {p}"))
            }
            None => {}
        }
    }
    if let Some(ms) = f.timeouts.request_ms {
        out.push(format!("request timeout {ms} ms"));
    }
    if let Some(ms) = f.timeouts.backend_request_ms {
        out.push(format!("backend request timeout {ms} ms"));
    }
    if let Some(retry) = &f.retry {
        let codes: Vec<String> = retry.codes.iter().map(u32::to_string).collect();
        out.push(format!(
            "retry: {} attempt(s), codes [{}]",
            retry
                .attempts
                .map_or("default".to_string(), |a| a.to_string()),
            codes.join(", ")
        ));
    }
    for m in &f.mirrors {
        let share = m.fraction.map_or("every request".to_string(), |(n, d)| {
            format!("{n}/{d} of requests")
        });
        out.push(format!("mirror to {} ({share})", m.cluster));
    }
    if let Some(cors) = &f.cors {
        out.push(format!("CORS: origins [{}]", cors.allow_origins.join(", ")));
    }
}

/// The backends and their shares; the answer when none can take the request.
fn shares(
    t: &View<'_>,
    backends: &[WeightedBackend],
    invalid: u32,
    steps: &mut Vec<Step>,
) -> Answer {
    let of: u32 = backends.iter().map(|b| b.weight).sum::<u32>() + invalid;
    let clusters: BTreeMap<&str, &aether_ir::Cluster> =
        t.ir.clusters
            .iter()
            .map(|c| (c.name.as_str(), &**c))
            .collect();
    let list: Vec<Share> = backends
        .iter()
        .map(|b| {
            let c = clusters.get(b.cluster.as_str());
            Share {
                backend: c.map_or_else(
                    || b.cluster.clone(),
                    |c| match c.backend_kind {
                        aether_ir::BackendKind::Service => {
                            format!("Service {}:{}", c.service, c.port)
                        }
                        aether_ir::BackendKind::XBackend => {
                            format!("XBackend {}:{}", c.service, c.port)
                        }
                    },
                ),
                cluster: b.cluster.clone(),
                weight: b.weight,
                of,
                endpoints: c.map_or(0, |c| c.endpoints.len()),
            }
        })
        .collect();
    let mut step = Step::new(
        "backend",
        match list.len() {
            0 => "no valid backend".to_string(),
            1 => list[0].backend.clone(),
            n => format!("one of {n} backends, by weight"),
        },
    );
    for s in &list {
        step.notes.push(format!(
            "{}: weight {}/{}, {} endpoint(s)",
            s.backend, s.weight, s.of, s.endpoints
        ));
    }
    if invalid > 0 {
        step.notes.push(format!(
            "invalid backendRefs: weight {invalid}/{of} of requests get 500"
        ));
    }
    steps.push(step);
    let serving: Vec<&Share> = list.iter().filter(|s| s.weight > 0).collect();
    if serving.is_empty() {
        return Answer::Respond {
            status: 500,
            why: "no valid backend takes requests (see the route's ResolvedRefs condition)".into(),
        };
    }
    if serving.iter().all(|s| s.endpoints == 0) {
        return Answer::Respond {
            status: 503,
            why: "no backend has a ready endpoint".into(),
        };
    }
    Answer::Forwarded { backends: list }
}

pub(crate) fn l4(t: &View<'_>, forward: &L4Forward, steps: &mut Vec<Step>) -> Answer {
    steps.push(Step::new(
        "route",
        format!("{} takes the connection", spaced(&forward.route)),
    ));
    shares(t, &forward.backends, forward.invalid_weight, steps)
}

/// `HTTPRoute default/web rule 0 match 1` from the route's Envoy name.
fn origin(name: &str) -> String {
    if let Some(host) = name.strip_prefix("misdirected/") {
        return format!("the 421 answer for {host}");
    }
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        [kind, ns, route, "rule", i, "match", j] => {
            format!("{kind} {ns}/{route} rule {i} match {j}")
        }
        _ => spaced(name),
    }
}

/// `TLSRoute/ns/name` → `TLSRoute ns/name`.
fn spaced(key: &str) -> String {
    match key.split_once('/') {
        Some((kind, rest)) => format!("{kind} {rest}"),
        None => key.to_string(),
    }
}

fn rival(route: &Route, verdict: &Result<(), String>) -> String {
    match verdict {
        Ok(()) => format!("{} matches", origin(&route.name)),
        Err(why) => format!(
            "{} ({}): {why}",
            origin(&route.name),
            matching::describe(&route.matcher)
        ),
    }
}

fn listed(items: impl Iterator<Item = String>) -> Vec<String> {
    let all: Vec<String> = items.collect();
    let more = all.len().saturating_sub(LISTED);
    let mut out: Vec<String> = all.into_iter().take(LISTED).collect();
    if more > 0 {
        out.push(format!("… and {more} more"));
    }
    out
}

/// Routes with a parentRef to this Gateway that are not attached there, and
/// whose hostnames would take the request's Host: (route text, reason).
fn not_attached(t: &View<'_>, gw: &ObjectRef, r: &Request) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for kind in [RouteKind::Http, RouteKind::Grpc] {
        for (key, status) in t.plan.routes_of_kind(kind) {
            let hostnames = match kind {
                RouteKind::Http => t
                    .store
                    .get::<HttpRoute>(&key.namespace, &key.name)
                    .and_then(|h| h.spec.hostnames.clone()),
                _ => t
                    .store
                    .get::<GrpcRoute>(&key.namespace, &key.name)
                    .and_then(|g| g.spec.hostnames.clone()),
            }
            .unwrap_or_default();
            let for_host = hostnames.is_empty()
                || hostnames
                    .iter()
                    .any(|h| aether_gateway::hostname::listener_claims(Some(h), &r.host));
            if !for_host {
                continue;
            }
            for parent in status.parents.iter().filter(|p| p.gateway == *gw) {
                let Some(c) = condition(&parent.conditions, route::Type::Accepted) else {
                    continue;
                };
                // Pending is the ACK gate's (live status), not a refusal: the
                // envoy step says who serves what.
                if c.ok || c.reason == route::Reason::Pending {
                    continue;
                }
                let section = parent
                    .parent_ref
                    .section_name
                    .as_ref()
                    .map(|s| format!(" sectionName {s}"))
                    .unwrap_or_default();
                out.push((
                    format!(
                        "{kind} {key} (parentRef Gateway {gw}{section}) is not attached: {}",
                        said(c)
                    ),
                    said(c),
                ));
            }
        }
    }
    out
}

fn push_refused(steps: &mut Vec<Step>, refused: &[(String, String)]) {
    if refused.is_empty() {
        return;
    }
    let mut step = Step::new(
        "not attached",
        format!(
            "{} route(s) for this host name this Gateway but are not attached",
            refused.len()
        ),
    );
    step.notes = listed(refused.iter().map(|(text, _)| text.clone()));
    steps.push(step);
}

/// The listener's pre-routing filters, which run before any route is matched:
/// a step naming them, and the answer when one can only refuse.
fn pre_routing(vhost: &aether_ir::VirtualHost, steps: &mut Vec<Step>) -> Option<Answer> {
    if vhost.pre_routing.is_empty() {
        return None;
    }
    let mut step = Step::new(
        "pre-routing",
        "the listener's filters run first, in order; below: if they allow the request",
    );
    step.notes = vhost
        .pre_routing
        .iter()
        .map(|a| match &a.cluster {
            Some(c) => {
                let over = match a.protocol {
                    aether_ir::ExternalAuthProtocol::Http => "HTTP",
                    aether_ir::ExternalAuthProtocol::Grpc => "gRPC",
                };
                format!("ExternalAuth over {over} asks cluster {c}; a denial is its answer")
            }
            None => "a filter that cannot run: every request is refused".into(),
        })
        .collect();
    steps.push(step);
    vhost
        .pre_routing
        .iter()
        .any(|a| a.cluster.is_none())
        .then(|| Answer::Respond {
            status: 500,
            why: "a pre-routing filter of the listener cannot run (see its status)".into(),
        })
}
