//! ReferenceGrant: may an object in one namespace refer to one in another?
//!
//! A reference within one namespace is always allowed. Across namespaces it needs a
//! ReferenceGrant in the *target* namespace whose `from` names the referring
//! (group, kind, namespace) and whose `to` names the target (group, kind, and
//! optionally name).

use crate::store::Store;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;

/// One side of a reference.
#[derive(Debug, Clone, Copy)]
pub struct Referent<'a> {
    /// `""` for the core group.
    pub group: &'a str,
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// May a route (`route_kind` in `route_ns`) name `to` in a backendRef?
pub fn route_may_name(
    store: &Store,
    route_kind: aether_ir::Kind,
    route_ns: &str,
    to: Referent<'_>,
) -> bool {
    let from = Referent {
        group: crate::status::GROUP,
        kind: route_kind.as_str(),
        namespace: route_ns,
        name: "",
    };
    permitted(store, from, to)
}

/// Is `from` allowed to refer to `to`?
pub fn permitted(store: &Store, from: Referent<'_>, to: Referent<'_>) -> bool {
    if from.namespace == to.namespace {
        return true;
    }
    store
        .all::<ReferenceGrant>()
        .iter()
        .filter(|(key, _)| key.namespace == to.namespace)
        .any(|(_, grant)| {
            grant.spec.from.iter().any(|f| {
                f.group == from.group && f.kind == from.kind && f.namespace == from.namespace
            }) && grant.spec.to.iter().any(|t| {
                t.group == to.group
                    && t.kind == to.kind
                    && t.name
                        .as_deref()
                        .is_none_or(|n| n.is_empty() || n == to.name)
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRANT: &str = "
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: backends}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: apps}]
  to: [{group: '', kind: Service, name: web}]
";

    fn r<'a>(group: &'a str, kind: &'a str, namespace: &'a str, name: &'a str) -> Referent<'a> {
        Referent {
            group,
            kind,
            namespace,
            name,
        }
    }

    #[test]
    fn grants_are_exact_about_from_and_to() {
        let mut store = Store::default();
        store.add_yaml("g.yaml", GRANT).unwrap();
        let route = r("gateway.networking.k8s.io", "HTTPRoute", "apps", "r");
        assert!(permitted(
            &store,
            route,
            r("", "Service", "backends", "web")
        ));
        assert!(
            !permitted(&store, route, r("", "Service", "backends", "db")),
            "other name"
        );
        assert!(
            !permitted(&store, route, r("", "Secret", "backends", "web")),
            "other kind"
        );
        let grpc = r("gateway.networking.k8s.io", "GRPCRoute", "apps", "r");
        assert!(
            !permitted(&store, grpc, r("", "Service", "backends", "web")),
            "other from kind"
        );
        let other_ns = r("gateway.networking.k8s.io", "HTTPRoute", "else", "r");
        assert!(!permitted(
            &store,
            other_ns,
            r("", "Service", "backends", "web")
        ));
        assert!(
            permitted(&store, other_ns, r("", "Service", "else", "x")),
            "same namespace"
        );
    }
}
