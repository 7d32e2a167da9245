//! Reading one file of the config directory: a regular file inside the
//! directory, opened without blocking, read up to a size cap within a timeout.
//!
//! ```text
//!  name.yaml ─► canonical path ─ outside the directory? ─► problem (not opened)
//!                    │
//!                    ▼ open(O_NONBLOCK | O_NOFOLLOW | O_NOCTTY)
//!              fstat(fd): not a regular file? ─► problem (a FIFO, a device, a directory)
//!              /proc/self/fd/N: not inside?   ─► problem (a component swapped meanwhile)
//!                    │
//!                    ▼ read ≤ cap bytes, fstat again: changed while read? ─► read later
//! ```
//!
//! The checks are made on the opened descriptor, not on the name, so a link
//! swapped between the check and the open is caught. Reads run on a reader
//! thread; one that does not return within [`READ_TIMEOUT`] (a file system
//! that hangs) is a problem of its file and the next file gets a new thread.

use super::FileStamp;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// How long reading one file may take: a local file of the size cap reads in
/// milliseconds; more is a file system that hangs (a stale network mount).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What reading one file gave.
#[derive(Debug)]
pub enum Outcome {
    /// Its text, and what the file looked like while it was read.
    Text(String, FileStamp),
    /// It changed while it was read: a writer is at work, read it later.
    Changing,
    /// Not read, and why (the line names the file).
    Problem(String),
}

/// Reads `paths` (files of the directory `root`, canonical) one after the
/// other on a reader thread, each at most `max` bytes and within `timeout`.
pub fn read_all(root: &Path, paths: &[PathBuf], max: u64, timeout: Duration) -> Vec<Outcome> {
    let mut out: Vec<Outcome> = Vec::with_capacity(paths.len());
    while out.len() < paths.len() {
        let rest: Vec<PathBuf> = paths[out.len()..].to_vec();
        let (tx, rx) = mpsc::channel();
        let root = root.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("config-reader".into())
            .spawn(move || {
                for path in rest {
                    if tx.send(read_one(&root, &path, max)).is_err() {
                        return;
                    }
                }
            });
        if let Err(e) = spawned {
            let name = super::file_name(&paths[out.len()]);
            out.push(Outcome::Problem(format!("{name}: no reader thread: {e}")));
            continue;
        }
        while out.len() < paths.len() {
            match rx.recv_timeout(timeout) {
                Ok(read) => out.push(read),
                Err(_) => {
                    // Left blocked in the kernel: the next file gets a new thread.
                    let name = super::file_name(&paths[out.len()]);
                    out.push(Outcome::Problem(format!(
                        "{name}: not read within {}s (a file system that does not answer?)",
                        timeout.as_secs()
                    )));
                    break;
                }
            }
        }
    }
    out
}

/// What kind of thing a non-regular file is, in a user's words.
fn kind(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Reads one file of `root` (`root` canonical).
pub fn read_one(root: &Path, path: &Path, max: u64) -> Outcome {
    let name = super::file_name(path);
    match read_checked(root, path, max, &name) {
        Ok(outcome) | Err(outcome) => outcome,
    }
}

/// [`read_one`], each step ending the read early with its outcome.
fn read_checked(root: &Path, path: &Path, max: u64, name: &str) -> Result<Outcome, Outcome> {
    let canonical = inside_root(root, path, name)?;
    let file = open_no_follow(&canonical, name)?;
    let before = file.metadata().map_err(|e| problem(name, e.to_string()))?;
    if !before.file_type().is_file() {
        return Err(problem(
            name,
            format!("{}, not a regular file", kind(before.file_type())),
        ));
    }
    // What the descriptor really is: a directory on the way swapped for a
    // link after the check above would show here.
    if let Ok(opened) = std::fs::read_link(format!("/proc/self/fd/{}", fd_number(&file)))
        && !opened.starts_with(root)
    {
        return Err(problem(
            name,
            format!(
                "opened as {}, outside the config directory",
                opened.display()
            ),
        ));
    }
    if before.len() > max {
        return Err(problem(
            name,
            format!(
                "{} bytes, more than the {max}-byte limit (--max-file-bytes)",
                before.len()
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(before.len() as usize);
    if let Err(e) = (&file).take(max + 1).read_to_end(&mut bytes) {
        return Err(problem(name, e.to_string()));
    }
    let after = file.metadata().map_err(|e| problem(name, e.to_string()))?;
    let stamp = FileStamp::of(&after);
    if FileStamp::of(&before) != stamp || bytes.len() as u64 != after.len() {
        return Ok(Outcome::Changing);
    }
    if bytes.len() as u64 > max {
        return Err(problem(
            name,
            format!(
                "{} bytes, more than the {max}-byte limit (--max-file-bytes)",
                bytes.len()
            ),
        ));
    }
    Ok(match String::from_utf8(bytes) {
        Ok(text) => Outcome::Text(text, stamp),
        Err(e) => problem(name, format!("not UTF-8 text ({e})")),
    })
}

fn problem(name: &str, what: String) -> Outcome {
    Outcome::Problem(format!("{name}: {what}; not read"))
}

/// The file's real path, which must be inside the config directory `root`.
fn inside_root(root: &Path, path: &Path, name: &str) -> Result<PathBuf, Outcome> {
    let canonical = match std::fs::canonicalize(path) {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink()) {
                return Err(Outcome::Problem(format!(
                    "{name}: a symbolic link to nothing (its target is missing)"
                )));
            }
            // Gone between the listing and now: a removal, seen next time.
            return Err(Outcome::Changing);
        }
        Err(e) => return Err(problem(name, e.to_string())),
    };
    if !canonical.starts_with(root) {
        return Err(problem(
            name,
            format!(
                "a symbolic link to {}, outside the config directory (links must stay inside it, \
                 as a ConfigMap volume's ..data links do)",
                canonical.display()
            ),
        ));
    }
    Ok(canonical)
}

/// Opens the real path without following a link, blocking or taking a
/// terminal; one that changed since is `Changing`.
fn open_no_follow(canonical: &Path, name: &str) -> Result<std::fs::File, Outcome> {
    let flags =
        rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NOCTTY;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(canonical)
    {
        Ok(f) => Ok(f),
        // ELOOP: the last component became a link after canonicalize.
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            Err(Outcome::Changing)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Outcome::Changing),
        Err(e) => Err(problem(name, e.to_string())),
    }
}

fn fd_number(file: &std::fs::File) -> i32 {
    use std::os::fd::AsRawFd;
    file.as_raw_fd()
}
