//! Where the Kubernetes binaries and the Gateway API CRDs come from. Neither is in the
//! repository:
//!
//! - binaries: `$AETHER_KUBE_BIN_DIR`, else the one line `conformance/build-tools apiserver`
//!   prints (it builds etcd + kube-apiserver into `~/.cache/aether-edge` the first time);
//! - CRDs: `$AETHER_GATEWAY_API_CRD_DIR`, else `config/crd/experimental` of the
//!   `sigs.k8s.io/gateway-api` module the conformance module pins (Go module cache,
//!   downloaded there if missing); [`gateway_api_crd_dir_at`] for another release.
//!
//! Each is resolved once per test process.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;
use tokio::sync::OnceCell;

use crate::Error;

static BIN_DIR: OnceCell<PathBuf> = OnceCell::const_new();
static CRD_DIR: OnceCell<PathBuf> = OnceCell::const_new();

/// The repository root (this crate lives in `<root>/crates/testkit`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory holding `etcd` and `kube-apiserver`.
pub async fn kube_bin_dir() -> Result<PathBuf, Error> {
    BIN_DIR
        .get_or_try_init(|| async {
            if let Some(dir) = std::env::var_os("AETHER_KUBE_BIN_DIR") {
                return Ok(PathBuf::from(dir));
            }
            let script = repo_root().join("conformance/build-tools");
            // Progress of a first build goes to stderr, straight to the terminal.
            let line = run_for_line(
                Command::new(&script)
                    .arg("apiserver")
                    .stderr(Stdio::inherit()),
                "conformance/build-tools apiserver (set AETHER_KUBE_BIN_DIR to skip it)",
            )
            .await?;
            Ok(PathBuf::from(line))
        })
        .await
        .cloned()
}

/// The directory of the experimental-channel Gateway API CRDs (`*.yaml`) of the
/// release our types are generated from (`crates/gateway-api/VERSION`).
pub async fn gateway_api_crd_dir() -> Result<PathBuf, Error> {
    CRD_DIR
        .get_or_try_init(|| async {
            if let Some(dir) = std::env::var_os("AETHER_GATEWAY_API_CRD_DIR") {
                return Ok(PathBuf::from(dir));
            }
            gateway_api_crd_dir_at(&gateway_api_version(), "experimental").await
        })
        .await
        .cloned()
}

/// The Gateway API release our types are generated from (`v1.7.0`).
pub fn gateway_api_version() -> String {
    let file = repo_root().join("crates/gateway-api/VERSION");
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    text.trim().to_string()
}

/// The CRD directory of one channel (`standard`, `experimental`) of another
/// Gateway API release (`v1.5.1`), from the Go module cache (downloaded there if
/// missing): for tests of clusters whose CRDs are older than the pinned ones.
pub async fn gateway_api_crd_dir_at(version: &str, channel: &str) -> Result<PathBuf, Error> {
    let module = format!("sigs.k8s.io/gateway-api@{version}");
    Ok(gateway_api_module(&module)
        .await?
        .join("config/crd")
        .join(channel))
}

/// Where `go mod download` (in conformance/) puts `module`.
async fn gateway_api_module(module: &str) -> Result<PathBuf, Error> {
    // `download` (not `list -m`) so a version missing from the module cache is
    // fetched rather than reported with an empty Dir; cached, it takes ~10 ms.
    let what = format!("go mod download -json {module} (in conformance/)");
    let mut go = Command::new("go");
    // auto: a release whose module needs a newer Go (v1.7.0: 1.27) is read with that
    // Go, which conformance/build-tools has already put in the module cache.
    go.args(["mod", "download", "-json", module])
        .env("GOTOOLCHAIN", "auto")
        .current_dir(repo_root().join("conformance"));
    let out = output(&mut go, &what).await?;
    #[derive(serde::Deserialize)]
    struct Module {
        #[serde(rename = "Dir", default)]
        dir: String,
    }
    match serde_json::from_slice::<Module>(&out.stdout) {
        Ok(m) if out.status.success() && !m.dir.is_empty() => Ok(PathBuf::from(m.dir)),
        _ => Err(Error::Tool {
            command: what,
            status: out.status.to_string(),
            stderr: format!(
                "{}{}(set AETHER_GATEWAY_API_CRD_DIR to a CRD directory to skip this)",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            ),
        }),
    }
}

/// Runs `cmd` with no input (`what` names it in the error) and returns what it did.
async fn output(cmd: &mut Command, what: &str) -> Result<std::process::Output, Error> {
    cmd.stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| Error::Spawn {
            program: what.to_string(),
            source: e,
        })
}

/// Runs `cmd` and returns the last non-empty line of its stdout (on success).
async fn run_for_line(cmd: &mut Command, what: &str) -> Result<String, Error> {
    let out = output(cmd.stdout(Stdio::piped()), what).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(line) if out.status.success() => Ok(line.trim().to_string()),
        _ => Err(Error::Tool {
            command: what.to_string(),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }),
    }
}

/// The Envoy binary the tests run: `$ENVOY_BIN`, else the one `scripts/get-envoy`
/// installs into `.tools/envoy/` (panics saying so when it is missing).
pub fn envoy_bin() -> PathBuf {
    let path = match std::env::var_os("ENVOY_BIN") {
        Some(p) => PathBuf::from(p),
        None => repo_root().join(".tools/envoy/bin/envoy"),
    };
    assert!(
        path.is_file(),
        "no Envoy binary at {}: run scripts/get-envoy (or set ENVOY_BIN)",
        path.display()
    );
    path
}
