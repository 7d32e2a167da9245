//! A seeded etcd: the data directory of an etcd whose kube-apiserver has bootstrapped
//! itself (RBAC policy, flow-control config, the `default` namespaces) and established
//! the CRDs, made once and copied into every later [`ApiServer`](crate::ApiServer)'s
//! directory before its etcd starts.
//!
//! ```text
//!   <tmp>/aether-testkit-seed-<key>/      key: binaries (path, size, mtime), CRDs, flags
//!     member/{snap,wal}                   ──copy (sparse)──▶ <run>/etcd-<n>/ ──▶ etcd
//! ```
//!
//! Creating the 14 Gateway API CRDs costs a kube-apiserver more CPU than starting it
//! (measured: ~2.7 CPU-s against ~2.0, server-side field tracking and CEL compilation of
//! their schemas, then the status updates that establish them); loading them from a
//! seeded etcd costs a fraction of that, and the kube tests start ~30 API servers.
//! The seed is made by the first start that needs it (one test process at a time
//! inside a process; between processes the first complete seed renamed into place
//! wins) and stays in the temp directory, so the test binaries after the first reuse it.
//! A change of binary, CRD or flag makes a new key; `AETHER_TESTKIT_SEED=0` turns it off.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;

use crate::Error;
use crate::run_dir::RunDir;

/// Raised whenever what a seed holds changes in a way the key cannot see.
const FORMAT: u32 = 1;
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// One seed is made at a time in this process; other starts wait, then reuse it.
static MAKING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Whether starts use a seed (`AETHER_TESTKIT_SEED=0` makes every start install its CRDs).
pub(crate) fn enabled() -> bool {
    std::env::var_os("AETHER_TESTKIT_SEED").is_none_or(|v| v != "0")
}

/// Where the seed for this combination lives (it may not exist yet).
pub(crate) fn path(
    bin_dir: &Path,
    crds: &[CustomResourceDefinition],
    flags: &[&str],
) -> Result<PathBuf, Error> {
    let mut hasher = DefaultHasher::new();
    FORMAT.hash(&mut hasher);
    for program in ["etcd", "kube-apiserver"] {
        let path = bin_dir.join(program);
        let real = std::fs::canonicalize(&path).map_err(|e| Error::io("resolve", &path, e))?;
        let meta = std::fs::metadata(&real).map_err(|e| Error::io("stat", &real, e))?;
        real.hash(&mut hasher);
        meta.len().hash(&mut hasher);
        meta.modified().ok().hash(&mut hasher);
    }
    serde_json::to_string(crds)
        .expect("CRDs serialize")
        .hash(&mut hasher);
    flags.hash(&mut hasher);
    let key = format!("{:016x}", hasher.finish());
    Ok(std::env::temp_dir().join(format!("aether-testkit-seed-{key}")))
}

/// Makes the seed at `seed` with `make` unless a test before this one made it. `make`
/// returns the data directory of an etcd it stopped, and the run directory it lives in.
pub(crate) async fn get_or_make<F, Fut>(seed: &Path, make: F) -> Result<(), Error>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<(RunDir, PathBuf), Error>>,
{
    let _one = MAKING.lock().await;
    if seed.is_dir() {
        return Ok(());
    }
    let begin = Instant::now();
    let (run, data) = make().await?;
    let partial = seed.with_extension(format!("partial-{}", crate::pki::random_hex(4)?));
    copy_sparse(&data, &partial)?;
    drop(run);
    // A directory cannot be renamed onto a non-empty one: if another test process
    // was first, its seed stays and ours goes.
    if std::fs::rename(&partial, seed).is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    eprintln!(
        "aether-testkit: etcd seed {} made in {:.1} s",
        seed.display(),
        begin.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `cp -r --sparse=always`: etcd preallocates its 64 MB WAL, which is mostly zeros.
pub(crate) fn copy_sparse(from: &Path, to: &Path) -> Result<(), Error> {
    let output = std::process::Command::new("cp")
        .args(["-r", "--sparse=always"])
        .arg(from)
        .arg(to)
        .output()
        .map_err(|e| Error::io("run cp for", from, e))?;
    if !output.status.success() {
        return Err(Error::io(
            "copy",
            from,
            std::io::Error::other(String::from_utf8_lossy(&output.stderr).into_owned()),
        ));
    }
    Ok(())
}

/// Waits until discovery lists every CRD's resource in each of its served versions:
/// the seeded CRDs are Established in etcd already, but a freshly started server
/// publishes them in discovery a moment after `/readyz` says ok.
pub(crate) async fn await_discovery(
    client: &Client,
    crds: &[CustomResourceDefinition],
) -> Result<(), Error> {
    let begin = Instant::now();
    let mut wanted: Vec<(String, String)> = crds
        .iter()
        .flat_map(|crd| {
            let spec = &crd.spec;
            spec.versions.iter().filter(|v| v.served).map(|v| {
                (
                    format!("{}/{}", spec.group, v.name),
                    spec.names.plural.clone(),
                )
            })
        })
        .collect();
    wanted.sort();
    wanted.dedup();
    loop {
        let mut missing = Vec::new();
        for (group_version, plural) in &wanted {
            let listed = client
                .list_api_group_resources(group_version)
                .await
                .is_ok_and(|list| list.resources.iter().any(|r| &r.name == plural));
            if !listed {
                missing.push(format!("{plural}.{group_version}"));
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        if begin.elapsed() > DISCOVERY_TIMEOUT {
            return Err(Error::CrdWait {
                name: missing.join(", "),
                reason: format!("not in discovery {DISCOVERY_TIMEOUT:?} after a seeded start"),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
