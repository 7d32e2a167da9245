//! Child processes that cannot outlive the test: loopback ports, a killed-on-drop child,
//! and a watchdog for the deaths `Drop` never sees.
//!
//! ```text
//!   test process ──spawns──▶ etcd, kube-apiserver        (Process: SIGKILL + reap on drop)
//!        │        ──spawns──▶ watchdog (sh), stdin = a pipe only the test holds
//!        ▼                                   blocks in `read`; EOF means the test is gone:
//!   SIGKILL / abort (no unwinding, no Drop)  kill -9 <dir>/pids, rm -rf <dir>
//! ```
//!
//! The kernel closes the pipe however the test dies, and std opens pipes close-on-exec so
//! no other child holds it open; the watchdog forks nothing while it waits.
//!
//! Ports are drawn at random between the edge Services' Envoy ports (20000-29999) and
//! the kernel's ephemeral range (32768+), so no Envoy listener and no outgoing
//! connection can take one between our pick and the child's bind, nor during an API server
//! outage; a process-wide set stops two servers of one test binary from drawing the same.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

use crate::Error;

/// Ports handed out in this process; never reused, so a stopped API server keeps its port.
static TAKEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
/// Above the edge Services' Envoy port range (`aether_k8s::service::ServiceConfig`'s
/// default 20000-29999, which a Kubernetes-mode test's Envoy binds on 0.0.0.0) and
/// below the kernel's ephemeral range.
const PORT_RANGE: std::ops::Range<u16> = 30000..32768;

/// `n` distinct loopback ports that were free a moment ago and were never handed out in
/// this process.
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>, Error> {
    let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    let mut picked = Vec::with_capacity(n);
    let mut held = Vec::with_capacity(n);
    for _ in 0..1000 {
        if picked.len() == n {
            break;
        }
        let port = PORT_RANGE.start + random_u16()? % (PORT_RANGE.end - PORT_RANGE.start);
        if taken.contains(&port) {
            continue;
        }
        if let Ok(listener) = TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            taken.insert(port);
            picked.push(port);
            held.push(listener);
        }
    }
    if picked.len() < n {
        return Err(Error::NoFreePort);
    }
    Ok(picked)
}

fn random_u16() -> Result<u16, Error> {
    let hex = crate::pki::random_hex(2)?;
    Ok(u16::from_str_radix(&hex, 16).unwrap_or(0))
}

/// A child whose stdout and stderr go to a log file; killed and reaped on drop.
#[derive(Debug)]
pub(crate) struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
    /// The watchdog's lifeline: its stdin, held open for as long as this process lives.
    _lifeline: Option<ChildStdin>,
}

impl Process {
    /// Starts `program args…`, appending its output to `log`.
    pub(crate) fn spawn(
        name: &'static str,
        program: &Path,
        args: &[String],
        log: &Path,
    ) -> Result<Process, Error> {
        Process::spawn_with(name, program, args, log, Stdio::null())
    }

    fn spawn_with(
        name: &'static str,
        program: &Path,
        args: &[String],
        log: &Path,
        stdin: Stdio,
    ) -> Result<Process, Error> {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| Error::io("open log", log, e))?;
        let err = out.try_clone().map_err(|e| Error::io("open log", log, e))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(stdin)
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| Error::Spawn {
                program: program.display().to_string(),
                source: e,
            })?;
        Ok(Process {
            name,
            _lifeline: child.stdin.take(),
            child,
            log: log.to_path_buf(),
        })
    }

    /// The watchdog: once its stdin reaches EOF (the test process is gone), kills every
    /// pid listed in `dir/pids` and removes `dir`. It ignores SIGINT/SIGTERM/SIGHUP so a
    /// Ctrl-C that kills the test still leaves it alive to clean up.
    pub(crate) fn watchdog(dir: &Path) -> Result<Process, Error> {
        const SCRIPT: &str = r#"trap '' INT TERM HUP
while read -r _; do :; done
[ -f "$1/pids" ] && kill -9 $(cat "$1/pids") 2>/dev/null
rm -rf "$1""#;
        let args = [
            "-c".to_string(),
            SCRIPT.to_string(),
            "aether-testkit-watchdog".to_string(),
            dir.display().to_string(),
        ];
        let log = dir.join("watchdog.log");
        Process::spawn_with("watchdog", Path::new("sh"), &args, &log, Stdio::piped())
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(description)` once the child has exited.
    pub(crate) fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("wait failed: {e}")),
        }
    }

    /// SIGKILL, then reap, so the pid is gone (not a zombie) when this returns.
    pub(crate) fn kill(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    /// SIGTERM, then up to `grace` for a clean exit (etcd closes its WAL and
    /// database), then SIGKILL; reaped when this returns.
    pub(crate) fn terminate(&mut self, grace: std::time::Duration) {
        let begin = std::time::Instant::now();
        let signalled = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        while signalled && self.exited().is_none() && begin.elapsed() < grace {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.kill();
    }

    /// The last `lines` lines of the log, for error messages.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    pub(crate) fn name(&self) -> &'static str {
        self.name
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

fn log_tail(path: &Path, lines: usize) -> String {
    const MAX: u64 = 64 * 1024;
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(MAX)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_in_range_and_never_handed_out_twice() {
        let first = free_ports(8).unwrap();
        let second = free_ports(8).unwrap();
        let all: BTreeSet<u16> = first.iter().chain(&second).copied().collect();
        assert_eq!(all.len(), 16, "{first:?} {second:?}");
        assert!(all.iter().all(|p| PORT_RANGE.contains(p)));
        // Free at the time: each can be bound.
        for port in &first {
            TcpListener::bind((Ipv4Addr::LOCALHOST, *port)).unwrap();
        }
    }

    /// A fresh directory and the path of a log file in it.
    fn scratch_log() -> (PathBuf, PathBuf) {
        let name = format!(
            "aether-testkit-process-{}",
            crate::pki::random_hex(4).unwrap()
        );
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("out.log");
        (dir, log)
    }

    #[test]
    fn terminate_lets_the_child_exit_cleanly() {
        let (dir, log) = scratch_log();
        let script = "trap 'echo clean exit; exit 0' TERM; echo up; while :; do sleep 0.05; done";
        let mut p =
            Process::spawn("sh", Path::new("sh"), &["-c".into(), script.into()], &log).unwrap();
        while log_tail(&log, 1) != "up" {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        p.terminate(std::time::Duration::from_secs(10));
        assert_eq!(log_tail(&log, 1), "clean exit");
        assert_eq!(p.exited().as_deref(), Some("exit status: 0"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kill_reaps_and_log_tail_keeps_the_last_lines() {
        let (dir, log) = scratch_log();
        let script = "for i in 1 2 3 4 5; do echo line $i; done; exec sleep 60".to_string();
        let mut p = Process::spawn("sh", Path::new("sh"), &["-c".into(), script], &log).unwrap();
        let pid = p.pid();
        while log_tail(&log, 2) != "line 4\nline 5" {
            assert!(p.exited().is_none());
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(p.log_tail(2), "line 4\nline 5");
        drop(p);
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "not reaped");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
