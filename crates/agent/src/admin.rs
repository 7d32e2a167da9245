//! Admin HTTP: health, readiness, Prometheus metrics and debug views.
//!
//! | path              | answers                                                        |
//! |-------------------|----------------------------------------------------------------|
//! | `/healthz`        | 200 while the process runs                                     |
//! | `/readyz`         | 200 once a first complete configuration is published (Kubernetes mode: and the local Envoy has caught up), else 503 |
//! | `/metrics`        | Prometheus text: config loads, publishes, ADS counters          |
//! | `/debug/snapshot` | JSON: the resources pushed (private keys `[redacted]`), per Envoy node what it ACKed/NACKed |
//! | `/debug/status`   | YAML: status as it stands given what Envoy has ACKed            |

use crate::pipeline::Published;
use aether_ads::Fleet;
use aether_gateway::StatusPlan;
use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct AdminState {
    pub published: watch::Receiver<Option<Arc<Published>>>,
    /// The local ADS server's fleet: what the local Envoy(s) ACKed and NACKed.
    pub fleet: Fleet,
    /// Prometheus text sources, concatenated on `/metrics`.
    pub metrics: Vec<Box<dyn Fn() -> String + Send + Sync>>,
    /// The status as it stands: the plan after the ACK gate of this mode.
    pub status_view: Box<dyn Fn(&Published) -> StatusPlan + Send + Sync>,
    /// Kubernetes mode: whether the local Envoy has caught up (see
    /// `kubernetes::fleet::envoy_ready`); `/readyz` waits for it too.
    pub envoy_ready: Option<watch::Receiver<bool>>,
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
    Ok(tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
            })
            .await
    }))
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
        return (StatusCode::OK, "ready\n").into_response();
    };
    (StatusCode::SERVICE_UNAVAILABLE, waiting).into_response()
}

async fn metrics(State(state): State<Shared>) -> Response {
    let mut body: String = state.metrics.iter().map(|m| m()).collect();
    body.push_str(&state.fleet.render_metrics());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

async fn debug_snapshot(State(state): State<Shared>) -> Response {
    let Some(p) = current(&state) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no snapshot yet\n").into_response();
    };
    // Private keys travel inline in LDS; this endpoint shows them redacted.
    let resources = match aether_xds::to_yaml_redacted(&p.snapshot)
        .map_err(|e| e.to_string())
        .and_then(|y| serde_yaml::from_str::<serde_json::Value>(&y).map_err(|e| e.to_string()))
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
