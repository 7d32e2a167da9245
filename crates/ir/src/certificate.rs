//! What TLS serves and verifies with: a listener's certificate and a CA
//! bundle, each one SDS secret.

use crate::object_ref::ObjectRef;
use serde::{Deserialize, Serialize};

/// PEM CA certificates, and the ConfigMaps they were read from: its identity,
/// which names the SDS secret Envoy gets it as (see [`names::ca_bundle`](crate::names::ca_bundle)), so
/// a changed bundle from the same ConfigMaps changes that secret alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CaBundle {
    /// The ConfigMaps whose `ca.crt` make up `pem`, in order.
    pub sources: Vec<ObjectRef>,
    pub pem: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Certificate {
    /// The Secret, as `namespace/name`: its identity, which names the SDS
    /// secret Envoy gets it as (see [`names::certificate`](crate::names::certificate)).
    pub secret: String,
    /// PEM certificate chain.
    pub certificate_chain: String,
    /// PEM private key.
    pub private_key: String,
}
