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
//! Namespace, ClusterTrustBundle: [`aether_ir::KindSpec::namespaced`]) are keyed
//! with an empty namespace. Objects without a namespace are filed under
//! `default`, as the API server would.
//!
//! What a kind is comes from the table in [`aether_ir::kind`]; which Rust type
//! holds it, from [`with_store_type!`] (the one match from [`Kind`] to a type,
//! exhaustive, so a new kind is a compile error there and nowhere else).

use self::types::*;
use aether_ir::{Kind, ObjectRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) mod reads;

/// The namespace an object without one lands in.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The objects of one kind, by key. Shared (`Arc`) between the copies of a
/// store, so that a copy costs a reference per kind and a change copies only the
/// map of its kind.
pub type Objects<T> = Arc<BTreeMap<ObjectRef, Arc<T>>>;

/// Every object translation looks at, by kind.
#[derive(Default, Clone, Debug)]
pub struct Store {
    gateway_classes: Objects<GatewayClass>,
    gateways: Objects<Gateway>,
    http_routes: Objects<HttpRoute>,
    grpc_routes: Objects<GrpcRoute>,
    tls_routes: Objects<TlsRoute>,
    tcp_routes: Objects<TcpRoute>,
    udp_routes: Objects<UdpRoute>,
    reference_grants: Objects<ReferenceGrant>,
    services: Objects<Service>,
    endpoint_slices: Objects<EndpointSlice>,
    secrets: Objects<Secret>,
    config_maps: Objects<ConfigMap>,
    namespaces: Objects<Namespace>,
    backend_tls_policies: Objects<BackendTlsPolicy>,
    listener_sets: Objects<ListenerSet>,
    cluster_trust_bundles: Objects<ClusterTrustBundle>,
    x_backends: Objects<XBackend>,
}

/// A kind the store holds.
pub trait StoreObject: Clone + Sized {
    /// The Kubernetes kind, e.g. [`Kind::HttpRoute`].
    const KIND: Kind;
    /// GatewayClass, Namespace, ClusterTrustBundle: keyed with an empty namespace.
    const CLUSTER_SCOPED: bool = !Self::KIND.spec().namespaced;
    fn metadata(&self) -> &ObjectMeta;
    fn metadata_mut(&mut self) -> &mut ObjectMeta;
    /// This kind's map as the store holds it, shared with the store's copies.
    fn shared(store: &Store) -> &Objects<Self>;
    fn shared_mut(store: &mut Store) -> &mut Objects<Self>;
    fn objects(store: &Store) -> &BTreeMap<ObjectRef, Arc<Self>> {
        Self::shared(store)
    }
    /// This kind's map, to change: copied first if a copy of the store shares it.
    fn objects_mut(store: &mut Store) -> &mut BTreeMap<ObjectRef, Arc<Self>> {
        Arc::make_mut(Self::shared_mut(store))
    }
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

/// `impl StoreObject` for type `$ty`, of the [`Kind`] variant of the same name.
macro_rules! store_object {
    ($ty:ident, $field:ident) => {
        store_object!($ty, $field, |_: &mut $ty, _: &$ty| {});
    };
    ($ty:ident, $field:ident, status) => {
        store_object!($ty, $field, |x: &mut $ty, b: &$ty| x
            .status
            .clone_from(&b.status));
    };
    ($ty:ident, $field:ident, $status:expr) => {
        impl StoreObject for $ty {
            const KIND: Kind = Kind::$ty;
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn shared(store: &Store) -> &Objects<Self> {
                &store.$field
            }
            fn shared_mut(store: &mut Store) -> &mut Objects<Self> {
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

store_object!(GatewayClass, gateway_classes, status);
store_object!(Gateway, gateways, status);
store_object!(HttpRoute, http_routes, status);
store_object!(GrpcRoute, grpc_routes, status);
store_object!(TlsRoute, tls_routes, status);
store_object!(TcpRoute, tcp_routes, status);
store_object!(UdpRoute, udp_routes, status);
store_object!(ReferenceGrant, reference_grants);
store_object!(Service, services, status);
store_object!(EndpointSlice, endpoint_slices);
store_object!(Secret, secrets);
store_object!(ConfigMap, config_maps);
store_object!(ListenerSet, listener_sets, status);
store_object!(BackendTlsPolicy, backend_tls_policies, status);
store_object!(Namespace, namespaces, status);
store_object!(ClusterTrustBundle, cluster_trust_bundles);
store_object!(XBackend, x_backends, status);

/// Calls `$f::<T>($args)` with `T` the store's type of the [`Kind`] `$kind`
/// (the match is exhaustive: a new kind is a compile error here).
#[macro_export]
macro_rules! with_store_type {
    ($kind:expr, $f:ident ( $($arg:expr),* )) => {{
        use $crate::store::types::*;
        match $kind {
            $crate::Kind::BackendTlsPolicy => $f::<BackendTlsPolicy>($($arg),*),
            $crate::Kind::ClusterTrustBundle => $f::<ClusterTrustBundle>($($arg),*),
            $crate::Kind::ConfigMap => $f::<ConfigMap>($($arg),*),
            $crate::Kind::EndpointSlice => $f::<EndpointSlice>($($arg),*),
            $crate::Kind::GrpcRoute => $f::<GrpcRoute>($($arg),*),
            $crate::Kind::Gateway => $f::<Gateway>($($arg),*),
            $crate::Kind::GatewayClass => $f::<GatewayClass>($($arg),*),
            $crate::Kind::HttpRoute => $f::<HttpRoute>($($arg),*),
            $crate::Kind::ListenerSet => $f::<ListenerSet>($($arg),*),
            $crate::Kind::Namespace => $f::<Namespace>($($arg),*),
            $crate::Kind::ReferenceGrant => $f::<ReferenceGrant>($($arg),*),
            $crate::Kind::Secret => $f::<Secret>($($arg),*),
            $crate::Kind::Service => $f::<Service>($($arg),*),
            $crate::Kind::TcpRoute => $f::<TcpRoute>($($arg),*),
            $crate::Kind::TlsRoute => $f::<TlsRoute>($($arg),*),
            $crate::Kind::UdpRoute => $f::<UdpRoute>($($arg),*),
            $crate::Kind::XBackend => $f::<XBackend>($($arg),*),
        }
    }};
}

/// The Rust type of every kind the store holds, by the kind's name.
pub mod types {
    pub use gateway_api::apis::experimental::gateways::Gateway;
    pub use gateway_api::apis::experimental::httproutes::HttpRoute;
    pub use gateway_api::apis::experimental::listenersets::ListenerSet;
    pub use gateway_api::apis::experimental::xbackends::XBackend;
    pub use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
    pub use gateway_api::apis::standard::gatewayclasses::GatewayClass;
    pub use gateway_api::apis::standard::grpcroutes::GrpcRoute;
    pub use gateway_api::apis::standard::referencegrants::ReferenceGrant;
    pub use gateway_api::apis::standard::tcproutes::TcpRoute;
    pub use gateway_api::apis::standard::tlsroutes::TlsRoute;
    pub use gateway_api::apis::standard::udproutes::UdpRoute;
    pub use k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle;
    pub use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
    pub use k8s_openapi::api::discovery::v1::EndpointSlice;
}

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
        let key = ObjectRef::new(ns, name);
        if !T::objects(self).contains_key(&key) {
            return None; // nothing to copy the map for
        }
        T::objects_mut(self).remove(&key)
    }

    /// Looks up one object (`namespace` is ignored for cluster-scoped kinds).
    pub fn get<T: StoreObject>(&self, namespace: &str, name: &str) -> Option<&T> {
        let ns = if T::CLUSTER_SCOPED { "" } else { namespace };
        let key = ObjectRef::new(ns, name);
        if reads::BY_REFERENCE.contains(&T::KIND) {
            reads::note(T::KIND, &key);
        }
        T::objects(self).get(&key).map(|o| &**o)
    }

    /// Whether the store holds `kind` `key` (not recorded as read: for the
    /// sources that fill stores, not for translating).
    pub fn holds(&self, kind: Kind, key: &ObjectRef) -> bool {
        fn has<T: StoreObject>(store: &Store, key: &ObjectRef) -> bool {
            T::objects(store).contains_key(key)
        }
        with_store_type!(kind, has(self, key))
    }

    /// Every object of one kind, sorted by (namespace, name).
    pub fn all<T: StoreObject>(&self) -> &BTreeMap<ObjectRef, Arc<T>> {
        if reads::BY_REFERENCE.contains(&T::KIND) {
            reads::note_all(T::KIND);
        }
        T::objects(self)
    }

    /// [`Store::all`], not recorded as read ([`reads`]): for comparing what
    /// was read, not for translating.
    pub(crate) fn unread<T: StoreObject>(&self) -> &BTreeMap<ObjectRef, Arc<T>> {
        T::objects(self)
    }

    /// Whether `other` holds the very maps (the same `Arc`s) this store
    /// holds of every kind but EndpointSlices.
    pub(crate) fn same_but_endpoint_slices(&self, other: &Store) -> bool {
        // Every field named: a kind added to the store is a compile error here.
        let Store {
            gateway_classes,
            gateways,
            http_routes,
            grpc_routes,
            tls_routes,
            tcp_routes,
            udp_routes,
            reference_grants,
            services,
            endpoint_slices: _,
            secrets,
            config_maps,
            namespaces,
            backend_tls_policies,
            listener_sets,
            cluster_trust_bundles,
            x_backends,
        } = self;
        Arc::ptr_eq(gateway_classes, &other.gateway_classes)
            && Arc::ptr_eq(gateways, &other.gateways)
            && Arc::ptr_eq(http_routes, &other.http_routes)
            && Arc::ptr_eq(grpc_routes, &other.grpc_routes)
            && Arc::ptr_eq(tls_routes, &other.tls_routes)
            && Arc::ptr_eq(tcp_routes, &other.tcp_routes)
            && Arc::ptr_eq(udp_routes, &other.udp_routes)
            && Arc::ptr_eq(reference_grants, &other.reference_grants)
            && Arc::ptr_eq(services, &other.services)
            && Arc::ptr_eq(secrets, &other.secrets)
            && Arc::ptr_eq(config_maps, &other.config_maps)
            && Arc::ptr_eq(namespaces, &other.namespaces)
            && Arc::ptr_eq(backend_tls_policies, &other.backend_tls_policies)
            && Arc::ptr_eq(listener_sets, &other.listener_sets)
            && Arc::ptr_eq(cluster_trust_bundles, &other.cluster_trust_bundles)
            && Arc::ptr_eq(x_backends, &other.x_backends)
    }

    /// Total number of objects of every kind.
    pub fn len(&self) -> usize {
        fn count<T: StoreObject>(store: &Store) -> usize {
            T::objects(store).len()
        }
        Kind::ALL
            .into_iter()
            .map(|kind| with_store_type!(kind, count(self)))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many Gateways (of any class) the store holds.
    pub fn gateway_count(&self) -> usize {
        self.gateways.len()
    }

    /// Every object's kind and key, sorted by kind, then (namespace, name).
    pub fn keys(&self) -> Vec<(Kind, &ObjectRef)> {
        fn push<'a, T: StoreObject + 'a>(store: &'a Store, out: &mut Vec<(Kind, &'a ObjectRef)>) {
            out.extend(T::objects(store).keys().map(|k| (T::KIND, k)));
        }
        // `Kind::ALL` is in the order of `Kind`: the walk comes out sorted.
        let mut keys = Vec::with_capacity(self.len());
        for kind in Kind::ALL {
            with_store_type!(kind, push(self, &mut keys));
        }
        keys
    }

    /// Removes the object of kind `kind` under `key`. Returns whether there
    /// was one.
    pub fn remove_kind(&mut self, kind: Kind, key: &ObjectRef) -> bool {
        fn remove<T: StoreObject>(store: &mut Store, key: &ObjectRef) -> bool {
            T::objects(store).contains_key(key) && T::objects_mut(store).remove(key).is_some()
        }
        with_store_type!(kind, remove(self, key))
    }

    /// Adds every object of `other`, replacing objects with the same key (as
    /// loading `other`'s file after this store's would).
    pub fn merge(&mut self, other: &Store) {
        fn merge<T: StoreObject>(into: &mut Store, from: &Store) {
            if T::objects(from).is_empty() {
                return;
            }
            if T::objects(into).is_empty() {
                // Shared, not copied: the first store of a kind is taken whole.
                *T::shared_mut(into) = T::shared(from).clone();
                return;
            }
            let objects = T::objects(from).iter();
            T::objects_mut(into).extend(objects.map(|(k, v)| (k.clone(), v.clone())));
        }
        for kind in Kind::ALL {
            with_store_type!(kind, merge(self, other));
        }
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
    fn a_copy_shares_every_kind_until_one_changes_and_then_only_that_one_is_copied() {
        let mut a = Store::default();
        a.insert(mk_service("shop", "cart", 80));
        a.insert_shared::<Namespace>(Arc::new(
            serde_json::from_str(r#"{"metadata":{"name":"shop"}}"#).unwrap(),
        ));
        let mut b = a.clone();
        let same = |a: &Store, b: &Store| {
            (
                Arc::ptr_eq(Service::shared(a), Service::shared(b)),
                Arc::ptr_eq(Namespace::shared(a), Namespace::shared(b)),
            )
        };
        assert_eq!(same(&a, &b), (true, true));
        // Removing what is not there copies nothing.
        assert!(b.remove::<Service>("shop", "gone").is_none());
        assert_eq!(same(&a, &b), (true, true));
        b.insert(mk_service("shop", "pay", 80));
        assert_eq!(same(&a, &b), (false, true), "only the Services were copied");
        assert_eq!((a.all::<Service>().len(), b.all::<Service>().len()), (1, 2));
        // Merged into an empty store, a kind is shared whole.
        let mut c = Store::default();
        c.merge(&b);
        assert_eq!(same(&b, &c), (true, true));
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
