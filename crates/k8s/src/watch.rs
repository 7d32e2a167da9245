//! One watch per kind, feeding the [`Index`].
//!
//! ```text
//!  core kinds (Service, EndpointSlice, Secret, ConfigMap, Namespace) ──► watch ──┐
//!  ClusterTrustBundle (when served: crate::trust_bundles) ──► watch ─────────────┤
//!                                                                                ├─► Index
//!  discovery (at start, then every `rediscover`) ─► per Gateway API kind         │
//!    (XBackend of the experimental group included):                              │
//!     served at v ──► watch at v (restarted when v changes) ────────────────────┤
//!     not installed (two passes in a row) ──► warn once, listed as empty ───────┘
//! ```
//!
//! Objects are received untyped ([`DynamicObject`]) and converted one by one, so
//! an object that fails to deserialize is skipped with a warning naming it instead
//! of failing the whole watch; objects read at an older version get what that
//! version leaves optional filled in first. The watcher relists by itself after a
//! 410 (Gone) or an API server restart; errors back off and retry forever.
//!
//! A Gateway API kind whose CRD is not installed never holds up the first
//! publish for long: once a second pass ([`CONFIRM_MISSING`] later) agrees it is
//! absent, it counts as listed and empty, and it is watched from the discovery
//! pass that finds it installed. A kind that was watched keeps its watch through
//! one pass that does not list it (an API server restarting).

use crate::discovery::{self, ServedVersions};
use crate::index::{Event, Index};
use aether_gateway::StoreObject;
use aether_gateway::lenient;
use aether_gateway::load::default_older_versions_json;
use aether_gateway::with_store_type;
use aether_ir::{Kind, ObjectRef};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};
use tracing::{info, warn};

/// Every kind the store holds; all must list before anything is published.
pub const KINDS: [Kind; 17] = Kind::ALL;

/// How often the served Gateway API versions are looked up again, so a CRD
/// installed (or upgraded) later gets watched (at its new version).
pub const REDISCOVER: Duration = Duration::from_secs(60);

/// Runs every watch until the returned future is dropped. `served` gets the
/// Gateway API versions in use after each discovery pass that changes them
/// (`None` until the first pass succeeds).
pub async fn run(
    client: Client,
    index: Arc<Index>,
    served: watch::Sender<Option<ServedVersions>>,
    rediscover: Duration,
) {
    tokio::join!(
        gateway_api(client.clone(), index.clone(), served, rediscover),
        watch_kind::<Service>(client.clone(), index.clone(), None),
        watch_kind::<EndpointSlice>(client.clone(), index.clone(), None),
        watch_secrets(client.clone(), index.clone()),
        watch_config_maps(client.clone(), index.clone()),
        watch_kind::<Namespace>(client.clone(), index.clone(), None),
        crate::trust_bundles::run(client, index, rediscover),
    );
}

/// The only Secrets a Gateway can use: a listener's certificateRefs must be
/// `kubernetes.io/tls`. Asking for those alone keeps every other Secret of the
/// cluster (tokens, passwords) out of this process's memory; RBAC cannot say
/// "only this type", so this is as narrow as the read gets.
pub const SECRET_TYPES: &str = "type=kubernetes.io/tls";

async fn watch_secrets(client: Client, index: Arc<Index>) {
    let config = watcher::Config::default().fields(SECRET_TYPES);
    watch_kind_with::<Secret>(client, index, None, config).await
}

/// Every ConfigMap but the leader's fleet view (`fleet_doc.rs`), which it
/// rewrites whenever the fleet's state moves (up to once a second, more often
/// the more routes a node is behind on). Translation never reads it, and a
/// changed ConfigMap makes the translator start over (any Gateway may name one
/// for a CA), so watching it made every rewrite an O(routes) translation on
/// every agent. The name is ours in every namespace.
pub const CONFIG_MAPS: &str = "metadata.name!=aether-edge-fleet";

async fn watch_config_maps(client: Client, index: Arc<Index>) {
    let config = watcher::Config::default().fields(CONFIG_MAPS);
    watch_kind_with::<ConfigMap>(client, index, None, config).await
}

/// A kind absent from discovery is declared missing only when the next pass, this
/// much later, agrees: an API server that has just (re)started can list its
/// groups before it serves every CRD, and taking that for "not installed" would
/// empty the kind and wipe what Envoy serves.
pub const CONFIRM_MISSING: Duration = Duration::from_secs(2);

/// Per Gateway API kind, what runs: a watch at `Some(version)`, or nothing
/// (`None`: not installed, listed as empty).
type Watched = BTreeMap<Kind, Option<&'static str>>;

/// What one discovery pass changes.
#[derive(Debug, Default, PartialEq)]
struct Pass {
    /// Kinds whose watch changes, with what to: a kind that stays as it is
    /// (missing included) is not named again.
    changes: Vec<(Kind, Option<&'static str>)>,
    /// Kinds absent from this pass but not (yet) declared missing: the next pass
    /// decides. What ran for them keeps running.
    unconfirmed: BTreeSet<Kind>,
}

/// Compares a discovery pass with what runs. `unconfirmed`: the kinds the
/// previous pass found absent.
fn pass(watched: &Watched, unconfirmed: &BTreeSet<Kind>, found: &ServedVersions) -> Pass {
    let mut out = Pass::default();
    for kind in Kind::gateway_api() {
        let version = found.version(kind);
        let now = watched.get(&kind);
        match version {
            Some(_) if now != Some(&version) => out.changes.push((kind, version)),
            Some(_) => {}
            None if now == Some(&None) => {}
            None if unconfirmed.contains(&kind) => out.changes.push((kind, None)),
            None => {
                out.unconfirmed.insert(kind);
            }
        }
    }
    out
}

/// The versions in use, as the status writer and /metrics see them.
fn in_use(watched: &Watched) -> ServedVersions {
    ServedVersions::choose(
        watched
            .iter()
            .filter_map(|(k, v)| Some(((*v)?, k.as_str()))),
    )
}

/// Discovery, then one watch per served Gateway API kind; re-checked every
/// `rediscover`. Dropping this future aborts the watches it started.
async fn gateway_api(
    client: Client,
    index: Arc<Index>,
    served: watch::Sender<Option<ServedVersions>>,
    rediscover: Duration,
) {
    let mut tasks = JoinSet::new();
    let mut watched = Watched::new();
    let mut unconfirmed = BTreeSet::new();
    let mut running: BTreeMap<Kind, AbortHandle> = BTreeMap::new();
    let mut retry = Duration::from_millis(500);
    loop {
        let found = match discovery::discover(&client).await {
            Ok(found) => found,
            Err(e) => {
                warn!(group = discovery::GROUP, error = %e, "API discovery failed; retrying");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(rediscover);
                continue;
            }
        };
        retry = Duration::from_millis(500);
        let Pass {
            changes,
            unconfirmed: absent,
        } = pass(&watched, &unconfirmed, &found);
        unconfirmed = absent;
        for (kind, version) in &changes {
            watched.insert(*kind, *version);
        }
        // Before any watch lists at a new version: status is written at it. Nothing
        // before every kind is settled (watched, or confirmed missing).
        if watched.len() == Kind::gateway_api().count() {
            let now = in_use(&watched).with_bundles(found.bundles().clone());
            served.send_if_modified(|current| {
                let changed = current.as_ref() != Some(&now);
                *current = Some(now);
                changed
            });
        }
        for (kind, version) in changes {
            if let Some(task) = running.remove(&kind) {
                task.abort();
            }
            match version {
                Some(v) => {
                    info!(kind = kind.as_str(), version = v, "watching");
                    let (client, index) = (client.clone(), index.clone());
                    let task = with_store_type!(kind, spawn_watch(&mut tasks, client, index, v));
                    running.insert(kind, task);
                }
                None => {
                    warn!(
                        kind = kind.as_str(),
                        group = kind.spec().group,
                        "CRD not installed (no served version we read): no objects of this kind"
                    );
                    with_store_type!(kind, list_empty(&index));
                }
            }
        }
        // Reap watches aborted above.
        while tasks.try_join_next().is_some() {}
        let next = if unconfirmed.is_empty() {
            rediscover
        } else {
            rediscover.min(CONFIRM_MISSING)
        };
        tokio::time::sleep(next).await;
    }
}

fn spawn_watch<T>(
    tasks: &mut JoinSet<()>,
    client: Client,
    index: Arc<Index>,
    version: &'static str,
) -> AbortHandle
where
    T: StoreObject + DeserializeOwned + Resource<DynamicType = ()> + Send + 'static,
{
    tasks.spawn(watch_kind::<T>(client, index, Some(version)))
}

/// A kind nobody serves: listed, with no objects (any it had are gone).
pub(crate) fn list_empty<T: StoreObject>(index: &Index) {
    index.apply(Event::<T>::Init);
    index.apply(Event::<T>::InitDone);
}

/// The typed object, or `None` (with a warning naming it) if it does not fit the
/// type. A route rule with a value we do not know is dropped, not the route
/// (`aether_gateway::lenient`): the route's status then names the field.
pub(crate) fn convert<T: StoreObject + DeserializeOwned>(obj: DynamicObject) -> Option<T> {
    let name = format!(
        "{}/{}",
        obj.metadata.namespace.as_deref().unwrap_or(""),
        obj.metadata.name.as_deref().unwrap_or("")
    );
    let mut value = match serde_json::to_value(&obj) {
        Ok(v) => v,
        Err(e) => {
            warn!(kind = T::KIND.as_str(), object = %name, error = %e, "skipping object");
            return None;
        }
    };
    default_older_versions_json(T::KIND, &mut value);
    // Only our decoder sets these.
    if let Some(notes) = value
        .pointer_mut("/metadata/annotations")
        .and_then(serde_json::Value::as_object_mut)
    {
        notes.retain(|k, _| !k.starts_with(lenient::DROPPED_RULE));
    }
    if let Ok(t) = serde_json::from_value(value.clone()) {
        return Some(t);
    }
    match lenient::decode_json::<T>(&value) {
        Ok(t) => {
            let dropped = lenient::dropped_rules(t.metadata().annotations.as_ref());
            warn!(kind = T::KIND.as_str(), object = %name, dropped = ?dropped, "rules with unsupported values dropped");
            Some(t)
        }
        Err(e) => {
            warn!(kind = T::KIND.as_str(), object = %name, error = %e, "an object that does not deserialize is not served");
            None
        }
    }
}

/// `version`: the served version to watch (Gateway API kinds); `None`: the type's own.
pub(crate) async fn watch_kind<T>(client: Client, index: Arc<Index>, version: Option<&str>)
where
    T: StoreObject + DeserializeOwned + Resource<DynamicType = ()>,
{
    watch_kind_with::<T>(client, index, version, watcher::Config::default()).await
}

async fn watch_kind_with<T>(
    client: Client,
    index: Arc<Index>,
    version: Option<&str>,
    config: watcher::Config,
) where
    T: StoreObject + DeserializeOwned + Resource<DynamicType = ()>,
{
    let mut resource = ApiResource::erase::<T>(&());
    if let Some(v) = version {
        resource.api_version = format!("{}/{v}", resource.group);
        resource.version = v.to_string();
    }
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let mut stream = watcher(api, config).default_backoff().boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => index.apply(Event::<T>::Init),
            Ok(watcher::Event::InitApply(obj)) => {
                if let Some(t) = convert::<T>(obj) {
                    index.apply(Event::InitApply(t));
                }
            }
            Ok(watcher::Event::InitDone) => index.apply(Event::<T>::InitDone),
            Ok(watcher::Event::Apply(obj)) => {
                let key = ObjectRef::new(
                    obj.metadata.namespace.clone().unwrap_or_default(),
                    obj.metadata.name.clone().unwrap_or_default(),
                );
                match convert::<T>(obj) {
                    Some(t) => index.apply(Event::Apply(t)),
                    // Its previous version must not go on being served.
                    None => index.apply(Event::<T>::Delete(key)),
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                let namespace = obj.metadata.namespace.unwrap_or_default();
                let name = obj.metadata.name.unwrap_or_default();
                index.apply(Event::<T>::Delete(ObjectRef::new(namespace, name)));
            }
            Err(e) => {
                warn!(kind = T::KIND.as_str(), error = %e, "watch failed; retrying with backoff")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aether_gateway::store::types::TcpRoute;
    use serde_json::json;

    #[test]
    fn an_older_version_decodes_into_the_v1_type() {
        // v1alpha2 TCPRoute: backendRefs optional (required in v1).
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1alpha2",
            "kind": "TCPRoute",
            "metadata": {"namespace": "app", "name": "db"},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [{}]},
        }))
        .unwrap();
        let route = convert::<TcpRoute>(obj).expect("decodes");
        assert_eq!(route.spec.rules.len(), 1);
        assert!(route.spec.rules[0].backend_refs.is_empty());
    }

    #[test]
    fn a_rule_with_an_unknown_value_is_dropped_and_a_forged_drop_is_not() {
        use gateway_api::apis::experimental::httproutes::HttpRoute;
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"namespace": "app", "name": "r",
                "annotations": {"decode.aether.io/dropped-rule-0": "forged"}},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [
                {"backendRefs": [{"name": "web", "port": 80}]},
                {"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "ftp"}}]},
            ]},
        }))
        .unwrap();
        let route = convert::<HttpRoute>(obj).expect("the route decodes");
        let dropped = lenient::dropped_rules(route.metadata.annotations.as_ref());
        assert_eq!(dropped.keys().copied().collect::<Vec<_>>(), vec![1]);
        assert!(dropped[&1].contains("scheme"), "{}", dropped[&1]);

        let broken: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"namespace": "app", "name": "r"},
            "spec": {"parentRefs": [{"name": "gw", "port": "eighty"}]},
        }))
        .unwrap();
        assert!(convert::<HttpRoute>(broken).is_none());
    }

    /// Runs a pass and applies it, as the loop does.
    fn step(
        watched: &mut Watched,
        unconfirmed: &mut BTreeSet<Kind>,
        found: &ServedVersions,
    ) -> Vec<(Kind, Option<&'static str>)> {
        let p = pass(watched, unconfirmed, found);
        watched.extend(p.changes.iter().copied());
        *unconfirmed = p.unconfirmed;
        p.changes
    }

    #[test]
    fn a_kind_changes_only_when_its_served_version_does() {
        let (mut watched, mut unconfirmed) = (Watched::new(), BTreeSet::new());
        let older = ServedVersions::choose([("v1", "Gateway"), ("v1alpha2", "TCPRoute")]);
        let first = step(&mut watched, &mut unconfirmed, &older);
        assert_eq!(
            first,
            vec![
                (Kind::Gateway, Some("v1")),
                (Kind::TcpRoute, Some("v1alpha2"))
            ]
        );
        assert_eq!(
            unconfirmed.len(),
            Kind::gateway_api().count() - 2,
            "to confirm"
        );
        // Confirmed: the absent kinds are missing, once.
        let second = step(&mut watched, &mut unconfirmed, &older);
        assert_eq!(second.len(), Kind::gateway_api().count() - 2);
        assert!(second.contains(&(Kind::UdpRoute, None)));
        assert!(unconfirmed.is_empty());
        assert_eq!(in_use(&watched), older);
        // The same answer again: nothing restarts, nothing is reported again.
        assert!(step(&mut watched, &mut unconfirmed, &older).is_empty());
        // TCPRoute upgraded to v1, UDPRoute installed: both change at once.
        let newer = ServedVersions::choose([
            ("v1", "Gateway"),
            ("v1", "TCPRoute"),
            ("v1alpha2", "TCPRoute"),
            ("v1", "UDPRoute"),
        ]);
        assert_eq!(
            step(&mut watched, &mut unconfirmed, &newer),
            vec![(Kind::TcpRoute, Some("v1")), (Kind::UdpRoute, Some("v1"))]
        );
    }

    #[test]
    fn a_kind_absent_for_one_pass_keeps_its_watch() {
        let (mut watched, mut unconfirmed) = (Watched::new(), BTreeSet::new());
        let all = ServedVersions::all_v1();
        step(&mut watched, &mut unconfirmed, &all);
        // An API server just restarted lists no Gateway API group yet.
        let blip = ServedVersions::default();
        assert!(step(&mut watched, &mut unconfirmed, &blip).is_empty());
        assert_eq!(unconfirmed.len(), Kind::gateway_api().count());
        assert_eq!(in_use(&watched), all, "status still written at v1");
        // Back: nothing changed, nothing to confirm.
        assert!(step(&mut watched, &mut unconfirmed, &all).is_empty());
        assert!(unconfirmed.is_empty());
        // Really gone (two passes): listed empty.
        let no_udp = ServedVersions::choose(
            Kind::gateway_api()
                .filter(|k| *k != Kind::UdpRoute)
                .map(|k| (k.served_versions()[0], k.as_str())),
        );
        assert!(step(&mut watched, &mut unconfirmed, &no_udp).is_empty());
        assert_eq!(
            step(&mut watched, &mut unconfirmed, &no_udp),
            vec![(Kind::UdpRoute, None)]
        );
    }

    #[test]
    fn every_gateway_api_kind_is_a_store_kind() {
        for kind in Kind::gateway_api() {
            assert!(KINDS.contains(&kind), "{kind}");
        }
    }
}
