//! Which version of each Gateway API kind the installed CRDs serve.
//!
//! ```text
//!  GET /apis ──► gateway.networking.k8s.io? ──no──► every Gateway API kind missing
//!                    │ yes
//!                    ▼
//!  GET /apis/gateway.networking.k8s.io/<v> (each served version) ──► kinds per version
//!                    │
//!                    ▼  per kind: the first of v1, v1beta1, v1alpha3, v1alpha2 served
//!               ServedVersions { kind ─► version }  (absent: the CRD is not installed)
//! ```
//!
//! Our types are v1; what an older served version leaves optional is filled in
//! before decoding ([`aether_gateway::load::default_older_versions_json`]), and the
//! status of an object is written at the version it is read at, so a cluster whose
//! CRDs serve only an older version is read and written all the same. A kind whose
//! CRD is not installed at all counts as listed and empty.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::Client;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The Gateway API group.
pub const GROUP: &str = "gateway.networking.k8s.io";

/// The versions we read, most preferred first (Kubernetes version priority). Our
/// types decode each of them, for every kind that has it.
pub const PREFERENCE: [&str; 4] = ["v1", "v1beta1", "v1alpha3", "v1alpha2"];

/// Every Gateway API kind the store holds, sorted.
pub const KINDS: [&str; 10] = [
    "BackendTLSPolicy",
    "GRPCRoute",
    "Gateway",
    "GatewayClass",
    "HTTPRoute",
    "ListenerSet",
    "ReferenceGrant",
    "TCPRoute",
    "TLSRoute",
    "UDPRoute",
];

/// The version of each Gateway API kind we read and write (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServedVersions {
    /// Kind → version; a kind that no preferred version serves is absent.
    versions: BTreeMap<&'static str, &'static str>,
}

impl ServedVersions {
    /// From what the API server serves, as (version, kind) pairs: per kind of
    /// [`KINDS`], the most preferred version ([`PREFERENCE`]) among them.
    pub fn choose<'a>(served: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut versions: BTreeMap<&'static str, &'static str> = BTreeMap::new();
        for (version, kind) in served {
            let Some(kind) = KINDS.iter().find(|k| **k == kind) else {
                continue;
            };
            let Some(rank) = PREFERENCE.iter().position(|v| *v == version) else {
                continue;
            };
            let better = versions
                .get(kind)
                .is_none_or(|have| PREFERENCE.iter().position(|v| v == have) > Some(rank));
            if better {
                versions.insert(kind, PREFERENCE[rank]);
            }
        }
        ServedVersions { versions }
    }

    /// Every kind at v1: what a cluster with current CRDs serves.
    pub fn all_v1() -> Self {
        ServedVersions {
            versions: KINDS.iter().map(|k| (*k, "v1")).collect(),
        }
    }

    /// The version `kind` is read at; `None` when its CRD is not installed (or
    /// serves no version we read). Kinds outside the Gateway API: `None`.
    pub fn version(&self, kind: &str) -> Option<&'static str> {
        self.versions.get(kind).copied()
    }

    /// The `apiVersion` to write `kind` at: its served version, v1 if there is
    /// none (a kind that is not served has no objects to write).
    pub fn api_version(&self, kind: &str) -> String {
        format!("{GROUP}/{}", self.version(kind).unwrap_or("v1"))
    }

    /// The Gateway API kinds no preferred version serves, sorted.
    pub fn missing(&self) -> Vec<&'static str> {
        KINDS
            .iter()
            .filter(|k| !self.versions.contains_key(*k))
            .copied()
            .collect()
    }

    /// Prometheus text: `aether_edge_kind_missing` per kind, and the version read.
    pub fn render_metrics(&self) -> String {
        let mut out = String::from(
            "# HELP aether_edge_kind_missing Gateway API kinds whose CRD serves no version we read (1: not installed, watched as empty).\n\
             # TYPE aether_edge_kind_missing gauge\n",
        );
        for kind in KINDS {
            let missing = u8::from(!self.versions.contains_key(kind));
            let _ = writeln!(out, "aether_edge_kind_missing{{kind=\"{kind}\"}} {missing}");
        }
        out.push_str(
            "# HELP aether_edge_kind_version The served version each Gateway API kind is watched and written at.\n\
             # TYPE aether_edge_kind_version gauge\n",
        );
        for (kind, version) in &self.versions {
            let _ = writeln!(
                out,
                "aether_edge_kind_version{{kind=\"{kind}\",version=\"{version}\"}} 1"
            );
        }
        out
    }
}

/// Asks the API server. `Err` only when it cannot answer (retry); a group or a
/// version that is not there is simply not served.
pub async fn discover(client: &Client) -> Result<ServedVersions, kube::Error> {
    let groups = client.list_api_groups().await?;
    let Some(group) = groups.groups.into_iter().find(|g| g.name == GROUP) else {
        return Ok(ServedVersions::default());
    };
    let mut lists: Vec<(String, APIResourceList)> = Vec::new();
    for v in group.versions {
        match client.list_api_group_resources(&v.group_version).await {
            Ok(list) => lists.push((v.version, list)),
            // A CRD removed between the two requests.
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    let pairs = lists.iter().flat_map(|(version, list)| {
        list.resources
            .iter()
            .filter(|r| !r.name.contains('/'))
            .map(move |r| (version.as_str(), r.kind.as_str()))
    });
    Ok(ServedVersions::choose(pairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_preferred_served_version_wins_per_kind() {
        let served = ServedVersions::choose([
            ("v1alpha2", "TLSRoute"),
            ("v1alpha3", "TLSRoute"),
            ("v1alpha2", "TCPRoute"),
            ("v1beta1", "Gateway"),
            ("v1", "Gateway"),
            ("v1", "HTTPRoute"),
            ("v1beta1", "ReferenceGrant"),
            ("v1alpha1", "XBackend"),
            ("v2", "GRPCRoute"),
        ]);
        assert_eq!(served.version("TLSRoute"), Some("v1alpha3"));
        assert_eq!(served.version("TCPRoute"), Some("v1alpha2"));
        assert_eq!(served.version("Gateway"), Some("v1"));
        assert_eq!(served.version("ReferenceGrant"), Some("v1beta1"));
        assert_eq!(served.version("XBackend"), None);
        assert_eq!(
            served.version("GRPCRoute"),
            None,
            "v2 is not a version we read"
        );
        assert_eq!(
            served.missing(),
            vec![
                "BackendTLSPolicy",
                "GRPCRoute",
                "GatewayClass",
                "ListenerSet",
                "UDPRoute"
            ]
        );
        assert_eq!(
            served.api_version("TCPRoute"),
            "gateway.networking.k8s.io/v1alpha2"
        );
        assert_eq!(
            served.api_version("UDPRoute"),
            "gateway.networking.k8s.io/v1"
        );
    }

    #[test]
    fn order_of_discovery_does_not_matter() {
        let a = ServedVersions::choose([("v1", "TLSRoute"), ("v1alpha2", "TLSRoute")]);
        let b = ServedVersions::choose([("v1alpha2", "TLSRoute"), ("v1", "TLSRoute")]);
        assert_eq!(a, b);
        assert_eq!(a.version("TLSRoute"), Some("v1"));
    }

    #[test]
    fn metrics_name_every_kind_and_the_version_read() {
        let served = ServedVersions::choose([("v1", "Gateway"), ("v1alpha2", "TCPRoute")]);
        let text = served.render_metrics();
        assert!(
            text.contains("aether_edge_kind_missing{kind=\"UDPRoute\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("aether_edge_kind_missing{kind=\"Gateway\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("aether_edge_kind_version{kind=\"TCPRoute\",version=\"v1alpha2\"} 1\n"),
            "{text}"
        );
        assert_eq!(
            text.matches("aether_edge_kind_missing{").count(),
            KINDS.len()
        );
        assert!(ServedVersions::all_v1().missing().is_empty());
    }
}
