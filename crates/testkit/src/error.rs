//! Why an [`ApiServer`](crate::ApiServer) could not be started. Process failures carry the
//! tail of the process's log, so a failing test says what etcd or kube-apiserver said.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Tool {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("`openssl {args}` failed: {stderr}")]
    Openssl { args: String, stderr: String },
    #[error("no free loopback port found")]
    NoFreePort,
    #[error("{name} exited during startup ({status}); its last log lines:\n{log}")]
    Exited {
        name: &'static str,
        status: String,
        log: String,
    },
    #[error("{name} not ready after {secs} s (last answer: {last}); its last log lines:\n{log}")]
    NotReady {
        name: &'static str,
        secs: u64,
        last: String,
        log: String,
    },
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    #[error("CRD file {path}: {source}")]
    CrdParse {
        path: PathBuf,
        source: serde_norway::Error,
    },
    #[error("no CustomResourceDefinition in {0}")]
    NoCrds(PathBuf),
    #[error("CRD {name}: {reason}")]
    CrdWait { name: String, reason: String },
    #[error("apply {object}: {source}")]
    Apply {
        object: String,
        // Boxed: kube::Error is large, and every Result of the crate would carry its size.
        source: Box<kube::Error>,
    },
    #[error("manifest document {index}: {reason}")]
    Manifest { index: usize, reason: String },
    #[error("TokenRequest for ServiceAccount {0} returned no token")]
    NoToken(String),
    #[error("etcd {what}: {reason}")]
    Etcd { what: &'static str, reason: String },
}

impl Error {
    pub(crate) fn io(what: &'static str, path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }

    /// A bind conflict: another process took a port between our pick and the child's bind.
    pub(crate) fn is_port_conflict(&self) -> bool {
        match self {
            Error::Exited { log, .. } => log.contains("address already in use"),
            _ => false,
        }
    }
}
