//! IR clusters → Envoy `Cluster` (CDS): EDS over ADS, round robin.
//!
//! An ExternalHostname XBackend is a `LOGICAL_DNS` cluster instead: Envoy
//! resolves the name itself (IPv4 first) and connects to the first address it
//! gets, re-resolving as the record's TTL says. Logical rather than strict
//! DNS: an external name (a CDN, a cloud API) answers with many rotating
//! addresses, and a strict cluster would make each of them a host, churning
//! connection pools on every answer; Envoy recommends logical DNS for exactly
//! that. (Strict DNS would only spread load over addresses the owner of the
//! name already spreads.)
//!
//! h2c upstreams (`appProtocol: kubernetes.io/h2c`, gRPC) speak HTTP/2 with prior
//! knowledge, set through the upstream `HttpProtocolOptions` extension; everything
//! else speaks HTTP/1.1 (websocket upgrades ride on it). A BackendTLSPolicy adds
//! TLS (`UpstreamTlsContext`) on top of either, its CAs and client certificate
//! over SDS (`secret.rs`): a cluster names its secrets, which it lists among
//! its references.

use crate::any::{ads_config_source, pack};
use crate::secret;
use aether_ir as ir;
use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster, OutlierDetection, cluster::ClusterDiscoveryType, cluster::DiscoveryType,
    cluster::DnsLookupFamily, cluster::EdsClusterConfig, cluster::LbPolicy,
};
use envoy_types::pb::envoy::config::core::v3::{
    DataSource, Http2ProtocolOptions, TransportSocket, data_source, transport_socket,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, SubjectAltNameMatcher, UpstreamTlsContext,
    common_tls_context::CombinedCertificateValidationContext,
    common_tls_context::ValidationContextType, subject_alt_name_matcher::SanType,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    HttpProtocolOptions, http_protocol_options::ExplicitHttpConfig,
    http_protocol_options::UpstreamProtocolOptions,
    http_protocol_options::explicit_http_config::ProtocolConfig,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};
use envoy_types::pb::google::protobuf::{Duration, UInt32Value};
use std::collections::HashMap;

const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";

/// The key Envoy looks up upstream HTTP options under.
pub const HTTP_PROTOCOL_OPTIONS: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/// How long Envoy waits for a TCP connection to an endpoint.
const CONNECT_TIMEOUT_SECONDS: i64 = 5;

/// Connect failures, resets and timeouts in a row that take an endpoint out.
const LOCAL_FAILURES_TO_EJECT: u32 = 3;

/// An endpoint that stopped answering leaves the load balancing after
/// [`LOCAL_FAILURES_TO_EJECT`] failures Envoy saw itself (refused or reset
/// connections, timeouts) for 15 s (longer each time it happens again), at
/// most half of a cluster at once; answers the backend chose (its own 5xx)
/// never eject it. Envoy's panic mode still sends to every endpoint when
/// fewer than half are left, so a lone endpoint is never taken out.
fn outlier_detection() -> OutlierDetection {
    let percent = |value: u32| Some(UInt32Value { value });
    OutlierDetection {
        split_external_local_origin_errors: true,
        consecutive_local_origin_failure: percent(LOCAL_FAILURES_TO_EJECT),
        enforcing_consecutive_local_origin_failure: percent(100),
        enforcing_consecutive_5xx: percent(0),
        enforcing_consecutive_gateway_failure: percent(0),
        enforcing_success_rate: percent(0),
        enforcing_local_origin_success_rate: percent(0),
        enforcing_failure_percentage: percent(0),
        enforcing_failure_percentage_local_origin: percent(0),
        interval: Some(Duration {
            seconds: 5,
            nanos: 0,
        }),
        base_ejection_time: Some(Duration {
            seconds: 15,
            nanos: 0,
        }),
        max_ejection_percent: percent(50),
        ..Default::default()
    }
}

pub fn cluster(c: &ir::Cluster) -> Cluster {
    let (discovery, eds_cluster_config, load_assignment, dns_lookup_family) = match &c.discovery {
        ir::Discovery::Eds => (
            DiscoveryType::Eds,
            Some(EdsClusterConfig {
                eds_config: Some(ads_config_source()),
                service_name: String::new(),
            }),
            None,
            DnsLookupFamily::Auto,
        ),
        ir::Discovery::Dns { hostname } => (
            DiscoveryType::LogicalDns,
            None,
            Some(dns_load_assignment(&c.name, hostname, c.port)),
            DnsLookupFamily::V4Preferred,
        ),
    };
    Cluster {
        name: c.name.clone(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(discovery as i32)),
        eds_cluster_config,
        load_assignment,
        dns_lookup_family: dns_lookup_family as i32,
        connect_timeout: Some(Duration {
            seconds: CONNECT_TIMEOUT_SECONDS,
            nanos: 0,
        }),
        lb_policy: LbPolicy::RoundRobin as i32,
        typed_extension_protocol_options: match c.protocol {
            ir::UpstreamProtocol::Http1 => HashMap::new(),
            ir::UpstreamProtocol::H2c => http2_protocol_options(),
        },
        transport_socket: c.tls.as_ref().map(|t| upstream_tls(t, c.protocol)),
        per_connection_buffer_limit_bytes: crate::edge::buffer_limit(),
        outlier_detection: Some(outlier_detection()),
        ..Default::default()
    }
}

/// The one host of a DNS cluster: the name and port Envoy resolves.
fn dns_load_assignment(cluster: &str, hostname: &str, port: u16) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: cluster.to_string(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                    address: Some(crate::endpoint::socket_address(hostname, port)),
                    // The name the TLS certificate is checked against is the
                    // XBackend's, not this: hostname here only names the host.
                    hostname: hostname.to_string(),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// TLS to the endpoints (a BackendTLSPolicy, an XBackend's `tls`): the policy's hostname as SNI,
/// the certificate verified against its CAs (an SDS secret, or the host's
/// bundle file) and required to carry one of the names (exact matches); the
/// Gateway's client certificate presented (an SDS secret), if it has one.
/// HTTP/2 over TLS asks for `h2` by ALPN.
fn upstream_tls(t: &ir::UpstreamTls, protocol: ir::UpstreamProtocol) -> TransportSocket {
    let sans = t
        .subject_alt_names
        .iter()
        .map(|san| {
            let (san_type, value) = match san {
                ir::SubjectAltName::Dns(v) => (SanType::Dns, v),
                ir::SubjectAltName::Uri(v) => (SanType::Uri, v),
            };
            SubjectAltNameMatcher {
                san_type: san_type as i32,
                matcher: Some(StringMatcher {
                    match_pattern: Some(MatchPattern::Exact(value.clone())),
                    ignore_case: false,
                }),
                oid: String::new(),
            }
        })
        .collect();
    let validation = match &t.trusted_ca {
        ir::TrustedCa::Pem(bundle) => {
            ValidationContextType::CombinedValidationContext(CombinedCertificateValidationContext {
                default_validation_context: Some(CertificateValidationContext {
                    match_typed_subject_alt_names: sans,
                    ..Default::default()
                }),
                validation_context_sds_secret_config: Some(secret::sds(secret::ca_bundle_name(
                    bundle,
                ))),
                ..Default::default()
            })
        }
        // A path on the Envoy host is no secret, and rotates with the host.
        ir::TrustedCa::File(path) => {
            ValidationContextType::ValidationContext(CertificateValidationContext {
                trusted_ca: Some(DataSource {
                    specifier: Some(data_source::Specifier::Filename(path.clone())),
                    ..Default::default()
                }),
                match_typed_subject_alt_names: sans,
                ..Default::default()
            })
        }
    };
    let tls = UpstreamTlsContext {
        sni: t.sni.clone(),
        common_tls_context: Some(CommonTlsContext {
            validation_context_type: Some(validation),
            tls_certificate_sds_secret_configs: t
                .client_certificate
                .iter()
                .map(|c| secret::sds(secret::certificate_name(c)))
                .collect(),
            alpn_protocols: match protocol {
                _ if !t.alpn.is_empty() => t.alpn.clone(),
                ir::UpstreamProtocol::H2c => vec!["h2".into()],
                ir::UpstreamProtocol::Http1 => vec![],
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    TransportSocket {
        name: TLS_TRANSPORT_SOCKET.to_string(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(pack(&tls))),
    }
}

/// `typed_extension_protocol_options` that make a cluster speak HTTP/2 (prior
/// knowledge when there is no TLS). A single-entry map, so its encoding is stable.
pub(crate) fn http2_protocol_options() -> HashMap<String, envoy_types::pb::google::protobuf::Any> {
    let options = HttpProtocolOptions {
        upstream_protocol_options: Some(UpstreamProtocolOptions::ExplicitHttpConfig(
            ExplicitHttpConfig {
                protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(
                    Http2ProtocolOptions::default(),
                )),
            },
        )),
        ..Default::default()
    };
    HashMap::from([(HTTP_PROTOCOL_OPTIONS.to_string(), pack(&options))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn ir_cluster(protocol: ir::UpstreamProtocol) -> ir::Cluster {
        ir::Cluster {
            name: "edge_cl_app_grpc_8081".into(),
            service: ir::ObjectRef::new("app", "grpc"),
            port: 8081,
            protocol,
            endpoints: vec![],
            endpoints_from: ir::EndpointsFrom::Nowhere,
            tls: None,
            backend_kind: ir::BackendKind::Service,
            discovery: ir::Discovery::Eds,
            session: None,
        }
    }

    #[test]
    fn an_external_hostname_is_a_logical_dns_cluster_ipv4_first() {
        let mut c = ir_cluster(ir::UpstreamProtocol::Http1);
        c.discovery = ir::Discovery::Dns {
            hostname: "api.example.com".into(),
        };
        c.port = 443;
        let built = cluster(&c);
        assert_eq!(
            built.cluster_discovery_type,
            Some(ClusterDiscoveryType::Type(DiscoveryType::LogicalDns as i32))
        );
        assert!(built.eds_cluster_config.is_none());
        assert_eq!(built.dns_lookup_family, DnsLookupFamily::V4Preferred as i32);
        let cla = built.load_assignment.unwrap();
        let Some(lb_endpoint::HostIdentifier::Endpoint(ep)) =
            &cla.endpoints[0].lb_endpoints[0].host_identifier
        else {
            panic!("no endpoint");
        };
        assert_eq!(
            ep.address,
            Some(crate::endpoint::socket_address("api.example.com", 443))
        );
    }

    #[test]
    fn endpoints_are_ejected_only_on_failures_envoy_saw_itself() {
        let o = cluster(&ir_cluster(ir::UpstreamProtocol::Http1))
            .outlier_detection
            .unwrap();
        assert!(o.split_external_local_origin_errors);
        let v = |x: Option<UInt32Value>| x.map(|x| x.value);
        assert_eq!(v(o.consecutive_local_origin_failure), Some(3));
        assert_eq!(v(o.enforcing_consecutive_local_origin_failure), Some(100));
        for (what, enforcing) in [
            ("5xx", o.enforcing_consecutive_5xx),
            ("gateway failure", o.enforcing_consecutive_gateway_failure),
            ("success rate", o.enforcing_success_rate),
            ("local success rate", o.enforcing_local_origin_success_rate),
        ] {
            assert_eq!(v(enforcing), Some(0), "{what} ejects");
        }
        assert_eq!(v(o.max_ejection_percent), Some(50));
    }

    #[test]
    fn clusters_use_eds_over_ads() {
        let c = cluster(&ir_cluster(ir::UpstreamProtocol::Http1));
        assert_eq!(
            c.cluster_discovery_type,
            Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32))
        );
        assert_eq!(
            c.eds_cluster_config.unwrap().eds_config,
            Some(ads_config_source())
        );
        assert!(c.typed_extension_protocol_options.is_empty());
    }

    #[test]
    fn h2c_clusters_speak_http2() {
        let c = cluster(&ir_cluster(ir::UpstreamProtocol::H2c));
        let any = &c.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS];
        let options = HttpProtocolOptions::decode(any.value.as_slice()).unwrap();
        assert!(matches!(
            options.upstream_protocol_options,
            Some(UpstreamProtocolOptions::ExplicitHttpConfig(
                ExplicitHttpConfig {
                    protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(_))
                }
            ))
        ));
    }
}
