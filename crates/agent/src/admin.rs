//! Admin HTTP: health, readiness, Prometheus metrics and debug views.
//!
//! | path              | answers                                                        |
//! |-------------------|----------------------------------------------------------------|
//! | `/healthz`        | 200 while the process runs                                     |
//! | `/readyz`         | 200 once a first complete configuration is published, else 503 |
//! | `/metrics`        | Prometheus text: config loads, publishes, ADS counters          |
//! | `/debug/snapshot` | JSON: the resources pushed, per Envoy node what it ACKed/NACKed |
//! | `/debug/status`   | YAML: status as it stands given what Envoy has ACKed            |

use crate::pipeline::{Published, Stats};
use aether_ads::{Fleet, GatewayAck};
use aether_gateway::AckState;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::watch;

pub struct AdminState {
    pub published: watch::Receiver<Option<Arc<Published>>>,
    pub fleet: Fleet,
    pub stats: Arc<Stats>,
}

type Shared = Arc<AdminState>;

pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Shared,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/debug/snapshot", get(debug_snapshot))
        .route("/debug/status", get(debug_status))
        .with_state(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

fn current(state: &AdminState) -> Option<Arc<Published>> {
    state.published.borrow().clone()
}

async fn readyz(State(state): State<Shared>) -> Response {
    match current(&state) {
        Some(_) => (StatusCode::OK, "ready\n").into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "waiting for a first complete configuration\n",
        )
            .into_response(),
    }
}

async fn metrics(State(state): State<Shared>) -> Response {
    let mut body = state.stats.render();
    body.push_str(&state.fleet.render_metrics());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

async fn debug_snapshot(State(state): State<Shared>) -> Response {
    let Some(p) = current(&state) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no snapshot yet\n").into_response();
    };
    let resources = match aether_xds::to_yaml(&p.snapshot)
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
        "resources": resources,
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string_pretty(&body).unwrap_or_default(),
    )
        .into_response()
}

async fn debug_status(State(state): State<Shared>) -> Response {
    let Some(p) = current(&state) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no configuration yet\n").into_response();
    };
    let gated = p
        .status
        .gated(|gw| match state.fleet.gateway_state(&p.snapshot, gw) {
            GatewayAck::Acked => AckState::Acked,
            GatewayAck::Pending => AckState::Pending,
            GatewayAck::Nacked(msg) => AckState::Nacked(msg),
        });
    (
        [(header::CONTENT_TYPE, "application/yaml")],
        gated.to_yaml(),
    )
        .into_response()
}
