//! The leader's end: one stream per agent, each report replacing the last.
//!
//! TLS only ([`serve`], [`crate::tls`]): a plain-text connection never gets
//! as far as gRPC. A stream is taken only from a peer whose credential names
//! its node ([`crate::auth`]); every report on it must be that node's.

use crate::auth::{Authenticator, Refusal, Refusals, bearer};
use crate::join::Reports;
use crate::pb::fleet_reports_server::{FleetReports, FleetReportsServer};
use crate::pb::{AckReport, ReportSummary};
use crate::tls::ServingCertificate;
use futures::StreamExt;
use std::future::Future;
use std::sync::Arc;
use tonic::{Request, Response, Status, Streaming};
use tracing::{debug, info, warn};

/// A report no larger than this is plenty for 10,000 Gateways.
const MAX_REPORT_BYTES: usize = 8 << 20;

pub struct ReportService {
    reports: Reports,
    auth: Arc<dyn Authenticator>,
    refusals: Arc<Refusals>,
}

impl ReportService {
    /// Refused streams are counted in `refusals`.
    pub fn new(
        reports: Reports,
        auth: Arc<dyn Authenticator>,
        refusals: Arc<Refusals>,
    ) -> FleetReportsServer<ReportService> {
        FleetReportsServer::new(ReportService {
            reports,
            auth,
            refusals,
        })
        .max_decoding_message_size(MAX_REPORT_BYTES)
    }

    fn refuse(&self, peer: &str, refusal: Refusal) -> Status {
        self.refusals.count(&refusal);
        warn!(%peer, reason = refusal.reason(), "report stream refused: {refusal}");
        refusal.status()
    }
}

/// Serves `service` on `listener` over TLS with `certificate`, until the
/// returned future is dropped.
pub fn serve(
    listener: tokio::net::TcpListener,
    service: FleetReportsServer<ReportService>,
    certificate: &ServingCertificate,
) -> Result<
    impl Future<Output = Result<(), tonic::transport::Error>> + use<>,
    tonic::transport::Error,
> {
    Ok(tonic::transport::Server::builder()
        .tls_config(certificate.server_tls())?
        .add_service(service)
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)))
}

#[tonic::async_trait]
impl FleetReports for ReportService {
    async fn report(
        &self,
        request: Request<Streaming<AckReport>>,
    ) -> Result<Response<ReportSummary>, Status> {
        let peer = request
            .remote_addr()
            .map_or_else(|| "unknown".to_string(), |a| a.to_string());
        let node = match bearer(request.metadata()) {
            None => Err(Refusal::NoToken),
            Some(token) => self.auth.node_of(token).await,
        }
        .map_err(|r| self.refuse(&peer, r))?;
        let mut stream = request.into_inner();
        let mut count = 0u64;
        let result = loop {
            match stream.next().await {
                Some(Ok(report)) => {
                    if report.node != node {
                        break Err(self.refuse(
                            &peer,
                            Refusal::WrongNode {
                                credential: node.clone(),
                                report: report.node,
                            },
                        ));
                    }
                    if count == 0 {
                        info!(%node, %peer, "agent reporting");
                    }
                    count += 1;
                    debug!(%node, "report");
                    self.reports.apply(report);
                }
                Some(Err(e)) => break Err(e),
                None => break Ok(()),
            }
        };
        if count > 0 {
            info!(%node, "agent stopped reporting");
            self.reports.remove(&node);
        }
        result.map(|()| Response::new(ReportSummary { reports: count }))
    }
}
