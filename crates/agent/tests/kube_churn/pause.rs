//! The pause variant: an Envoy stopped (SIGSTOP) while changes go in.

use super::*;

pub(crate) async fn pause() {
    let w = world("kube-churn-pause").await;
    let c = &w.client;
    let apply = |objects: &[Value]| {
        let yaml: Vec<String> = objects.iter().map(Value::to_string).collect();
        let server = &w.server;
        async move { server.apply(&yaml.join("\n---\n")).await.unwrap() }
    };
    apply(&[route("held", "b0")]).await;
    eventually(
        Duration::from_secs(30),
        "held Accepted, attached, served",
        || async move {
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
        },
    )
    .await;
    let (route_events, gw_events): (Events, Events) = Default::default();
    let (r, g) = (route_events.clone(), gw_events.clone());
    let route_watch = watch::<HttpRoute>(c, move |at, v| r.lock().unwrap().push((at, v))).await;
    let gw_watch = watch::<Gateway>(c, move |at, v| g.lock().unwrap().push((at, v))).await;

    // Stopped: a new route, an updated route (generation 2), a new listener (generation 2).
    w.envoy.proc.signal("STOP");
    let stopped = Instant::now();
    apply(&[
        route("fresh", "b1"),
        route("held", "b1"),
        gateway(&[("http", 80), ("extra", 81)]),
    ])
    .await;
    // The agent has seen it all and holds it back: Pending at the new generations.
    let state = || async move {
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
        let extra = listener(&gw, "extra").and_then(programmed);
        Ok::<_, String>((
            (
                accepted(&fresh),
                accepted(&held),
                programmed(&gw["status"]),
                extra,
            ),
            (attached("http"), attached("extra")),
        ))
    };
    eventually(
        Duration::from_secs(30),
        "Pending at the new generations",
        || async move {
            let (got, _) = state().await?;
            let want = (
                Some((false, 1)),
                Some((false, 2)),
                Some((false, 2)),
                Some((false, 2)),
            );
            (got == want)
                .then_some(())
                .ok_or(format!("(fresh, held, gw, extra): {got:?}"))
        },
    )
    .await;
    let hold = Duration::from_secs(3);
    tokio::time::sleep(hold.saturating_sub(stopped.elapsed())).await;
    // Markers: once both watches show them, they have shown every earlier write.
    let marker = json!({"metadata": {"annotations": {"aether.test/marker": "resume"}}});
    let merge = (PatchParams::default(), Patch::Merge(&marker));
    let routes: kube::Api<HttpRoute> = kube::Api::namespaced(c.clone(), NS);
    routes.patch("held", &merge.0, &merge.1).await.unwrap();
    let gateways: kube::Api<Gateway> = kube::Api::namespaced(c.clone(), NS);
    gateways.patch("gw", &merge.0, &merge.1).await.unwrap();
    let marked = |events: &Events| {
        let events = events.lock().unwrap();
        events
            .iter()
            .any(|(_, v)| v["metadata"]["annotations"]["aether.test/marker"] == "resume")
    };
    eventually(
        Duration::from_secs(10),
        "the watches show the markers",
        || {
            let both = marked(&route_events) && marked(&gw_events);
            async move { both.then_some(()).ok_or_else(|| "not yet".to_string()) }
        },
    )
    .await;
    w.envoy.proc.signal("CONT");
    let resumed = Instant::now();

    let route_events = route_events.lock().unwrap().clone();
    let gw_events = gw_events.lock().unwrap().clone();
    let claims = claims(stopped, resumed, &route_events, &gw_events);
    assert!(
        claims.is_empty(),
        "claimed while Envoy was stopped:\n{}",
        claims.join("\n")
    );

    // Resumed: it all becomes true once Envoy ACKs, and is served.
    eventually(
        Duration::from_secs(30),
        "everything claimed after the ACK",
        || async move {
            let got = state().await?;
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
        },
    )
    .await;
    let claimed = resumed.elapsed();
    for (port, path) in [(80, "/fresh"), (80, "/held"), (81, "/fresh"), (81, "/held")] {
        assert_eq!(ask(port, path), "b1", "{POD_IP}:{port}{path} once claimed");
    }
    println!(
        "pause: Envoy stopped {} ms, nothing claimed ({} route and {} Gateway events checked); all claimed and served {} ms after SIGCONT",
        (resumed - stopped).as_millis(),
        route_events.len(),
        gw_events.len(),
        claimed.as_millis()
    );
    route_watch.abort();
    gw_watch.abort();
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
            (name.as_str(), accepted(r)),
            ("fresh", Some((true, _))) | ("held", Some((true, 2)))
        ) {
            claims.push(format!("{} ms: {name}: {}", ms(at), r["status"]));
        }
    }
    for (at, gw) in gws.iter().filter(|(at, _)| *at < resumed) {
        let attached = |l: &str| listener(gw, l).and_then(|l| l["attachedRoutes"].as_i64());
        let extra = listener(gw, "extra").and_then(programmed);
        if programmed(&gw["status"]) == Some((true, 2))
            || matches!(extra, Some((true, _)))
            || attached("http") > Some(1)
            || attached("extra") > Some(0)
        {
            claims.push(format!("{} ms: gw: {}", ms(at), gw["status"]));
        }
    }
    claims
}
