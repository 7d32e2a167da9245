//! The private directory of one [`ApiServer`](crate::ApiServer) and the files in it that
//! other processes read: `pids` (for the watchdog) and kubeconfigs (for clients and child
//! processes). Removed on drop, after the watchdog is stopped; `AETHER_TESTKIT_KEEP=1`
//! keeps it for its logs.

use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;

use crate::Error;
use crate::pki;
use crate::process::Process;

/// The instance's directory and its watchdog; removes the directory on drop.
#[derive(Debug)]
pub(crate) struct RunDir {
    pub(crate) path: PathBuf,
    pub(crate) kubeconfig_path: PathBuf,
    pub(crate) watchdog: Process,
}

impl RunDir {
    pub(crate) fn create() -> Result<RunDir, Error> {
        let name = format!(
            "aether-testkit-{}-{}",
            std::process::id(),
            pki::random_hex(4)?
        );
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).map_err(|e| Error::io("create", &path, e))?;
        let watchdog = Process::watchdog(&path);
        let watchdog = match watchdog {
            Ok(w) => w,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&path);
                return Err(e);
            }
        };
        Ok(RunDir {
            kubeconfig_path: path.join("kubeconfig"),
            path,
            watchdog,
        })
    }

    /// Best effort: the file only matters if the test process dies without unwinding.
    pub(crate) fn write_pids(&self, pids: &[u32]) {
        let text: String = pids.iter().map(|p| format!("{p}\n")).collect();
        let _ = std::fs::write(self.path.join("pids"), text);
    }

    pub(crate) fn kubeconfig(&self) -> Kubeconfig {
        Kubeconfig::read_from(&self.kubeconfig_path).expect("the kubeconfig this kit wrote")
    }
}

/// A kubeconfig with one context: `server` on `port`, trusting `ca`, as `user` by token.
pub(crate) fn write_kubeconfig(
    path: &Path,
    port: u16,
    ca: &Path,
    user: &str,
    token: &str,
    namespace: &str,
) -> Result<(), Error> {
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "aether-testkit", "cluster": {
            "server": format!("https://127.0.0.1:{port}"),
            "certificate-authority": ca.display().to_string(),
        }}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "aether-testkit", "context": {
            "cluster": "aether-testkit", "user": user, "namespace": namespace,
        }}],
        "current-context": "aether-testkit",
    });
    // JSON is YAML; every kubeconfig reader accepts it.
    let text = serde_json::to_string_pretty(&doc).expect("json");
    std::fs::write(path, text).map_err(|e| Error::io("write", path, e))
}

impl Drop for RunDir {
    fn drop(&mut self) {
        self.watchdog.kill();
        if std::env::var_os("AETHER_TESTKIT_KEEP").is_some() {
            eprintln!("aether-testkit: kept {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
