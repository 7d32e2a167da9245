//! Session persistence: which backend a client's requests stick to, by cookie
//! or header (a route rule's, or an XBackend's).

use serde::{Deserialize, Serialize};

/// How a session is recognized, so its requests reach the same endpoint
/// (Envoy's stateful session: the endpoint's address travels with the client).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SessionPersistence {
    /// A cookie Envoy sets on the first answer.
    Cookie {
        name: String,
        path: String,
        /// The cookie's Max-Age; `None`: a session cookie (no expiry).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_seconds: Option<u64>,
    },
    /// A header Envoy sets on the first answer and the client sends back.
    Header { name: String },
}
