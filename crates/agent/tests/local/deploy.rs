//! The DaemonSet, the controller Deployment and the RBAC of `deploy/`, read as
//! the API server would: what the internet-facing Envoy container can reach,
//! what the edge agent is given (reads only) and what the controller is given
//! (the writes). (That they run is shown by conformance/run, which deploys
//! exactly these, and by the kube tests `rbac` and `report_auth`, which run
//! both identities under this RBAC and see the edge identity's writes refused.)

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use serde::Deserialize;
use std::path::Path;

fn manifest(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn pod() -> PodSpec {
    let ds: DaemonSet = serde_norway::from_str(&manifest("30-daemonset.yaml")).unwrap();
    ds.spec.unwrap().template.spec.unwrap()
}

fn controller_pod() -> PodSpec {
    let d: Deployment = serde_norway::from_str(&manifest("35-controller.yaml")).unwrap();
    d.spec.unwrap().template.spec.unwrap()
}

/// The rules of the `kind` (ClusterRole or Role) named `name` in 10-rbac.yaml.
fn rules(kind: &str, name: &str) -> Vec<PolicyRule> {
    let text = manifest("10-rbac.yaml");
    let doc = serde_norway::Deserializer::from_str(&text)
        .map(|d| serde_norway::Value::deserialize(d).unwrap())
        .find(|v| v["kind"] == kind && v["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"));
    match kind {
        "ClusterRole" => serde_norway::from_value::<ClusterRole>(doc).unwrap().rules,
        _ => serde_norway::from_value::<Role>(doc).unwrap().rules,
    }
    .unwrap_or_default()
}

fn container<'a>(pod: &'a PodSpec, name: &str) -> &'a Container {
    pod.containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// The volumes of `pod` that project a ServiceAccount token, with its audience.
fn token_volumes(pod: &PodSpec) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for v in pod.volumes.iter().flatten() {
        for s in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(t) = &s.service_account_token {
                out.push((v.name.clone(), t.audience.clone()));
            }
        }
    }
    out
}

fn mounts(c: &Container) -> Vec<(&str, &str)> {
    c.volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.as_str(), m.mount_path.as_str()))
        .collect()
}

fn flag<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    let prefix = format!("{name}=");
    c.args
        .iter()
        .flatten()
        .find_map(|a| a.strip_prefix(&prefix))
}

#[test]
fn only_the_agent_container_holds_a_token_and_envoy_none() {
    let pod = pod();
    assert_eq!(pod.automount_service_account_token, Some(false));
    let tokens = token_volumes(&pod);
    let envoy = container(&pod, "envoy");
    for (volume, _) in &tokens {
        assert!(
            !mounts(envoy).iter().any(|(name, _)| name == volume),
            "Envoy mounts token volume {volume}"
        );
    }
    let agent = container(&pod, "agent");
    let agent_mounts = mounts(agent);
    let mounted_at = |volume: &str| {
        agent_mounts
            .iter()
            .find(|(name, _)| *name == volume)
            .map(|(_, path)| *path)
    };
    let api = tokens
        .iter()
        .find(|(_, audience)| audience.is_none())
        .expect("a token for the API server");
    assert_eq!(
        mounted_at(&api.0),
        Some("/var/run/secrets/kubernetes.io/serviceaccount"),
        "where in-cluster config reads it"
    );
    let report = tokens
        .iter()
        .find(|(_, audience)| audience.as_deref() == Some(aether_report::auth::AUDIENCE))
        .expect("a token for the report port");
    let dir = mounted_at(&report.0).expect("the report token mounted in the agent");
    let file = flag(agent, "--report-token-file").expect("--report-token-file");
    assert!(
        Path::new(file).parent() == Some(Path::new(dir)),
        "{file} is not in {dir}"
    );
}

#[test]
fn the_pod_runs_confined_and_ads_is_a_socket_the_two_containers_share() {
    let pod = pod();
    let security = pod.security_context.clone().unwrap();
    assert_eq!(
        security.seccomp_profile.map(|p| p.type_).as_deref(),
        Some("RuntimeDefault")
    );
    assert_eq!(security.run_as_non_root, Some(true));
    for c in &pod.containers {
        let s = c.security_context.clone().unwrap_or_default();
        assert_eq!(s.allow_privilege_escalation, Some(false), "{}", c.name);
        assert_eq!(s.read_only_root_filesystem, Some(true), "{}", c.name);
    }
    let agent = container(&pod, "agent");
    let socket = flag(agent, "--xds-address").expect("--xds-address");
    let path = socket.strip_prefix("unix:").expect("ADS on a unix socket");
    let dir = Path::new(path).parent().unwrap().to_str().unwrap();
    let volume = mounts(agent)
        .into_iter()
        .find(|(_, at)| *at == dir)
        .map(|(name, _)| name)
        .expect("the socket's directory is a volume");
    let sharing: Vec<&str> = pod
        .containers
        .iter()
        .filter(|c| mounts(c).iter().any(|(name, _)| *name == volume))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(sharing, ["agent", "envoy"]);
    let v = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == volume)
        .unwrap();
    assert!(v.empty_dir.is_some(), "a pod-private emptyDir");
}

/// The edge agents (on every edge node, beside an internet-facing Envoy) hold
/// no write verb anywhere; in the edge namespace they read the one Lease.
#[test]
fn the_edge_identity_only_reads() {
    let pod = pod();
    assert_eq!(pod.service_account_name.as_deref(), Some("aether-edge"));
    let agent = container(&pod, "agent");
    assert_eq!(flag(agent, "--role"), Some("edge"));
    assert_eq!(
        flag(agent, "--report-address"),
        None,
        "an edge agent takes no reports"
    );
    for r in rules("ClusterRole", "aether-edge") {
        assert!(
            r.verbs
                .iter()
                .all(|v| ["get", "list", "watch"].contains(&v.as_str())),
            "the edge ClusterRole writes: {r:?}"
        );
    }
    let lease = rules("Role", "aether-edge");
    assert_eq!(lease.len(), 1, "{lease:?}");
    assert_eq!(
        lease[0].resources.as_deref(),
        Some(&["leases".to_string()][..])
    );
    assert_eq!(
        lease[0].resource_names.as_deref(),
        Some(&["aether-edge".to_string()][..])
    );
    assert_eq!(lease[0].verbs, ["get"]);
}

/// The writer runs apart, with no Envoy and no host network.
#[test]
fn the_controller_runs_under_the_writer_identity() {
    let pod = controller_pod();
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("aether-edge-controller")
    );
    assert_ne!(pod.host_network, Some(true));
    let c = container(&pod, "controller");
    assert_eq!(flag(c, "--role"), Some("controller"));
    assert!(flag(c, "--report-address").is_some());
    assert_eq!(flag(c, "--report-token-file"), None);
}

#[test]
fn the_controller_may_review_tokens_and_reads_nothing_it_does_not_watch() {
    let rules = rules("ClusterRole", "aether-edge-controller");
    let grants = |group: &str, resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r.api_groups.iter().flatten().any(|g| g == group)
                && r.resources.iter().flatten().any(|x| x == resource)
                && r.verbs.iter().any(|v| v == verb)
        })
    };
    assert!(grants("authentication.k8s.io", "tokenreviews", "create"));
    // The public Services beside the Gateways and their slices: the only
    // objects made or deleted cluster-wide, besides a TokenReview.
    for (group, resource) in [("", "services"), ("discovery.k8s.io", "endpointslices")] {
        for verb in ["create", "patch", "delete"] {
            assert!(grants(group, resource, verb), "{verb} {resource}");
        }
    }
    // Events are only created (never patched or deleted): what `kubectl
    // describe` shows about the objects and the leader's pod.
    assert!(grants("events.k8s.io", "events", "create"));
    // The GatewayClass finalizer: a patch of the class's metadata, nothing more.
    assert!(grants(
        "gateway.networking.k8s.io",
        "gatewayclasses",
        "patch"
    ));
    let writable = [
        ("authentication.k8s.io", "tokenreviews"),
        ("", "services"),
        ("discovery.k8s.io", "endpointslices"),
        ("events.k8s.io", "events"),
    ];
    for r in &rules {
        for verb in &r.verbs {
            assert!(
                [
                    "get", "list", "watch", "patch", "update", "create", "delete"
                ]
                .contains(&verb.as_str()),
                "cluster-wide {verb}: {r:?}"
            );
        }
        if r.verbs.iter().any(|v| v == "create" || v == "delete") {
            let groups = r.api_groups.iter().flatten();
            for (g, res) in groups.flat_map(|g| r.resources.iter().flatten().map(move |x| (g, x))) {
                assert!(
                    writable.contains(&(g.as_str(), res.as_str())),
                    "cluster-wide create/delete of {res}: {r:?}"
                );
            }
        }
        if r.resources.iter().flatten().any(|x| x == "gatewayclasses")
            && r.verbs
                .iter()
                .any(|v| v != "get" && v != "list" && v != "watch")
        {
            assert_eq!(r.verbs, ["patch"], "GatewayClasses are only patched: {r:?}");
        }
        if r.resources.iter().flatten().any(|x| x == "events") {
            assert_eq!(r.verbs, ["create"], "Events are only created: {r:?}");
        }
        // Status subresources (and services/status, the load balancer's) are
        // never created or deleted, and no Secret is ever written.
        if r.resources.iter().flatten().any(|x| x == "secrets") {
            assert!(
                r.verbs
                    .iter()
                    .all(|v| ["get", "list", "watch"].contains(&v.as_str())),
                "Secrets are only read: {r:?}"
            );
        }
    }
}

/// A stopping edge pod drains before Envoy ends: the agent's preStop drains
/// Envoy for its whole --drain-time-s, Envoy's preStop outlasts that, and the
/// grace period outlasts both (else the kubelet kills Envoy mid-drain).
#[test]
fn a_stopping_pod_drains_envoy_before_envoy_gets_its_sigterm() {
    let pod = pod();
    let envoy = container(&pod, "envoy");
    let args = envoy.args.clone().unwrap_or_default();
    let drain_time: i64 = args
        .iter()
        .skip_while(|a| *a != "--drain-time-s")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("Envoy's --drain-time-s");
    let agent = container(&pod, "agent");
    let hook = agent
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        .and_then(|h| h.exec.as_ref())
        .and_then(|e| e.command.clone())
        .expect("the agent's preStop exec");
    assert_eq!(&hook[..2], ["aether-edge", "drain"]);
    assert!(
        hook.contains(&format!("--seconds={drain_time}")),
        "{hook:?}"
    );
    let envoy_wait = envoy
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        .and_then(|h| h.sleep.as_ref())
        .expect("Envoy's preStop sleep")
        .seconds;
    assert!(
        envoy_wait > drain_time,
        "Envoy ends before its drain is over"
    );
    let grace = pod
        .termination_grace_period_seconds
        .expect("a grace period");
    assert!(grace > envoy_wait, "the kubelet kills Envoy mid-drain");
    let budgets = manifest("40-pdb.yaml");
    let budget = |name: &str| -> serde_norway::Value {
        serde_norway::Deserializer::from_str(&budgets)
            .map(|doc| serde_norway::Value::deserialize(doc).unwrap())
            .find(|doc| doc["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no PodDisruptionBudget {name} in 40-pdb.yaml"))
    };
    let pdb = budget("aether-edge");
    assert_eq!(pdb["kind"], "PodDisruptionBudget");
    // An integer minAvailable: for DaemonSet pods (no scale subresource) the
    // disruption controller counts nothing else, and a maxUnavailable budget
    // never syncs and refuses every eviction.
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert!(pdb["spec"]["maxUnavailable"].is_null());
    // The controller's (a Deployment: maxUnavailable counts) never blocks a
    // drain of its one replica, and a broken standby is always evictable.
    let controller = budget("aether-edge-controller");
    assert_eq!(controller["spec"]["maxUnavailable"], 1);
    assert!(controller["spec"]["minAvailable"].is_null());
    assert_eq!(
        controller["spec"]["unhealthyPodEvictionPolicy"],
        "AlwaysAllow"
    );
    assert_eq!(
        controller["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
        "aether-edge-controller"
    );
}
