//! What a document says it is (apiVersion, kind, name, namespace), checked
//! before its fields are read. A name the API server would refuse is refused
//! here too: Envoy names and status keys are built from these.

use super::LoadError;
use super::lines::metadata_key_line;
use crate::store::DEFAULT_NAMESPACE;
use crate::yaml_guard::Document;
use aether_ir::Kind;
use serde_norway::{Mapping, Value};

/// A document's apiVersion and kind, the kind if we read it, and the object
/// as errors show it (`Kind ns/name`, escaped).
pub(super) struct Identity {
    pub(super) api_version: String,
    pub(super) kind: String,
    pub(super) known: Option<Kind>,
    pub(super) object: String,
}

/// The identity of a document whose value is the mapping `map`; `text_line`
/// is its first line with content (where an error about the whole of it points).
pub(super) fn identify(
    file: &str,
    doc: &Document<'_>,
    map: &Mapping,
    text_line: usize,
) -> Result<Identity, LoadError> {
    let at = |line: usize| doc.first_line + line.saturating_sub(1);
    let field = |name: &str| map.get(name).and_then(Value::as_str).map(str::to_string);
    let meta = map.get("metadata");
    let meta_field = |name: &str| {
        meta.and_then(|m| m.get(name))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let api_version = field("apiVersion");
    let kind = field("kind");
    let named = meta_field("name").filter(|n| !n.is_empty());
    let name = named.clone().unwrap_or_else(|| "<unnamed>".into());
    // Names and kinds are shown escaped: they may hold anything.
    let shown = |s: &str| s.escape_debug().to_string();
    let (Some(api_version), Some(kind)) = (api_version, kind) else {
        return Err(LoadError::NotAnObject {
            file: file.to_string(),
            line: at(text_line),
            object: format!("object {}", shown(&name)),
            reason: "missing `apiVersion` or `kind`".into(),
        });
    };
    if named.is_none() {
        return Err(LoadError::NotAnObject {
            file: file.to_string(),
            line: at(text_line),
            object: format!("{} <unnamed>", shown(&kind)),
            reason: "`metadata.name` is required".into(),
        });
    }
    let known = kind.parse::<Kind>().ok();
    let cluster_scoped = known.is_some_and(|k| !k.spec().namespaced);
    let ns = meta_field("namespace").unwrap_or_else(|| DEFAULT_NAMESPACE.into());
    // A name the API server would refuse is refused here too: Envoy names and
    // status keys are built from these.
    let invalid = match (crate::object_name::check(known, &name), cluster_scoped) {
        (Err(why), _) => Some(("name", why)),
        (Ok(()), false) => crate::object_name::check_namespace(&ns)
            .err()
            .map(|why| ("namespace", why)),
        (Ok(()), true) => None,
    };
    let object = if cluster_scoped {
        format!("{} {}", shown(&kind), shown(&name))
    } else {
        format!("{} {}/{}", shown(&kind), shown(&ns), shown(&name))
    };
    if let Some((field, why)) = invalid {
        return Err(LoadError::InvalidField {
            file: file.to_string(),
            line: at(metadata_key_line(doc.text, field)),
            object,
            reason: format!("`metadata.{field}` is not a valid name: {why}"),
        });
    }
    Ok(Identity {
        api_version,
        kind,
        known,
        object,
    })
}
