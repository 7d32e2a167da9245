//! Envoy's own verdict on service mode: 20 Gateways all listening on :80 and :443
//! share one Envoy once their ports are rewritten to the allocated Envoy ports
//! (`envoy --mode validate` accepts the snapshot), while the same IR bound directly
//! (static mode, every Gateway on one address) is rejected — so the check can fail.

use aether_gateway::{Config, Store, translate};
use aether_ir::Ir;
use aether_k8s::service::{ServiceConfig, allocations, apply_allocations, desired_services};
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;
use std::path::PathBuf;
use std::process::Command;

/// A throwaway self-signed certificate (Envoy validate parses the PEM), made by openssl.
fn tls_secret() -> Secret {
    let dir = scratch_dir();
    let (key, crt) = (dir.join("tls.key"), dir.join("tls.crt"));
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=example.com", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .expect("running openssl");
    assert!(status.status.success(), "openssl: {status:?}");
    let b64 = |p: &PathBuf| {
        let out = Command::new("base64")
            .args(["-w0"])
            .arg(p)
            .output()
            .expect("base64");
        String::from_utf8(out.stdout).unwrap()
    };
    serde_json::from_value(json!({
        "metadata": {"namespace": "infra", "name": "cert"},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": b64(&crt), "tls.key": b64(&key)},
    }))
    .unwrap()
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("aether-k8s-service-envoy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

use aether_testkit::envoy_bin;

fn envoy_validate(tag: &str, ir: &Ir) -> Result<(), String> {
    let snapshot = aether_xds::build(ir);
    let bootstrap = aether_xds::validation_bootstrap(&snapshot).unwrap();
    let file = scratch_dir().join(format!("{tag}.yaml"));
    std::fs::write(&file, bootstrap).unwrap();
    let out = Command::new(envoy_bin())
        .args(["--mode", "validate", "--log-level", "warn", "-c"])
        .arg(&file)
        .output()
        .expect("running envoy");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn store() -> Store {
    let mut store = Store::default();
    store.insert::<GatewayClass>(
        serde_json::from_value(json!({
            "metadata": {"name": "aether"},
            "spec": {"controllerName": "gateway.aether.io/edge"},
        }))
        .unwrap(),
    );
    store.insert(tls_secret());
    for i in 0..20 {
        store.insert::<Gateway>(
            serde_json::from_value(json!({
                "metadata": {"namespace": "infra", "name": format!("gw-{i:02}")},
                "spec": {"gatewayClassName": "aether", "listeners": [
                    {"name": "http", "protocol": "HTTP", "port": 80},
                    {"name": "https", "protocol": "HTTPS", "port": 443,
                     "tls": {"certificateRefs": [{"name": "cert"}]}},
                ]},
            }))
            .unwrap(),
        );
    }
    store
}

#[test]
fn allocated_ports_let_twenty_gateways_share_one_envoy() {
    let mut store = store();
    // Static mode: every Gateway binds the same address at the listener ports,
    // so the oldest keeps :80 and the others' listeners there are not accepted
    // (Envoy would refuse the second socket: "duplicate address").
    let static_ir = translate(&store, &Config::default()).ir;
    assert_eq!(static_ir.gateways.len(), 1);
    envoy_validate("static", &static_ir).expect("one Gateway on :80");

    // Service mode: the leader's Services, as the watch then shows them.
    let config = crate::support::service_mode();
    let planned_ir = translate(&store, &config).ir;
    assert_eq!(planned_ir.gateways.len(), 20);
    let cfg = ServiceConfig::default();
    for svc in desired_services(&store, &planned_ir, &cfg) {
        store.insert(svc);
    }
    let mut ir = translate(&store, &config).ir;
    let dropped = apply_allocations(&mut ir, &allocations(&store, &cfg.namespace), "0.0.0.0");
    assert!(dropped.is_empty(), "{dropped:?}");
    assert_eq!(ir.gateways.len(), 20);
    envoy_validate("service", &ir).expect("Envoy accepts allocated ports");
    let _ = std::fs::remove_dir_all(scratch_dir());
}
