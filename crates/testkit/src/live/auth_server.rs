//! Authorization servers for Envoy's ext_authz (a listener's or a route's
//! ExternalAuth filter), over HTTP ([`AuthServer`]) and gRPC
//! ([`GrpcAuthServer`]): each allows a request that carries `x-allow: yes`
//! (adding `x-user: alice` to it) and denies any other with 403. Each counts
//! the checks it answered.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub struct AuthServer {
    pub port: u16,
    checks: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl AuthServer {
    /// On 127.0.0.1 (standalone mode).
    pub fn start() -> AuthServer {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (checks, stop) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (c, s) = (checks.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let c = c.clone();
                std::thread::spawn(move || serve(conn, &c));
            }
        });
        AuthServer { port, checks, stop }
    }

    /// How many checks it has answered.
    pub fn checks(&self) -> usize {
        self.checks.load(Ordering::Relaxed)
    }

    /// Its Service `<name>` in `ns` (port 80 → the server) and EndpointSlice.
    pub fn yaml(&self, ns: &str, name: &str) -> String {
        service_yaml(ns, name, self.port)
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Checks on one connection until it closes.
fn serve(conn: TcpStream, checks: &AtomicUsize) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let (mut allow, mut length) = (false, 0usize);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "x-allow" => allow = v.trim() == "yes",
                    "content-length" => length = v.trim().parse().unwrap_or(0),
                    _ => {}
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        checks.fetch_add(1, Ordering::Relaxed);
        let answer = if allow {
            "HTTP/1.1 200 OK\r\nx-user: alice\r\ncontent-length: 0\r\n\r\n".to_string()
        } else {
            "HTTP/1.1 403 Forbidden\r\ncontent-length: 6\r\n\r\ndenied".to_string()
        };
        if conn.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// The same judgement over Envoy's ext_authz gRPC protocol (HTTP/2 cleartext):
/// `x-allow: yes` → OK with `x-user: alice` added, else PERMISSION_DENIED with 403.
pub struct GrpcAuthServer {
    pub port: u16,
    checks: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl GrpcAuthServer {
    /// On 127.0.0.1.
    pub fn start() -> GrpcAuthServer {
        use envoy_types::pb::envoy::service::auth::v3::authorization_server::AuthorizationServer;
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let checks = Arc::new(AtomicUsize::new(0));
        let service = AuthorizationServer::new(Judge(checks.clone()));
        let stop = super::grpc_backend::serve(listener, tonic::service::Routes::new(service));
        GrpcAuthServer {
            port,
            checks,
            stop: Some(stop),
        }
    }

    /// How many checks it has answered.
    pub fn checks(&self) -> usize {
        self.checks.load(Ordering::Relaxed)
    }

    /// Its Service `<name>` in `ns` (port 80 → the server) and EndpointSlice.
    pub fn yaml(&self, ns: &str, name: &str) -> String {
        service_yaml(ns, name, self.port)
    }
}

impl Drop for GrpcAuthServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

struct Judge(Arc<AtomicUsize>);

#[tonic::async_trait]
impl envoy_types::pb::envoy::service::auth::v3::authorization_server::Authorization for Judge {
    async fn check(
        &self,
        request: tonic::Request<envoy_types::pb::envoy::service::auth::v3::CheckRequest>,
    ) -> Result<
        tonic::Response<envoy_types::pb::envoy::service::auth::v3::CheckResponse>,
        tonic::Status,
    > {
        use envoy_types::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption};
        use envoy_types::pb::envoy::service::auth::v3::{
            CheckResponse, DeniedHttpResponse, OkHttpResponse, check_response::HttpResponse,
        };
        use envoy_types::pb::envoy::r#type::v3::{HttpStatus, StatusCode};
        use envoy_types::pb::google::rpc::Status;
        self.0.fetch_add(1, Ordering::Relaxed);
        let allow = request
            .get_ref()
            .attributes
            .as_ref()
            .and_then(|a| a.request.as_ref())
            .and_then(|r| r.http.as_ref())
            .and_then(|h| h.headers.get("x-allow"))
            .is_some_and(|v| v == "yes");
        let response = if allow {
            CheckResponse {
                status: Some(Status::default()),
                http_response: Some(HttpResponse::OkResponse(OkHttpResponse {
                    headers: vec![HeaderValueOption {
                        header: Some(HeaderValue {
                            key: "x-user".into(),
                            value: "alice".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                })),
                ..Default::default()
            }
        } else {
            CheckResponse {
                // PERMISSION_DENIED
                status: Some(Status {
                    code: 7,
                    ..Default::default()
                }),
                http_response: Some(HttpResponse::DeniedResponse(DeniedHttpResponse {
                    status: Some(HttpStatus {
                        code: StatusCode::Forbidden as i32,
                    }),
                    body: "denied".into(),
                    ..Default::default()
                })),
                ..Default::default()
            }
        };
        Ok(tonic::Response::new(response))
    }
}

fn service_yaml(ns: &str, name: &str, port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  ports:\n  - {{name: http, port: 80, targetPort: {port}}}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports:\n- {{name: http, port: {port}}}\nendpoints:\n- addresses: [\"127.0.0.1\"]\n  conditions: {{ready: true}}\n"
    )
}
