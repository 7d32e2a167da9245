//! Admin HTTP: health, readiness, Prometheus metrics and debug views.
//!
//! | path              | answers                                                        |
//! |-------------------|----------------------------------------------------------------|
//! | `/healthz`        | 200 while the process runs                                     |
//! | `/readyz`         | 200 once a first complete configuration is published (Kubernetes mode: and the local Envoy has caught up), else 503 |
//! | `/metrics`        | the process's one registry ([`crate::metrics`]): OpenMetrics to who asks for it, else Prometheus text 0.0.4 |
//! | `/debug/snapshot` | JSON: the resources pushed (private keys `[redacted]`), per Envoy node what it ACKed/NACKed |
//! | `/debug/status`   | YAML: status as it stands given what Envoy has ACKed            |
//! | `/debug/explain`  | what the edge does with one request (`?method=&url=&header=&sni=&output=text\|json`), and whether each Envoy serves it |

use crate::pipeline::Published;
use aether_ads::Fleet;
use aether_gateway::StatusPlan;
use anyhow::Context;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct AdminState {
    pub published: watch::Receiver<Option<Arc<Published>>>,
    /// The local ADS server's fleet: what the local Envoy(s) ACKed and NACKed.
    pub fleet: Fleet,
    /// The process's one registry, encoded on `/metrics`.
    pub metrics: prometheus_client::registry::Registry,
    /// The status as it stands: the plan after the ACK gate of this mode.
    pub status_view: Box<dyn Fn(&Published) -> StatusPlan + Send + Sync>,
    /// Kubernetes mode: whether the local Envoy has caught up (see
    /// `kubernetes::fleet::envoy_ready`); `/readyz` waits for it too.
    pub envoy_ready: Option<watch::Receiver<bool>>,
    /// Standalone: what is wrong with the config directory, one line per
    /// problem naming its file; `/readyz` shows it.
    pub config_problems: Option<watch::Receiver<Vec<String>>>,
}

type Shared = Arc<AdminState>;

/// Binds `address` and serves every admin endpoint until `shutdown` turns true.
pub async fn spawn(
    address: &str,
    state: Shared,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<JoinHandle<std::io::Result<()>>> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/debug/snapshot", get(debug_snapshot))
        .route("/debug/status", get(debug_status))
        .route("/debug/explain", get(debug_explain))
        .with_state(state);
    bind_and_serve(address, app, shutdown, "admin").await
}

/// Only `/healthz` and `/readyz`, for probes on a routable address (the admin
/// endpoints show Secrets' material and stay on loopback).
pub async fn spawn_health(
    address: &str,
    state: Shared,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<JoinHandle<std::io::Result<()>>> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(state);
    bind_and_serve(address, app, shutdown, "health").await
}

/// Only `/metrics`, for Prometheus on a routable address (`--metrics-address`;
/// the admin endpoints stay on loopback).
pub async fn spawn_metrics(
    address: &str,
    state: Shared,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<JoinHandle<std::io::Result<()>>> {
    bind_and_serve(address, metrics_router(state), shutdown, "metrics").await
}

fn metrics_router(state: Shared) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn bind_and_serve(
    address: &str,
    app: Router,
    mut shutdown: watch::Receiver<bool>,
    what: &str,
) -> anyhow::Result<JoinHandle<std::io::Result<()>>> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("binding the {what} address {address}"))?;
    if what == "admin" && !listener.local_addr()?.ip().is_loopback() {
        anyhow::bail!(
            "--admin-address {address} is not loopback: the admin endpoints show \
             configuration and fleet state to whoever connects; keep them on 127.0.0.1 \
             (probes have --health-address)"
        );
    }
    tracing::info!(address = %address, "{what} HTTP listening");
    Ok(tokio::spawn(serve_limited(
        listener,
        app,
        LIMITS,
        async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        },
    )))
}

/// What one admin or health listener allows, so a local user cannot take its
/// file descriptors (and with them the config directory's) or its answers.
#[derive(Debug, Clone, Copy)]
struct ConnectionLimits {
    /// Connections open at once. One more closes the oldest that has not
    /// sent a whole request yet (or, when every one has, is itself closed).
    max: usize,
    /// A request's headers must have arrived within this (also the idle wait
    /// for the next request on a kept-alive connection).
    header_timeout: Duration,
    /// No connection stays open longer (every answer takes well under it).
    lifetime: Duration,
}

const LIMITS: ConnectionLimits = ConnectionLimits {
    max: 64,
    header_timeout: Duration::from_secs(5),
    lifetime: Duration::from_secs(60),
};

/// The open connections, oldest first: whether each has sent a request yet,
/// and how to close it.
#[derive(Default)]
struct Open {
    next: u64,
    connections: std::collections::BTreeMap<u64, (Arc<AtomicBool>, tokio::task::AbortHandle)>,
}

impl Open {
    /// Room for one more within `max`: `Ok` with the oldest connection that
    /// has not sent a request yet, taken off to be closed (by the caller, once
    /// it let go of the registry), if that was needed; `Err` when every one has.
    fn make_room(&mut self, max: usize) -> Result<Option<tokio::task::AbortHandle>, ()> {
        if self.connections.len() < max {
            return Ok(None);
        }
        let idle = self
            .connections
            .iter()
            .find(|(_, (requested, _))| !requested.load(Ordering::Relaxed))
            .map(|(id, _)| *id)
            .ok_or(())?;
        Ok(self.connections.remove(&idle).map(|(_, task)| task))
    }
}

/// Takes a connection off [`Open`] when its task ends (or is aborted).
struct Leaves(Arc<std::sync::Mutex<Open>>, u64);

impl Drop for Leaves {
    fn drop(&mut self) {
        if let Ok(mut open) = self.0.lock() {
            open.connections.remove(&self.1);
        }
    }
}

/// Serves `app` on `listener` within `limits` until `shutdown` completes.
/// Half-sent requests cannot crowd out a client that asks at once: at the cap,
/// the oldest connection that has sent nothing whole yet gives way.
async fn serve_limited(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let open = Arc::new(std::sync::Mutex::new(Open::default()));
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors, most likely: back off, never spin.
                    tracing::warn!(error = %e, "admin accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let mut registry = open.lock().expect("the admin connection registry");
        let Ok(gives_way) = registry.make_room(limits.max) else {
            tracing::debug!(
                max = limits.max,
                "admin connection refused: every one is busy"
            );
            continue;
        };
        let (id, requested) = (registry.next, Arc::new(AtomicBool::new(false)));
        registry.next += 1;
        let leaves = Leaves(open.clone(), id);
        let (app, flag) = (app.clone(), requested.clone());
        let service = hyper::service::service_fn(move |request| {
            flag.store(true, Ordering::Relaxed);
            tower_service::Service::call(&mut app.clone(), request)
        });
        let task = tokio::spawn(async move {
            let _leaves = leaves;
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let connection = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let _ = tokio::time::timeout(limits.lifetime, connection).await;
        });
        registry
            .connections
            .insert(id, (requested, task.abort_handle()));
        drop(registry);
        if let Some(task) = gives_way {
            task.abort();
        }
    }
}

fn current(state: &AdminState) -> Option<Arc<Published>> {
    state.published.borrow().clone()
}

async fn readyz(State(state): State<Shared>) -> Response {
    let waiting = if current(&state).is_none() {
        "waiting for a first complete configuration\n"
    } else if state.envoy_ready.as_ref().is_some_and(|r| !*r.borrow()) {
        "waiting for the local Envoy to ACK the current configuration\n"
    } else {
        return (
            StatusCode::OK,
            format!("ready\n{}", config_problems(&state)),
        )
            .into_response();
    };
    let body = format!("{waiting}{}", config_problems(&state));
    (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
}

/// The config directory's problems, if any, for `/readyz`: a broken file
/// keeps its last good version, so the edge stays ready and says so.
fn config_problems(state: &AdminState) -> String {
    let Some(problems) = &state.config_problems else {
        return String::new();
    };
    let problems = problems.borrow();
    if problems.is_empty() {
        return String::new();
    }
    let mut out =
        String::from("config directory broken (each file named keeps its last good version):\n");
    for p in problems.iter() {
        out.push_str("  ");
        out.push_str(p);
        out.push('\n');
    }
    out
}

async fn metrics(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|a| a.to_str().ok());
    let (content_type, body) = crate::metrics::encode(&state.metrics, accept);
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn debug_snapshot(State(state): State<Shared>) -> Response {
    let Some(p) = current(&state) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no snapshot yet\n").into_response();
    };
    // Private keys travel in SDS secrets; this endpoint shows them redacted.
    let resources = match aether_xds::to_yaml_redacted(&p.snapshot)
        .map_err(|e| e.to_string())
        .and_then(|y| serde_norway::from_str::<serde_json::Value>(&y).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => serde_json::Value::String(format!("rendering failed: {e}")),
    };
    let versions: serde_json::Map<String, serde_json::Value> = aether_xds::ResourceType::ALL
        .into_iter()
        .map(|ty| {
            let by_name: serde_json::Map<String, serde_json::Value> = p
                .snapshot
                .of_type(ty)
                .map(|r| (r.name.clone(), r.version.clone().into()))
                .collect();
            (ty.short_name().to_string(), by_name.into())
        })
        .collect();
    let gateways: serde_json::Map<String, serde_json::Value> = p
        .snapshot
        .gateways
        .iter()
        .map(|(gw, g)| (gw.to_string(), g.hash.clone().into()))
        .collect();
    let body = serde_json::json!({
        "version": p.snapshot.version,
        "gateways": gateways,
        "versions": versions,
        "nodes": state.fleet.debug_view(),
        "gateway_acks": gateway_acks(&state.fleet, &p.snapshot),
        "resources": resources,
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string_pretty(&body).unwrap_or_default(),
    )
        .into_response()
}

/// Per Envoy node, per Gateway: the content hash it ACKed (null until every
/// resource of the Gateway is ACKed); compare with `gateways` above.
fn gateway_acks(fleet: &Fleet, snapshot: &aether_xds::Snapshot) -> serde_json::Value {
    let nodes: serde_json::Map<String, serde_json::Value> = fleet
        .gateway_acks(snapshot)
        .into_iter()
        .map(|(node, per_gateway)| {
            let gws: serde_json::Map<String, serde_json::Value> = per_gateway
                .into_iter()
                .map(|(gw, hash)| (gw.to_string(), hash.into()))
                .collect();
            (node, gws.into())
        })
        .collect();
    nodes.into()
}

async fn debug_status(State(state): State<Shared>) -> Response {
    let Some(p) = current(&state) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no configuration yet\n").into_response();
    };
    (
        [(header::CONTENT_TYPE, "application/yaml")],
        (state.status_view)(&p).to_yaml(),
    )
        .into_response()
}

/// `aether-edge explain --admin`: the explanation against what this process
/// serves (the status as it stands, so a load balancer's addresses count), then,
/// per Envoy node connected here, whether it ACKed the Gateway's current config.
async fn debug_explain(State(state): State<Shared>, RawQuery(query): RawQuery) -> Response {
    let Some(p) = current(&state) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no configuration yet\n").into_response();
    };
    let params = query_params(query.as_deref());
    let one = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let headers: Vec<String> = params
        .iter()
        .filter(|(k, _)| k == "header")
        .map(|(_, v)| v.clone())
        .collect();
    let (Some(url), method) = (one("url"), one("method").unwrap_or("GET")) else {
        return (
            StatusCode::BAD_REQUEST,
            "give url= (and method=, header=, sni=)\n",
        )
            .into_response();
    };
    let request = match aether_explain::Request::parse(method, url, &headers, one("sni")) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    };
    let plan = (state.status_view)(&p);
    let mut e = aether_explain::explain(&p.store, &p.ir, &plan, &request);
    if let Some(gw) = e.gateway.clone() {
        served_by_fleet(&state, &p, &gw, &mut e);
    }
    if one("output") == Some("json") {
        let body = serde_json::to_string_pretty(&e).unwrap_or_default() + "\n";
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    } else {
        (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            e.to_text(),
        )
            .into_response()
    }
}

/// `k=v&k=v` query parameters, percent-decoded, in order.
fn query_params(query: Option<&str>) -> Vec<(String, String)> {
    let mut params = Vec::new();
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|s| !s.is_empty())
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        params.push((percent_decode(k), percent_decode(v)));
    }
    params
}

/// Whether each Envoy serves what the explanation of Gateway `gw` describes
/// (its version, its last NACK), and the routes of `gw` an Envoy refused.
fn served_by_fleet(
    state: &AdminState,
    p: &Published,
    gw: &aether_ir::ObjectRef,
    e: &mut aether_explain::Explanation,
) {
    let computed = p.snapshot.gateways.get(gw).map(|g| g.hash.clone());
    let view = state.fleet.debug_view();
    let nodes: Vec<aether_explain::NodeAck> = state
        .fleet
        .gateway_acks(&p.snapshot)
        .into_iter()
        .map(|(node, per_gateway)| {
            let nack = view
                .nodes
                .get(&node)
                .and_then(|n| n.last_nack.as_ref())
                .map(|n| {
                    (
                        n.resource_type.clone(),
                        n.version.clone(),
                        n.message.clone(),
                    )
                });
            aether_explain::NodeAck {
                acked: per_gateway.get(gw).cloned().flatten(),
                node,
                nack,
            }
        })
        .collect();
    e.served_by(&p.snapshot.version, computed.as_deref(), &nodes);
    // Routes of this Gateway an Envoy refused are served as they were.
    if let Some(resources) = p.snapshot.gateways.get(gw) {
        for (key, refusal) in state.fleet.refused_routes() {
            if resources.routes.contains_key(key.as_str()) {
                let why = aether_gateway::assemble::served_as_it_was(&refusal);
                e.caveats.push(format!("{key}: {why}"));
            }
        }
    }
}

/// `%XX` and `+` decoded (bytes that are not UTF-8 are replaced).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
                continue;
            }
            (b'+', _) => out.push(b' '),
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
#[path = "admin_tests.rs"]
mod tests;
