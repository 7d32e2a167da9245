//! Loading objects from YAML text into the [`Store`].
//!
//! A file may hold many documents (`---`). One pass of a linear parser guards
//! the file and builds each document's YAML value ([`crate::yaml_guard::read`];
//! what it leaves, `serde_yaml` reads); the value gives apiVersion, kind and name
//! for error messages, then decodes into its typed struct, noting in the same
//! pass every field the type has no place for, so a misspelt field (`listner:`)
//! is an error instead of being silently dropped — the generated API types do
//! not deny unknown fields.
//!
//! Errors name the file, the 1-based line, the object and the reason:
//! `gateways.yaml:11: Gateway default/web: unknown field `spec.listner``.
//! A route rule with a value we do not know (a newer CRD's enum value or filter
//! type) is dropped with a status condition instead (`lenient.rs`); a `status:`
//! stanza is ignored.

use crate::store::{DEFAULT_NAMESPACE, Store, StoreObject};
use aether_ir::ObjectRef;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::listenersets::ListenerSet;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use gateway_api::apis::standard::udproutes::UdpRoute;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_yaml::Value;
use std::collections::BTreeMap;

/// Why a file could not be loaded. Every variant names the file and 1-based line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LoadError {
    /// The text is not YAML.
    #[error("{file}:{line}: invalid YAML: {reason}")]
    Syntax {
        file: String,
        line: usize,
        reason: String,
    },
    /// A document without `apiVersion` or `kind`, or not a mapping.
    #[error("{file}:{line}: {object}: {reason}")]
    NotAnObject {
        file: String,
        line: usize,
        object: String,
        reason: String,
    },
    /// A kind (or apiVersion of a known kind) we do not read.
    #[error("{file}:{line}: {object}: unsupported kind `{kind}` of apiVersion `{api_version}`")]
    UnknownKind {
        file: String,
        line: usize,
        object: String,
        api_version: String,
        kind: String,
    },
    /// A field of the wrong type, a missing required field, a bad enum value.
    #[error("{file}:{line}: {object}: {reason}")]
    InvalidField {
        file: String,
        line: usize,
        object: String,
        reason: String,
    },
    /// Text refused before parsing: nested too deep, or aliases that would
    /// expand it past its budget (`yaml_guard`).
    #[error("{file}:{line}: {reason}")]
    Refused {
        file: String,
        line: usize,
        reason: String,
    },
    /// The same object twice in one file.
    #[error("{file}:{line}: {object}: defined twice in this file (first at line {first})")]
    Duplicate {
        file: String,
        line: usize,
        object: String,
        first: usize,
    },
    /// A field the kind does not have (often a typo).
    #[error("{file}:{line}: {object}: unknown field `{field}`")]
    UnknownField {
        file: String,
        line: usize,
        object: String,
        field: String,
    },
}

impl Store {
    /// Parses one file (multi-document YAML allowed) and adds its objects.
    /// Empty documents are skipped. Returns how many objects were added. On error
    /// nothing from this file is added.
    pub fn add_yaml(&mut self, file: &str, text: &str) -> Result<usize, LoadError> {
        let mut staged: Vec<Staged> = Vec::new();
        let mut seen: BTreeMap<(&'static str, ObjectRef), usize> = BTreeMap::new();
        // Parts of the file read side by side, then taken in document order:
        // the first error in the file is the one reported.
        for part in read_in_parts(file, text) {
            for (line, object) in part? {
                if let Some(first) = seen.insert((object.kind, object.key.clone()), line) {
                    return Err(LoadError::Duplicate {
                        file: file.to_string(),
                        line,
                        object: object.describe(),
                        first,
                    });
                }
                staged.push(object);
            }
        }
        let added = staged.len();
        for object in staged {
            (object.insert)(self);
        }
        Ok(added)
    }
}

/// A file at least this long is read in parts, one per core (up to
/// [`MAX_PARTS`]): 10,000 routes are 9 MiB, and reading takes ~30 ms a MiB.
const PARALLEL_FROM_BYTES: usize = 1 << 20;
const MAX_PARTS: usize = 4;

/// One part of a file: its objects with the line each starts on, in
/// document order, or the first error in it.
type Part = Result<Vec<(usize, Staged)>, LoadError>;

/// Reads `text`'s documents (guarded, decoded) in contiguous parts of about
/// equal size, each on a thread of its own when the file is large and there
/// is more than one core. Documents are independent (YAML anchors do not
/// cross them), so the parts are too; the alias budget is the file's, shared
/// out by size, so a part can spend no more than its share and the parts
/// together no more than the file.
fn read_in_parts(file: &str, text: &str) -> Vec<Part> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let parts = if text.len() >= PARALLEL_FROM_BYTES {
        cores.min(MAX_PARTS)
    } else {
        1
    };
    read_parts(file, text, parts)
}

/// [`read_in_parts`] in `parts` parts (fewer if the file has fewer documents).
fn read_parts(file: &str, text: &str, parts: usize) -> Vec<Part> {
    let docs = crate::yaml_guard::split(text);
    let parts = parts.min(docs.len());
    let limit = crate::yaml_guard::expansion_budget(text.len());
    if parts <= 1 {
        return vec![read_part(file, docs, limit, limit)];
    }
    // Contiguous groups of about `text.len() / parts` bytes each.
    let target = text.len().div_ceil(parts);
    let mut groups: Vec<Vec<(usize, &str)>> = vec![Vec::new()];
    let mut size = 0;
    for doc in docs {
        if size >= target && groups.len() < parts {
            groups.push(Vec::new());
            size = 0;
        }
        size += doc.1.len();
        groups.last_mut().expect("one group at least").push(doc);
    }
    let share = |group: &[(usize, &str)]| {
        let bytes: usize = group.iter().map(|(_, t)| t.len()).sum();
        let base = crate::yaml_guard::expansion_budget(0);
        crate::yaml_guard::expansion_budget(bytes) - base + base / groups.len() as u64
    };
    let budgets: Vec<u64> = groups.iter().map(|g| share(g)).collect();
    std::thread::scope(|scope| {
        let running: Vec<_> = groups
            .into_iter()
            .zip(budgets)
            .map(|(group, budget)| scope.spawn(move || read_part(file, group, budget, limit)))
            .collect();
        running
            .into_iter()
            .map(|t| t.join().expect("a YAML reading thread panicked"))
            .collect()
    })
}

fn read_part(file: &str, docs: Vec<(usize, &str)>, budget: u64, limit: u64) -> Part {
    let mut objects = Vec::new();
    // One pass of a linear parser guards each document and builds its value.
    for doc in crate::yaml_guard::read_documents(docs, budget, limit) {
        let mut doc = doc.map_err(|r| {
            let (file, line, reason) = (file.to_string(), r.line, r.reason);
            if r.hostile {
                LoadError::Refused { file, line, reason }
            } else {
                LoadError::Syntax { file, line, reason }
            }
        })?;
        if let Some(object) = load_document(file, &mut doc)? {
            objects.push((doc.first_line + first_content_line(doc.text) - 1, object));
        }
    }
    Ok(objects)
}

/// A parsed object waiting for the whole file to parse before it is inserted.
struct Staged {
    kind: &'static str,
    key: ObjectRef,
    insert: Box<dyn FnOnce(&mut Store) + Send>,
}

impl Staged {
    fn describe(&self) -> String {
        if self.key.namespace.is_empty() {
            format!("{} {}", self.kind, self.key.name)
        } else {
            format!("{} {}", self.kind, self.key)
        }
    }
}

use crate::yaml_guard::Document;

/// Parses one document; `Ok(None)` when it is empty.
fn load_document(file: &str, doc: &mut Document<'_>) -> Result<Option<Staged>, LoadError> {
    let at = |line: usize| doc.first_line + line.saturating_sub(1);
    let mut value = std::mem::take(&mut doc.value);
    let doc = &*doc;
    if value.is_null() {
        return Ok(None);
    }
    let text_line = first_content_line(doc.text);
    let Value::Mapping(map) = &value else {
        return Err(LoadError::NotAnObject {
            file: file.to_string(),
            line: at(text_line),
            object: "document".into(),
            reason: "expected a Kubernetes object (a mapping)".into(),
        });
    };
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
    let cluster_scoped = matches!(kind.as_str(), "GatewayClass" | "Namespace");
    let ns = meta_field("namespace").unwrap_or_else(|| DEFAULT_NAMESPACE.into());
    // A name the API server would refuse is refused here too: Envoy names and
    // status keys are built from these.
    let invalid = match (crate::object_name::check(&kind, &name), cluster_scoped) {
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
            line: at(key_line(doc.text, field)),
            object,
            reason: format!("`metadata.{field}` is not a valid name: {why}"),
        });
    }
    default_older_versions(&kind, &mut value);
    let ctx = Context {
        file,
        doc,
        object: &object,
    };
    const GW: &str = "gateway.networking.k8s.io/";
    let gw_version = api_version.strip_prefix(GW);
    match (kind.as_str(), api_version.as_str(), gw_version) {
        ("GatewayClass", _, Some("v1" | "v1beta1")) => ctx.load::<GatewayClass>(value),
        ("Gateway", _, Some("v1" | "v1beta1")) => ctx.load::<Gateway>(value),
        ("HTTPRoute", _, Some("v1" | "v1beta1")) => ctx.load::<HttpRoute>(value),
        ("GRPCRoute", _, Some("v1")) => ctx.load::<GrpcRoute>(value),
        ("TLSRoute", _, Some("v1" | "v1alpha2" | "v1alpha3")) => ctx.load::<TlsRoute>(value),
        ("TCPRoute", _, Some("v1" | "v1alpha2")) => ctx.load::<TcpRoute>(value),
        ("UDPRoute", _, Some("v1" | "v1alpha2")) => ctx.load::<UdpRoute>(value),
        ("ReferenceGrant", _, Some("v1" | "v1beta1")) => ctx.load::<ReferenceGrant>(value),
        ("BackendTLSPolicy", _, Some("v1" | "v1alpha3")) => ctx.load::<BackendTlsPolicy>(value),
        ("ListenerSet", _, Some("v1")) => ctx.load::<ListenerSet>(value),
        ("Service", "v1", _) => ctx.load::<Service>(value),
        ("Secret", "v1", _) => ctx.load::<Secret>(value),
        ("ConfigMap", "v1", _) => ctx.load::<ConfigMap>(value),
        ("Namespace", "v1", _) => ctx.load::<Namespace>(value),
        ("EndpointSlice", "discovery.k8s.io/v1", _) => ctx.load::<EndpointSlice>(value),
        _ => Err(LoadError::UnknownKind {
            file: file.to_string(),
            line: at(text_line),
            object,
            api_version,
            kind,
        }),
    }
    .map(Some)
}

struct Context<'a> {
    file: &'a str,
    doc: &'a Document<'a>,
    object: &'a str,
}

impl Context<'_> {
    fn line(&self, doc_line: usize) -> usize {
        self.doc.first_line + doc_line.saturating_sub(1)
    }

    fn load<T: StoreObject + DeserializeOwned + Serialize + Send + 'static>(
        &self,
        mut value: Value,
    ) -> Result<Staged, LoadError> {
        // A `status:` stanza is the API server's business: never read, ignored.
        if let Some(m) = value.as_mapping_mut() {
            m.remove("status");
        }
        // Rules with values we do not know are dropped, not the object.
        // One pass: the typed object and the fields it has no place for.
        let (typed, unknown) =
            crate::lenient::decode_noting_unknown::<T>(&mut value).map_err(|reason| {
                // The text again, for the line the error is on.
                let line = serde_yaml::from_str::<T>(self.doc.text)
                    .err()
                    .and_then(|e| e.location())
                    .map_or_else(|| first_content_line(self.doc.text), |l| l.line());
                LoadError::InvalidField {
                    file: self.file.to_string(),
                    line: self.line(line),
                    object: self.object.to_string(),
                    reason,
                }
            })?;
        if let Some(field) = unknown.into_iter().next() {
            let leaf = field.rsplit('.').next().unwrap_or(&field);
            let leaf = leaf.split('[').next().unwrap_or(leaf);
            return Err(LoadError::UnknownField {
                file: self.file.to_string(),
                line: self.line(key_line(self.doc.text, leaf)),
                object: self.object.to_string(),
                field,
            });
        }
        Ok(Staged {
            kind: T::KIND,
            key: crate::store::key_of(&typed),
            insert: Box::new(move |store: &mut Store| store.insert(typed)),
        })
    }
}

/// Older served versions (TLSRoute `v1alpha2`/`v1alpha3`, TCPRoute and UDPRoute
/// `v1alpha2`) leave optional what `v1` requires: TLSRoute `spec.hostnames` and
/// a rule's `backendRefs`. Absent, they mean empty; filled in so one `v1` type
/// reads every version the CRDs serve.
pub fn default_older_versions(kind: &str, value: &mut Value) {
    if !matches!(kind, "TLSRoute" | "TCPRoute" | "UDPRoute") {
        return;
    }
    let Some(spec) = value.get_mut("spec").and_then(Value::as_mapping_mut) else {
        return;
    };
    let empty = || Value::Sequence(Vec::new());
    if kind == "TLSRoute" && !spec.contains_key("hostnames") {
        spec.insert("hostnames".into(), empty());
    }
    if !spec.contains_key("rules") {
        spec.insert("rules".into(), empty());
    }
    for rule in spec
        .get_mut("rules")
        .and_then(Value::as_sequence_mut)
        .into_iter()
        .flatten()
    {
        if let Some(rule) = rule.as_mapping_mut()
            && !rule.contains_key("backendRefs")
        {
            rule.insert("backendRefs".into(), empty());
        }
    }
}

/// [`default_older_versions`] for an object read as JSON (Kubernetes mode).
pub fn default_older_versions_json(kind: &str, value: &mut serde_json::Value) {
    use serde_json::Value as J;
    if !matches!(kind, "TLSRoute" | "TCPRoute" | "UDPRoute") {
        return;
    }
    let Some(spec) = value.get_mut("spec").and_then(J::as_object_mut) else {
        return;
    };
    if kind == "TLSRoute" {
        spec.entry("hostnames").or_insert_with(|| J::Array(vec![]));
    }
    let rules = spec.entry("rules").or_insert_with(|| J::Array(vec![]));
    for rule in rules.as_array_mut().into_iter().flatten() {
        if let Some(rule) = rule.as_object_mut() {
            rule.entry("backendRefs")
                .or_insert_with(|| J::Array(vec![]));
        }
    }
}

/// The 1-based line of the first `key:` in the document (best effort).
fn key_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            let l = l.trim_start().trim_start_matches("- ").trim_start();
            l.strip_prefix(key)
                .or_else(|| l.strip_prefix(&format!("\"{key}\"")))
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map_or_else(|| first_content_line(text), |i| i + 1)
}

/// The 1-based line of the first line that is not blank or a comment.
fn first_content_line(text: &str) -> usize {
    text.lines()
        .position(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map_or(1, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Store, LoadError> {
        let mut store = Store::default();
        store.add_yaml("gateways.yaml", text).map(|_| store)
    }

    const GATEWAY: &str = "\
# leading comment
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: web
spec:
  gatewayClassName: aether
  listeners:
  - name: http
    port: 80
    protocol: HTTP
";

    #[test]
    fn loads_multi_document_files_and_skips_empty_documents() {
        let text = format!(
            "{GATEWAY}---\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps\n"
        );
        let mut store = Store::default();
        assert_eq!(store.add_yaml("a.yaml", &text), Ok(2));
        assert!(store.get::<Gateway>("default", "web").is_some());
        assert!(store.get::<Namespace>("", "apps").is_some());
    }

    #[test]
    fn malformed_yaml_names_file_and_line() {
        let text =
            format!("{GATEWAY}---\napiVersion: v1\nkind: Service\nmetadata:\n  name: [oops\n");
        let err = load(&text).unwrap_err();
        assert!(matches!(err, LoadError::Syntax { .. }), "{err:?}");
        let msg = err.to_string();
        // The flow sequence opened on line 17 never closes.
        assert_eq!(msg, "gateways.yaml:17: invalid YAML: unclosed bracket '['");
    }

    #[test]
    fn unknown_kind_names_object_and_line() {
        let text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n---\n\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: apps\n";
        let err = load(text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "gateways.yaml:7: Widget apps/w: unsupported kind `Widget` of apiVersion `example.com/v1`"
        );
    }

    #[test]
    fn invalid_field_type_names_line_and_field() {
        let text = GATEWAY.replace("port: 80", "port: eighty");
        let err = load(&text).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("gateways.yaml:11: Gateway default/web: "),
            "{msg}"
        );
        assert!(
            msg.contains("spec.listeners[0].port: invalid type"),
            "{msg}"
        );
    }

    #[test]
    fn unknown_field_is_an_error_not_silence() {
        let text = GATEWAY.replace("  listeners:", "  listner: []\n  listeners:");
        let err = load(&text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "gateways.yaml:9: Gateway default/web: unknown field `spec.listner`"
        );
    }

    #[test]
    fn an_object_without_a_name_is_an_error() {
        let text = GATEWAY.replace("  name: web\n", "  labels: {a: b}\n");
        assert_eq!(
            load(&text).unwrap_err().to_string(),
            "gateways.yaml:3: Gateway <unnamed>: `metadata.name` is required"
        );
        let text = GATEWAY.replace("name: web", "name: \"\"");
        assert!(load(&text).is_err());
    }

    #[test]
    fn a_name_the_api_server_refuses_is_refused() {
        // Two tenants whose names joined by `_` would read the same.
        let service = |ns: &str, name: &str| {
            format!(
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: \"{name}\"\n  namespace: {ns}\nspec: {{}}\n"
            )
        };
        assert_eq!(
            load(&service("a", "b_c")).unwrap_err().to_string(),
            "gateways.yaml:4: Service a/b_c: `metadata.name` is not a valid name: a DNS-1035 \
             label must consist of lower case alphanumeric characters or '-', start with an \
             alphabetic character, end with an alphanumeric character, and be at most 63 \
             characters long"
        );
        let err = load(&service("a_b", "c")).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "gateways.yaml:5: Service a_b/c: `metadata.namespace` is not a valid name"
            ),
            "{err}"
        );
        // Control characters never reach a log line as they are.
        let err = load(&service("a", "x\\u001b[31m\\u0007"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("Service a/x\\u{1b}[31m\\u{7}:"), "{err}");
        assert!(!err.chars().any(char::is_control), "{err:?}");
        let route = GATEWAY.replace("name: web", "name: Web/1");
        assert!(
            load(&route)
                .unwrap_err()
                .to_string()
                .contains("RFC 1123 subdomain")
        );
    }

    #[test]
    fn the_same_object_twice_in_a_file_is_an_error() {
        let text = format!("{GATEWAY}---\n{GATEWAY}");
        assert_eq!(
            load(&text).unwrap_err().to_string(),
            "gateways.yaml:16: Gateway default/web: defined twice in this file (first at line 3)"
        );
    }

    #[test]
    fn hostile_text_is_refused_before_it_is_parsed() {
        let deep = format!("{GATEWAY}---\nkind: {}\n", "[".repeat(100_000));
        let err = load(&deep).unwrap_err();
        assert!(matches!(err, LoadError::Refused { line: 14, .. }), "{err}");
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        let err = load(&bomb).unwrap_err();
        assert!(err.to_string().contains("aliases expand"), "{err}");
    }

    /// `n` Services, one per document, each 6 lines long (line 1 first).
    fn services(n: usize) -> String {
        (0..n)
            .map(|i| {
                format!("---\napiVersion: v1\nkind: Service\nmetadata:\n  name: s{i}\nspec: {{}}\n")
            })
            .collect()
    }

    /// What each part read: (line, kind, key) per object, or the error.
    fn outcome(parts: Vec<Part>) -> Vec<Result<Vec<(usize, String)>, String>> {
        parts
            .into_iter()
            .map(|p| {
                p.map(|objects| {
                    objects
                        .iter()
                        .map(|(line, o)| (*line, o.describe()))
                        .collect()
                })
                .map_err(|e| e.to_string())
            })
            .collect()
    }

    fn flat(
        parts: Vec<Result<Vec<(usize, String)>, String>>,
    ) -> Result<Vec<(usize, String)>, String> {
        let mut all = Vec::new();
        for p in parts {
            all.extend(p?);
        }
        Ok(all)
    }

    #[test]
    fn a_file_read_in_parts_reads_as_it_does_whole() {
        let text = services(300);
        let whole = flat(outcome(read_parts("a.yaml", &text, 1)));
        let parts = outcome(read_parts("a.yaml", &text, 4));
        assert_eq!(parts.len(), 4, "four parts, each on a thread");
        assert!(
            parts
                .iter()
                .all(|p| p.as_ref().is_ok_and(|o| !o.is_empty()))
        );
        let parts = flat(parts);
        assert_eq!(parts, whole);
        let objects = whole.expect("the file loads");
        assert_eq!(objects.len(), 300);
        assert_eq!(
            objects[299],
            (1 + 299 * 6 + 1, "Service default/s299".to_string())
        );
    }

    #[test]
    fn an_error_in_a_later_part_names_its_line_in_the_file() {
        // Line 1 + 250*6 is the `---` of document 250; its `kind` is line +2.
        let text = format!(
            "{}---\napiVersion: v1\nkind: Bogus\nmetadata:\n  name: x\n{}",
            services(250),
            services(50)
        );
        let whole = flat(outcome(read_parts("a.yaml", &text, 1))).unwrap_err();
        let parts = flat(outcome(read_parts("a.yaml", &text, 3))).unwrap_err();
        assert_eq!(parts, whole);
        assert!(whole.starts_with("a.yaml:1502: "), "{whole}");
    }

    #[test]
    fn an_alias_bomb_in_a_later_part_is_refused() {
        let mut bomb = String::from("---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        let text = format!("{}{bomb}", services(400));
        // The bomb's document starts at line 2401; a part has less budget than
        // the whole file, so it may stop a few lines sooner, never outside it.
        for parts in [1, 4] {
            let err = flat(outcome(read_parts("a.yaml", &text, parts))).unwrap_err();
            let line = err["a.yaml:".len()..].split(':').next().unwrap_or_default();
            let line: usize = line.parse().expect("a line number");
            assert!((2402..2412).contains(&line), "{err}");
            assert!(err.contains("aliases expand"), "{err}");
        }
        // A file large enough to be read in parts is refused all the same.
        let big = format!("{}{bomb}", services(PARALLEL_FROM_BYTES / 60));
        assert!(big.len() >= PARALLEL_FROM_BYTES);
        let err = load(&big).unwrap_err();
        assert!(err.to_string().contains("aliases expand"), "{err}");
    }

    #[test]
    fn parts_share_the_file_alias_budget_and_spend_no_more() {
        // Two valid EndpointSlices, each expanding through an alias to ~60%
        // of the file's budget: read whole, the second refuses the file; read
        // in two parts, so must one (a part may spend only its share: were it
        // given the whole budget, each part would pass).
        let heavy = |i: usize| {
            let list = vec!["\"10.0.0.1\""; 100].join(", ");
            let aliases = format!("- addresses: *a{i}\n").repeat(199);
            format!(
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: e{i}}}\naddressType: IPv4\nendpoints:\n- addresses: &a{i} [{list}]\n{aliases}"
            )
        };
        let text = format!("{}{}{}{}", services(20), heavy(0), services(20), heavy(1));
        let budget = crate::yaml_guard::expansion_budget(text.len());
        let one = 200 * 101;
        assert!(one < budget && 2 * one > budget, "budget {budget}");
        for parts in [1, 2] {
            let err = flat(outcome(read_parts("a.yaml", &text, parts))).unwrap_err();
            assert!(err.contains("aliases expand"), "{parts} parts: {err}");
        }
    }

    #[test]
    fn a_duplicate_across_parts_is_found() {
        let text = format!("{}{}", services(200), services(1));
        let err = load_parts(&text, 4).unwrap_err();
        assert!(err.starts_with("a.yaml:1202: "), "{err}");
        assert!(err.ends_with("(first at line 2)"), "{err}");
    }

    /// `Store::add_yaml`'s checks over [`read_parts`] in `parts` parts.
    fn load_parts(text: &str, parts: usize) -> Result<usize, String> {
        let mut seen = BTreeMap::new();
        let mut n = 0;
        for part in read_parts("a.yaml", text, parts) {
            for (line, object) in part.map_err(|e| e.to_string())? {
                if let Some(first) = seen.insert((object.kind, object.key.clone()), line) {
                    return Err(LoadError::Duplicate {
                        file: "a.yaml".into(),
                        line,
                        object: object.describe(),
                        first,
                    }
                    .to_string());
                }
                n += 1;
            }
        }
        Ok(n)
    }

    #[test]
    fn a_bad_document_adds_nothing_from_the_file() {
        let text = format!("{GATEWAY}---\napiVersion: v1\nkind: Bogus\nmetadata:\n  name: x\n");
        let mut store = Store::default();
        assert!(store.add_yaml("a.yaml", &text).is_err());
        assert!(store.is_empty());
    }
}

#[cfg(test)]
mod empty_values {
    use super::*;

    #[test]
    fn empty_collections_are_not_unknown_fields() {
        let text = "\
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: s
  labels: {}
  annotations: {}
addressType: IPv4
ports: []
endpoints: []
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: r
spec:
  hostnames: []
  parentRefs: []
  rules: []
---
apiVersion: v1
kind: Secret
metadata:
  name: s
type: kubernetes.io/tls
data:
  tls.crt: aGVsbG8=
stringData: {}
";
        let mut store = Store::default();
        assert_eq!(store.add_yaml("e.yaml", text), Ok(3));
    }
}

/// Unknown fields in one pass ([`crate::lenient::decode_noting_unknown`])
/// against the slow way it replaced: decode, serialize back, and compare.
#[cfg(test)]
mod one_pass {
    use super::*;
    use proptest::prelude::*;

    /// Paths (`spec.listeners[0].listner`) present in `input` but dropped by the
    /// typed round trip. Null values are ignored: they serialize as absent.
    fn round_trip_unknown(input: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
        match (input, typed) {
            (Value::Mapping(inp), Value::Mapping(out_map)) => {
                for (k, v) in inp {
                    if v.is_null() {
                        continue;
                    }
                    let key = match k {
                        Value::String(s) => s.clone(),
                        other => serde_yaml::to_string(other)
                            .unwrap_or_default()
                            .trim()
                            .to_string(),
                    };
                    let sub = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    match out_map.get(k) {
                        Some(t) => round_trip_unknown(v, t, &sub, out),
                        None => out.push(sub),
                    }
                }
            }
            (Value::Sequence(inp), Value::Sequence(out_seq)) => {
                for (i, (v, t)) in inp.iter().zip(out_seq).enumerate() {
                    round_trip_unknown(v, t, &format!("{path}[{i}]"), out);
                }
            }
            (Value::Tagged(t), other) => round_trip_unknown(&t.value, other, path, out),
            _ => {}
        }
    }

    fn both<T: DeserializeOwned + Serialize>(value: &Value) -> (Vec<String>, Vec<String>) {
        let mut fast = value.clone();
        let Ok((_, one_pass)) = crate::lenient::decode_noting_unknown::<T>(&mut fast) else {
            return (vec![], vec![]);
        };
        let mut slow = value.clone();
        let typed: T = crate::lenient::decode(&mut slow).unwrap();
        let mut old = Vec::new();
        round_trip_unknown(&slow, &serde_yaml::to_value(&typed).unwrap(), "", &mut old);
        (one_pass, old)
    }

    /// Both ways over one document, by its kind; `None` for kinds not read here.
    fn compare(value: &Value) -> Option<(Vec<String>, Vec<String>)> {
        let kind = value.get("kind")?.as_str()?.to_string();
        let mut value = value.clone();
        default_older_versions(&kind, &mut value);
        if let Some(m) = value.as_mapping_mut() {
            m.remove("status");
        }
        Some(match kind.as_str() {
            "GatewayClass" => both::<GatewayClass>(&value),
            "Gateway" => both::<Gateway>(&value),
            "HTTPRoute" => both::<HttpRoute>(&value),
            "GRPCRoute" => both::<GrpcRoute>(&value),
            "TLSRoute" => both::<TlsRoute>(&value),
            "TCPRoute" => both::<TcpRoute>(&value),
            "UDPRoute" => both::<UdpRoute>(&value),
            "ReferenceGrant" => both::<ReferenceGrant>(&value),
            "BackendTLSPolicy" => both::<BackendTlsPolicy>(&value),
            "ListenerSet" => both::<ListenerSet>(&value),
            "Service" => both::<Service>(&value),
            "Secret" => both::<Secret>(&value),
            "ConfigMap" => both::<ConfigMap>(&value),
            "Namespace" => both::<Namespace>(&value),
            "EndpointSlice" => both::<EndpointSlice>(&value),
            _ => return None,
        })
    }

    /// Every document of every golden case.
    fn golden_documents() -> &'static [Value] {
        static DOCS: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
        DOCS.get_or_init(read_golden_documents)
    }

    fn read_golden_documents() -> Vec<Value> {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata");
        let mut dirs: Vec<_> = std::fs::read_dir(root)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        dirs.sort();
        dirs.iter()
            .filter_map(|d| std::fs::read_to_string(d.join("in.yaml")).ok())
            .flat_map(|text| {
                crate::yaml_guard::read(&text)
                    .map(Result::unwrap)
                    .filter_map(|d| serde_yaml::from_str::<Value>(d.text).ok())
                    .filter(|v| !v.is_null())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The mapping nodes of `value`, as paths of keys and indices.
    fn mappings(value: &Value, at: Vec<Value>, out: &mut Vec<Vec<Value>>) {
        match value {
            Value::Mapping(m) => {
                out.push(at.clone());
                for (k, v) in m {
                    let mut next = at.clone();
                    next.push(k.clone());
                    mappings(v, next, out);
                }
            }
            Value::Sequence(s) => {
                for (i, v) in s.iter().enumerate() {
                    let mut next = at.clone();
                    next.push(Value::from(i as u64));
                    mappings(v, next, out);
                }
            }
            _ => {}
        }
    }

    fn node_mut<'a>(value: &'a mut Value, path: &[Value]) -> &'a mut Value {
        path.iter().fold(value, |v, step| match step {
            Value::Number(n) => &mut v[n.as_u64().unwrap() as usize],
            key => v.get_mut(key).unwrap(),
        })
    }

    #[test]
    fn the_golden_inputs_have_the_same_unknown_fields_both_ways() {
        let docs = golden_documents();
        assert!(docs.len() > 300, "{} documents", docs.len());
        for doc in docs {
            if let Some((one_pass, old)) = compare(doc) {
                assert_eq!(one_pass, old, "{}", serde_yaml::to_string(doc).unwrap());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        /// A field nobody knows, added anywhere in a golden object (or null
        /// there, which is absent), is found the same both ways, by its path.
        #[test]
        fn an_added_field_is_found_by_both(pick in any::<prop::sample::Index>(),
                                           at in any::<prop::sample::Index>(),
                                           null in any::<bool>()) {
            let docs = golden_documents();
            let mut doc = docs[pick.index(docs.len())].clone();
            let mut nodes = Vec::new();
            mappings(&doc, vec![], &mut nodes);
            let path = nodes[at.index(nodes.len())].clone();
            let added = if null { Value::Null } else { Value::from("x") };
            node_mut(&mut doc, &path).as_mapping_mut().unwrap().insert("zzUnknown".into(), added);
            if let Some((one_pass, old)) = compare(&doc) {
                prop_assert_eq!(&one_pass, &old);
                let found = one_pass.iter().any(|p| p.ends_with("zzUnknown"));
                // Some maps take any key (labels, annotations, Secret data).
                prop_assert!(!found || !null, "a null field is absent: {:?}", one_pass);
            }
        }
    }
}
