//! Rendering Envoy protos as proto3 JSON / YAML.
//!
//! envoy-types has prost structs but no serde. `build.rs` compiles the Envoy
//! `.proto` files into a descriptor set; here a [`DescriptorPool`] decodes each
//! resource's bytes into a [`DynamicMessage`], which serializes with proto3 JSON
//! names (lowerCamelCase, enums by name, durations as `"5s"`, `Any` with `@type`).
//!
//! ```text
//!  Resource.body (Any: type_url + bytes) ─► DynamicMessage ─► serde_norway::Value ─► YAML
//! ```
//!
//! We serialize straight into `serde_norway::Value`, whose mappings keep insertion
//! order (the proto field order), so the output never depends on whether some other
//! crate in the build turned on serde_json's `preserve_order`.

use crate::snapshot::{ResourceType, Snapshot};
use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};
use serde_norway::{Mapping, Value};
use std::sync::OnceLock;

static DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/envoy_descriptors.bin"));

/// Why a resource could not be rendered. Every variant is a bug in the builder (a
/// message type missing from the descriptor set, corrupt bytes), never user input.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("type URL {0:?} has no message in the Envoy descriptor set")]
    UnknownType(String),
    #[error("decoding {type_name}: {source}")]
    Decode {
        type_name: String,
        #[source]
        source: prost::DecodeError,
    },
    #[error("{type_name} {name:?} is referenced but not in the snapshot")]
    MissingResource {
        type_name: &'static str,
        name: String,
    },
    #[error("serializing {type_name}: {source}")]
    Serialize {
        type_name: String,
        #[source]
        source: serde_norway::Error,
    },
}

/// The descriptor pool of every Envoy message we emit (built once).
pub fn descriptor_pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(DESCRIPTORS).expect("build.rs writes a valid descriptor set")
    })
}

/// One message, given its full proto name and encoded bytes, as a YAML value.
pub fn message_value(type_name: &str, encoded: &[u8]) -> Result<Value, RenderError> {
    let descriptor = descriptor_pool()
        .get_message_by_name(type_name)
        .ok_or_else(|| RenderError::UnknownType(type_name.to_string()))?;
    let message =
        DynamicMessage::decode(descriptor, encoded).map_err(|source| RenderError::Decode {
            type_name: type_name.to_string(),
            source,
        })?;
    message
        .serialize_with_options(serde_norway::value::Serializer, &SerializeOptions::new())
        .map_err(|source| RenderError::Serialize {
            type_name: type_name.to_string(),
            source,
        })
}

/// A prost message as a YAML value.
pub fn proto_value<M: prost::Name>(message: &M) -> Result<Value, RenderError> {
    message_value(&M::full_name(), &message.encode_to_vec())
}

/// The message name inside a `type.googleapis.com/<name>` URL.
fn type_name_of(type_url: &str) -> &str {
    type_url.rsplit('/').next().unwrap_or(type_url)
}

/// The key a resource type is grouped under in [`to_yaml`].
fn group_name(ty: ResourceType) -> &'static str {
    match ty {
        ResourceType::Cluster => "clusters",
        ResourceType::Endpoint => "endpoints",
        ResourceType::Listener => "listeners",
        ResourceType::Route => "routes",
        ResourceType::Secret => "secrets",
    }
}

/// Every resource of the snapshot as one YAML document:
///
/// ```yaml
/// clusters: [...]     # push order: CDS, EDS, LDS, RDS, SDS
/// endpoints: [...]    # within a group, sorted by resource name
/// listeners: [...]
/// routes: [...]
/// secrets: [...]      # certificates with their private keys, CA bundles
/// ```
///
/// Empty groups are left out.
pub fn to_yaml(snapshot: &Snapshot) -> Result<String, RenderError> {
    render(snapshot, false)
}

/// [`to_yaml`] with every private key (and key password) replaced by
/// `[redacted]`, as Envoy's own config_dump shows them: for debug endpoints,
/// which must not hand out the keys that the SDS secrets carry.
pub fn to_yaml_redacted(snapshot: &Snapshot) -> Result<String, RenderError> {
    render(snapshot, true)
}

fn render(snapshot: &Snapshot, redacted: bool) -> Result<String, RenderError> {
    let mut doc = Mapping::new();
    for ty in ResourceType::ALL {
        let mut group = Vec::new();
        for resource in snapshot.of_type(ty) {
            let mut v = message_value(type_name_of(&resource.body.type_url), &resource.body.value)?;
            if redacted {
                redact(&mut v);
            }
            group.push(v);
        }
        if !group.is_empty() {
            doc.insert(Value::from(group_name(ty)), Value::Sequence(group));
        }
    }
    yaml_string(&Value::Mapping(doc))
}

/// The DataSource fields of Envoy's TLS messages that hold secrets.
const SECRET_FIELDS: [&str; 2] = ["privateKey", "password"];

/// Replaces every secret DataSource under `value` by `inlineString: [redacted]`.
pub fn redact(value: &mut Value) {
    match value {
        Value::Mapping(m) => {
            for (k, v) in m.iter_mut() {
                if k.as_str().is_some_and(|k| SECRET_FIELDS.contains(&k)) {
                    let mut hidden = Mapping::new();
                    hidden.insert(Value::from("inlineString"), Value::from("[redacted]"));
                    *v = Value::Mapping(hidden);
                } else {
                    redact(v);
                }
            }
        }
        Value::Sequence(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

/// A YAML value as text any YAML reader (Envoy's yaml-cpp included) reads back
/// the same (see `yaml.rs`).
pub(crate) fn yaml_string(value: &Value) -> Result<String, RenderError> {
    Ok(crate::yaml::to_string(value))
}

#[cfg(test)]
mod redact_tests {
    use super::*;

    #[test]
    fn private_keys_and_passwords_are_redacted_wherever_they_are() {
        let mut v: Value = serde_norway::from_str(
            "listeners:\n- filterChains:\n  - transportSocket:\n      typedConfig:\n        commonTlsContext:\n          tlsCertificates:\n          - certificateChain: {inlineBytes: Q0VSVA==}\n            privateKey: {inlineBytes: S0VZ}\n            password: {inlineString: hunter2}\n",
        )
        .unwrap();
        redact(&mut v);
        let text = serde_norway::to_string(&v).unwrap();
        assert!(
            !text.contains("S0VZ") && !text.contains("hunter2"),
            "{text}"
        );
        assert_eq!(text.matches("[redacted]").count(), 2, "{text}");
        assert!(text.contains("Q0VSVA=="), "certificates stay: {text}");
    }

    /// The keys live in SDS Secret resources now: the snapshot as the debug
    /// endpoint renders it shows each secret's certificate, never its key.
    #[test]
    fn private_keys_in_secret_resources_are_redacted() {
        use crate::snapshot::Resource;
        use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
        use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
            Secret, TlsCertificate, secret,
        };
        use prost::Message;
        let inline = |s: &str| DataSource {
            specifier: Some(data_source::Specifier::InlineString(s.into())),
            ..Default::default()
        };
        let body = Secret {
            name: "edge_cert_infra_web".into(),
            r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
                certificate_chain: Some(inline("THE-CERTIFICATE")),
                private_key: Some(inline("THE-PRIVATE-KEY")),
                ..Default::default()
            })),
        };
        let resource = Resource::new(
            &body.name,
            ResourceType::Secret.type_url(),
            body.encode_to_vec(),
        );
        let snapshot = Snapshot::new(
            [(
                ResourceType::Secret,
                [(body.name.clone(), resource)].into_iter().collect(),
            )]
            .into_iter()
            .collect(),
            Default::default(),
        );
        let plain = to_yaml(&snapshot).unwrap();
        assert!(plain.starts_with("secrets:"), "{plain}");
        assert!(
            plain.contains("THE-PRIVATE-KEY"),
            "translate prints it: {plain}"
        );
        let redacted = to_yaml_redacted(&snapshot).unwrap();
        assert!(!redacted.contains("THE-PRIVATE-KEY"), "{redacted}");
        assert!(redacted.contains("[redacted]"), "{redacted}");
        assert!(redacted.contains("THE-CERTIFICATE"), "{redacted}");
    }
}
