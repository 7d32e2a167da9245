//! The command line contract: `status`, `translate`, `bootstrap`, and clear errors.

use crate::support::*;
use std::process::Command;

fn quickstart() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart")
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(agent_bin()).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn status_prints_kubernetes_shaped_documents() {
    let dir = quickstart();
    let (ok, out, err) = run(&["status", "--config-dir", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    let docs: Vec<serde_norway::Value> = serde_norway::Deserializer::from_str(&out)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(kinds, ["GatewayClass", "Gateway", "HTTPRoute"], "{out}");
    for d in &docs {
        assert!(d["apiVersion"].is_string() && d["metadata"]["name"].is_string());
        assert!(d["status"].is_mapping(), "{d:?}");
    }
    assert_eq!(docs[1]["status"]["listeners"][0]["attachedRoutes"], 1);
}

#[test]
fn translate_prints_envoy_resources_and_is_deterministic() {
    let dir = quickstart();
    let (ok, first, err) = run(&["translate", "--config-dir", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    let (_, second, _) = run(&["translate", "--config-dir", dir.to_str().unwrap()]);
    assert_eq!(first, second, "same input, same bytes");
    let doc: serde_norway::Value = serde_norway::from_str(&first).unwrap();
    assert_eq!(
        doc["listeners"][0]["name"].as_str(),
        Some("edge_ls_default_quickstart_10080")
    );
    assert_eq!(
        doc["routes"][0]["name"].as_str(),
        Some("edge_rt_default_quickstart_10080")
    );
    assert!(first.contains("ignorePortInHostMatching: true"), "{first}");
}

#[test]
fn bootstrap_selects_sotw_or_delta() {
    let base = [
        "bootstrap",
        "--node-id",
        "n1",
        "--xds-address",
        "127.0.0.1:18000",
    ];
    let (ok, default, err) = run(&base);
    assert!(ok, "{err}");
    assert!(default.contains("apiType: DELTA_GRPC"), "{default}");
    let (ok, sotw, err) = run(&[&base[..], &["--sotw"]].concat());
    assert!(ok, "{err}");
    assert!(sotw.contains("apiType: GRPC"), "{sotw}");
    assert!(!sotw.contains("DELTA_GRPC"), "{sotw}");
    let (ok, delta, _) = run(&[&base[..], &["--delta"]].concat());
    assert!(ok);
    assert_eq!(delta, default, "--delta is the default");
    let (ok, _, err) = run(&[&base[..], &["--delta", "--sotw"]].concat());
    assert!(!ok && err.contains("--sotw"), "{err}");
    let (ok, _, err) = run(&["bootstrap", "--node-id", "n1", "--xds-address", "no-port"]);
    assert!(!ok);
    assert!(err.contains("no-port"), "{err}");
}

#[test]
fn a_broken_file_is_named_with_line_and_reason() {
    let dir = temp_dir("cli-broken");
    std::fs::write(
        dir.join("gw.yaml"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: web}\nspec:\n  gatewayClassName: aether\n  listeners: 7\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("zz.yaml"),
        "apiVersion: v1\nkind: Frobnicator\nmetadata: {name: x}\n",
    )
    .unwrap();
    let (ok, out, err) = run(&["status", "--config-dir", dir.to_str().unwrap()]);
    assert!(!ok, "must fail: {out}");
    assert!(out.is_empty(), "no partial output: {out}");
    assert!(
        err.contains("gw.yaml:") && err.contains("default/web"),
        "{err}"
    );
    assert!(
        err.contains("zz.yaml:") && err.contains("Frobnicator"),
        "{err}"
    );
}

#[test]
fn every_subcommand_has_help() {
    for sub in ["standalone", "status", "translate", "bootstrap", "agent"] {
        let (ok, out, _) = run(&[sub, "--help"]);
        assert!(ok && out.contains("Usage:"), "{sub}: {out}");
    }
}

#[test]
fn ads_and_admin_refuse_addresses_others_can_reach() {
    let dir = quickstart();
    let dir = dir.to_str().unwrap();
    for (flag, needle) in [
        (
            "--xds-address",
            "is not loopback: ADS carries every TLS private key",
        ),
        ("--admin-address", "is not loopback: the admin endpoints"),
    ] {
        let mut args = vec![
            "standalone",
            "--config-dir",
            dir,
            "--xds-address",
            "127.0.0.1:0",
            "--admin-address",
            "127.0.0.1:0",
            "--xds-tcp-open-to-local-users",
        ];
        let at = args.iter().position(|a| *a == flag).unwrap();
        args[at + 1] = "0.0.0.0:0";
        let (ok, _, stderr) = run(&args);
        assert!(!ok, "{flag} 0.0.0.0 must be refused");
        assert!(stderr.contains(needle), "{flag}: {stderr}");
    }
}

/// ADS carries every private key: a TCP port, which every local user can
/// reach, is served only when a flag says so.
#[test]
fn a_tcp_ads_address_needs_the_flag_that_says_who_can_read_the_keys() {
    let dir = quickstart();
    let (ok, _, stderr) = run(&[
        "standalone",
        "--config-dir",
        dir.to_str().unwrap(),
        "--xds-address",
        "127.0.0.1:0",
        "--admin-address",
        "127.0.0.1:0",
    ]);
    assert!(!ok, "a TCP --xds-address without the flag must be refused");
    assert!(
        stderr.contains("--xds-tcp-open-to-local-users")
            && stderr.contains("read every TLS private key"),
        "{stderr}"
    );
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let (ok, out, _) = run(&["--version"]);
    assert!(ok);
    let commit = out
        .trim()
        .strip_prefix(concat!(
            "aether-edge ",
            env!("CARGO_PKG_VERSION"),
            " (commit "
        ))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{out}"));
    let hash = commit.trim_end_matches("-dirty");
    assert!(
        hash == "unknown" || (hash.len() == 12 && hash.chars().all(|c| c.is_ascii_hexdigit())),
        "{out}"
    );
}

#[test]
fn completions_cover_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let (ok, out, err) = run(&["completions", shell]);
        assert!(ok, "{shell}: {err}");
        for sub in [
            "standalone",
            "agent",
            "explain",
            "fleet",
            "bootstrap",
            "drain",
        ] {
            assert!(out.contains(sub), "{shell} completion lacks {sub}");
        }
    }
}
