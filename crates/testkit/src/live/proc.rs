//! Child processes of a live test, free ports and scratch directories.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// A loopback port that was free a moment ago, for a listener some process binds
/// later. Drawn as the API server's ports are (`process::free_ports`): below the
/// kernel's ephemeral range and never twice in this process, so no `bind(…:0)`
/// or outgoing connection, of this test or one running beside it, can take it
/// before its owner binds it (a port from `bind(127.0.0.1:0)`, released, could
/// be given to another test's Envoy admin, and Envoy would then refuse our
/// listener).
pub fn free_port() -> u16 {
    crate::process::free_ports(1).expect("a free loopback port")[0]
}

/// A fresh, empty directory `aether-edge-live-<tag>-<pid>-<n>` under the temp dir
/// (the pid lets [`isolated`](super::isolated) remove a passed test's directories).
/// A test keeps its directories (logs, configs) for a post-mortem; the first
/// call in a process removes those of test processes that are gone and were
/// last changed over an hour ago, so runs do not pile them up.
pub fn temp_dir(tag: &str) -> PathBuf {
    static JANITOR: std::sync::Once = std::sync::Once::new();
    JANITOR.call_once(remove_dead_processes_dirs);
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("aether-edge-live-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Removes each `aether-edge-live-*-<pid>-<n>` directory whose process is gone
/// and that has not changed for [`KEPT_FOR`].
fn remove_dead_processes_dirs() {
    for entry in std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| n.strip_prefix("aether-edge-live-"))
        else {
            continue;
        };
        let pid = rest.rsplit('-').nth(1).and_then(|p| p.parse::<u32>().ok());
        let gone = pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists());
        let age = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok()?.elapsed().ok());
        if gone && age.is_some_and(|a| a > KEPT_FOR) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// How long the directories of a finished test process are kept.
const KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(3600);

/// A child process killed on drop, its stdout and stderr kept in `<log_dir>/<name>.log`.
pub struct Proc {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(name: &str, cmd: &mut Command, log_dir: &Path) -> Proc {
        let log = log_dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Proc {
            name: name.to_string(),
            child,
            log,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Kill with SIGKILL and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal by name (`STOP`, `CONT`, ...) with kill(1).
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{name} {}", self.pid());
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}
