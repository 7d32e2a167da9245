//! Listening: a TCP `HOST:PORT` or a `unix:/path` socket, served until shutdown.
//!
//! [`bind`] and [`serve_on`] are split so a caller (or a test) can bind port 0 and
//! learn the address before serving; [`serve`] does both.

use crate::server::AdsServer;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::net::{TcpListener, UnixListener};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

/// Prefix of a unix socket listen address.
const UNIX_PREFIX: &str = "unix:";

/// Envoy keeps ADS streams open for hours; keepalives find dead peers behind NATs
/// and load balancers.
const KEEPALIVE: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("invalid xDS listen address {address:?}: expected HOST:PORT or unix:/path")]
    InvalidAddress { address: String },
    #[error(
        "xDS listen address {address} is not loopback: ADS carries every TLS private key and \
         is not authenticated, so it listens only on a unix socket (unix:/path, mode 0600) \
         or a loopback address"
    )]
    NotPrivate { address: String },
    #[error("cannot listen for xDS on {address}: {source}")]
    Bind {
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error("xDS server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// A bound listener, not yet serving.
#[derive(Debug)]
pub struct XdsListener {
    socket: Socket,
}

#[derive(Debug)]
enum Socket {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl XdsListener {
    /// `HOST:PORT` with the actual port, or `unix:/path`.
    pub fn local_addr(&self) -> String {
        match &self.socket {
            Socket::Tcp(l) => l
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|e| format!("<unknown: {e}>")),
            Socket::Unix(_, path) => format!("{UNIX_PREFIX}{}", path.display()),
        }
    }
}

/// Binds `listen`: a loopback `HOST:PORT` (port 0 picks one) or `unix:/path`
/// (mode 0600; a stale socket file left by a previous run is replaced). Any
/// other address is refused: the channel carries private keys in clear.
pub async fn bind(listen: &str) -> Result<XdsListener, ServeError> {
    let bind_error = |source| ServeError::Bind {
        address: listen.to_string(),
        source,
    };
    if let Some(path) = listen.strip_prefix(UNIX_PREFIX) {
        if path.is_empty() {
            return Err(ServeError::InvalidAddress {
                address: listen.to_string(),
            });
        }
        let path = PathBuf::from(path);
        let listener = bind_private(&path).map_err(bind_error)?;
        return Ok(XdsListener {
            socket: Socket::Unix(listener, path),
        });
    }
    let addr: SocketAddr = match listen.parse() {
        Ok(a) => a,
        // Host names ("localhost:18000") resolve; anything else is not an address.
        Err(_) => tokio::net::lookup_host(listen)
            .await
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| ServeError::InvalidAddress {
                address: listen.to_string(),
            })?,
    };
    if !addr.ip().is_loopback() {
        return Err(ServeError::NotPrivate {
            address: listen.to_string(),
        });
    }
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    Ok(XdsListener {
        socket: Socket::Tcp(listener),
    })
}

/// Serves ADS on `listen` until `shutdown` completes.
pub async fn serve(
    listen: &str,
    server: AdsServer,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    serve_on(bind(listen).await?, server, shutdown).await
}

/// Serves ADS on an already bound listener until `shutdown` completes.
pub async fn serve_on(
    listener: XdsListener,
    server: AdsServer,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let address = listener.local_addr();
    let closer = server.clone();
    let shutdown = async move {
        shutdown.await;
        tracing::info!("xDS server shutting down: closing ADS streams");
        closer.close_streams();
    };
    let mut builder = Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE))
        .http2_keepalive_timeout(Some(KEEPALIVE));
    let router = builder.add_service(server.into_service());
    tracing::info!(%address, "serving xDS (ADS, SotW and Delta)");
    match listener.socket {
        Socket::Tcp(l) => {
            let incoming = TcpIncoming::from(l).with_nodelay(Some(true));
            router
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await?;
        }
        Socket::Unix(l, path) => {
            let result = router
                .serve_with_incoming_shutdown(UnixListenerStream::new(l), shutdown)
                .await;
            let _ = std::fs::remove_file(&path);
            result?;
        }
    }
    Ok(())
}

/// A unix socket at `path` that only its owner can connect to (0600: ADS
/// carries private keys). Bound under a temporary name, made private, then
/// renamed into place, so it is never reachable with the umask's permissions.
fn bind_private(path: &std::path::Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let staging = path.with_file_name(format!(".{name}.{}.binding", std::process::id()));
    remove_stale_socket(path)?;
    remove_stale_socket(&staging)?;
    let listener = UnixListener::bind(&staging)?;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&staging, path)?;
    Ok(listener)
}

/// Removes a socket file at `path`, but never a regular file or directory.
fn remove_stale_socket(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path),
        Ok(_) => Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "{} exists and is not a socket; it is left as it is (remove it, or choose \
                 another --xds-address)",
                path.display()
            ),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
