//! Leader election against a real kube-apiserver: two candidates, exactly one
//! leader; the holder's report address and certificate are found through the Lease; a holder that
//! dies is replaced after the lease duration and not before; a holder that cannot
//! renew steps down; a holder that shuts down hands over at once.

use aether_k8s::leader::{Holder, LeaderConfig, LeaderElector, current_leader};
use aether_testkit::ApiServer;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::PostParams;
use kube::{Api, Client};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

const NS: &str = "aether-ingress";
const LEASE: &str = "aether-edge-leader";

fn config(identity: &str) -> LeaderConfig {
    let mut c = LeaderConfig::new(NS, LEASE, identity);
    c.report_address = Some(format!("{identity}.example:9443"));
    c.report_certificate = Some(format!("{identity}'s certificate"));
    c.lease_duration = Duration::from_secs(3);
    c.renew_interval = Duration::from_millis(300);
    c.renew_deadline = Duration::from_secs(2);
    c
}

struct Candidate {
    is_leader: watch::Receiver<bool>,
    task: JoinHandle<()>,
    stop: Option<oneshot::Sender<()>>,
}

impl Candidate {
    fn start(client: &Client, identity: &str) -> Candidate {
        let elector = LeaderElector::new(client.clone(), config(identity));
        let is_leader = elector.is_leader();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(elector.run(async {
            let _ = stopped.await;
        }));
        Candidate {
            is_leader,
            task,
            stop: Some(stop),
        }
    }

    /// A candidate whose task is gone is no leader, whatever it said last.
    fn leads(&self) -> bool {
        !self.task.is_finished() && *self.is_leader.borrow()
    }
}

async fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) -> Duration {
    let begin = Instant::now();
    while !check() {
        assert!(begin.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    begin.elapsed()
}

async fn lease_transitions(client: &Client) -> i32 {
    let lease = Api::<Lease>::namespaced(client.clone(), NS)
        .get(LEASE)
        .await
        .unwrap();
    lease.spec.unwrap().lease_transitions.unwrap_or(0)
}

#[tokio::test]
async fn one_leader_failover_step_down_and_handover() {
    let mut server = ApiServer::start().await;
    let client = server.client();
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    assert_eq!(current_leader(&client, NS, LEASE).await, None);
    let (leader, follower) = exactly_one_of_two_candidates_leads(&client).await;
    let follower =
        a_dead_holder_is_replaced_after_the_lease_and_not_before(&client, leader, follower).await;
    a_holder_that_cannot_renew_steps_down(&mut server, &follower).await;
    a_graceful_shutdown_hands_over_at_once(&client, follower).await;
}

/// The holder `id` as the Lease names it, with its report address and certificate.
fn lease_naming(id: &str) -> Option<Holder> {
    Some(Holder {
        identity: id.to_string(),
        report_address: Some(format!("{id}.example:9443")),
        report_certificate: Some(format!("{id}'s certificate")),
    })
}

/// Several renew rounds later, still exactly one; the Lease names it and its
/// report address. Returns `(leader, follower)` with their identities.
async fn exactly_one_of_two_candidates_leads(
    client: &Client,
) -> ((Candidate, &'static str), (Candidate, &'static str)) {
    let a = Candidate::start(client, "a");
    let b = Candidate::start(client, "b");
    wait_for("a first leader", Duration::from_secs(5), || {
        a.leads() || b.leads()
    })
    .await;
    for _ in 0..100 {
        assert!(a.leads() != b.leads(), "exactly one leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (leader, follower) = if a.leads() {
        ((a, "a"), (b, "b"))
    } else {
        ((b, "b"), (a, "a"))
    };
    assert_eq!(
        current_leader(client, NS, LEASE).await,
        lease_naming(leader.1)
    );
    (leader, follower)
}

/// The holder dies without a word: the follower waits out the lease, then takes
/// over (one more transition). Returns the new leader.
async fn a_dead_holder_is_replaced_after_the_lease_and_not_before(
    client: &Client,
    (leader, _): (Candidate, &str),
    (follower, follower_id): (Candidate, &str),
) -> Candidate {
    let transitions = lease_transitions(client).await;
    leader.task.abort();
    let took = wait_for("failover", Duration::from_secs(8), || follower.leads()).await;
    assert!(
        took >= Duration::from_millis(2500),
        "took over after {took:?}, before the 3 s lease could expire"
    );
    assert_eq!(lease_transitions(client).await, transitions + 1);
    assert_eq!(
        current_leader(client, NS, LEASE).await,
        lease_naming(follower_id)
    );
    follower
}

/// It steps down after the renew deadline (2 s; the bound allows for a loaded
/// machine), while the 3 s lease it last wrote keeps anyone else out; it leads
/// again once renewing works.
async fn a_holder_that_cannot_renew_steps_down(server: &mut ApiServer, holder: &Candidate) {
    server.stop_apiserver().await;
    let stepped = wait_for("step down", Duration::from_secs(5), || !holder.leads()).await;
    assert!(
        stepped <= Duration::from_millis(3500),
        "stepped down after {stepped:?}"
    );
    server.start_apiserver().await;
    wait_for(
        "lead again once renewing works",
        Duration::from_secs(10),
        || holder.leads(),
    )
    .await;
}

/// A graceful shutdown releases the Lease: a newcomer need not wait it out (it
/// leads well within the 3 s lease).
async fn a_graceful_shutdown_hands_over_at_once(client: &Client, mut holder: Candidate) {
    holder.stop.take().unwrap().send(()).unwrap();
    holder.task.await.unwrap();
    assert_eq!(current_leader(client, NS, LEASE).await, None);
    let c = Candidate::start(client, "c");
    wait_for(
        "takeover of a released lease",
        Duration::from_millis(2500),
        || c.leads(),
    )
    .await;
    assert_eq!(current_leader(client, NS, LEASE).await, lease_naming("c"));
}
