//! Older served versions of a kind, read as its `v1`.

use aether_ir::{Kind, RouteKind};
use serde_norway::Value;

/// The kinds whose older versions leave fields optional.
fn older(kind: Kind) -> bool {
    matches!(
        kind.route(),
        Some(RouteKind::Tls | RouteKind::Tcp | RouteKind::Udp)
    )
}

/// Older served versions (TLSRoute `v1alpha2`/`v1alpha3`, TCPRoute and UDPRoute
/// `v1alpha2`) leave optional what `v1` requires: TLSRoute `spec.hostnames` and
/// a rule's `backendRefs`. Absent, they mean empty; filled in so one `v1` type
/// reads every version the CRDs serve.
pub fn default_older_versions(kind: Kind, value: &mut Value) {
    if !older(kind) {
        return;
    }
    let Some(spec) = value.get_mut("spec").and_then(Value::as_mapping_mut) else {
        return;
    };
    let empty = || Value::Sequence(Vec::new());
    if kind == Kind::TlsRoute && !spec.contains_key("hostnames") {
        spec.insert("hostnames".into(), empty());
    }
    if !spec.contains_key("rules") {
        spec.insert("rules".into(), empty());
    }
    for rule in spec
        .get_mut("rules")
        .and_then(Value::as_sequence_mut)
        .into_iter()
        .flatten()
    {
        if let Some(rule) = rule.as_mapping_mut()
            && !rule.contains_key("backendRefs")
        {
            rule.insert("backendRefs".into(), empty());
        }
    }
}

/// [`default_older_versions`] for an object read as JSON (Kubernetes mode).
pub fn default_older_versions_json(kind: Kind, value: &mut serde_json::Value) {
    use serde_json::Value as J;
    if !older(kind) {
        return;
    }
    let Some(spec) = value.get_mut("spec").and_then(J::as_object_mut) else {
        return;
    };
    if kind == Kind::TlsRoute {
        spec.entry("hostnames").or_insert_with(|| J::Array(vec![]));
    }
    let rules = spec.entry("rules").or_insert_with(|| J::Array(vec![]));
    for rule in rules.as_array_mut().into_iter().flatten() {
        if let Some(rule) = rule.as_object_mut() {
            rule.entry("backendRefs")
                .or_insert_with(|| J::Array(vec![]));
        }
    }
}
