//! `aether-edge fleet`: per Gateway and per node, what the edge's Envoys serve,
//! read from the view the leader publishes (the status gate's own join, node by
//! node: [`aether_k8s::fleet_doc`]).
//!
//! ```text
//!  fleet [--kubeconfig F] [--namespace aether-ingress] [--max-behind 30s] [--output json]
//!    ConfigMap <namespace>/aether-edge-fleet ──► a table per Gateway: the leader's hash,
//!    nodes served, and per node that is not: its state, the hash it ACKed, since when,
//!    Envoy's NACK text
//!  exit 0: every node serves every Gateway, or is behind for less than --max-behind
//!  exit 1: a node is behind (or NACKed, or silent) for longer; exit 2: no view to read
//! ```

use crate::explain::Output;
use aether_k8s::fleet_doc::{self, FleetDoc, NodeDoc};
use aether_report::NodeState;
use anyhow::{Context, bail};
use clap::Args;
use k8s_openapi::api::core::v1::ConfigMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    /// A kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The edge namespace (where the agents run).
    #[arg(long, default_value = "aether-ingress")]
    namespace: String,
    /// A node behind (or NACKed, or not reporting) for longer than this makes
    /// the exit status 1 (a Gateway API duration: `30s`, `2m`, `1m30s`).
    #[arg(long, default_value = "30s", value_parser = parse_seconds)]
    max_behind: u64,
    /// `text` (default) or `json`.
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
}

fn parse_seconds(value: &str) -> Result<u64, String> {
    aether_gateway::duration::parse_ms(value).map(|ms| ms / 1000)
}

pub fn run(args: FleetArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let doc = runtime.block_on(read(&args))?;
    let now = unix_now();
    let late = late(&doc, now, args.max_behind);
    match args.output {
        Output::Text => print!("{}", render_text(&doc, now, args.max_behind)),
        Output::Json => println!("{}", render_json(&doc, now, args.max_behind)),
    }
    if late.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for (gateway, node, seconds) in &late {
        eprintln!(
            "behind for longer than {}: Gateway {gateway} on node {node} ({})",
            ago(args.max_behind),
            ago(*seconds)
        );
    }
    Ok(ExitCode::from(1))
}

async fn read(args: &FleetArgs) -> anyhow::Result<FleetDoc> {
    let client = crate::kubernetes::client(args.kubeconfig.as_ref()).await?;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, &args.namespace);
    let name = fleet_doc::CONFIGMAP;
    let Some(cm) = api
        .get_opt(name)
        .await
        .with_context(|| format!("reading ConfigMap {}/{name}", args.namespace))?
    else {
        bail!(
            "no fleet view: ConfigMap {}/{name} does not exist (no aether-edge agent leads \
             in namespace {}, or none has written yet)",
            args.namespace,
            args.namespace
        );
    };
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(fleet_doc::KEY))
        .with_context(|| {
            format!(
                "ConfigMap {}/{name} has no {}",
                args.namespace,
                fleet_doc::KEY
            )
        })?;
    serde_json::from_str(text).with_context(|| {
        format!(
            "ConfigMap {}/{name}: {} is not a fleet view",
            args.namespace,
            fleet_doc::KEY
        )
    })
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// (Gateway, node, seconds behind) for every node behind longer than `max`.
fn late(doc: &FleetDoc, now: u64, max: u64) -> Vec<(String, String, u64)> {
    doc.gateways
        .iter()
        .flat_map(|(gw, g)| {
            g.behind.iter().filter_map(move |(node, n)| {
                let for_s = now.saturating_sub(n.since);
                (for_s > max).then(|| (gw.clone(), node.clone(), for_s))
            })
        })
        .collect()
}

/// `42s`, `3m10s`, `2h5m`.
fn ago(seconds: u64) -> String {
    match seconds {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{}s", s / 60, s % 60),
        s => format!("{}h{}m", s / 3600, (s % 3600) / 60),
    }
}

/// A hash as the table shows it: its first 12 characters (`--output json`
/// has it whole).
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn state_words(n: &NodeDoc) -> String {
    match &n.state {
        NodeState::Served => "served".into(),
        NodeState::Behind { pending } if pending.is_empty() => "behind".into(),
        NodeState::Behind { pending } => format!("behind on {}", pending.join(", ")),
        NodeState::Nacked { .. } => "NACKed".into(),
        NodeState::Unreported => "not reporting (its agent or Envoy is not connected)".into(),
    }
}

fn render_text(doc: &FleetDoc, now: u64, max: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "leader {} at snapshot {}, last change {} ago",
        doc.leader,
        doc.snapshot,
        ago(now.saturating_sub(doc.updated))
    );
    if doc.gateways.is_empty() {
        out.push_str("no Gateway is served\n");
        return out;
    }
    let width = doc
        .gateways
        .keys()
        .map(String::len)
        .max()
        .unwrap_or(0)
        .max(7);
    let _ = writeln!(out, "{:width$}  {:12}  SERVED", "GATEWAY", "HASH");
    for (gw, g) in &doc.gateways {
        let _ = writeln!(
            out,
            "{gw:width$}  {:12}  {}/{} nodes",
            short(&g.hash),
            g.served,
            g.nodes
        );
        for (node, n) in &g.behind {
            let for_s = now.saturating_sub(n.since);
            let mark = if for_s > max {
                "  (over --max-behind)"
            } else {
                ""
            };
            let acked = match (&n.acked, &n.acked_snapshot) {
                (Some(hash), _) => short(hash).to_string(),
                (None, Some(v)) if *v != doc.snapshot => {
                    format!("its own snapshot {}, not the leader's", short(v))
                }
                _ => "only parts of it (route by route), no whole hash".into(),
            };
            let _ = writeln!(
                out,
                "  node {node}: {} for {}, ACKed {acked}{mark}",
                state_words(n),
                ago(for_s),
            );
            if let NodeState::Nacked { message } = &n.state {
                let _ = writeln!(out, "    NACK: {message}");
            }
        }
    }
    out
}

fn render_json(doc: &FleetDoc, now: u64, max: u64) -> String {
    let mut value = serde_json::to_value(doc).unwrap_or_default();
    if let Some(gateways) = value["gateways"].as_object_mut() {
        for g in gateways.values_mut() {
            if let Some(behind) = g.get_mut("behind").and_then(|b| b.as_object_mut()) {
                for n in behind.values_mut() {
                    let since = n["since"].as_u64().unwrap_or(now);
                    n["behindSeconds"] = now.saturating_sub(since).into();
                }
            }
        }
    }
    let late: Vec<serde_json::Value> = late(doc, now, max)
        .into_iter()
        .map(|(gw, node, s)| serde_json::json!({"gateway": gw, "node": node, "behindSeconds": s}))
        .collect();
    value["maxBehindSeconds"] = max.into();
    value["late"] = late.into();
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aether_k8s::fleet_doc::GatewayDoc;
    use std::collections::BTreeMap;

    fn doc() -> FleetDoc {
        let behind = BTreeMap::from([
            (
                "node-b".to_string(),
                NodeDoc {
                    state: NodeState::Behind {
                        pending: vec!["HTTPRoute/apps/r".into()],
                    },
                    acked: Some("0badc0ffee0123456789".into()),
                    acked_snapshot: None,
                    since: 1_000,
                },
            ),
            (
                "node-c".to_string(),
                NodeDoc {
                    state: NodeState::Nacked {
                        message: "invalid regex".into(),
                    },
                    acked: None,
                    acked_snapshot: Some("v3".into()),
                    since: 1_090,
                },
            ),
        ]);
        FleetDoc {
            leader: "aether-edge-x1".into(),
            snapshot: "v7".into(),
            updated: 1_090,
            gateways: BTreeMap::from([
                (
                    "apps/web".to_string(),
                    GatewayDoc {
                        hash: "f00d".into(),
                        nodes: 3,
                        served: 1,
                        behind,
                    },
                ),
                (
                    "apps/api".to_string(),
                    GatewayDoc {
                        hash: "beef".into(),
                        nodes: 3,
                        served: 3,
                        behind: BTreeMap::new(),
                    },
                ),
            ]),
        }
    }

    #[test]
    fn only_nodes_behind_longer_than_the_threshold_are_late() {
        assert_eq!(
            late(&doc(), 1_100, 30),
            vec![("apps/web".into(), "node-b".into(), 100)]
        );
        assert_eq!(late(&doc(), 1_100, 5).len(), 2);
        assert!(
            late(&doc(), 1_100, 100).is_empty(),
            "100 s is not longer than 100 s"
        );
    }

    #[test]
    fn the_table_names_each_node_that_does_not_serve_and_why() {
        let text = render_text(&doc(), 1_100, 30);
        assert_eq!(
            text,
            "leader aether-edge-x1 at snapshot v7, last change 10s ago\n\
             GATEWAY   HASH          SERVED\n\
             apps/api  beef          3/3 nodes\n\
             apps/web  f00d          1/3 nodes\n  \
             node node-b: behind on HTTPRoute/apps/r for 1m40s, ACKed 0badc0ffee01  (over --max-behind)\n  \
             node node-c: NACKed for 10s, ACKed its own snapshot v3, not the leader's\n    \
             NACK: invalid regex\n"
        );
    }

    #[test]
    fn json_adds_how_long_and_which_are_late() {
        let v: serde_json::Value = serde_json::from_str(&render_json(&doc(), 1_100, 30)).unwrap();
        assert_eq!(
            v["gateways"]["apps/web"]["behind"]["node-b"]["behindSeconds"],
            100
        );
        assert_eq!(
            v["gateways"]["apps/web"]["behind"]["node-c"]["state"],
            "nacked"
        );
        assert_eq!(v["late"][0]["node"], "node-b");
        assert_eq!(v["late"].as_array().unwrap().len(), 1);
    }
}
