//! A gRPC backend (HTTP/2 cleartext): `Echo.Unary` answers its name, and
//! `Echo.Stream` streams its name every `interval_ms` until the caller hangs up
//! (proto/echo.proto). Runs on a thread of its own until dropped.

use std::net::SocketAddr;
use std::time::Duration;

/// The generated client and server of proto/echo.proto.
pub mod echo {
    tonic::include_proto!("aether.test.echo");
}

use echo::echo_server::{Echo, EchoServer};
use echo::{Ping, Pong};

/// Serves `routes` (gRPC over HTTP/2 cleartext) on `listener` from a thread of its
/// own, until the returned sender fires or is dropped.
pub(crate) fn serve(
    listener: std::net::TcpListener,
    routes: tonic::service::Routes,
) -> tokio::sync::oneshot::Sender<()> {
    listener.set_nonblocking(true).expect("non-blocking");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
            let incoming = tonic::transport::server::TcpIncoming::from(listener);
            let _ = tonic::transport::Server::builder()
                .add_routes(routes)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await;
        });
    });
    stop
}

pub struct GrpcBackend {
    pub name: String,
    pub ip: String,
    pub port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl GrpcBackend {
    /// On 127.0.0.1.
    pub fn start(name: &str) -> GrpcBackend {
        GrpcBackend::on("127.0.0.1:0", name).expect("a port on 127.0.0.1")
    }

    /// On `addr` (`ip:port`, port 0 for any).
    pub fn on(addr: &str, name: &str) -> std::io::Result<GrpcBackend> {
        let listener = std::net::TcpListener::bind(addr)?;
        let addr: SocketAddr = listener.local_addr().expect("its address");
        let service = EchoServer::new(Named(name.to_string()));
        let stop = serve(listener, tonic::service::Routes::new(service));
        Ok(GrpcBackend {
            name: name.to_string(),
            ip: addr.ip().to_string(),
            port: addr.port(),
            stop: Some(stop),
        })
    }

    /// Service `name` (port 80, `appProtocol: kubernetes.io/h2c`: Envoy speaks
    /// HTTP/2 to it) and its EndpointSlice, in namespace `ns`.
    pub fn yaml(&self, ns: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  ports:\n  - {{name: grpc, port: 80, targetPort: {port}, appProtocol: kubernetes.io/h2c}}\n---\n\
             apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports:\n- {{name: grpc, port: {port}, appProtocol: kubernetes.io/h2c}}\nendpoints:\n- addresses: [\"{ip}\"]\n  conditions: {{ready: true}}\n",
            name = self.name,
            port = self.port,
            ip = self.ip,
        )
    }
}

impl Drop for GrpcBackend {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

struct Named(String);

type PongStream =
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<Pong, tonic::Status>> + Send + 'static>>;

#[tonic::async_trait]
impl Echo for Named {
    async fn unary(&self, _: tonic::Request<Ping>) -> Result<tonic::Response<Pong>, tonic::Status> {
        Ok(tonic::Response::new(Pong {
            backend: self.0.clone(),
            seq: 0,
        }))
    }

    type StreamStream = PongStream;

    async fn stream(
        &self,
        request: tonic::Request<Ping>,
    ) -> Result<tonic::Response<PongStream>, tonic::Status> {
        let every = Duration::from_millis(u64::from(request.get_ref().interval_ms.max(1)));
        let backend = self.0.clone();
        let pongs = futures::stream::unfold(0u64, move |seq| {
            let backend = backend.clone();
            async move {
                tokio::time::sleep(every).await;
                Some((Ok(Pong { backend, seq }), seq + 1))
            }
        });
        Ok(tonic::Response::new(Box::pin(pongs)))
    }
}
