//! Direct etcd access for forcing watch expiry: write a key outside `/registry` (so the
//! revision moves past every resourceVersion clients hold), then compact at that revision.
//! After `stop_apiserver` → compaction → `start_apiserver`, a watch or list resuming from a
//! resourceVersion older than the compaction gets `410 Gone`: the restarted watch cache
//! starts at the new revision and etcd no longer has the history behind it.
//!
//! It speaks etcd's JSON gateway (`/v3/kv/*`, on the client port by default) over plain
//! HTTP/1.0, so the response is neither chunked nor kept alive.

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::Error;

/// base64("aether-testkit/bump") and base64("x"): the JSON gateway takes bytes as base64.
const BUMP_KEY: &str = "YWV0aGVyLXRlc3RraXQvYnVtcA==";
const BUMP_VALUE: &str = "eA==";

#[derive(Deserialize)]
struct PutResponse {
    header: Header,
}

#[derive(Deserialize)]
struct Header {
    /// int64 in JSON as a string, per the protobuf JSON mapping.
    revision: String,
}

/// Bumps the revision and compacts everything before it; returns the compaction revision.
pub(crate) async fn compact(port: u16) -> Result<i64, Error> {
    let put = serde_json::json!({"key": BUMP_KEY, "value": BUMP_VALUE});
    let body = post(port, "/v3/kv/put", &put).await?;
    let parsed: PutResponse = serde_json::from_str(&body).map_err(|e| Error::Etcd {
        what: "put",
        reason: format!("{e}: {body}"),
    })?;
    let revision: i64 = parsed.header.revision.parse().map_err(|_| Error::Etcd {
        what: "put",
        reason: format!("revision {:?}", parsed.header.revision),
    })?;
    let compaction = serde_json::json!({"revision": revision.to_string(), "physical": true});
    post(port, "/v3/kv/compaction", &compaction).await?;
    Ok(revision)
}

async fn post(port: u16, path: &'static str, body: &serde_json::Value) -> Result<String, Error> {
    let failed = |reason: String| Error::Etcd { what: path, reason };
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| failed(e.to_string()))?;
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| failed(e.to_string()))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| failed(format!("malformed response: {response:?}")))?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        return Err(failed(format!("{head}\n{body}")));
    }
    Ok(body.to_string())
}
