//! Envoy's access logs: one line per request (HTTP) or connection (TCP) on
//! Envoy's stdout, where a platform's log shipper reads container output.
//!
//! ```text
//!  AccessLog::Json (default) ─► one JSON object per line: the fields below
//!  AccessLog::Text           ─► Envoy's default text line
//!  AccessLog::Off            ─► nothing
//! ```
//!
//! The JSON fields are the ones an operator asks first: what was asked (method,
//! authority, path without its query, protocol), what came back (status,
//! Envoy's response flags and details, bytes, duration, upstream time), where it
//! went (route, cluster, upstream host) and from whom (client address,
//! `x-forwarded-for`, user agent, request id, SNI). No header that carries a
//! credential, and no query string (tokens travel there): a log line is read
//! by more people than the request was meant for.

use crate::any::pack;
use envoy_types::pb::envoy::config::accesslog::v3::{AccessLog as EnvoyAccessLog, access_log};
use envoy_types::pb::envoy::extensions::access_loggers::stream::v3::StdoutAccessLog;
use envoy_types::pb::google::protobuf::{Any, Value, value::Kind};
use prost::{Message, Name};
use std::collections::BTreeMap;

/// How Envoy logs each request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum AccessLog {
    /// One JSON object per line (the fields of [`HTTP_FIELDS`] or [`TCP_FIELDS`]).
    #[default]
    Json,
    /// Envoy's default text format.
    Text,
    /// No access log.
    Off,
}

/// The JSON fields of an HTTP request's line.
pub const HTTP_FIELDS: &[(&str, &str)] = &[
    ("start_time", "%START_TIME%"),
    ("method", "%REQ(:METHOD)%"),
    ("authority", "%REQ(:AUTHORITY)%"),
    ("path", "%PATH(NQ)%"),
    ("protocol", "%PROTOCOL%"),
    ("response_code", "%RESPONSE_CODE%"),
    ("response_flags", "%RESPONSE_FLAGS%"),
    ("response_code_details", "%RESPONSE_CODE_DETAILS%"),
    (
        "connection_termination_details",
        "%CONNECTION_TERMINATION_DETAILS%",
    ),
    (
        "upstream_transport_failure_reason",
        "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
    ),
    ("bytes_received", "%BYTES_RECEIVED%"),
    ("bytes_sent", "%BYTES_SENT%"),
    ("duration_ms", "%DURATION%"),
    (
        "upstream_service_time",
        "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
    ),
    ("route_name", "%ROUTE_NAME%"),
    ("upstream_cluster", "%UPSTREAM_CLUSTER%"),
    ("upstream_host", "%UPSTREAM_HOST%"),
    ("downstream_remote_address", "%DOWNSTREAM_REMOTE_ADDRESS%"),
    ("downstream_local_address", "%DOWNSTREAM_LOCAL_ADDRESS%"),
    ("x_forwarded_for", "%REQ(X-FORWARDED-FOR)%"),
    ("user_agent", "%REQ(USER-AGENT)%"),
    ("request_id", "%REQ(X-REQUEST-ID)%"),
    ("requested_server_name", "%REQUESTED_SERVER_NAME%"),
];

/// The JSON fields of a TCP connection's line.
pub const TCP_FIELDS: &[(&str, &str)] = &[
    ("start_time", "%START_TIME%"),
    ("response_flags", "%RESPONSE_FLAGS%"),
    (
        "connection_termination_details",
        "%CONNECTION_TERMINATION_DETAILS%",
    ),
    ("bytes_received", "%BYTES_RECEIVED%"),
    ("bytes_sent", "%BYTES_SENT%"),
    ("duration_ms", "%DURATION%"),
    ("upstream_cluster", "%UPSTREAM_CLUSTER%"),
    ("upstream_host", "%UPSTREAM_HOST%"),
    ("downstream_remote_address", "%DOWNSTREAM_REMOTE_ADDRESS%"),
    ("downstream_local_address", "%DOWNSTREAM_LOCAL_ADDRESS%"),
    ("requested_server_name", "%REQUESTED_SERVER_NAME%"),
];

const STDOUT: &str = "envoy.access_loggers.stdout";

impl AccessLog {
    /// The access log of an HTTP connection manager.
    pub fn http(self) -> Vec<EnvoyAccessLog> {
        self.with(HTTP_FIELDS)
    }

    /// The access log of a TCP proxy.
    pub fn tcp(self) -> Vec<EnvoyAccessLog> {
        self.with(TCP_FIELDS)
    }

    fn with(self, fields: &[(&str, &str)]) -> Vec<EnvoyAccessLog> {
        let typed_config = match self {
            AccessLog::Off => return vec![],
            AccessLog::Text => pack(&StdoutAccessLog::default()),
            AccessLog::Json => json(fields),
        };
        vec![EnvoyAccessLog {
            name: STDOUT.to_string(),
            config_type: Some(access_log::ConfigType::TypedConfig(typed_config)),
            ..Default::default()
        }]
    }
}

/// A `StdoutAccessLog` with a JSON format, encoded with its fields in sorted
/// order. `google.protobuf.Struct` is a hash map in the generated types, which
/// would encode in a different order on every build, and so give the listener a
/// new version each time: these messages are the same on the wire, with a
/// sorted map.
fn json(fields: &[(&str, &str)]) -> Any {
    #[derive(Clone, PartialEq, prost::Message)]
    struct SortedStruct {
        #[prost(btree_map = "string, message", tag = "1")]
        fields: BTreeMap<String, Value>,
    }
    /// `SubstitutionFormatString` with only `json_format` (tag 2).
    #[derive(Clone, PartialEq, prost::Message)]
    struct JsonFormat {
        #[prost(message, optional, tag = "2")]
        json_format: Option<SortedStruct>,
    }
    /// `StdoutAccessLog` with only `log_format` (tag 1).
    #[derive(Clone, PartialEq, prost::Message)]
    struct Stdout {
        #[prost(message, optional, tag = "1")]
        log_format: Option<JsonFormat>,
    }
    let fields = fields
        .iter()
        .map(|(k, v)| {
            let value = Value {
                kind: Some(Kind::StringValue(v.to_string())),
            };
            (k.to_string(), value)
        })
        .collect();
    let stdout = Stdout {
        log_format: Some(JsonFormat {
            json_format: Some(SortedStruct { fields }),
        }),
    };
    Any {
        type_url: StdoutAccessLog::type_url(),
        value: stdout.encode_to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_field_logs_a_credential_or_a_query() {
        for (_, v) in HTTP_FIELDS.iter().chain(TCP_FIELDS) {
            let upper = v.to_ascii_uppercase();
            for secret in ["AUTHORIZATION", "COOKIE", "%REQ(:PATH)%", "X-API-KEY"] {
                assert!(!upper.contains(secret), "{v}");
            }
        }
        assert!(AccessLog::Off.http().is_empty());
        assert_eq!(
            AccessLog::Json.http(),
            AccessLog::Json.http(),
            "the same bytes every time (a sorted map)"
        );
        assert_eq!(AccessLog::Json.http().len(), 1);
        assert_eq!(AccessLog::Text.tcp().len(), 1);
    }
}
