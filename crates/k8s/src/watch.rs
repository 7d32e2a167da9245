//! One watch per kind, feeding the [`Index`].
//!
//! Objects are received untyped ([`DynamicObject`]) and converted one by one, so
//! an object that fails to deserialize is skipped with a warning naming it instead
//! of failing the whole watch. The watcher relists by itself after a 410 (Gone)
//! or an API server restart; errors back off and retry forever.

use crate::index::{Event, Index};
use aether_gateway::StoreObject;
use aether_ir::ObjectRef;
use futures::StreamExt;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::httproutes::HttpRoute;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::sync::Arc;
use tracing::warn;

/// Every kind the store holds; all must list before anything is published.
pub const KINDS: [&str; 11] = [
    GatewayClass::KIND,
    Gateway::KIND,
    HttpRoute::KIND,
    GrpcRoute::KIND,
    TlsRoute::KIND,
    ReferenceGrant::KIND,
    Service::KIND,
    EndpointSlice::KIND,
    Secret::KIND,
    ConfigMap::KIND,
    Namespace::KIND,
];

/// Runs every watch until the returned future is dropped.
pub async fn run(client: Client, index: Arc<Index>) {
    tokio::join!(
        watch_kind::<GatewayClass>(client.clone(), index.clone()),
        watch_kind::<Gateway>(client.clone(), index.clone()),
        watch_kind::<HttpRoute>(client.clone(), index.clone()),
        watch_kind::<GrpcRoute>(client.clone(), index.clone()),
        watch_kind::<TlsRoute>(client.clone(), index.clone()),
        watch_kind::<ReferenceGrant>(client.clone(), index.clone()),
        watch_kind::<Service>(client.clone(), index.clone()),
        watch_kind::<EndpointSlice>(client.clone(), index.clone()),
        watch_kind::<Secret>(client.clone(), index.clone()),
        watch_kind::<ConfigMap>(client.clone(), index.clone()),
        watch_kind::<Namespace>(client, index),
    );
}

/// The typed object, or `None` (with a warning naming it) if it does not fit the type.
fn convert<T: StoreObject + DeserializeOwned>(obj: DynamicObject) -> Option<T> {
    let name = format!(
        "{}/{}",
        obj.metadata.namespace.as_deref().unwrap_or(""),
        obj.metadata.name.as_deref().unwrap_or("")
    );
    let value = match serde_json::to_value(&obj) {
        Ok(v) => v,
        Err(e) => {
            warn!(kind = T::KIND, object = %name, error = %e, "skipping object");
            return None;
        }
    };
    match serde_json::from_value(value) {
        Ok(t) => Some(t),
        Err(e) => {
            warn!(kind = T::KIND, object = %name, error = %e, "skipping an object that does not deserialize");
            None
        }
    }
}

async fn watch_kind<T>(client: Client, index: Arc<Index>)
where
    T: StoreObject + DeserializeOwned + Resource<DynamicType = ()>,
{
    let resource = ApiResource::erase::<T>(&());
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
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
                if let Some(t) = convert::<T>(obj) {
                    index.apply(Event::Apply(t));
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                let namespace = obj.metadata.namespace.unwrap_or_default();
                let name = obj.metadata.name.unwrap_or_default();
                index.apply(Event::<T>::Delete(ObjectRef::new(namespace, name)));
            }
            Err(e) => warn!(kind = T::KIND, error = %e, "watch failed; retrying with backoff"),
        }
    }
}
