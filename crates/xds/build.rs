//! Compiles the Envoy protos we render into a `FileDescriptorSet` (in `OUT_DIR`).
//!
//! envoy-types ships prost structs but no serde, and no descriptors. Its crate
//! source carries the `.proto` files it was generated from, so we compile the few
//! roots we need (every message that can appear in a resource or inside one of its
//! `Any` fields) with protox and let `prost-reflect` render them as proto3 JSON.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Every message type we put on the wire or inside an `Any` must be reachable from
/// one of these files.
const ROOTS: &[&str] = &[
    "envoy/config/bootstrap/v3/bootstrap.proto",
    "envoy/extensions/access_loggers/stream/v3/stream.proto",
    "envoy/config/cluster/v3/cluster.proto",
    "envoy/config/endpoint/v3/endpoint.proto",
    "envoy/config/listener/v3/listener.proto",
    "envoy/config/route/v3/route.proto",
    "envoy/extensions/filters/http/cors/v3/cors.proto",
    "envoy/extensions/filters/http/ext_authz/v3/ext_authz.proto",
    "envoy/extensions/filters/http/router/v3/router.proto",
    "envoy/extensions/filters/http/stateful_session/v3/stateful_session.proto",
    "envoy/extensions/http/stateful_session/cookie/v3/cookie.proto",
    "envoy/extensions/http/stateful_session/header/v3/header.proto",
    "envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector.proto",
    "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto",
    "envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.proto",
    "envoy/extensions/filters/udp/udp_proxy/v3/udp_proxy.proto",
    "envoy/extensions/filters/udp/udp_proxy/v3/route.proto",
    "envoy/extensions/regex_engines/v3/google_re2.proto",
    "envoy/extensions/resource_monitors/downstream_connections/v3/downstream_connections.proto",
    "envoy/extensions/resource_monitors/fixed_heap/v3/fixed_heap.proto",
    "envoy/extensions/retry/host/previous_hosts/v3/previous_hosts.proto",
    "envoy/extensions/transport_sockets/tls/v3/secret.proto",
    "envoy/extensions/transport_sockets/tls/v3/tls.proto",
    "envoy/extensions/upstreams/http/v3/http_protocol_options.proto",
];

fn main() {
    let proto_root = envoy_types_dir().join("proto");
    let includes: Vec<PathBuf> = std::fs::read_dir(&proto_root)
        .unwrap_or_else(|e| panic!("reading {}: {e}", proto_root.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut compiler = protox::Compiler::new(&includes)
        .unwrap_or_else(|e| panic!("protox include paths {includes:?}: {e}"));
    compiler.include_imports(true).include_source_info(false);
    for root in ROOTS {
        compiler
            .open_file(root)
            .unwrap_or_else(|e| panic!("compiling {root}: {e}"));
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR is set for build scripts"));
    std::fs::write(
        out.join("envoy_descriptors.bin"),
        compiler.encode_file_descriptor_set(),
    )
    .expect("writing the descriptor set");
    println!("cargo:rerun-if-changed=build.rs");
}

/// The envoy-types crate source: `$ENVOY_TYPES_DIR` if set, else found through
/// `cargo metadata` (offline first: every package is normally fetched already), so
/// that it works with any registry location, vendoring or path override.
fn envoy_types_dir() -> PathBuf {
    println!("cargo:rerun-if-env-changed=ENVOY_TYPES_DIR");
    if let Some(dir) = std::env::var_os("ENVOY_TYPES_DIR") {
        return checked(PathBuf::from(dir));
    }
    let manifest_dir = PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is set for build scripts"),
    );
    let workspace_manifest = manifest_dir.join("../../Cargo.toml");
    // A new envoy-types version changes the lock file; the protos must follow.
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("../../Cargo.lock").display()
    );
    let mut errors = Vec::new();
    for offline in [true, false] {
        match metadata(&workspace_manifest, offline) {
            Ok(metadata) => {
                let manifest = metadata["packages"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|p| p["name"] == "envoy-types")
                    .and_then(|p| p["manifest_path"].as_str())
                    .unwrap_or_else(|| {
                        panic!(
                            "envoy-types is not in `cargo metadata`; it must be a dependency of aether-xds"
                        )
                    });
                let dir = Path::new(manifest)
                    .parent()
                    .expect("a manifest path has a parent");
                return checked(dir.to_path_buf());
            }
            Err(e) => errors.push(e),
        }
    }
    panic!(
        "cannot locate the envoy-types sources (set ENVOY_TYPES_DIR to its crate directory):\n{}",
        errors.join("\n")
    );
}

fn metadata(workspace_manifest: &Path, offline: bool) -> Result<serde_json::Value, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    // Only the target platform's packages: other platforms' dependencies may not
    // have been downloaded, and metadata would fetch them for nothing.
    let target = std::env::var("TARGET").expect("TARGET is set for build scripts");
    let mut cmd = Command::new(&cargo);
    cmd.args(["metadata", "--format-version", "1", "--filter-platform"])
        .arg(&target)
        .arg("--manifest-path")
        .arg(workspace_manifest);
    if offline {
        cmd.arg("--offline");
    }
    let output = cmd
        .output()
        .map_err(|e| format!("running `{cargo} metadata`: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`{cargo} metadata{}` failed: {}",
            if offline { " --offline" } else { "" },
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("`cargo metadata` output: {e}"))
}

fn checked(dir: PathBuf) -> PathBuf {
    if !dir.join("proto/data-plane-api").is_dir() {
        panic!(
            "{} has no proto/data-plane-api: this envoy-types release does not ship its protos",
            dir.display()
        );
    }
    dir
}
