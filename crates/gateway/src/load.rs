//! Loading objects from YAML text into the [`Store`].
//!
//! A file may hold many documents (`---`). One pass of a linear parser guards
//! the file and builds each document's YAML value ([`crate::yaml_guard::read`];
//! what it leaves, `serde_norway` reads); the value gives apiVersion, kind and name
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

use crate::store::{Store, StoreObject};
use aether_ir::{Kind, ObjectRef};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_norway::Value;
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
    /// nothing from this file is added, and the error is the file's first
    /// ([`Store::add_file`] says them all).
    pub fn add_yaml(&mut self, file: &str, text: &str) -> Result<usize, LoadError> {
        self.add_file(file, text)
            .map_err(|e| e.errors.into_iter().next().expect("one error at least"))
    }

    /// [`Store::add_yaml`], with every bad object of the file reported (in line
    /// order): one bad name does not hide the next. A document the YAML guard
    /// refuses as hostile ends the reading of its part of the file.
    pub fn add_file(&mut self, file: &str, text: &str) -> Result<usize, FileErrors> {
        let mut staged: Vec<Staged> = Vec::new();
        let mut errors: Vec<LoadError> = Vec::new();
        let mut seen: BTreeMap<(Kind, ObjectRef), usize> = BTreeMap::new();
        // Parts of the file read side by side, then taken in document order.
        for part in read_in_parts(file, text) {
            errors.extend(part.errors);
            for (line, object) in part.objects {
                if let Some(first) = seen.insert((object.kind, object.key.clone()), line) {
                    errors.push(LoadError::Duplicate {
                        file: file.to_string(),
                        line,
                        object: object.describe(),
                        first,
                    });
                } else {
                    staged.push(object);
                }
            }
        }
        if !errors.is_empty() {
            errors.sort_by_key(LoadError::line);
            return Err(FileErrors {
                file: file.to_string(),
                errors,
            });
        }
        let added = staged.len();
        for object in staged {
            (object.insert)(self);
        }
        Ok(added)
    }
}

impl LoadError {
    /// The 1-based line of the file the error is on.
    pub fn line(&self) -> usize {
        match self {
            LoadError::Syntax { line, .. }
            | LoadError::NotAnObject { line, .. }
            | LoadError::UnknownKind { line, .. }
            | LoadError::InvalidField { line, .. }
            | LoadError::Refused { line, .. }
            | LoadError::Duplicate { line, .. }
            | LoadError::UnknownField { line, .. } => *line,
        }
    }
}

/// Everything wrong with one file: one error per bad object, in line order
/// (never empty). Shown one line each, at most [`FileErrors::SHOWN`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{}", self.lines().join("\n"))]
pub struct FileErrors {
    pub file: String,
    pub errors: Vec<LoadError>,
}

impl FileErrors {
    /// How many errors are shown; a line says how many more there are.
    pub const SHOWN: usize = 20;

    /// One line per error (each naming file, line and object), then how many
    /// were left out, if any.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .errors
            .iter()
            .take(Self::SHOWN)
            .map(ToString::to_string)
            .collect();
        if let Some(more) = self
            .errors
            .len()
            .checked_sub(Self::SHOWN)
            .filter(|n| *n > 0)
        {
            lines.push(format!("{}: {more} more problems not shown", self.file));
        }
        lines
    }
}

/// A file at least this long is read in parts, one per core (up to
/// [`MAX_PARTS`]): 10,000 routes are 9 MiB, and reading takes ~30 ms a MiB.
const PARALLEL_FROM_BYTES: usize = 1 << 20;
const MAX_PARTS: usize = 4;

/// One part of a file: its objects with the line each starts on, and the
/// problems of its documents, both in document order.
#[derive(Default)]
struct Part {
    objects: Vec<(usize, Staged)>,
    errors: Vec<LoadError>,
}

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
    let mut part = Part::default();
    // One pass of a linear parser guards each document and builds its value.
    for doc in crate::yaml_guard::read_documents(docs, budget, limit) {
        let mut doc = match doc {
            Ok(doc) => doc,
            Err(r) => {
                let (file, line, reason) = (file.to_string(), r.line, r.reason);
                if r.hostile {
                    // Hostile text gets no more of our time.
                    part.errors.push(LoadError::Refused { file, line, reason });
                    break;
                }
                part.errors.push(LoadError::Syntax { file, line, reason });
                continue;
            }
        };
        match load_document(file, &mut doc) {
            Ok(Some(object)) => part
                .objects
                .push((doc.first_line + first_content_line(doc.text) - 1, object)),
            Ok(None) => {}
            Err(e) => part.errors.push(e),
        }
    }
    part
}

/// A parsed object waiting for the whole file to parse before it is inserted.
struct Staged {
    kind: Kind,
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
use identity::{Identity, identify};
use lines::{first_content_line, key_line};

mod identity;
mod lines;
mod older_versions;

pub use older_versions::{default_older_versions, default_older_versions_json};

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
    let Identity {
        api_version,
        kind,
        known,
        object,
    } = identify(file, doc, map, text_line)?;
    if known == Some(Kind::EndpointSlice)
        && let Some(why) = endpoint_address_error(&value)
    {
        return Err(LoadError::InvalidField {
            file: file.to_string(),
            line: at(key_line(doc.text, "addresses")),
            object,
            reason: why,
        });
    }
    // A kind we read, at a version a manifest may carry it at ([`Kind::spec`]).
    let read = known.and_then(|k| Some((k, k.manifest_version(&api_version)?)));
    let Some((known, version)) = read else {
        return Err(LoadError::UnknownKind {
            file: file.to_string(),
            line: at(text_line),
            object,
            api_version,
            kind,
        });
    };
    default_older_versions(known, &mut value);
    if known == Kind::ClusterTrustBundle
        && version == "v1alpha1"
        && let Some(m) = value.as_mapping_mut()
    {
        // The alpha version has the same fields; the type checks its apiVersion.
        m.insert("apiVersion".into(), known.api_version("v1beta1").into());
    }
    let ctx = Context {
        file,
        doc,
        object: &object,
    };
    fn load<T: StoreObject + DeserializeOwned + Serialize + Send + 'static>(
        ctx: &Context<'_>,
        value: Value,
    ) -> Result<Staged, LoadError> {
        ctx.load::<T>(value)
    }
    crate::with_store_type!(known, load(&ctx, value)).map(Some)
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
                let line = serde_norway::from_str::<T>(self.doc.text)
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

/// An EndpointSlice address that is not an IP of the slice's `addressType`
/// (IPv4, IPv6), as the API server refuses it: Envoy would refuse the
/// endpoints of every Service of the Gateway with it.
fn endpoint_address_error(value: &Value) -> Option<String> {
    let v4 = match value.get("addressType").and_then(Value::as_str) {
        Some("IPv4") => true,
        Some("IPv6") => false,
        _ => return None,
    };
    let endpoints = value.get("endpoints").and_then(Value::as_sequence)?;
    endpoints.iter().enumerate().find_map(|(i, ep)| {
        let addresses = ep.get("addresses").and_then(Value::as_sequence)?;
        addresses.iter().enumerate().find_map(|(j, a)| {
            let text = a.as_str().unwrap_or_default();
            let ok = if v4 {
                text.parse::<std::net::Ipv4Addr>().is_ok()
            } else {
                text.parse::<std::net::Ipv6Addr>().is_ok()
            };
            (!ok).then(|| {
                let kind = if v4 { "IPv4" } else { "IPv6" };
                format!(
                    "endpoints[{i}].addresses[{j}] {:?} is not an {kind} address",
                    text.escape_debug().to_string()
                )
            })
        })
    })
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
