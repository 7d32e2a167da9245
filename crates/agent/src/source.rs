//! The standalone source: a directory of Gateway API YAML.
//!
//! Every `*.yaml` / `*.yml` entry (not recursive, sorted by name) is parsed into
//! one [`Store`]. A file loads all or nothing: one that fails keeps its last
//! good version (none, if it never parsed), every other file loads, and the
//! problems name every failing file, line and object ([`ParseCache::load_each`],
//! what the server runs once it has published). The one-shot commands, and the
//! server until its first complete load, load strictly: any problem is an error.
//!
//! When a changed file is read (the edit contract, README "Editing the config
//! directory"):
//!
//! ```text
//!  moved into place (rename, a ConfigMap ..data swap) ──► at once: a rename is atomic
//!  still open for writing (written, not closed)     ──► when closed (at most OPEN_HOLD)
//!  written in place, created, emptied, removed       ──► once the whole directory has
//!                                                        been quiet for Limits::settle
//!                                                        (EMPTIED_QUIET for an emptied file)
//! ```
//!
//! Until then the file keeps its last good version (a removed file its
//! objects): a directory emptied and refilled file by file, an appender that
//! closes between chunks, a truncate followed later by a write, publish
//! nothing half-done. "Quiet" is the newest of the last such file event
//! ([`Edits`]), the files' change times (ctime) and the directory's mtime, so it
//! holds without file events too. A file that shrinks and loses objects is
//! logged ([`ParseCache::take_notes`]), and refused while its file system is
//! full (a `cp` cut short by a full disk leaves a shorter, valid file).
//!
//! What is a problem of its file, named with it: anything not a regular file
//! (a FIFO, a device, a directory named `*.yaml`), a symbolic link out of the
//! directory or to nothing, a file over [`Limits::max_file_bytes`] or past
//! [`Limits::max_total_bytes`] (not read at all), one not read within
//! [`read::READ_TIMEOUT`], and an object another file already defines.
//! Changes are noticed through [`FileStamp`]s (size, mtime, ctime, inode), so
//! a rewrite that keeps size and mtime is still seen, and an unchanged file
//! is never re-read.

mod packed;
mod read;

pub use packed::Packed;

use aether_gateway::Store;
use aether_ir::{Kind, ObjectRef};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Why a directory did not load: one line per problem.
#[derive(Debug)]
pub struct LoadFailure {
    pub dir: PathBuf,
    pub problems: Vec<String>,
}

impl LoadFailure {
    /// The directory itself could not be read.
    fn io(dir: &Path, e: &std::io::Error) -> Self {
        LoadFailure {
            dir: dir.to_path_buf(),
            problems: vec![format!("{}: {e}", dir.display())],
        }
    }
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

/// What a file must be to be read, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A bigger file is not read (a problem naming it instead).
    pub max_file_bytes: u64,
    /// All files together: a file that would take the directory past it is not
    /// read (a problem naming it), the files already loaded stay.
    pub max_total_bytes: u64,
    /// The quiet period: a file written in place, or removed, is read once the
    /// whole directory has seen no such change for this long.
    pub settle: Duration,
}

/// How long an emptied file (it had objects, it is now empty) waits for a
/// quiet directory: emptying is the first half of a truncate-then-write edit,
/// and the writer may pause between the two for seconds. Nobody empties a file
/// and needs its routes gone within seconds; deleting it is a removal.
pub const EMPTIED_QUIET: Duration = Duration::from_secs(5);

/// How long a file a writer still holds open is left unread: a writer that
/// never closes its file (or whose close was missed) does not freeze it.
pub const OPEN_HOLD: Duration = Duration::from_secs(30);

/// The default `--max-file-bytes`: 4 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 4 << 20;

/// The default `--max-total-bytes`: 64 MiB. Parsed objects take about ten
/// times their YAML in memory (20 files of 4 MiB took RSS from 46 to 794 MB),
/// so this caps a directory near 700 MB; the largest configurations served
/// (10,000 routes, 5,000 files) are under 8 MiB of YAML.
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 64 << 20;

/// A file system with less room than this is full (statvfs, what this user
/// may still write): a write to it was likely cut short.
const FULL_BELOW_BYTES: u64 = 1 << 20;

impl Default for Limits {
    /// What the one-shot commands use: the size caps, no quiet period.
    fn default() -> Self {
        Limits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            settle: Duration::ZERO,
        }
    }
}

/// What file events said since the last load (the watcher keeps it; the
/// one-shot commands have none).
#[derive(Debug, Clone, Default)]
pub struct Edits {
    /// How long ago a file was last written in place, created or removed.
    pub since_in_place: Option<Duration>,
    /// Files moved into place since the last load: read at once.
    pub moved_in: BTreeSet<PathBuf>,
    /// Files written to and not closed yet, and for how long.
    pub open: BTreeMap<PathBuf, Duration>,
}

/// What a file looked like: size, mtime, ctime and identity. The ctime moves
/// on every write, truncate, rename and utime, and a writer cannot set it back,
/// so a rewrite that restores size and mtime still changes the stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileStamp {
    pub len: u64,
    modified: Option<SystemTime>,
    changed: (i64, i64),
    inode: (u64, u64),
}

impl FileStamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            changed: (meta.ctime(), meta.ctime_nsec()),
            inode: (meta.dev(), meta.ino()),
        }
    }

    fn changed_at(&self) -> Option<SystemTime> {
        let secs = u64::try_from(self.changed.0).ok()?;
        let nanos = u64::try_from(self.changed.1).ok()?;
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_nanos(nanos))
    }
}

/// The YAML-named entries of a directory, sorted by name, with their stamps
/// (`None`: cannot be looked at, e.g. a link to nothing). Whatever their type:
/// what is not a regular file is a problem when read, never skipped silently.
fn yaml_entries(dir: &Path) -> std::io::Result<Vec<(PathBuf, Option<FileStamp>)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if is_yaml(&path) {
            // stat follows links and never blocks, whatever the file is.
            let stamp = std::fs::metadata(&path).ok().map(|m| FileStamp::of(&m));
            files.push((path, stamp));
        }
    }
    // Every path is `dir/<name>`: their bytes sort as the paths do, without
    // parsing each one into components at every comparison (at 10,000 files
    // that parsing was a tenth of a one-file change's time).
    files.sort_by(|a, b| by_name(&a.0, &b.0));
    Ok(files)
}

/// Two files of one directory in path order, by their bytes.
fn by_name(a: &Path, b: &Path) -> std::cmp::Ordering {
    a.as_os_str().cmp(b.as_os_str())
}

/// A file of the directory as a map key: ordered by its path's bytes (see
/// [`yaml_entries`]), and looked up by them (`Borrow<OsStr>`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileKey(PathBuf);

impl Ord for FileKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        by_name(&self.0, &other.0)
    }
}

impl PartialOrd for FileKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::borrow::Borrow<OsStr> for FileKey {
    fn borrow(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

impl std::ops::Deref for FileKey {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
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

/// An object as a user names it: `Kind namespace/name`, `Kind name` when cluster-scoped.
fn object(kind: Kind, key: &ObjectRef) -> String {
    if key.namespace.is_empty() {
        format!("{kind} {}", key.name)
    } else {
        format!("{kind} {key}")
    }
}

/// How long ago `t` was; a time in the future (a clock stepped back) counts
/// as long ago, so it cannot hold a file forever.
fn age(now: SystemTime, t: Option<SystemTime>) -> Duration {
    t.and_then(|t| now.duration_since(t).ok())
        .unwrap_or(Duration::MAX)
}

/// Parses every YAML file of `dir` into one store, or says everything that is wrong.
#[cfg(test)]
pub fn load_dir(dir: &Path) -> Result<Store, LoadFailure> {
    ParseCache::default().load(dir)
}

/// How many bytes the file system holding a path still takes from this user
/// (statvfs); `None` when that cannot be told. A field of the cache, so a test
/// can say "full" without filling a disk.
#[derive(Clone, Copy)]
struct FreeSpace(fn(&Path) -> Option<u64>);

impl Default for FreeSpace {
    fn default() -> Self {
        FreeSpace(|path| {
            let s = rustix::fs::statvfs(path).ok()?;
            Some(s.f_bavail.saturating_mul(s.f_frsize))
        })
    }
}

/// One file's last good version.
struct Cached {
    stamp: FileStamp,
    store: Store,
    /// Its text, kept (deflated) when the server persists what it serves.
    text: Option<Packed>,
}

/// Each file's parsed objects, keyed by the file's stamp when it was parsed.
#[derive(Default)]
pub struct ParseCache {
    files: BTreeMap<FileKey, Cached>,
    limits: Limits,
    keep_text: bool,
    /// When the files held back by the last load can be looked at again.
    held: Option<Duration>,
    /// Files whose read did not return, at the stamp they had: not read again
    /// (another thread left blocked) until they change.
    stuck: BTreeMap<FileKey, Option<FileStamp>>,
    /// What the last loads noticed that is not a problem (a file shrank).
    notes: Vec<String>,
    free_space: FreeSpace,
}

impl ParseCache {
    pub fn new(limits: Limits) -> Self {
        ParseCache {
            limits,
            ..ParseCache::default()
        }
    }

    /// Keeps each loaded file's text, for [`ParseCache::served_files`].
    pub fn keeping_text(mut self) -> Self {
        self.keep_text = true;
        self
    }

    /// After the last load: how long until a file held back by it (being
    /// written, or the directory not quiet yet) can be read; `None` if none was.
    pub fn held(&self) -> Option<Duration> {
        self.held
    }

    /// What loads noticed since the last call that is worth a log line.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// The text of every file as loaded (file name, text): what is served.
    pub fn served_files(&self) -> Vec<(String, Packed)> {
        self.files
            .iter()
            .filter_map(|(path, c)| Some((file_name(path), c.text.clone()?)))
            .collect()
    }

    /// Files served in the version [`ParseCache::seed`] gave: not loaded from
    /// the directory since (broken, or not read yet).
    pub fn served_from_state(&self) -> Vec<String> {
        self.files
            .iter()
            .filter(|(_, c)| c.stamp == FileStamp::default())
            .map(|(p, _)| file_name(p))
            .collect()
    }

    /// Starts from `files` (name, text) of `dir`, as served before a restart:
    /// each is a file's last good version until the file itself loads. Returns
    /// the ones that did not parse.
    pub fn seed(&mut self, dir: &Path, files: Vec<(String, String)>) -> Vec<String> {
        let mut problems = Vec::new();
        for (name, text) in files {
            let mut store = Store::default();
            match store.add_file(&name, &text) {
                Ok(_) => {
                    let cached = Cached {
                        // Matches no file's stamp: the file itself is read.
                        stamp: FileStamp::default(),
                        store,
                        text: Some(Packed::of(&text)),
                    };
                    self.files.insert(FileKey(dir.join(&name)), cached);
                }
                Err(e) => problems.extend(e.lines()),
            }
        }
        problems
    }

    /// [`load_dir`], re-parsing only the files whose stamp changed since they
    /// last parsed cleanly: strict, any problem fails the whole load.
    pub fn load(&mut self, dir: &Path) -> Result<Store, LoadFailure> {
        let (store, problems) = self.load_each(dir, &Edits::default())?;
        if problems.is_empty() {
            Ok(store)
        } else {
            Err(LoadFailure {
                dir: dir.to_path_buf(),
                problems,
            })
        }
    }

    /// Every file that parses, and for each that does not its last good
    /// version (if any), with the problems; files not to be read yet (see the
    /// module doc) keep their last good version too. `Err` only when the
    /// directory cannot be read. An object another file already holds is a
    /// problem of the file that brought it second (its last good version
    /// stays), naming both files.
    pub fn load_each(
        &mut self,
        dir: &Path,
        edits: &Edits,
    ) -> Result<(Store, Vec<String>), LoadFailure> {
        let entries = yaml_entries(dir).map_err(|e| LoadFailure::io(dir, &e))?;
        self.load_listed(dir, edits, &entries)
    }

    /// [`ParseCache::load_each`] with the directory's listing (a
    /// [`Fingerprint`]'s) already taken: one listing and one `stat` per file
    /// and change, not two.
    pub fn load_listed(
        &mut self,
        dir: &Path,
        edits: &Edits,
        entries: &[(PathBuf, Option<FileStamp>)],
    ) -> Result<(Store, Vec<String>), LoadFailure> {
        let root = std::fs::canonicalize(dir).map_err(|e| LoadFailure::io(dir, &e))?;
        let now = SystemTime::now();
        let quiet_for = |mut age: Duration| {
            if let Some(since) = edits.since_in_place {
                age = age.min(since);
            }
            let dir_changed = std::fs::metadata(dir).ok().and_then(|m| m.modified().ok());
            age.min(self::age(now, dir_changed))
        };
        let mut held: Option<Duration> = None;
        let mut hold = |left: Duration| held = Some(held.map_or(left, |h| h.min(left)));

        // Removed files keep their objects until the directory is quiet.
        let present: BTreeSet<&OsStr> = entries.iter().map(|(p, _)| p.as_os_str()).collect();
        let removal_quiet = quiet_for(Duration::MAX);
        if removal_quiet >= self.limits.settle {
            self.files
                .retain(|path, _| present.contains(path.as_os_str()));
        } else if self.files.keys().any(|p| !present.contains(p.as_os_str())) {
            hold(self.limits.settle - removal_quiet);
        }
        self.stuck
            .retain(|path, _| present.contains(path.as_os_str()));

        // The changed files; those written in place count towards the quiet.
        let changed: Vec<&(PathBuf, Option<FileStamp>)> = entries
            .iter()
            .filter(|(path, stamp)| {
                self.files
                    .get(path.as_os_str())
                    .is_none_or(|c| Some(c.stamp) != *stamp)
                    && self.stuck.get(path.as_os_str()) != Some(stamp)
            })
            .collect();
        let mut problems: Vec<String> = entries
            .iter()
            .filter(|(path, stamp)| self.stuck.get(path.as_os_str()) == Some(stamp))
            .map(|(path, _)| {
                format!(
                    "{}: its last read did not return; read again once it changes",
                    file_name(path)
                )
            })
            .collect();
        let newest_write = changed
            .iter()
            .filter(|(path, _)| !edits.moved_in.contains(path))
            .map(|(_, stamp)| age(now, stamp.and_then(|s| s.changed_at())))
            .min()
            .unwrap_or(Duration::MAX);
        let quiet = quiet_for(newest_write);
        let mut to_read: Vec<(&PathBuf, Option<FileStamp>)> = Vec::new();
        for (path, stamp) in changed {
            let cached = self.files.get(path.as_os_str());
            let emptied =
                stamp.is_some_and(|s| s.len == 0) && cached.is_some_and(|c| !c.store.is_empty());
            let needed = if emptied {
                self.limits.settle.max(EMPTIED_QUIET)
            } else {
                self.limits.settle
            };
            if edits.moved_in.contains(path) {
                to_read.push((path, *stamp));
            } else if let Some(open) = edits.open.get(path).filter(|o| **o < OPEN_HOLD) {
                hold(OPEN_HOLD - *open);
            } else if quiet < needed {
                hold(needed - quiet);
            } else {
                if edits.open.contains_key(path) {
                    self.notes.push(format!(
                        "{}: still open for writing after {}s; read as it is",
                        file_name(path),
                        OPEN_HOLD.as_secs()
                    ));
                }
                to_read.push((path, *stamp));
            }
        }

        // The input budget: files keep their bytes in name order; a file that
        // would take the total past the budget is not read.
        let mut total: u64 = self.files.values().map(|c| c.stamp.len).sum();
        let max_total = self.limits.max_total_bytes;
        to_read.retain(|(path, stamp)| {
            let old = self.files.get(path.as_os_str()).map_or(0, |c| c.stamp.len);
            let new = stamp
                .map_or(0, |s| s.len)
                .min(self.limits.max_file_bytes + 1);
            let after = total - old + new;
            if after > max_total && new > old {
                problems.push(format!(
                    "{}: {new} bytes would take the config directory to {after} bytes, over \
                     the {max_total}-byte budget (--max-total-bytes); not read",
                    file_name(path)
                ));
                return false;
            }
            total = after;
            true
        });

        let paths: Vec<PathBuf> = to_read.iter().map(|(p, _)| (*p).clone()).collect();
        let reads = read::read_all(
            &root,
            &paths,
            self.limits.max_file_bytes,
            read::READ_TIMEOUT,
        );
        let mut texts: Vec<(PathBuf, FileStamp, String)> = Vec::new();
        for ((path, stamp), outcome) in to_read.iter().zip(reads) {
            match outcome {
                read::Outcome::Text(text, stamp) => texts.push(((*path).clone(), stamp, text)),
                read::Outcome::Changing => hold(self.limits.settle.max(Duration::from_millis(10))),
                read::Outcome::Problem(p) => {
                    if p.contains("not read within") {
                        self.stuck.insert(FileKey((*path).clone()), *stamp);
                    }
                    problems.push(p)
                }
            }
        }
        let mut parsed: Vec<(PathBuf, FileStamp, Store, String)> = Vec::new();
        for ((path, stamp, text), result) in texts.iter().zip(self.parse_all(&texts)) {
            match result {
                Ok(store) => parsed.push((path.clone(), *stamp, store, text.clone())),
                Err(lines) => problems.extend(lines),
            }
        }
        drop(texts);
        let refused = self.clashes(&parsed);
        for ((path, stamp, store, text), refused) in parsed.into_iter().zip(refused) {
            if let Some(problem) = refused.or_else(|| self.cut_short(&path, &stamp, &store)) {
                problems.push(problem);
                continue;
            }
            let text = self.keep_text.then(|| Packed::of(&text));
            self.files
                .insert(FileKey(path), Cached { stamp, store, text });
        }
        self.held = held;
        let mut store = Store::default();
        for file in self.files.values() {
            store.merge(&file.store);
        }
        // By file; a file's own problems stay in line order.
        problems.sort_by(|a, b| a.split(':').next().cmp(&b.split(':').next()));
        Ok((store, problems))
    }

    /// Who holds each object: first the files that keep what they had, then
    /// the new versions in file order, each refused if it brings an object
    /// another file holds. Only the objects the new versions bring are looked
    /// up (borrowed, not copied): a one-file edit among 10,000 objects costs a
    /// walk over their keys, not a map of them all.
    fn clashes(&self, parsed: &[(PathBuf, FileStamp, Store, String)]) -> Vec<Option<String>> {
        let replaced: BTreeSet<&OsStr> = parsed.iter().map(|(p, ..)| p.as_os_str()).collect();
        let brought: BTreeSet<(Kind, &ObjectRef)> = parsed
            .iter()
            .flat_map(|(_, _, store, _)| store.keys())
            .collect();
        let mut owners: BTreeMap<(Kind, &ObjectRef), &Path> = BTreeMap::new();
        for (path, cached) in &self.files {
            if replaced.contains(path.as_os_str()) {
                continue;
            }
            for &(kind, key) in &brought {
                if cached.store.holds(kind, key) {
                    owners.entry((kind, key)).or_insert(path);
                }
            }
        }
        parsed
            .iter()
            .map(|(path, _, store, _)| {
                let keys = store.keys();
                let clash = keys
                    .iter()
                    .find_map(|k| owners.get(k).map(|other| (k, *other)));
                if let Some(((kind, key), other)) = clash {
                    return Some(format!(
                        "{}: {} is already defined in {}; this file keeps its last good version",
                        file_name(path),
                        object(*kind, key),
                        file_name(other)
                    ));
                }
                for k in keys {
                    owners.insert(k, path);
                }
                None
            })
            .collect()
    }

    /// A file that shrank and lost objects is noted; on a full file system
    /// it is refused (a write cut short looks exactly like that).
    fn cut_short(&mut self, path: &Path, stamp: &FileStamp, store: &Store) -> Option<String> {
        let cached = self.files.get(path.as_os_str())?;
        if stamp.len >= cached.stamp.len || cached.stamp == FileStamp::default() {
            return None;
        }
        let now: BTreeSet<_> = store.keys().into_iter().collect();
        let lost: Vec<String> = cached
            .store
            .keys()
            .into_iter()
            .filter(|k| !now.contains(k))
            .map(|(kind, key)| object(kind, key))
            .collect();
        if lost.is_empty() {
            return None;
        }
        let name = file_name(path);
        let shrank = format!(
            "{name}: shrank from {} to {} bytes, losing {} object(s) ({}{})",
            cached.stamp.len,
            stamp.len,
            lost.len(),
            lost.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            if lost.len() > 3 { ", ..." } else { "" },
        );
        let room = (self.free_space.0)(path);
        if room.is_some_and(|r| r < FULL_BELOW_BYTES) {
            return Some(format!(
                "{shrank} while its file system is full ({} bytes free): a write cut short? \
                 It keeps its last good version until the disk has room",
                room.unwrap_or(0)
            ));
        }
        self.notes.push(format!(
            "{shrank}; if that was not meant, a write was cut short"
        ));
        None
    }

    /// Parses `files` (in order), on every core when there are several: a
    /// first load of 10,000 routes is a hundred files.
    /// A file that does not parse gives one problem per bad object.
    fn parse_all(&self, files: &[(PathBuf, FileStamp, String)]) -> Vec<Result<Store, Vec<String>>> {
        let parse = |(path, _, text): &(PathBuf, FileStamp, String)| {
            let mut store = Store::default();
            store
                .add_file(&file_name(path), text)
                .map(|_| store)
                .map_err(|e| e.lines())
        };
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        if cores < 2 || files.len() < 2 {
            return files.iter().map(parse).collect();
        }
        let chunk = files.len().div_ceil(cores);
        std::thread::scope(|scope| {
            let running: Vec<_> = files
                .chunks(chunk)
                .map(|part| scope.spawn(move || part.iter().map(parse).collect::<Vec<_>>()))
                .collect();
            running
                .into_iter()
                .flat_map(|t| t.join().expect("a config parsing thread panicked"))
                .collect()
        })
    }
}

/// What a directory looks like from the outside: which directory it is (a
/// directory replaced by another under the same name is a new one) and each
/// file's [`FileStamp`]. Equal fingerprints, same content.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fingerprint {
    pub dir: Option<(u64, u64)>,
    /// `None` when the directory could not be listed.
    files: Option<Vec<(PathBuf, Option<FileStamp>)>>,
}

impl Fingerprint {
    /// The directory's YAML files and their stamps, in name order, if it
    /// could be listed ([`ParseCache::load_listed`] takes them).
    pub fn files(&self) -> Option<&[(PathBuf, Option<FileStamp>)]> {
        self.files.as_deref()
    }
}

pub fn fingerprint(dir: &Path) -> Fingerprint {
    Fingerprint {
        dir: std::fs::metadata(dir).ok().map(|m| (m.dev(), m.ino())),
        files: yaml_entries(dir).ok(),
    }
}

#[cfg(test)]
mod refusal_tests;
#[cfg(test)]
mod tests;
