//! The leader's end: one stream per agent, each report replacing the last.

use crate::join::Reports;
use crate::pb::fleet_reports_server::{FleetReports, FleetReportsServer};
use crate::pb::{AckReport, ReportSummary};
use futures::StreamExt;
use tonic::{Request, Response, Status, Streaming};
use tracing::{debug, info};

/// A report no larger than this is plenty for 10,000 Gateways.
const MAX_REPORT_BYTES: usize = 8 << 20;

pub struct ReportService {
    reports: Reports,
}

impl ReportService {
    pub fn new(reports: Reports) -> FleetReportsServer<ReportService> {
        FleetReportsServer::new(ReportService { reports })
            .max_decoding_message_size(MAX_REPORT_BYTES)
    }
}

#[tonic::async_trait]
impl FleetReports for ReportService {
    async fn report(
        &self,
        request: Request<Streaming<AckReport>>,
    ) -> Result<Response<ReportSummary>, Status> {
        let mut stream = request.into_inner();
        let mut node: Option<String> = None;
        let mut count = 0u64;
        let result = loop {
            match stream.next().await {
                Some(Ok(report)) => {
                    if node.is_none() {
                        info!(node = %report.node, "agent reporting");
                    }
                    if node.as_deref().is_some_and(|n| n != report.node) {
                        break Err(Status::invalid_argument("a stream reports for one node"));
                    }
                    node = Some(report.node.clone());
                    count += 1;
                    debug!(node = %report.node, "report");
                    self.reports.apply(report);
                }
                Some(Err(e)) => break Err(e),
                None => break Ok(()),
            }
        };
        if let Some(node) = node {
            info!(node = %node, "agent stopped reporting");
            self.reports.remove(&node);
        }
        result.map(|()| Response::new(ReportSummary { reports: count }))
    }
}
