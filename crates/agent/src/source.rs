//! The standalone source: a directory of Gateway API YAML.
//!
//! Every `*.yaml` / `*.yml` file (not recursive, sorted by name) is parsed into one
//! [`Store`]. A file loads all or nothing: one that fails keeps its last good
//! version (none, if it never parsed), every other file loads, and the problems
//! name every failing file, line and object ([`ParseCache::load_each`], what the
//! server runs once it has published). The one-shot commands, and the server
//! until its first complete load, load strictly: any problem is an error.
//! Changes are noticed through a cheap [`Fingerprint`] (names, sizes and
//! modification times) so an unchanged directory is never re-parsed, and a
//! [`ParseCache`] keeps each file's objects so a reload parses only the files
//! that changed.
//!
//! What is a problem of its file, named with it: a file over
//! [`Limits::max_file_bytes`] (not read at all), a symbolic link to nothing,
//! and an object another file already defines (the file that brought it
//! second keeps its last good version, so the live object stays). A file
//! modified within [`Limits::settle`] is not read yet ([`ParseCache::settling`]),
//! nor, for [`EMPTIED_SETTLE`], one that had objects and is now empty.

use aether_gateway::Store;
use aether_ir::ObjectRef;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

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

/// What a file must be to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A bigger file is not read (a problem naming it instead).
    pub max_file_bytes: u64,
    /// A file modified this recently may still be being written: it is read on a
    /// later pass, and until then keeps its last good version.
    pub settle: Duration,
}

/// How long a file that had objects and is now empty stays unread (unless the
/// settle window is longer): emptying is the first half of a truncate-then-write
/// edit, and on a loaded machine the writer can be descheduled between the two
/// for longer than the settle window. Nobody empties a file and expects its
/// routes gone within a second; deleting it takes effect at once.
pub const EMPTIED_SETTLE: Duration = Duration::from_secs(1);

/// The default `--max-file-bytes`: 4 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 4 << 20;

impl Default for Limits {
    /// What the one-shot commands use: the size cap, no settle window.
    fn default() -> Self {
        Limits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            settle: Duration::ZERO,
        }
    }
}

/// The YAML files of a directory, sorted by name, and a problem for each entry
/// that looks like one but cannot be read (a symbolic link to nothing).
fn yaml_files(dir: &Path) -> std::io::Result<(Vec<PathBuf>, Vec<String>)> {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !is_yaml(&path) {
            continue;
        }
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => files.push(path),
            Ok(_) => {}
            Err(_) if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_symlink()) => problems
                .push(format!(
                    "{}: a symbolic link to nothing (its target is missing)",
                    file_name(&path)
                )),
            Err(e) => problems.push(format!("{}: {e}", file_name(&path))),
        }
    }
    files.sort();
    problems.sort();
    Ok((files, problems))
}

/// Whether `path` names a file the directory source reads (`*.yaml`, `*.yml`).
pub fn is_yaml(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Parses every YAML file of `dir` into one store, or says everything that is wrong.
#[cfg(test)]
pub fn load_dir(dir: &Path) -> Result<Store, LoadFailure> {
    ParseCache::default().load(dir)
}

/// Each file's parsed objects, keyed by what the file looked like (size and
/// modification time) when it was parsed.
#[derive(Default)]
pub struct ParseCache {
    files: BTreeMap<PathBuf, (FileStamp, Store)>,
    limits: Limits,
    settling: bool,
    /// Files whose writer is known to be done (closed, moved in): the next
    /// load reads them without a settle window.
    done: BTreeSet<PathBuf>,
}

type FileStamp = (u64, Option<SystemTime>);

fn stamp(path: &Path) -> FileStamp {
    let meta = std::fs::metadata(path).ok();
    let len = meta.as_ref().map_or(0, |m| m.len());
    (len, meta.and_then(|m| m.modified().ok()))
}

impl ParseCache {
    pub fn new(limits: Limits) -> Self {
        ParseCache {
            limits,
            ..ParseCache::default()
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The writers of `paths` are done with them (a file event said so): the
    /// next load reads them even if they changed within the settle window,
    /// unless one was emptied ([`EMPTIED_SETTLE`] still holds for that).
    pub fn writer_done(&mut self, paths: BTreeSet<PathBuf>) {
        self.done.extend(paths);
    }

    /// Whether the last load left a file unread because it had only just
    /// changed: load again once [`Limits::settle`] has passed.
    pub fn settling(&self) -> bool {
        self.settling
    }

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
    /// An object another file already holds is a problem of the file that
    /// brought it second (its last good version stays), naming both files.
    pub fn load_each(&mut self, dir: &Path) -> Result<(Store, Vec<String>), LoadFailure> {
        let failure = |problems| LoadFailure {
            dir: dir.to_path_buf(),
            problems,
        };
        let (files, mut problems) =
            yaml_files(dir).map_err(|e| failure(vec![format!("{}: {e}", dir.display())]))?;
        self.files.retain(|path, _| files.contains(path));
        self.settling = false;
        let done = std::mem::take(&mut self.done);
        let mut to_parse: Vec<(&PathBuf, FileStamp)> = Vec::new();
        for path in &files {
            let now = stamp(path);
            let cached = self.files.get(path);
            if cached.is_some_and(|(s, _)| *s == now) {
                continue;
            }
            // Emptied is what a truncate-then-write edit looks like between its
            // two steps: a file whose objects all vanish gets a longer window.
            let emptied = now.0 == 0 && cached.is_some_and(|(_, store)| !store.is_empty());
            let settling = if done.contains(path) && !emptied {
                false
            } else {
                self.is_settling(&now, emptied)
            };
            if settling {
                self.settling = true;
                continue;
            }
            to_parse.push((path, now));
        }
        let mut parsed: Vec<(PathBuf, FileStamp, Store)> = Vec::new();
        for ((path, now), result) in to_parse.iter().zip(self.parse_all(&to_parse)) {
            match result {
                Ok(store) => parsed.push(((*path).clone(), *now, store)),
                Err(problem) => problems.push(problem),
            }
        }
        // Who holds each object: first the files that keep what they had, then
        // the new versions in file order, each refused if it brings an object
        // another file holds. Only the objects the new versions bring are
        // looked up (borrowed, not copied): a one-file edit among 10,000
        // objects costs a walk over their keys, not a map of them all.
        let refused: Vec<Option<String>> = {
            let replaced: BTreeSet<&PathBuf> = parsed.iter().map(|(p, _, _)| p).collect();
            let brought: BTreeSet<(&str, &ObjectRef)> = parsed
                .iter()
                .flat_map(|(_, _, store)| store.keys())
                .collect();
            let mut owners: BTreeMap<(&str, &ObjectRef), &PathBuf> = BTreeMap::new();
            for (path, (_, store)) in &self.files {
                if !replaced.contains(path) {
                    for key in store.keys().into_iter().filter(|k| brought.contains(k)) {
                        owners.entry(key).or_insert(path);
                    }
                }
            }
            parsed
                .iter()
                .map(|(path, _, store)| {
                    let keys = store.keys();
                    let clash = keys
                        .iter()
                        .find_map(|k| owners.get(k).map(|other| (k, *other)));
                    if let Some(((kind, key), other)) = clash {
                        let object = if key.namespace.is_empty() {
                            format!("{kind} {}", key.name)
                        } else {
                            format!("{kind} {key}")
                        };
                        return Some(format!(
                            "{}: {object} is already defined in {}; this file keeps its last good version",
                            file_name(path),
                            file_name(other)
                        ));
                    }
                    for k in keys {
                        owners.insert(k, path);
                    }
                    None
                })
                .collect()
        };
        for ((path, stamp, store), refused) in parsed.into_iter().zip(refused) {
            match refused {
                Some(problem) => problems.push(problem),
                None => {
                    self.files.insert(path, (stamp, store));
                }
            }
        }
        let mut store = Store::default();
        for (_, file) in self.files.values() {
            store.merge(file);
        }
        problems.sort();
        Ok((store, problems))
    }

    /// Modified within the settle window, or within [`EMPTIED_SETTLE`] for a
    /// file that was `emptied` (a clock that jumped back does not hold a file
    /// forever: a modification time in the future is settled).
    fn is_settling(&self, stamp: &FileStamp, emptied: bool) -> bool {
        let Some(modified) = stamp.1 else {
            return false;
        };
        let window = if emptied {
            self.limits.settle.max(EMPTIED_SETTLE)
        } else {
            self.limits.settle
        };
        SystemTime::now()
            .duration_since(modified)
            .is_ok_and(|age| age < window)
    }

    /// Parses `files` (in order), on every core when there are several: a
    /// first load of 10,000 routes is a hundred files.
    fn parse_all(&self, files: &[(&PathBuf, FileStamp)]) -> Vec<Result<Store, String>> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        if cores < 2 || files.len() < 2 {
            return files.iter().map(|(p, s)| self.parse(p, s.0)).collect();
        }
        let chunk = files.len().div_ceil(cores);
        std::thread::scope(|scope| {
            let running: Vec<_> = files
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|(p, s)| self.parse(p, s.0))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            running
                .into_iter()
                .flat_map(|t| t.join().expect("a config parsing thread panicked"))
                .collect()
        })
    }

    fn parse(&self, path: &Path, len: u64) -> Result<Store, String> {
        use std::io::Read;
        let name = file_name(path);
        let max = self.limits.max_file_bytes;
        let too_big = |len: u64| {
            format!(
                "{name}: {len} bytes, more than the {max}-byte limit (--max-file-bytes); not read"
            )
        };
        if len > max {
            return Err(too_big(len));
        }
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(max + 1).read_to_string(&mut text))
            .map_err(|e| format!("{name}: {e}"))?;
        if text.len() as u64 > max {
            return Err(too_big(text.len() as u64));
        }
        let mut store = Store::default();
        store.add_yaml(&name, &text).map_err(|e| e.to_string())?;
        Ok(store)
    }
}

/// What a directory looks like from the outside; equal fingerprints, same content
/// (as far as a writer that updates mtime or size is concerned).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fingerprint(Vec<(PathBuf, u64, Option<SystemTime>)>);

pub fn fingerprint(dir: &Path) -> Fingerprint {
    let files = yaml_files(dir).map(|(files, _)| files).unwrap_or_default();
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

    fn gateway(name: &str, port: u16) -> String {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}}}\n\
             spec: {{gatewayClassName: aether, listeners: [{{name: http, port: {port}, protocol: HTTP}}]}}\n"
        )
    }

    fn port_of(store: &Store, name: &str) -> i32 {
        use gateway_api::apis::standard::gateways::Gateway;
        store
            .get::<Gateway>("default", name)
            .expect("gateway")
            .spec
            .listeners[0]
            .port
    }

    #[test]
    fn an_object_in_two_files_keeps_the_live_one_and_names_both_files() {
        let dir = tempdir("dup");
        std::fs::write(dir.join("b.yaml"), gateway("web", 80)).unwrap();
        let mut cache = ParseCache::default();
        let (store, problems) = cache.load_each(&dir).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        // A file sorted before the live one brings the same Gateway: refused.
        std::fs::write(dir.join("a.yaml"), gateway("web", 81)).unwrap();
        let (store2, problems) = cache.load_each(&dir).unwrap();
        assert_eq!(
            problems,
            [
                "a.yaml: Gateway default/web is already defined in b.yaml; this file keeps its last good version"
            ]
        );
        assert_eq!(port_of(&store, "web"), 80);
        assert_eq!(port_of(&store2, "web"), 80, "the live one stays");
        assert!(cache.load(&dir).is_err(), "strict loading fails");
        // Moved in one step (gone from b, added to a): no clash.
        std::fs::write(dir.join("b.yaml"), gateway("other", 82)).unwrap();
        let (store, problems) = cache.load_each(&dir).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(port_of(&store, "web"), 81);
        // Two new files with the same object: the first by name wins.
        std::fs::write(dir.join("c.yaml"), gateway("twin", 90)).unwrap();
        std::fs::write(dir.join("d.yaml"), gateway("twin", 91)).unwrap();
        let (store, problems) = cache.load_each(&dir).unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("d.yaml: Gateway default/twin is already defined in c.yaml")
        );
        assert_eq!(port_of(&store, "twin"), 90);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_over_the_size_cap_and_a_dangling_link_are_problems() {
        let dir = tempdir("limits");
        std::fs::write(dir.join("big.yaml"), format!("# {}\n", "x".repeat(2000))).unwrap();
        std::fs::write(dir.join("ok.yaml"), gateway("web", 80)).unwrap();
        std::os::unix::fs::symlink(dir.join("missing.yaml"), dir.join("link.yaml")).unwrap();
        let mut cache = ParseCache::new(Limits {
            max_file_bytes: 1000,
            settle: Duration::ZERO,
        });
        let (store, problems) = cache.load_each(&dir).unwrap();
        assert_eq!(port_of(&store, "web"), 80);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(
            problems[0],
            "big.yaml: 2003 bytes, more than the 1000-byte limit (--max-file-bytes); not read"
        );
        assert_eq!(
            problems[1],
            "link.yaml: a symbolic link to nothing (its target is missing)"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_that_just_changed_is_read_once_it_settles() {
        let dir = tempdir("settle");
        std::fs::write(dir.join("a.yaml"), gateway("web", 80)).unwrap();
        let settle = Duration::from_secs(2);
        let mut cache = ParseCache::new(Limits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            settle,
        });
        let (store, problems) = cache.load_each(&dir).unwrap();
        assert!(problems.is_empty());
        assert!(cache.settling(), "just written: not read yet");
        assert!(store.is_empty());
        // Half a document, as an editor that truncates and then writes leaves it.
        let old = SystemTime::now() - settle * 2;
        let set_mtime = |t: SystemTime| {
            std::fs::File::options()
                .append(true)
                .open(dir.join("a.yaml"))
                .unwrap()
                .set_modified(t)
                .unwrap()
        };
        set_mtime(old);
        let (store, _) = cache.load_each(&dir).unwrap();
        assert!(!cache.settling());
        assert_eq!(port_of(&store, "web"), 80);
        std::fs::write(
            dir.join("a.yaml"),
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gat",
        )
        .unwrap();
        let (store, problems) = cache.load_each(&dir).unwrap();
        assert!(cache.settling() && problems.is_empty(), "{problems:?}");
        assert_eq!(
            port_of(&store, "web"),
            80,
            "the last good version serves meanwhile"
        );
        set_mtime(old + Duration::from_secs(1));
        let (_, problems) = cache.load_each(&dir).unwrap();
        assert_eq!(problems.len(), 1, "once settled it is read: {problems:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_emptied_file_keeps_its_objects_for_longer_than_the_settle_window() {
        let dir = tempdir("emptied");
        let file = dir.join("a.yaml");
        std::fs::write(&file, gateway("web", 80)).unwrap();
        let settle = Duration::from_millis(50);
        let mut cache = ParseCache::new(Limits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            settle,
        });
        let set_mtime = |t: SystemTime| {
            std::fs::File::options()
                .append(true)
                .open(&file)
                .unwrap()
                .set_modified(t)
                .unwrap()
        };
        set_mtime(SystemTime::now() - Duration::from_secs(5));
        assert_eq!(port_of(&cache.load(&dir).unwrap(), "web"), 80);
        // Truncated, and the writer descheduled past the settle window.
        std::fs::write(&file, "").unwrap();
        set_mtime(SystemTime::now() - settle * 4);
        let (store, problems) = cache.load_each(&dir).unwrap();
        assert!(cache.settling() && problems.is_empty(), "{problems:?}");
        assert_eq!(port_of(&store, "web"), 80, "still the last good version");
        // Emptied for longer: meant, so read.
        set_mtime(SystemTime::now() - EMPTIED_SETTLE * 2);
        let (store, problems) = cache.load_each(&dir).unwrap();
        assert!(!cache.settling() && problems.is_empty(), "{problems:?}");
        assert!(store.is_empty());
        // A file that never had objects is not held: an empty new file is read
        // once the ordinary window has passed.
        std::fs::write(dir.join("b.yaml"), "").unwrap();
        std::fs::File::options()
            .append(true)
            .open(dir.join("b.yaml"))
            .unwrap()
            .set_modified(SystemTime::now() - settle * 4)
            .unwrap();
        cache.load_each(&dir).unwrap();
        assert!(!cache.settling());
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
