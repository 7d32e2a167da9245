//! The agent's end: stream the latest local report to whoever leads.
//!
//! Bounded: at most one report per `interval`, only when it changed, and only the
//! latest (intermediate reports are skipped). The stream follows the leader: when
//! the leader's report address changes, or the stream breaks, it reconnects.

use crate::pb::AckReport;
use crate::pb::fleet_reports_client::FleetReportsClient;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_stream::wrappers::ReceiverStream;
use tracing::{info, warn};

pub async fn run(
    mut leader: watch::Receiver<Option<String>>,
    reports: watch::Receiver<Arc<AckReport>>,
    interval: Duration,
) {
    loop {
        let address = leader.borrow_and_update().clone();
        let Some(address) = address else {
            if leader.changed().await.is_err() {
                return;
            }
            continue;
        };
        tokio::select! {
            r = stream_to(&address, reports.clone(), interval) => {
                if let Err(e) = r {
                    warn!(leader = %address, error = %e, "reporting to the leader failed; retrying");
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            r = leader.changed() => if r.is_err() { return },
        }
    }
}

async fn stream_to(
    address: &str,
    mut reports: watch::Receiver<Arc<AckReport>>,
    interval: Duration,
) -> Result<(), tonic::Status> {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?
        .connect_timeout(Duration::from_secs(3));
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    info!(leader = %address, "reporting to the leader");
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let sender = async move {
        loop {
            let report = (**reports.borrow_and_update()).clone();
            if tx.send(report).await.is_err() {
                return;
            }
            tokio::time::sleep(interval).await;
            if reports.changed().await.is_err() {
                return;
            }
        }
    };
    let mut client = FleetReportsClient::new(channel);
    tokio::select! {
        r = client.report(ReceiverStream::new(rx)) => r.map(|_| ()),
        () = sender => Ok(()),
    }
}
