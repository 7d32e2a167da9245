//! A status write: which object ([`StatusKind`], name), the version it was
//! computed from, and the apply body (`apiVersion`, `kind`, `metadata` with the
//! preconditions, `status`). What to write is [`super::compute`]'s.

use aether_gateway::status::RouteStatus as PlannedRoute;
use aether_gateway::{StatusPlan, Store, StoreObject};
use aether_ir::{Kind, ObjectRef};
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::listenersets::ListenerSet;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt;

/// The kinds we write status for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatusKind {
    GatewayClass,
    Gateway,
    HttpRoute,
    GrpcRoute,
    TlsRoute,
    TcpRoute,
    UdpRoute,
    BackendTlsPolicy,
    ListenerSet,
    XBackend,
}

impl StatusKind {
    pub const ALL: [StatusKind; 10] = [
        StatusKind::GatewayClass,
        StatusKind::Gateway,
        StatusKind::HttpRoute,
        StatusKind::GrpcRoute,
        StatusKind::TlsRoute,
        StatusKind::TcpRoute,
        StatusKind::UdpRoute,
        StatusKind::BackendTlsPolicy,
        StatusKind::ListenerSet,
        StatusKind::XBackend,
    ];

    /// The route kinds: a shared `status.parents` list each.
    pub const ROUTES: [StatusKind; 5] = [
        StatusKind::HttpRoute,
        StatusKind::GrpcRoute,
        StatusKind::TlsRoute,
        StatusKind::TcpRoute,
        StatusKind::UdpRoute,
    ];

    /// The kind of the table ([`Kind::spec`]) this is.
    pub const fn kind(self) -> Kind {
        match self {
            StatusKind::GatewayClass => Kind::GatewayClass,
            StatusKind::Gateway => Kind::Gateway,
            StatusKind::HttpRoute => Kind::HttpRoute,
            StatusKind::GrpcRoute => Kind::GrpcRoute,
            StatusKind::TlsRoute => Kind::TlsRoute,
            StatusKind::TcpRoute => Kind::TcpRoute,
            StatusKind::UdpRoute => Kind::UdpRoute,
            StatusKind::BackendTlsPolicy => Kind::BackendTlsPolicy,
            StatusKind::ListenerSet => Kind::ListenerSet,
            StatusKind::XBackend => Kind::XBackend,
        }
    }

    /// The Kubernetes kind.
    pub fn as_str(self) -> &'static str {
        self.kind().as_str()
    }

    /// The resource name in API paths.
    pub fn plural(self) -> &'static str {
        self.kind().spec().plural
    }

    /// The planned statuses of a route kind (`None` for GatewayClass, Gateway).
    pub fn planned(
        self,
        plan: &StatusPlan,
    ) -> Option<&BTreeMap<ObjectRef, std::sync::Arc<PlannedRoute>>> {
        match self {
            StatusKind::GatewayClass
            | StatusKind::Gateway
            | StatusKind::BackendTlsPolicy
            | StatusKind::ListenerSet
            | StatusKind::XBackend => None,
            StatusKind::HttpRoute => Some(&plan.http_routes),
            StatusKind::GrpcRoute => Some(&plan.grpc_routes),
            StatusKind::TlsRoute => Some(&plan.tls_routes),
            StatusKind::TcpRoute => Some(&plan.tcp_routes),
            StatusKind::UdpRoute => Some(&plan.udp_routes),
        }
    }
}

impl fmt::Display for StatusKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One server-side apply of one object's status subresource.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusPatch {
    pub kind: StatusKind,
    /// Namespace empty for a GatewayClass.
    pub object: ObjectRef,
    /// `resourceVersion` of the object this was computed from.
    pub based_on: Option<String>,
    /// The apply body: `apiVersion`, `kind`, `metadata`, `status`.
    pub body: Value,
    /// A route's patch whose every changed entry says only that the route
    /// waits for its Envoys (`Accepted=False/Pending`), replacing no entry
    /// that described the route's current generation: news a reader gets
    /// from no write at all. The status loop holds it back a moment
    /// ([`super::driver::PENDING_HOLD`]): most often the ACK comes first, and
    /// one write says `Accepted` where two would have.
    pub only_pending: bool,
}

impl StatusPatch {
    /// The version the body is for (its `apiVersion`), v1 if it names none: the
    /// version whose `/status` is patched.
    pub fn version(&self) -> &str {
        self.body
            .get("apiVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.rsplit_once('/'))
            .map_or("v1", |(_, version)| version)
    }

    /// What the API server does with this apply, played on `store`: the
    /// object's status becomes the body's and its resourceVersion moves on.
    /// For tests and benches that follow a run of writes with no API server;
    /// an object `store` lacks is left as it is (the server would answer 404).
    pub fn apply_to(&self, store: &mut Store) -> Result<(), serde_json::Error> {
        use gateway_api::apis::experimental::httproutes::HttpRoute;
        use gateway_api::apis::experimental::xbackends::XBackend;
        use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
        use gateway_api::apis::standard::grpcroutes::GrpcRoute;
        use gateway_api::apis::standard::tcproutes::TcpRoute;
        use gateway_api::apis::standard::tlsroutes::TlsRoute;
        use gateway_api::apis::standard::udproutes::UdpRoute;
        use serde::Serialize;
        use serde::de::DeserializeOwned;

        fn set<T: StoreObject + Serialize + DeserializeOwned>(
            store: &mut Store,
            patch: &StatusPatch,
        ) -> Result<(), serde_json::Error> {
            let (ns, name) = (&patch.object.namespace, &patch.object.name);
            let Some(current) = store.get::<T>(ns, name) else {
                return Ok(());
            };
            let mut o = serde_json::to_value(current)?;
            o["status"] = patch.body["status"].clone();
            let rv = o["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default();
            o["metadata"]["resourceVersion"] = json!(format!("{rv}0"));
            store.insert(serde_json::from_value::<T>(o)?);
            Ok(())
        }
        match self.kind {
            StatusKind::GatewayClass => set::<GatewayClass>(store, self),
            StatusKind::Gateway => set::<Gateway>(store, self),
            StatusKind::HttpRoute => set::<HttpRoute>(store, self),
            StatusKind::GrpcRoute => set::<GrpcRoute>(store, self),
            StatusKind::TlsRoute => set::<TlsRoute>(store, self),
            StatusKind::TcpRoute => set::<TcpRoute>(store, self),
            StatusKind::UdpRoute => set::<UdpRoute>(store, self),
            StatusKind::BackendTlsPolicy => set::<BackendTlsPolicy>(store, self),
            StatusKind::ListenerSet => set::<ListenerSet>(store, self),
            StatusKind::XBackend => set::<XBackend>(store, self),
        }
    }
}

/// What the API server must find for an apply body to be taken.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Precondition<'a> {
    /// The version read: anyone else's write since makes the apply fail.
    pub resource_version: Option<&'a str>,
    /// The object read: a re-created namesake makes the apply fail.
    pub uid: Option<&'a str>,
}

/// The apply body around a status.
pub(crate) fn body(
    kind: StatusKind,
    api_version: &str,
    object: &ObjectRef,
    precondition: Precondition<'_>,
    status: Value,
) -> Value {
    let mut metadata = json!({ "name": object.name });
    if !object.namespace.is_empty() {
        metadata["namespace"] = json!(object.namespace);
    }
    if let Some(rv) = precondition.resource_version {
        metadata["resourceVersion"] = json!(rv);
    }
    if let Some(uid) = precondition.uid {
        metadata["uid"] = json!(uid);
    }
    json!({
        "apiVersion": api_version,
        "kind": kind.as_str(),
        "metadata": metadata,
        "status": status,
    })
}
