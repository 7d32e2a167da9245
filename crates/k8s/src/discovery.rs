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
//!
//! The experimental group ([`X_GROUP`], XBackend at v1alpha1) is discovered the
//! same way: a cluster with the standard channel or an older release has no
//! XBackend, and it is reported missing like any other kind.

use aether_ir::Kind;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::{Api, Client};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use std::collections::BTreeMap;

/// The Gateway API group.
pub const GROUP: &str = aether_ir::kind::GATEWAY_GROUP;

/// The Gateway API's experimental group (`XBackend`).
pub const X_GROUP: &str = aether_ir::kind::X_GATEWAY_GROUP;

/// The annotation a Gateway API CRD carries its release in.
pub const BUNDLE_VERSION: &str = "gateway.networking.k8s.io/bundle-version";

/// The Gateway API releases whose CRDs this controller reads and writes
/// (the conformance suites it passes): `v1.5.x`, `v1.6.x`, `v1.7.x`.
pub const SUPPORTED_RELEASES: [&str; 3] = ["v1.5.", "v1.6.", "v1.7."];

/// The version of each Gateway API kind we read and write (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServedVersions {
    /// Kind → version; a kind that no preferred version serves is absent.
    versions: BTreeMap<Kind, &'static str>,
    /// The installed CRDs' releases ([`BUNDLE_VERSION`]).
    bundles: Bundles,
}

/// What the installed Gateway API CRDs say their release is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Bundles {
    /// Not asked (tests, or before discovery).
    #[default]
    NotRead,
    /// Per installed kind, its CRD's annotation (`None`: not annotated).
    Read(BTreeMap<Kind, Option<String>>),
    /// The API server would not say (e.g. RBAC), and why.
    Unreadable(String),
}

impl ServedVersions {
    /// From what the API server serves, as (version, kind) pairs: per kind of
    /// Gateway API kind, the most preferred version ([`Kind::served_versions`])
    /// among them.
    pub fn choose<'a>(served: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut versions: BTreeMap<Kind, &'static str> = BTreeMap::new();
        for (version, kind) in served {
            let Some(kind) = kind.parse::<Kind>().ok().filter(|k| k.is_gateway_api()) else {
                continue;
            };
            let order = kind.served_versions();
            let Some(rank) = order.iter().position(|v| *v == version) else {
                continue;
            };
            let better = versions
                .get(&kind)
                .is_none_or(|have| order.iter().position(|v| v == have) > Some(rank));
            if better {
                versions.insert(kind, order[rank]);
            }
        }
        ServedVersions {
            versions,
            bundles: Bundles::NotRead,
        }
    }

    /// The same, with what the CRDs say their release is.
    pub fn with_bundles(mut self, bundles: Bundles) -> Self {
        self.bundles = bundles;
        self
    }

    pub fn bundles(&self) -> &Bundles {
        &self.bundles
    }

    /// The GatewayClass's `SupportedVersion`: whether every installed Gateway
    /// API CRD is of a release we support, and a message naming what is
    /// installed; `None` when the CRDs were not read.
    pub fn supported_version(&self) -> Option<(bool, String)> {
        let read = match &self.bundles {
            Bundles::NotRead => return None,
            Bundles::Unreadable(why) => {
                return Some((
                    false,
                    format!(
                        "the Gateway API CRDs' release cannot be read ({why}); served best effort"
                    ),
                ));
            }
            Bundles::Read(read) => read,
        };
        let supported = |v: &str| SUPPORTED_RELEASES.iter().any(|p| v.starts_with(p));
        let odd: Vec<String> = read
            .iter()
            .filter(|(_, v)| !v.as_deref().is_some_and(supported))
            .map(|(kind, v)| match v {
                Some(v) => format!("{kind} ({v})"),
                None => format!("{kind} (no {BUNDLE_VERSION} annotation)"),
            })
            .collect();
        let releases: std::collections::BTreeSet<&str> =
            read.values().flatten().map(String::as_str).collect();
        let releases: Vec<&str> = releases.into_iter().collect();
        if odd.is_empty() {
            Some((
                true,
                format!("Gateway API CRDs {} are supported", releases.join(", ")),
            ))
        } else {
            Some((
                false,
                format!(
                    "CRDs of a release this controller does not support (v1.5 to v1.7): {}; served best effort",
                    odd.join(", ")
                ),
            ))
        }
    }

    /// Every kind at its current version (v1; XBackend v1alpha1): what a
    /// cluster with current experimental CRDs serves.
    pub fn all_v1() -> Self {
        ServedVersions {
            versions: Kind::gateway_api()
                .map(|k| (k, k.served_versions()[0]))
                .collect(),
            bundles: Bundles::NotRead,
        }
    }

    /// The version `kind` is read at; `None` when its CRD is not installed (or
    /// serves no version we read). Kinds outside the Gateway API: `None`.
    pub fn version(&self, kind: Kind) -> Option<&'static str> {
        self.versions.get(&kind).copied()
    }

    /// The `apiVersion` to write `kind` at: its served version, its most
    /// preferred if there is none (a kind that is not served has no objects to
    /// write).
    pub fn api_version(&self, kind: Kind) -> String {
        let version = self
            .version(kind)
            .or(kind.served_versions().first().copied());
        kind.api_version(version.unwrap_or("v1"))
    }

    /// The Gateway API kinds no preferred version serves, sorted.
    pub fn missing(&self) -> Vec<Kind> {
        Kind::gateway_api()
            .filter(|k| !self.versions.contains_key(k))
            .collect()
    }
}

/// `aether_edge_kind_missing{kind}` (1: its CRD serves no version we read) and
/// `aether_edge_kind_version{kind,version}` (under a registry prefixed
/// `aether_edge`), from the latest discovery at each scrape; nothing before the
/// first, when no kind is known missing yet.
pub struct ServedKinds(pub tokio::sync::watch::Receiver<Option<ServedVersions>>);

impl std::fmt::Debug for ServedKinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ServedKinds").finish_non_exhaustive()
    }
}

impl Collector for ServedKinds {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(served) = self.0.borrow().clone() else {
            return Ok(());
        };
        let mut missing = encoder.encode_descriptor(
            "kind_missing",
            "Gateway API kinds whose CRD serves no version we read (1: not installed, watched as empty).",
            None,
            MetricType::Gauge,
        )?;
        for kind in Kind::gateway_api() {
            let gauge = ConstGauge::new(i64::from(served.version(kind).is_none()));
            gauge.encode(missing.encode_family(&[("kind", kind.as_str())])?)?;
        }
        let mut version = encoder.encode_descriptor(
            "kind_version",
            "The served version each Gateway API kind is watched and written at.",
            None,
            MetricType::Gauge,
        )?;
        for (kind, v) in &served.versions {
            let labels = [("kind", kind.as_str()), ("version", *v)];
            ConstGauge::new(1i64).encode(version.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// Asks the API server. `Err` only when it cannot answer (retry); a group or a
/// version that is not there is simply not served.
pub async fn discover(client: &Client) -> Result<ServedVersions, kube::Error> {
    let groups = client.list_api_groups().await?;
    // (group, version, resources) of every served version of both groups.
    let mut lists: Vec<(&'static str, String, APIResourceList)> = Vec::new();
    for name in [GROUP, X_GROUP] {
        let Some(group) = groups.groups.iter().find(|g| g.name == name) else {
            continue;
        };
        for v in &group.versions {
            match client.list_api_group_resources(&v.group_version).await {
                Ok(list) => lists.push((name, v.version.clone(), list)),
                // A CRD removed between the two requests.
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
    }
    // Only a kind of the group it belongs to.
    let resources = || {
        lists.iter().flat_map(|(g, version, list)| {
            list.resources
                .iter()
                .filter(move |r| {
                    !r.name.contains('/')
                        && r.kind.parse::<Kind>().is_ok_and(|k| k.spec().group == *g)
                })
                .map(move |r| (version.as_str(), r))
        })
    };
    let served = ServedVersions::choose(resources().map(|(v, r)| (v, r.kind.as_str())));
    // Each served kind's CRD, `<plural>.<group>`, for its release.
    let plurals: BTreeMap<Kind, &str> = resources()
        .filter_map(|(_, r)| Some((r.kind.parse::<Kind>().ok()?, r.name.as_str())))
        .collect();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut read = BTreeMap::new();
    for (kind, plural) in plurals {
        if served.version(kind).is_none() {
            continue;
        }
        match crds
            .get_metadata_opt(&format!("{plural}.{}", kind.spec().group))
            .await
        {
            Ok(Some(crd)) => {
                let bundle = crd
                    .metadata
                    .annotations
                    .and_then(|a| a.get(BUNDLE_VERSION).cloned());
                read.insert(kind, bundle);
            }
            Ok(None) => {}
            Err(kube::Error::Api(s)) if s.code == 401 || s.code == 403 => {
                let why = format!("{}: {}", s.reason, s.message);
                return Ok(served.with_bundles(Bundles::Unreadable(why)));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(served.with_bundles(Bundles::Read(read)))
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
        assert_eq!(served.version(Kind::TlsRoute), Some("v1alpha3"));
        assert_eq!(served.version(Kind::TcpRoute), Some("v1alpha2"));
        assert_eq!(served.version(Kind::Gateway), Some("v1"));
        assert_eq!(served.version(Kind::ReferenceGrant), Some("v1beta1"));
        assert_eq!(served.version(Kind::XBackend), Some("v1alpha1"));
        assert_eq!(
            served.version(Kind::GrpcRoute),
            None,
            "v2 is not a version we read"
        );
        assert_eq!(
            served.missing(),
            vec![
                Kind::BackendTlsPolicy,
                Kind::GrpcRoute,
                Kind::GatewayClass,
                Kind::ListenerSet,
                Kind::UdpRoute,
            ]
        );
        assert_eq!(
            ServedVersions::choose([("v1", "XBackend")]).version(Kind::XBackend),
            None,
            "XBackend is read at v1alpha1 only"
        );
        assert_eq!(
            served.api_version(Kind::XBackend),
            "gateway.networking.x-k8s.io/v1alpha1"
        );
        assert_eq!(
            served.api_version(Kind::TcpRoute),
            "gateway.networking.k8s.io/v1alpha2"
        );
        assert_eq!(
            served.api_version(Kind::UdpRoute),
            "gateway.networking.k8s.io/v1"
        );
    }

    #[test]
    fn supported_version_names_every_crd_of_another_release() {
        let served = |b: &[(&str, Option<&str>)]| {
            ServedVersions::all_v1().with_bundles(Bundles::Read(
                b.iter()
                    .map(|(k, v)| (k.parse().unwrap(), v.map(str::to_string)))
                    .collect(),
            ))
        };
        assert_eq!(ServedVersions::all_v1().supported_version(), None);
        let (ok, message) = served(&[("Gateway", Some("v1.7.0")), ("HTTPRoute", Some("v1.6.3"))])
            .supported_version()
            .unwrap();
        assert!(ok, "{message}");
        assert_eq!(message, "Gateway API CRDs v1.6.3, v1.7.0 are supported");
        let (ok, message) = served(&[
            ("Gateway", Some("v1.7.0")),
            ("HTTPRoute", Some("v1.8.0")),
            ("GRPCRoute", None),
        ])
        .supported_version()
        .unwrap();
        assert!(!ok);
        assert!(message.contains("HTTPRoute (v1.8.0)"), "{message}");
        assert!(
            message.contains("GRPCRoute (no gateway.networking.k8s.io/bundle-version"),
            "{message}"
        );
        assert!(!message.contains("Gateway (v1.7.0)"), "{message}");
        let unreadable =
            ServedVersions::all_v1().with_bundles(Bundles::Unreadable("forbidden".into()));
        assert_eq!(unreadable.supported_version().map(|s| s.0), Some(false));
    }

    #[test]
    fn order_of_discovery_does_not_matter() {
        let a = ServedVersions::choose([("v1", "TLSRoute"), ("v1alpha2", "TLSRoute")]);
        let b = ServedVersions::choose([("v1alpha2", "TLSRoute"), ("v1", "TLSRoute")]);
        assert_eq!(a, b);
        assert_eq!(a.version(Kind::TlsRoute), Some("v1"));
    }

    #[test]
    fn missing_kinds_and_the_versions_read_are_what_the_metrics_show() {
        let served = ServedVersions::choose([("v1", "Gateway"), ("v1alpha2", "TCPRoute")]);
        assert!(served.missing().contains(&Kind::UdpRoute));
        assert!(!served.missing().contains(&Kind::Gateway));
        assert_eq!(served.version(Kind::TcpRoute), Some("v1alpha2"));
        assert_eq!(served.missing().len() + 2, Kind::gateway_api().count());
        assert!(ServedVersions::all_v1().missing().is_empty());
    }
}
