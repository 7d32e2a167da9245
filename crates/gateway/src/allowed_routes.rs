//! A listener's allowedRoutes: which namespaces and kinds of routes may attach.
//!
//! Namespaces: `Same` (the default: the Gateway's own), `All`, or `Selector` over
//! Namespace labels (matchLabels and matchExpressions, ANDed). `Selector` with no
//! `selector` is a null label selector: it selects nothing (an empty one, `{}`,
//! selects everything, as in Kubernetes). Every namespace
//! carries the label `kubernetes.io/metadata.name`, as the API server sets it, even
//! when no Namespace object was loaded.

use crate::status::{GROUP, RouteGroupKind};
use crate::store::Store;
use aether_ir::RouteKind;
use gateway_api::apis::experimental::gateways::{
    GatewayListenersAllowedRoutes, GatewayListenersAllowedRoutesNamespacesFrom,
    GatewayListenersAllowedRoutesNamespacesSelector,
};
use k8s_openapi::api::core::v1::Namespace;
use std::collections::BTreeMap;

/// Route kinds an HTTP or HTTPS listener can carry.
pub const HTTP_KINDS: [RouteKind; 2] = [RouteKind::Http, RouteKind::Grpc];

#[derive(Debug, Clone, PartialEq)]
pub enum AllowedNamespaces {
    Same,
    All,
    /// `None`: `from: Selector` without a selector, which admits no namespace.
    Selector(Option<GatewayListenersAllowedRoutesNamespacesSelector>),
}

impl AllowedNamespaces {
    pub fn from_spec(spec: Option<&GatewayListenersAllowedRoutes>) -> Self {
        let ns = spec.and_then(|a| a.namespaces.as_ref());
        match ns.and_then(|n| n.from.as_ref()) {
            Some(GatewayListenersAllowedRoutesNamespacesFrom::All) => AllowedNamespaces::All,
            Some(GatewayListenersAllowedRoutesNamespacesFrom::Selector) => {
                AllowedNamespaces::Selector(ns.and_then(|n| n.selector.clone()))
            }
            Some(GatewayListenersAllowedRoutesNamespacesFrom::Same) | None => {
                AllowedNamespaces::Same
            }
        }
    }

    /// May a route in `route_ns` attach to a listener of a Gateway in `gateway_ns`?
    pub fn allows(&self, store: &Store, gateway_ns: &str, route_ns: &str) -> bool {
        match self {
            AllowedNamespaces::Same => gateway_ns == route_ns,
            AllowedNamespaces::All => true,
            AllowedNamespaces::Selector(Some(sel)) => {
                selects(sel, &namespace_labels(store, route_ns))
            }
            AllowedNamespaces::Selector(None) => false,
        }
    }
}

/// Does a label selector (as JSON: any generated selector type has this
/// shape) select namespace `ns`? One that does not read selects nothing.
pub fn selects_namespace(store: &Store, selector: &serde_json::Value, ns: &str) -> bool {
    serde_json::from_value::<GatewayListenersAllowedRoutesNamespacesSelector>(selector.clone())
        .is_ok_and(|sel| selects(&sel, &namespace_labels(store, ns)))
}

fn namespace_labels(store: &Store, ns: &str) -> BTreeMap<String, String> {
    let mut labels = store
        .get::<Namespace>("", ns)
        .and_then(|n| n.metadata.labels.clone())
        .unwrap_or_default();
    labels.insert("kubernetes.io/metadata.name".into(), ns.into());
    labels
}

/// Label selector semantics. An unknown operator selects nothing. An empty
/// selector selects everything.
fn selects(
    sel: &GatewayListenersAllowedRoutesNamespacesSelector,
    labels: &BTreeMap<String, String>,
) -> bool {
    let labels_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let value = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// The kinds a listener supports: allowedRoutes.kinds filtered to what the
/// protocol carries (`carried`; default: all of them), and the kinds it names
/// that it cannot carry.
pub fn route_kinds(
    spec: Option<&GatewayListenersAllowedRoutes>,
    carried: &[RouteKind],
) -> (Vec<RouteGroupKind>, Vec<String>) {
    let gk = |kind: &str| RouteGroupKind {
        group: GROUP.into(),
        kind: kind.into(),
    };
    match spec
        .and_then(|a| a.kinds.as_ref())
        .filter(|k| !k.is_empty())
    {
        None => (carried.iter().map(|k| gk(k.as_str())).collect(), vec![]),
        Some(kinds) => {
            let mut supported = Vec::new();
            let mut unsupported = Vec::new();
            for k in kinds {
                let group = k.group.as_deref().unwrap_or(GROUP);
                if group == GROUP && carried.iter().any(|c| c.as_str() == k.kind) {
                    if !supported.contains(&gk(&k.kind)) {
                        supported.push(gk(&k.kind));
                    }
                } else {
                    unsupported.push(if group.is_empty() {
                        k.kind.clone()
                    } else {
                        format!("{group}/{}", k.kind)
                    });
                }
            }
            (supported, unsupported)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gateway_api::apis::experimental::gateways::GatewayListenersAllowedRoutesNamespacesSelectorMatchExpressions as Expr;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> Expr {
        Expr {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn selector_table() {
        let l = labels(&[("env", "prod"), ("team", "a")]);
        let sel =
            |ml: &[(&str, &str)], ex: Vec<Expr>| GatewayListenersAllowedRoutesNamespacesSelector {
                match_labels: Some(labels(ml)),
                match_expressions: Some(ex),
            };
        assert!(selects(&sel(&[], vec![]), &l), "empty selects all");
        assert!(selects(&sel(&[("env", "prod")], vec![]), &l));
        assert!(!selects(&sel(&[("env", "dev")], vec![]), &l));
        assert!(selects(
            &sel(&[], vec![expr("env", "In", &["dev", "prod"])]),
            &l
        ));
        assert!(!selects(
            &sel(&[], vec![expr("env", "NotIn", &["prod"])]),
            &l
        ));
        assert!(selects(&sel(&[], vec![expr("zone", "NotIn", &["x"])]), &l));
        assert!(selects(&sel(&[], vec![expr("team", "Exists", &[])]), &l));
        assert!(!selects(
            &sel(&[], vec![expr("team", "DoesNotExist", &[])]),
            &l
        ));
        assert!(!selects(&sel(&[], vec![expr("team", "Bogus", &[])]), &l));
        assert!(
            !selects(
                &sel(&[("env", "prod")], vec![expr("team", "In", &["b"])]),
                &l
            ),
            "ANDed"
        );
    }

    #[test]
    fn from_selector_without_a_selector_admits_no_namespace() {
        let spec = |selector| {
            GatewayListenersAllowedRoutes {
            kinds: None,
            namespaces: Some(
                gateway_api::apis::experimental::gateways::GatewayListenersAllowedRoutesNamespaces {
                    from: Some(GatewayListenersAllowedRoutesNamespacesFrom::Selector),
                    selector,
                },
            ),
        }
        };
        let store = Store::default();
        let none = AllowedNamespaces::from_spec(Some(&spec(None)));
        assert!(!none.allows(&store, "infra", "infra"));
        assert!(!none.allows(&store, "infra", "apps"));
        let empty = AllowedNamespaces::from_spec(Some(&spec(Some(Default::default()))));
        assert!(
            empty.allows(&store, "infra", "apps"),
            "{{}} selects everything"
        );
    }
}
