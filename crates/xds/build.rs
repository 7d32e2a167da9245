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
    "envoy/config/cluster/v3/cluster.proto",
    "envoy/config/endpoint/v3/endpoint.proto",
    "envoy/config/listener/v3/listener.proto",
    "envoy/config/route/v3/route.proto",
    "envoy/extensions/filters/http/router/v3/router.proto",
    "envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector.proto",
    "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto",
    "envoy/extensions/regex_engines/v3/google_re2.proto",
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

/// The envoy-types crate source, found through `cargo metadata` so that it works with
/// any registry location, vendoring or a path override.
fn envoy_types_dir() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let manifest_dir = PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is set for build scripts"),
    );
    let workspace_manifest = manifest_dir.join("../../Cargo.toml");
    // Only the target platform's packages: other platforms' dependencies may not
    // have been downloaded, and metadata would fetch them for nothing.
    let target = std::env::var("TARGET").expect("TARGET is set for build scripts");
    let output = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--filter-platform"])
        .arg(&target)
        .arg("--manifest-path")
        .arg(&workspace_manifest)
        .output()
        .unwrap_or_else(|e| panic!("running `{cargo} metadata` to find envoy-types: {e}"));
    if !output.status.success() {
        panic!(
            "`{cargo} metadata` failed while looking for the envoy-types protos:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("`cargo metadata` prints JSON");
    let manifest = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "envoy-types")
        .and_then(|p| p["manifest_path"].as_str())
        .unwrap_or_else(|| {
            panic!("envoy-types is not in `cargo metadata`; it must be a dependency of aether-xds")
        });
    let dir = Path::new(manifest)
        .parent()
        .expect("a manifest path has a parent")
        .to_path_buf();
    if !dir.join("proto/data-plane-api").is_dir() {
        panic!(
            "{} has no proto/data-plane-api: this envoy-types release does not ship its protos",
            dir.display()
        );
    }
    dir
}
