//! Shared by the integration tests: where the golden cases are, and where Envoy is.

#![allow(dead_code, unused_imports)] // each test binary uses a different part

pub mod live;

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// Every directory holding an `ir.yaml`: this crate's own cases (builder specifics)
/// and the workspace's end-to-end cases (written by the translate stage).
pub fn case_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for root in testdata_roots() {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            if dir.join("ir.yaml").is_file() {
                dirs.push(dir);
            }
        }
    }
    dirs.sort();
    dirs
}

pub fn testdata_roots() -> [PathBuf; 2] {
    [
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata"),
        workspace_root().join("testdata"),
    ]
}

/// A readable name for a case directory (`xds/redirects`, `root/http-basic`).
pub fn case_name(dir: &Path) -> String {
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let parent = if dir.parent() == Some(own.as_path()) {
        "xds"
    } else {
        "root"
    };
    format!(
        "{parent}/{}",
        dir.file_name().unwrap_or_default().to_string_lossy()
    )
}

pub fn load_ir(dir: &Path) -> aether_ir::Ir {
    let path = dir.join("ir.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

pub use aether_testkit::envoy_bin;

/// A scratch file unique to this process and `tag`, in the temp directory
/// itself (no directory of ours to leave behind).
pub fn scratch_file(tag: &str) -> PathBuf {
    let name = format!(
        "aether-xds-tests-{}-{}",
        std::process::id(),
        tag.replace('/', "_")
    );
    std::env::temp_dir().join(name)
}

/// Runs `envoy --mode validate` on a bootstrap; `Err(stderr)` when Envoy rejects it.
pub fn envoy_validate(tag: &str, bootstrap_yaml: &str) -> Result<(), String> {
    let file = scratch_file(&format!("{tag}.yaml"));
    std::fs::write(&file, bootstrap_yaml).expect("writing the bootstrap");
    let out = Command::new(envoy_bin())
        .args(["--mode", "validate", "--log-level", "warn", "-c"])
        .arg(&file)
        .output()
        .expect("running envoy");
    let _ = std::fs::remove_file(&file);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
