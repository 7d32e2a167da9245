//! The standalone source: a directory of Gateway API YAML.
//!
//! Every `*.yaml` / `*.yml` file (not recursive, sorted by name) is parsed into one
//! [`Store`]. A file loads all or nothing: one that fails keeps its last good
//! version (none, if it never parsed), every other file loads, and the problems
//! name every failing file, line and object ([`ParseCache::load_each`], what the
//! server runs once it has published). The one-shot commands, and the server
//! until its first complete load, load strictly: any problem is an error. Changes are noticed through a cheap [`Fingerprint`] (names, sizes and
//! modification times) so an unchanged directory is never re-parsed, and a
//! [`ParseCache`] keeps each file's objects so a reload parses only the files
//! that changed.

use aether_gateway::Store;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Why a directory did not load: one line per problem.
#[derive(Debug)]
pub struct LoadFailure {
    pub dir: PathBuf,
    pub problems: Vec<String>,
}

impl fmt::Display for LoadFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "config directory {} did not load:", self.dir.display())?;
        for p in &self.problems {
            write!(f, "\n  {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadFailure {}

/// The YAML files of a directory, sorted by name.
fn yaml_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let is_yaml = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        );
        if is_yaml && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Parses every YAML file of `dir` into one store, or says everything that is wrong.
pub fn load_dir(dir: &Path) -> Result<Store, LoadFailure> {
    ParseCache::default().load(dir)
}

/// Each file's parsed objects, keyed by what the file looked like (size and
/// modification time) when it was parsed.
#[derive(Default)]
pub struct ParseCache {
    files: BTreeMap<PathBuf, (FileStamp, Store)>,
}

type FileStamp = (u64, Option<SystemTime>);

fn stamp(path: &Path) -> FileStamp {
    let meta = std::fs::metadata(path).ok();
    let len = meta.as_ref().map_or(0, |m| m.len());
    (len, meta.and_then(|m| m.modified().ok()))
}

impl ParseCache {
    /// [`load_dir`], re-parsing only the files whose stamp changed since they
    /// last parsed cleanly: strict, any problem fails the whole load.
    pub fn load(&mut self, dir: &Path) -> Result<Store, LoadFailure> {
        let (store, problems) = self.load_each(dir)?;
        if problems.is_empty() {
            Ok(store)
        } else {
            Err(LoadFailure {
                dir: dir.to_path_buf(),
                problems,
            })
        }
    }

    /// Every file that parses, and for each that does not its last good version
    /// (if any), with the problems. `Err` only when the directory cannot be read.
    pub fn load_each(&mut self, dir: &Path) -> Result<(Store, Vec<String>), LoadFailure> {
        let failure = |problems| LoadFailure {
            dir: dir.to_path_buf(),
            problems,
        };
        let files =
            yaml_files(dir).map_err(|e| failure(vec![format!("{}: {e}", dir.display())]))?;
        self.files.retain(|path, _| files.contains(path));
        let mut problems = Vec::new();
        for path in &files {
            let now = stamp(path);
            if self.files.get(path).is_some_and(|(s, _)| *s == now) {
                continue;
            }
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut store = Store::default();
            match std::fs::read_to_string(path) {
                Ok(text) => match store.add_yaml(&name, &text) {
                    Ok(_) => {
                        self.files.insert(path.clone(), (now, store));
                    }
                    Err(e) => problems.push(e.to_string()),
                },
                Err(e) => problems.push(format!("{name}: {e}")),
            }
        }
        let mut store = Store::default();
        for (_, file) in self.files.values() {
            store.merge(file);
        }
        Ok((store, problems))
    }
}

/// What a directory looks like from the outside; equal fingerprints, same content
/// (as far as a writer that updates mtime or size is concerned).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fingerprint(Vec<(PathBuf, u64, Option<SystemTime>)>);

pub fn fingerprint(dir: &Path) -> Fingerprint {
    let files = yaml_files(dir).unwrap_or_default();
    Fingerprint(
        files
            .into_iter()
            .map(|p| {
                let meta = std::fs::metadata(&p).ok();
                let len = meta.as_ref().map_or(0, |m| m.len());
                let mtime = meta.and_then(|m| m.modified().ok());
                (p, len, mtime)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("aether-edge-source-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_broken_file_is_named_with_its_line() {
        let dir = tempdir("broken");
        std::fs::write(
            dir.join("good.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n",
        )
        .unwrap();
        std::fs::write(dir.join("bad.yml"), "apiVersion: v1\nkind: [unclosed\n").unwrap();
        std::fs::write(dir.join("ignored.txt"), "not yaml at all: [").unwrap();
        let err = load_dir(&dir).unwrap_err();
        assert_eq!(err.problems.len(), 1, "{err}");
        assert!(err.problems[0].starts_with("bad.yml:"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_cache_reparses_only_changed_files_and_forgets_deleted_ones() {
        let dir = tempdir("cache");
        let ns =
            |name: &str| format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n");
        std::fs::write(dir.join("a.yaml"), ns("a")).unwrap();
        std::fs::write(dir.join("b.yaml"), ns("b")).unwrap();
        let mut cache = ParseCache::default();
        assert_eq!(cache.load(&dir).unwrap().len(), 2);
        std::fs::write(dir.join("b.yaml"), ns("bee")).unwrap();
        let store = cache.load(&dir).unwrap();
        let names: Vec<String> = store
            .all::<k8s_openapi::api::core::v1::Namespace>()
            .keys()
            .map(|k| k.name.clone())
            .collect();
        assert_eq!(names, ["a", "bee"]);
        std::fs::remove_file(dir.join("a.yaml")).unwrap();
        assert_eq!(cache.load(&dir).unwrap().len(), 1);
        // A broken file fails the load and is retried next time.
        std::fs::write(dir.join("c.yaml"), "kind: [").unwrap();
        assert!(cache.load(&dir).is_err());
        assert!(cache.load(&dir).is_err());
        std::fs::write(dir.join("c.yaml"), ns("c")).unwrap();
        assert_eq!(cache.load(&dir).unwrap().len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_broken_file_keeps_its_last_good_version_and_holds_back_no_other() {
        let dir = tempdir("each");
        let ns =
            |name: &str| format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n");
        let names = |store: &Store| -> Vec<String> {
            store
                .all::<k8s_openapi::api::core::v1::Namespace>()
                .keys()
                .map(|k| k.name.clone())
                .collect()
        };
        std::fs::write(dir.join("a.yaml"), ns("a")).unwrap();
        std::fs::write(dir.join("b.yaml"), ns("b")).unwrap();
        let mut cache = ParseCache::default();
        let (store, problems) = cache.load_each(&dir).unwrap();
        assert!(problems.is_empty());
        assert_eq!(names(&store), ["a", "b"]);
        // b breaks while a changes: a's change loads, b keeps its last good version.
        std::fs::write(dir.join("a.yaml"), ns("a2")).unwrap();
        std::fs::write(dir.join("b.yaml"), "kind: [").unwrap();
        std::fs::write(dir.join("c.yaml"), "apiVersion: v1\nkind: Nonsense\n").unwrap();
        let (store, problems) = cache.load_each(&dir).unwrap();
        assert_eq!(names(&store), ["a2", "b"]);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("b.yaml:"), "{problems:?}");
        assert!(problems[1].starts_with("c.yaml:"), "{problems:?}");
        assert!(cache.load(&dir).is_err(), "strict loading still fails");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn fingerprint_changes_when_a_file_changes() {
        let dir = tempdir("fp");
        std::fs::write(dir.join("a.yaml"), "a: 1\n").unwrap();
        let before = fingerprint(&dir);
        assert_eq!(before, fingerprint(&dir));
        std::fs::write(dir.join("a.yaml"), "a: 12\n").unwrap();
        assert_ne!(before, fingerprint(&dir));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
