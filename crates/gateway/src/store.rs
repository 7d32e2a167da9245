//! The typed, indexed store of every object translation reads.
//!
//! ```text
//!  YAML files ──add_yaml──┐
//!                         ├──► Store { kind ─► BTreeMap<ObjectRef, object> } ──► translate
//!  kube watches ─insert/remove┘
//! ```
//!
//! One `BTreeMap` per kind, keyed by [`ObjectRef`] (namespace, name), so every walk
//! over the store is in a stable order. Cluster-scoped kinds (GatewayClass,
//! Namespace, ClusterTrustBundle) are keyed with an empty namespace. Objects without a namespace are
//! filed under `default`, as the API server would.

use aether_ir::ObjectRef;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::experimental::listenersets::ListenerSet;
use gateway_api::apis::experimental::xbackends::XBackend;
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use gateway_api::apis::standard::udproutes::UdpRoute;
use k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The namespace an object without one lands in.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Every object translation looks at, by kind.
#[derive(Default, Clone, Debug)]
pub struct Store {
    gateway_classes: BTreeMap<ObjectRef, Arc<GatewayClass>>,
    gateways: BTreeMap<ObjectRef, Arc<Gateway>>,
    http_routes: BTreeMap<ObjectRef, Arc<HttpRoute>>,
    grpc_routes: BTreeMap<ObjectRef, Arc<GrpcRoute>>,
    tls_routes: BTreeMap<ObjectRef, Arc<TlsRoute>>,
    tcp_routes: BTreeMap<ObjectRef, Arc<TcpRoute>>,
    udp_routes: BTreeMap<ObjectRef, Arc<UdpRoute>>,
    reference_grants: BTreeMap<ObjectRef, Arc<ReferenceGrant>>,
    services: BTreeMap<ObjectRef, Arc<Service>>,
    endpoint_slices: BTreeMap<ObjectRef, Arc<EndpointSlice>>,
    secrets: BTreeMap<ObjectRef, Arc<Secret>>,
    config_maps: BTreeMap<ObjectRef, Arc<ConfigMap>>,
    namespaces: BTreeMap<ObjectRef, Arc<Namespace>>,
    backend_tls_policies: BTreeMap<ObjectRef, Arc<BackendTlsPolicy>>,
    listener_sets: BTreeMap<ObjectRef, Arc<ListenerSet>>,
    cluster_trust_bundles: BTreeMap<ObjectRef, Arc<ClusterTrustBundle>>,
    x_backends: BTreeMap<ObjectRef, Arc<XBackend>>,
}

/// A kind the store holds.
pub trait StoreObject: Clone + Sized {
    /// The Kubernetes kind, e.g. `HTTPRoute`.
    const KIND: &'static str;
    /// GatewayClass and Namespace: keyed with an empty namespace.
    const CLUSTER_SCOPED: bool;
    fn metadata(&self) -> &ObjectMeta;
    fn metadata_mut(&mut self) -> &mut ObjectMeta;
    fn objects(store: &Store) -> &BTreeMap<ObjectRef, Arc<Self>>;
    fn objects_mut(store: &mut Store) -> &mut BTreeMap<ObjectRef, Arc<Self>>;
    /// Equal in all that translation reads: everything but `status`,
    /// `metadata.resourceVersion` and `metadata.managedFields`. A status write
    /// (ours or another controller's) comes back through a watch as a new
    /// object that is this one to translation.
    fn same_input(&self, other: &Self) -> bool;
}

/// `a` with what translation does not read taken from `b` (see
/// [`StoreObject::same_input`]), to compare.
fn unread_from<T: StoreObject>(a: &T, b: &T) -> T {
    let mut x = a.clone();
    let (m, from) = (x.metadata_mut(), b.metadata());
    m.resource_version.clone_from(&from.resource_version);
    m.managed_fields.clone_from(&from.managed_fields);
    x
}

macro_rules! store_object {
    ($ty:ty, $kind:literal, $field:ident, $cluster:literal) => {
        store_object!($ty, $kind, $field, $cluster, |_: &mut $ty, _: &$ty| {});
    };
    ($ty:ty, $kind:literal, $field:ident, $cluster:literal, status) => {
        store_object!($ty, $kind, $field, $cluster, |x: &mut $ty, b: &$ty| x
            .status
            .clone_from(&b.status));
    };
    ($ty:ty, $kind:literal, $field:ident, $cluster:literal, $status:expr) => {
        impl StoreObject for $ty {
            const KIND: &'static str = $kind;
            const CLUSTER_SCOPED: bool = $cluster;
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn objects(store: &Store) -> &BTreeMap<ObjectRef, Arc<Self>> {
                &store.$field
            }
            fn objects_mut(store: &mut Store) -> &mut BTreeMap<ObjectRef, Arc<Self>> {
                &mut store.$field
            }
            fn same_input(&self, other: &Self) -> bool {
                let mut x = unread_from(self, other);
                ($status)(&mut x, other);
                x == *other
            }
        }
    };
}

/// Calls macro `$m` with every kind the store holds (the one list of them).
macro_rules! every_kind {
    ($m:ident) => {
        $m!(
            GatewayClass,
            Gateway,
            HttpRoute,
            GrpcRoute,
            TlsRoute,
            TcpRoute,
            UdpRoute,
            ReferenceGrant,
            Service,
            EndpointSlice,
            Secret,
            ConfigMap,
            Namespace,
            BackendTlsPolicy,
            ListenerSet,
            ClusterTrustBundle,
            XBackend
        )
    };
}

store_object!(GatewayClass, "GatewayClass", gateway_classes, true, status);
store_object!(Gateway, "Gateway", gateways, false, status);
store_object!(HttpRoute, "HTTPRoute", http_routes, false, status);
store_object!(GrpcRoute, "GRPCRoute", grpc_routes, false, status);
store_object!(TlsRoute, "TLSRoute", tls_routes, false, status);
store_object!(TcpRoute, "TCPRoute", tcp_routes, false, status);
store_object!(UdpRoute, "UDPRoute", udp_routes, false, status);
store_object!(ReferenceGrant, "ReferenceGrant", reference_grants, false);
store_object!(Service, "Service", services, false, status);
store_object!(EndpointSlice, "EndpointSlice", endpoint_slices, false);
store_object!(Secret, "Secret", secrets, false);
store_object!(ConfigMap, "ConfigMap", config_maps, false);
store_object!(ListenerSet, "ListenerSet", listener_sets, false, status);
store_object!(
    BackendTlsPolicy,
    "BackendTLSPolicy",
    backend_tls_policies,
    false,
    status
);
store_object!(Namespace, "Namespace", namespaces, true, status);
store_object!(
    ClusterTrustBundle,
    "ClusterTrustBundle",
    cluster_trust_bundles,
    true
);
store_object!(XBackend, "XBackend", x_backends, false, status);

/// The store key of an object: namespace defaulted (or emptied for cluster-scoped
/// kinds) and name.
pub fn key_of<T: StoreObject>(obj: &T) -> ObjectRef {
    let meta = obj.metadata();
    let name = meta.name.clone().unwrap_or_default();
    if T::CLUSTER_SCOPED {
        ObjectRef::new("", name)
    } else {
        let ns = meta
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
        ObjectRef::new(ns, name)
    }
}

impl Store {
    /// Inserts or replaces an object. A namespaced object without a namespace is
    /// filed (and rewritten) under `default`.
    pub fn insert<T: StoreObject>(&mut self, mut obj: T) {
        let key = key_of(&obj);
        if !T::CLUSTER_SCOPED {
            obj.metadata_mut().namespace = Some(key.namespace.clone());
        }
        T::objects_mut(self).insert(key, Arc::new(obj));
    }

    /// [`Store::insert`] of an object another store already holds: shared, not
    /// copied (unless its namespace has to be filled in).
    pub fn insert_shared<T: StoreObject>(&mut self, mut obj: Arc<T>) {
        let key = key_of(&*obj);
        if !T::CLUSTER_SCOPED && obj.metadata().namespace.as_deref() != Some(&key.namespace) {
            Arc::make_mut(&mut obj).metadata_mut().namespace = Some(key.namespace.clone());
        }
        T::objects_mut(self).insert(key, obj);
    }

    /// Removes an object; `namespace` is ignored for cluster-scoped kinds.
    /// Returns the removed object, if any.
    pub fn remove<T: StoreObject>(&mut self, namespace: &str, name: &str) -> Option<Arc<T>> {
        let ns = if T::CLUSTER_SCOPED { "" } else { namespace };
        T::objects_mut(self).remove(&ObjectRef::new(ns, name))
    }

    /// Looks up one object (`namespace` is ignored for cluster-scoped kinds).
    pub fn get<T: StoreObject>(&self, namespace: &str, name: &str) -> Option<&T> {
        let ns = if T::CLUSTER_SCOPED { "" } else { namespace };
        T::objects(self)
            .get(&ObjectRef::new(ns, name))
            .map(|o| &**o)
    }

    /// Every object of one kind, sorted by (namespace, name).
    pub fn all<T: StoreObject>(&self) -> &BTreeMap<ObjectRef, Arc<T>> {
        T::objects(self)
    }

    /// Total number of objects of every kind.
    pub fn len(&self) -> usize {
        macro_rules! sum {
            ($($ty:ty),*) => { 0 $(+ <$ty>::objects(self).len())* };
        }
        every_kind!(sum)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many Gateways (of any class) the store holds.
    pub fn gateway_count(&self) -> usize {
        self.gateways.len()
    }

    /// Every object's kind and key, sorted by kind, then (namespace, name).
    pub fn keys(&self) -> Vec<(&'static str, &ObjectRef)> {
        fn of<'a, T: StoreObject + 'a>(
            store: &'a Store,
        ) -> impl Iterator<Item = (&'static str, &'a ObjectRef)> {
            T::objects(store).keys().map(|k| (T::KIND, k))
        }
        macro_rules! chain {
            ($first:ty, $($ty:ty),*) => { of::<$first>(self)$(.chain(of::<$ty>(self)))* };
        }
        let mut keys: Vec<_> = every_kind!(chain).collect();
        keys.sort();
        keys
    }

    /// Removes the object of kind `kind` (as [`StoreObject::KIND`] spells it)
    /// under `key`. Returns whether there was one.
    pub fn remove_kind(&mut self, kind: &str, key: &ObjectRef) -> bool {
        macro_rules! by_kind {
            ($($ty:ty),*) => {
                $(if kind == <$ty>::KIND {
                    return <$ty>::objects_mut(self).remove(key).is_some();
                })*
            };
        }
        every_kind!(by_kind);
        false
    }

    /// Adds every object of `other`, replacing objects with the same key (as
    /// loading `other`'s file after this store's would).
    pub fn merge(&mut self, other: &Store) {
        macro_rules! merge_kinds {
            ($($ty:ty),*) => {
                $(<$ty>::objects_mut(self)
                    .extend(<$ty>::objects(other).iter().map(|(k, v)| (k.clone(), v.clone())));)*
            };
        }
        every_kind!(merge_kinds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mk_service(ns: &str, name: &str, port: i32) -> Service {
        let mut svc = Service::default();
        svc.metadata.namespace = Some(ns.into());
        svc.metadata.name = Some(name.into());
        svc.spec = Some(k8s_openapi::api::core::v1::ServiceSpec {
            ports: Some(vec![k8s_openapi::api::core::v1::ServicePort {
                port,
                ..Default::default()
            }]),
            ..Default::default()
        });
        svc
    }

    #[test]
    fn merge_adds_every_object_and_the_later_store_wins() {
        let mut a = Store::default();
        a.insert(mk_service("x", "one", 80));
        a.insert(mk_service("x", "two", 80));
        let mut b = Store::default();
        b.insert(mk_service("x", "two", 8080));
        b.insert(mk_service("y", "three", 80));
        a.merge(&b);
        assert_eq!(a.len(), 3);
        let two: &Service = a.get("x", "two").unwrap();
        assert_eq!(
            two.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].port,
            8080
        );
    }

    #[test]
    fn insert_defaults_namespace_and_remove_finds_it() {
        let mut store = Store::default();
        let mut svc = Service::default();
        svc.metadata.name = Some("web".into());
        store.insert(svc);
        let got: &Service = store.get("default", "web").expect("filed under default");
        assert_eq!(got.metadata.namespace.as_deref(), Some("default"));
        assert!(store.remove::<Service>("default", "web").is_some());
        assert!(store.is_empty());
    }

    #[test]
    fn cluster_scoped_kinds_ignore_namespace() {
        let mut store = Store::default();
        let mut ns = Namespace::default();
        ns.metadata.name = Some("apps".into());
        store.insert(ns);
        assert!(store.get::<Namespace>("whatever", "apps").is_some());
        assert_eq!(
            store.all::<Namespace>().keys().next().unwrap().namespace,
            ""
        );
    }
}
