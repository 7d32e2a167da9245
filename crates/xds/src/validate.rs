//! A static Envoy bootstrap holding a snapshot's resources, for
//! `envoy --mode validate -c <file>`: Envoy's own verdict on everything we would send.
//!
//! Dynamic references are resolved in place, so nothing needs an xDS server:
//!
//! ```text
//!  Listener ── HCM rds{name} ──► HCM route_config = the snapshot's RouteConfiguration
//!  Cluster (EDS over ADS)    ──► Cluster STATIC, load_assignment = the snapshot's CLA
//!  TLS sds{name, ADS}        ──► sds{name}: static_resources.secrets = the snapshot's Secrets
//! ```
//!
//! It carries the same runtime as the ADS bootstrap (the RE2 program size limit),
//! so Envoy judges it exactly as the served Envoy will. The same file also runs for
//! real (no admin), which the live tests use.

use crate::render::{RenderError, message_value, yaml_string};
use crate::snapshot::{ResourceType, Snapshot};
use envoy_types::pb::envoy::config::bootstrap::v3::{Bootstrap, bootstrap::StaticResources};
use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster, cluster::ClusterDiscoveryType, cluster::DiscoveryType,
};
use envoy_types::pb::envoy::config::core::v3::{TransportSocket, transport_socket};
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, Secret, UpstreamTlsContext,
    common_tls_context::ValidationContextType,
};
use prost::{Message, Name};

/// The snapshot as a static bootstrap (YAML). Fails only on a snapshot that does not
/// hold together (a listener naming a route table it lacks) or cannot be decoded.
pub fn validation_bootstrap(snapshot: &Snapshot) -> Result<String, RenderError> {
    let listeners = snapshot
        .of_type(ResourceType::Listener)
        .map(|r| {
            let mut listener = inline_routes(decode::<Listener>(&r.body.value)?, snapshot)?;
            for chain in &mut listener.filter_chains {
                if let Some(socket) = &mut chain.transport_socket {
                    static_secrets::<DownstreamTlsContext>(socket, snapshot)?;
                }
            }
            Ok(listener)
        })
        .collect::<Result<Vec<_>, RenderError>>()?;
    let clusters = snapshot
        .of_type(ResourceType::Cluster)
        .map(|r| {
            let mut cluster = static_cluster(decode::<Cluster>(&r.body.value)?, snapshot)?;
            if let Some(socket) = &mut cluster.transport_socket {
                static_secrets::<UpstreamTlsContext>(socket, snapshot)?;
            }
            Ok(cluster)
        })
        .collect::<Result<Vec<_>, RenderError>>()?;
    let secrets = snapshot
        .of_type(ResourceType::Secret)
        .map(|r| decode::<Secret>(&r.body.value))
        .collect::<Result<Vec<_>, _>>()?;
    let bootstrap = Bootstrap {
        static_resources: Some(StaticResources {
            listeners,
            clusters,
            secrets,
        }),
        layered_runtime: Some(crate::bootstrap::runtime()),
        ..Default::default()
    };
    let value = message_value(&Bootstrap::full_name(), &bootstrap.encode_to_vec())?;
    yaml_string(&value)
}

fn decode<M: Message + Name + Default>(bytes: &[u8]) -> Result<M, RenderError> {
    M::decode(bytes).map_err(|source| RenderError::Decode {
        type_name: M::full_name(),
        source,
    })
}

/// Replaces every connection manager's RDS reference by the route table itself.
fn inline_routes(mut listener: Listener, snapshot: &Snapshot) -> Result<Listener, RenderError> {
    for chain in &mut listener.filter_chains {
        for f in &mut chain.filters {
            let Some(filter::ConfigType::TypedConfig(any)) = &mut f.config_type else {
                continue;
            };
            if any.type_url != HttpConnectionManager::type_url() {
                continue;
            }
            let mut hcm = decode::<HttpConnectionManager>(&any.value)?;
            if let Some(RouteSpecifier::Rds(rds)) = &hcm.route_specifier {
                let routes = snapshot
                    .resources
                    .get(&ResourceType::Route)
                    .and_then(|m| m.get(&rds.route_config_name))
                    .ok_or_else(|| RenderError::MissingResource {
                        type_name: "route table",
                        name: rds.route_config_name.clone(),
                    })?;
                hcm.route_specifier =
                    Some(RouteSpecifier::RouteConfig(decode::<RouteConfiguration>(
                        &routes.body.value,
                    )?));
                any.value = hcm.encode_to_vec();
            }
        }
    }
    Ok(listener)
}

/// The TLS contexts that carry a `CommonTlsContext`.
trait HasCommonTlsContext: Message + Name + Default {
    fn common(&mut self) -> Option<&mut CommonTlsContext>;
}

impl HasCommonTlsContext for DownstreamTlsContext {
    fn common(&mut self) -> Option<&mut CommonTlsContext> {
        self.common_tls_context.as_mut()
    }
}

impl HasCommonTlsContext for UpstreamTlsContext {
    fn common(&mut self) -> Option<&mut CommonTlsContext> {
        self.common_tls_context.as_mut()
    }
}

/// Turns every SDS reference of a TLS transport socket into a reference to a
/// static secret (a name without a config source), checking that the snapshot
/// holds it.
fn static_secrets<T: HasCommonTlsContext>(
    socket: &mut TransportSocket,
    snapshot: &Snapshot,
) -> Result<(), RenderError> {
    let Some(transport_socket::ConfigType::TypedConfig(any)) = &mut socket.config_type else {
        return Ok(());
    };
    if any.type_url != T::type_url() {
        return Ok(());
    }
    let mut tls = decode::<T>(&any.value)?;
    let Some(common) = tls.common() else {
        return Ok(());
    };
    let validation = match &mut common.validation_context_type {
        Some(ValidationContextType::CombinedValidationContext(c)) => {
            c.validation_context_sds_secret_config.as_mut()
        }
        Some(ValidationContextType::ValidationContextSdsSecretConfig(c)) => Some(c),
        _ => None,
    };
    for sds in common
        .tls_certificate_sds_secret_configs
        .iter_mut()
        .chain(validation)
    {
        if snapshot
            .version_of(ResourceType::Secret, &sds.name)
            .is_none()
        {
            return Err(RenderError::MissingResource {
                type_name: "secret",
                name: sds.name.clone(),
            });
        }
        sds.sds_config = None;
    }
    any.value = tls.encode_to_vec();
    Ok(())
}

/// An EDS cluster as a STATIC one carrying its load assignment.
fn static_cluster(mut cluster: Cluster, snapshot: &Snapshot) -> Result<Cluster, RenderError> {
    let assignment = match snapshot
        .resources
        .get(&ResourceType::Endpoint)
        .and_then(|m| m.get(&cluster.name))
    {
        Some(r) => decode::<ClusterLoadAssignment>(&r.body.value)?,
        None => ClusterLoadAssignment {
            cluster_name: cluster.name.clone(),
            ..Default::default()
        },
    };
    cluster.cluster_discovery_type = Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32));
    cluster.eds_cluster_config = None;
    cluster.load_assignment = Some(assignment);
    Ok(cluster)
}
