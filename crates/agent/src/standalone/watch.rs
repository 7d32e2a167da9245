//! Watching the config directory: file events turned into [`Edits`], the
//! directory itself re-watched when it is replaced.
//!
//! ```text
//!  inotify on DIR ──┐                                   ┌─► load now (a move is atomic)
//!  inotify on ..  ──┼─► Wake ─► Writers (open, moved in, ─┼─► load when the directory is quiet
//!  1 s rescan     ──┘           last in-place change)   └─► load when a writer closes its file
//! ```
//!
//! The parent directory is watched for DIR's own name: a directory renamed
//! away and another put in its place gets a new watch at once (the old watch
//! followed the old directory, and every later event was lost). The rescan
//! also compares the directory's identity (device, inode), for when the
//! parent cannot be watched.

use crate::source::{self, Edits};
use notify::Watcher;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::time::Instant;
use tracing::warn;

/// What woke the config thread.
#[derive(Debug)]
pub enum Wake {
    /// Events on files of the directory.
    Files(Vec<(PathBuf, Writer)>),
    /// Events were lost, or the directory itself was replaced: look again.
    Lost,
    /// Shutting down.
    Stop,
}

/// What a file event says about the file's writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// Written to: its writer has it open until a close says otherwise.
    Writing,
    /// Created: open for writing if it is an empty regular file (a link, a
    /// directory or a hard link is complete as created).
    Created,
    /// Closed after writing: an in-place edit, maybe one step of several.
    Closed,
    /// Its attributes changed (touch, chmod).
    Touched,
    /// Moved into place: what is there now is what its writer meant.
    MovedIn,
    /// Something that is not a YAML file was moved in (a ConfigMap volume's
    /// `..data` link): the files reached through links changed at once.
    Swapped,
    /// Removed or moved away.
    Gone,
}

/// The YAML files an event names, and what it says about their writers;
/// nothing for events that change no content (opens, reads).
pub fn writer_events(event: &notify::Event) -> Vec<(PathBuf, Writer)> {
    use notify::EventKind::{Access, Create, Modify, Remove};
    use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
    let writer = match event.kind {
        Access(AccessKind::Close(AccessMode::Write)) => Writer::Closed,
        Modify(ModifyKind::Name(RenameMode::To)) => Writer::MovedIn,
        // A rename within the directory also comes as From and To.
        Modify(ModifyKind::Name(RenameMode::Both)) => return Vec::new(),
        Remove(_) | Modify(ModifyKind::Name(_)) => Writer::Gone,
        Create(_) => Writer::Created,
        Modify(ModifyKind::Data(_) | ModifyKind::Any) => Writer::Writing,
        Modify(ModifyKind::Metadata(_)) => Writer::Touched,
        _ => return Vec::new(),
    };
    event
        .paths
        .iter()
        .filter_map(|p| match writer {
            _ if source::is_yaml(p) => Some((p.clone(), writer)),
            Writer::MovedIn => Some((p.clone(), Writer::Swapped)),
            _ => None,
        })
        .collect()
}

/// What the events since the last load say.
#[derive(Debug, Default)]
pub struct Writers {
    /// Written to and not closed, since when.
    open: BTreeMap<PathBuf, Instant>,
    moved_in: BTreeSet<PathBuf>,
    last_in_place: Option<Instant>,
    /// Something happened since the last load.
    pub news: bool,
}

impl Writers {
    pub fn note(&mut self, dir: &Path, events: Vec<(PathBuf, Writer)>) {
        let now = Instant::now();
        for (path, writer) in events {
            self.news = true;
            match writer {
                Writer::Writing => {
                    self.moved_in.remove(&path);
                    self.open.entry(path).or_insert(now);
                    self.last_in_place = Some(now);
                }
                Writer::Created => {
                    self.moved_in.remove(&path);
                    let fresh =
                        std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() == 0);
                    if fresh {
                        self.open.entry(path).or_insert(now);
                    }
                    self.last_in_place = Some(now);
                }
                Writer::Closed | Writer::Touched => {
                    self.moved_in.remove(&path);
                    if writer == Writer::Closed {
                        self.open.remove(&path);
                    }
                    self.last_in_place = Some(now);
                }
                Writer::MovedIn => {
                    self.open.remove(&path);
                    self.moved_in.insert(path);
                }
                Writer::Swapped => self.moved_in.extend(linked_files(dir)),
                Writer::Gone => {
                    self.open.remove(&path);
                    self.moved_in.remove(&path);
                    self.last_in_place = Some(now);
                }
            }
        }
    }

    /// Events were lost: every file counts as just written in place.
    pub fn lost(&mut self) {
        self.news = true;
        self.last_in_place = Some(Instant::now());
    }

    /// What a load needs to know; files moved in are handed over once.
    pub fn take_edits(&mut self) -> Edits {
        self.news = false;
        Edits {
            since_in_place: self.last_in_place.map(|t| t.elapsed()),
            moved_in: std::mem::take(&mut self.moved_in),
            open: self
                .open
                .iter()
                .map(|(p, since)| (p.clone(), since.elapsed()))
                .collect(),
        }
    }
}

/// The YAML entries of `dir` that are symbolic links.
fn linked_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .map(|e| e.path())
        .filter(|p| source::is_yaml(p))
        .collect()
}

/// The inotify watches: the directory, and its parent for the directory's
/// own name.
pub struct DirWatch {
    watcher: Option<notify::RecommendedWatcher>,
    dir: PathBuf,
    /// (device, inode) of the directory the watch is on.
    pub watching: Option<(u64, u64)>,
}

impl DirWatch {
    pub fn start(dir: &Path, wake: Sender<Wake>) -> DirWatch {
        let own = dir.to_path_buf();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let wake_up = match res {
                Ok(event) if event.need_rescan() => Some(Wake::Lost),
                // The directory itself created, removed or moved (not read:
                // our own listing of it is an event too).
                Ok(event) if event.paths.iter().any(|p| p == &own) => {
                    use notify::EventKind::{Create, Modify, Remove};
                    let replaced = matches!(
                        event.kind,
                        Create(_) | Remove(_) | Modify(notify::event::ModifyKind::Name(_))
                    );
                    replaced.then_some(Wake::Lost)
                }
                Ok(event) => {
                    let files = writer_events(&event);
                    let ours = files.iter().any(|(p, _)| p.parent() == Some(own.as_path()));
                    (ours && !files.is_empty()).then_some(Wake::Files(files))
                }
                Err(_) => Some(Wake::Lost),
            };
            if let Some(w) = wake_up {
                let _ = wake.send(w);
            }
        });
        let mut watch = DirWatch {
            watcher: watcher
                .map_err(|e| {
                    warn!(dir = %dir.display(), error = %e, "file events unavailable; rescanning every second");
                })
                .ok(),
            dir: dir.to_path_buf(),
            watching: None,
        };
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty())
            && let Some(w) = &mut watch.watcher
            && let Err(e) = w.watch(parent, notify::RecursiveMode::NonRecursive)
        {
            warn!(dir = %parent.display(), error = %e, "cannot watch the config directory's parent; a replaced directory is found by the rescan");
        }
        watch.rewatch(source::fingerprint(dir).dir);
        watch
    }

    /// Watches the directory now at the path, `identity`, instead of the one
    /// watched so far (gone, or moved elsewhere).
    pub fn rewatch(&mut self, identity: Option<(u64, u64)>) {
        let Some(w) = &mut self.watcher else {
            return;
        };
        if self.watching.is_some() {
            let _ = w.unwatch(&self.dir);
        }
        self.watching = None;
        if identity.is_some() {
            match w.watch(&self.dir, notify::RecursiveMode::NonRecursive) {
                Ok(()) => self.watching = identity,
                Err(e) => {
                    warn!(dir = %self.dir.display(), error = %e, "cannot watch the config directory")
                }
            }
        }
    }

    pub fn available(&self) -> bool {
        self.watcher.is_some()
    }
}
