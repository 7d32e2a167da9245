//! Envoy's "Configuring Envoy as an edge proxy" defaults, in one place: what
//! every HTTP connection manager and listener we build sets because it faces
//! the internet. Each value is the guide's unless its comment says why not.
//!
//! ```text
//!  connection   buffer 32 KiB per connection (listeners and clusters)
//!               idle 1 h; request headers within 10 s (slowloris)
//!  HTTP/2       100 concurrent streams; windows 64 KiB per stream, 1 MiB per connection
//!  request      at most 100 headers; a header name with `_` refused (400: it
//!               could pass for a `-` one behind CGI-style backends); a stream
//!               idle 5 min ends
//!  path         normalized (RFC 3986), `//` merged, `%2F` unescaped and
//!               redirected to, before routes match
//! ```

use envoy_types::pb::envoy::config::core::v3::{
    Http2ProtocolOptions, HttpProtocolOptions, http_protocol_options::HeadersWithUnderscoresAction,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::PathWithEscapedSlashesAction,
};
use envoy_types::pb::google::protobuf::{BoolValue, Duration, UInt32Value};

/// Bytes Envoy buffers per connection before it applies back pressure.
pub const BUFFER_LIMIT_BYTES: u32 = 32 * 1024;

fn seconds(s: i64) -> Option<Duration> {
    Some(Duration {
        seconds: s,
        nanos: 0,
    })
}

/// The connection buffer limit, as listeners and clusters carry it.
pub fn buffer_limit() -> Option<UInt32Value> {
    Some(UInt32Value {
        value: BUFFER_LIMIT_BYTES,
    })
}

/// Sets the edge limits on a connection manager.
pub fn limit(hcm: &mut HttpConnectionManager) {
    hcm.common_http_protocol_options = Some(HttpProtocolOptions {
        idle_timeout: seconds(3600),
        max_headers_count: Some(UInt32Value { value: 100 }),
        headers_with_underscores_action: HeadersWithUnderscoresAction::RejectRequest as i32,
        ..Default::default()
    });
    hcm.http2_protocol_options = Some(Http2ProtocolOptions {
        max_concurrent_streams: Some(UInt32Value { value: 100 }),
        initial_stream_window_size: Some(UInt32Value { value: 64 * 1024 }),
        initial_connection_window_size: Some(UInt32Value { value: 1024 * 1024 }),
        ..Default::default()
    });
    hcm.request_headers_timeout = seconds(10);
    hcm.stream_idle_timeout = seconds(300);
    hcm.normalize_path = Some(BoolValue { value: true });
    hcm.merge_slashes = true;
    hcm.path_with_escaped_slashes_action = PathWithEscapedSlashesAction::UnescapeAndRedirect as i32;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_manager_gets_every_edge_limit() {
        let mut hcm = HttpConnectionManager::default();
        limit(&mut hcm);
        let common = hcm.common_http_protocol_options.unwrap();
        assert_eq!(
            common.headers_with_underscores_action,
            HeadersWithUnderscoresAction::RejectRequest as i32
        );
        assert_eq!(common.max_headers_count, Some(UInt32Value { value: 100 }));
        let h2 = hcm.http2_protocol_options.unwrap();
        assert_eq!(h2.max_concurrent_streams, Some(UInt32Value { value: 100 }));
        assert_eq!(hcm.request_headers_timeout.unwrap().seconds, 10);
        assert!(hcm.merge_slashes && hcm.normalize_path.unwrap().value);
    }
}
