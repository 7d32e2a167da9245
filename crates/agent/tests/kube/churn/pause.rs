//! The pause variant: an Envoy stopped (SIGSTOP) while changes go in.

use super::*;

pub(crate) async fn pause() {
    let w = world("kube-churn-pause").await;
    a_route_is_accepted_attached_and_served(&w).await;
    let events = Recorded::watch(&w.client).await;
    let stopped = changes_while_envoy_is_stopped_are_held_pending(&w).await;
    let resumed = envoy_resumes_once_the_watches_show_every_write(&w, &events, stopped).await;
    let (routes, gateways) = events.stop();
    let claims = claims(stopped, resumed, &routes, &gateways);
    assert!(
        claims.is_empty(),
        "claimed while Envoy was stopped:\n{}",
        claims.join("\n")
    );
    everything_is_claimed_and_served_after_the_ack(&w.client).await;
    println!(
        "pause: Envoy stopped {} ms, nothing claimed ({} route and {} Gateway events checked); all claimed and served {} ms after SIGCONT",
        (resumed - stopped).as_millis(),
        routes.len(),
        gateways.len(),
        resumed.elapsed().as_millis()
    );
}

async fn apply(w: &World, objects: &[Value]) {
    let yaml: Vec<String> = objects.iter().map(Value::to_string).collect();
    w.server.apply(&yaml.join("\n---\n")).await.unwrap();
}

async fn a_route_is_accepted_attached_and_served(w: &World) {
    let c = &w.client;
    apply(w, &[route("held", "b0")]).await;
    let what = "held Accepted, attached, served";
    eventually(Duration::from_secs(30), what, || async move {
        route_accepted(c, NS, "held", "gw").await?;
        let gw = get_json::<Gateway>(c, Some(NS), "gw")
            .await
            .ok_or("no gw")?;
        let attached = listener(&gw, "http").map(|l| l["attachedRoutes"].clone());
        let answer = ask(80, "/held");
        if attached == Some(json!(1)) && answer == "b0" {
            Ok(())
        } else {
            Err(format!("attachedRoutes {attached:?}, answer {answer}"))
        }
    })
    .await;
}

/// An object as a watch showed it, and when.
type Event = (Instant, Value);

/// Every route and Gateway a watch shows, with when.
struct Recorded {
    routes: Events,
    gateways: Events,
    watches: [tokio::task::JoinHandle<()>; 2],
}

impl Recorded {
    async fn watch(c: &kube::Client) -> Recorded {
        let (routes, gateways): (Events, Events) = Default::default();
        let (r, g) = (routes.clone(), gateways.clone());
        let route_watch = watch::<HttpRoute>(c, move |at, v| r.lock().unwrap().push((at, v))).await;
        let gw_watch = watch::<Gateway>(c, move |at, v| g.lock().unwrap().push((at, v))).await;
        Recorded {
            routes,
            gateways,
            watches: [route_watch, gw_watch],
        }
    }

    /// Both seen `aether.test/marker: resume`.
    fn marked(&self) -> bool {
        let marked = |events: &Events| {
            let events = events.lock().unwrap();
            events
                .iter()
                .any(|(_, v)| v["metadata"]["annotations"]["aether.test/marker"] == "resume")
        };
        marked(&self.routes) && marked(&self.gateways)
    }

    /// `(routes, Gateways)` seen.
    fn stop(self) -> (Vec<Event>, Vec<Event>) {
        for w in &self.watches {
            w.abort();
        }
        let routes = self.routes.lock().unwrap().clone();
        let gateways = self.gateways.lock().unwrap().clone();
        (routes, gateways)
    }
}

/// `((fresh Accepted, held Accepted, Gateway Programmed, listener extra
/// Programmed), (attachedRoutes http, extra))`, each `(is True, observedGeneration)`.
type State = (
    (
        Option<(bool, i64)>,
        Option<(bool, i64)>,
        Option<(bool, i64)>,
        Option<(bool, i64)>,
    ),
    (Option<Value>, Option<Value>),
);

async fn state(c: &kube::Client) -> Result<State, String> {
    let fresh = get_json::<HttpRoute>(c, Some(NS), "fresh")
        .await
        .ok_or("no fresh")?;
    let held = get_json::<HttpRoute>(c, Some(NS), "held")
        .await
        .ok_or("no held")?;
    let gw = get_json::<Gateway>(c, Some(NS), "gw")
        .await
        .ok_or("no gw")?;
    let attached = |l: &str| listener(&gw, l).map(|l| l["attachedRoutes"].clone());
    let extra = listener(&gw, "extra").and_then(programmed_at);
    Ok((
        (
            accepted_at(&fresh),
            accepted_at(&held),
            programmed_at(&gw["status"]),
            extra,
        ),
        (attached("http"), attached("extra")),
    ))
}

/// Stopped: a new route, an updated route (generation 2), a new listener
/// (generation 2). The agent has seen it all and holds it back: Pending at the
/// new generations. Returns when Envoy was stopped.
async fn changes_while_envoy_is_stopped_are_held_pending(w: &World) -> Instant {
    w.envoy.proc.signal("STOP");
    let stopped = Instant::now();
    let changes = [
        route("fresh", "b1"),
        route("held", "b1"),
        gateway(&[("http", 80), ("extra", 81)]),
    ];
    apply(w, &changes).await;
    let c = &w.client;
    let what = "Pending at the new generations";
    eventually(Duration::from_secs(30), what, || async move {
        let (got, _) = state(c).await?;
        let want = (
            Some((false, 1)),
            Some((false, 2)),
            Some((false, 2)),
            Some((false, 2)),
        );
        (got == want)
            .then_some(())
            .ok_or(format!("(fresh, held, gw, extra): {got:?}"))
    })
    .await;
    stopped
}

/// Held three seconds; then markers, and once both watches show them, they have
/// shown every earlier write: Envoy resumes. Returns when.
async fn envoy_resumes_once_the_watches_show_every_write(
    w: &World,
    events: &Recorded,
    stopped: Instant,
) -> Instant {
    let hold = Duration::from_secs(3);
    tokio::time::sleep(hold.saturating_sub(stopped.elapsed())).await;
    let marker = json!({"metadata": {"annotations": {"aether.test/marker": "resume"}}});
    let merge = (PatchParams::default(), Patch::Merge(&marker));
    let routes: kube::Api<HttpRoute> = kube::Api::namespaced(w.client.clone(), NS);
    routes.patch("held", &merge.0, &merge.1).await.unwrap();
    let gateways: kube::Api<Gateway> = kube::Api::namespaced(w.client.clone(), NS);
    gateways.patch("gw", &merge.0, &merge.1).await.unwrap();
    eventually(
        Duration::from_secs(10),
        "the watches show the markers",
        || {
            let both = events.marked();
            async move { both.then_some(()).ok_or_else(|| "not yet".to_string()) }
        },
    )
    .await;
    w.envoy.proc.signal("CONT");
    Instant::now()
}

/// Resumed: it all becomes true once Envoy ACKs, and is served.
async fn everything_is_claimed_and_served_after_the_ack(c: &kube::Client) {
    let what = "everything claimed after the ACK";
    eventually(Duration::from_secs(30), what, || async move {
        let got = state(c).await?;
        let want = (
            (
                Some((true, 1)),
                Some((true, 2)),
                Some((true, 2)),
                Some((true, 2)),
            ),
            (Some(json!(2)), Some(json!(2))),
        );
        (got == want).then_some(()).ok_or(format!("{got:?}"))
    })
    .await;
    for (port, path) in [(80, "/fresh"), (80, "/held"), (81, "/fresh"), (81, "/held")] {
        assert_eq!(ask(port, path), "b1", "{POD_IP}:{port}{path} once claimed");
    }
}

/// What the events seen before `resumed` claim of the changes made while Envoy
/// was stopped: `fresh` Accepted, `held` Accepted at generation 2, the Gateway or
/// listener `extra` Programmed at generation 2, attachedRoutes grown.
pub(crate) fn claims(
    stopped: Instant,
    resumed: Instant,
    routes: &[(Instant, Value)],
    gws: &[(Instant, Value)],
) -> Vec<String> {
    let ms = |at: &Instant| at.saturating_duration_since(stopped).as_millis();
    let mut claims = Vec::new();
    for (at, r) in routes.iter().filter(|(at, _)| *at < resumed) {
        let name = identity(r).0;
        if matches!(
            (name.as_str(), accepted_at(r)),
            ("fresh", Some((true, _))) | ("held", Some((true, 2)))
        ) {
            claims.push(format!("{} ms: {name}: {}", ms(at), r["status"]));
        }
    }
    for (at, gw) in gws.iter().filter(|(at, _)| *at < resumed) {
        let attached = |l: &str| listener(gw, l).and_then(|l| l["attachedRoutes"].as_i64());
        let extra = listener(gw, "extra").and_then(programmed_at);
        if programmed_at(&gw["status"]) == Some((true, 2))
            || matches!(extra, Some((true, _)))
            || attached("http") > Some(1)
            || attached("extra") > Some(0)
        {
            claims.push(format!("{} ms: gw: {}", ms(at), gw["status"]));
        }
    }
    claims
}
