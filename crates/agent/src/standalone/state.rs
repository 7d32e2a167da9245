//! The last configuration served, kept across restarts: after a restart with a
//! broken file, what served before serves again instead of nothing.
//!
//! One file per config directory (named by a hash of its canonical path) in
//! the state directory, holding the text of every file as last published.
//! Written atomically (temporary file, fsync, rename, fsync of the directory),
//! mode 0600 in a 0700 directory of ours: it holds private keys.

use crate::source::Packed;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

/// `$XDG_STATE_HOME/aether-edge`, else `~/.local/state/aether-edge`: state
/// that must outlive a reboot (the ADS socket's runtime directory does not).
pub fn default_dir() -> Option<PathBuf> {
    let state_home = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|d| d.is_absolute())
                .map(|h| h.join(".local/state"))
        })?;
    Some(state_home.join("aether-edge"))
}

#[derive(Deserialize)]
struct Saved {
    config_dir: PathBuf,
    /// (file name, text), sorted by name.
    files: Vec<(String, String)>,
}

/// [`Saved`] as a save writes it: each file's text unpacked as it is
/// written, so one file's text is in memory at a time, not every file's.
#[derive(Serialize)]
struct Saving<'a> {
    config_dir: &'a Path,
    files: Unpacking<'a>,
}

struct Unpacking<'a>(&'a [(String, Packed)]);

impl Serialize for Unpacking<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|(name, text)| (name, text.text())))
    }
}

/// The state file of one config directory.
pub struct StateFile {
    path: PathBuf,
    config_dir: PathBuf,
}

impl StateFile {
    /// The state file of `config_dir` in `state_dir`, which is created (0700)
    /// if missing, and refused unless it is ours and no one else may write it.
    pub fn open(state_dir: &Path, config_dir: &Path) -> anyhow::Result<StateFile> {
        crate::serve::private_dir(state_dir, "the state directory")
            .context("the last configuration served is not kept")?;
        let config_dir = std::fs::canonicalize(config_dir)?;
        let hash = sha2::Sha256::digest(config_dir.as_os_str().as_encoded_bytes());
        let name = format!("last-served-{}.json", hex::encode(&hash[..8]));
        Ok(StateFile {
            path: state_dir.join(name),
            config_dir,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The files saved for this config directory; `Ok(None)` if none were.
    pub fn load(&self) -> anyhow::Result<Option<Vec<(String, String)>>> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", self.path.display())),
        };
        let saved: Saved = serde_json::from_slice(&bytes)
            .with_context(|| format!("reading {}", self.path.display()))?;
        anyhow::ensure!(
            saved.config_dir == self.config_dir,
            "{} is the state of {}, not of {}",
            self.path.display(),
            saved.config_dir.display(),
            self.config_dir.display()
        );
        Ok(Some(saved.files))
    }

    /// Replaces the saved files with `files`, atomically: a crash leaves the
    /// old state or the new one, never a mix.
    pub fn save(&self, files: &[(String, Packed)]) -> anyhow::Result<()> {
        let saved = Saving {
            config_dir: &self.config_dir,
            files: Unpacking(files),
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let tmp = self.path.with_extension("json.tmp");
        let write = || -> std::io::Result<()> {
            let _ = std::fs::remove_file(&tmp);
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            // Buffered: the serializer writes a string in many pieces, and
            // each piece straight to the file was a system call (with 10,000
            // files, the saver took as much CPU as the config thread).
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            serde_json::to_writer(&mut out, &saved)?;
            let file = out.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            std::fs::File::open(dir)?.sync_all()
        };
        write().with_context(|| format!("writing {}", self.path.display()))
    }
}

/// Saves in a thread of its own, the latest files only: the config thread
/// hands them over and reads the next change at once. (Saved on that thread,
/// 64 MiB of configuration and its fsyncs held every change back 1.3 s.)
/// Dropped, it finishes the save it holds.
pub struct Saver {
    shared: Arc<(Mutex<Pending>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct Pending {
    next: Option<Vec<(String, Packed)>>,
    stop: bool,
}

impl Saver {
    pub fn spawn(file: StateFile) -> Saver {
        let shared: Arc<(Mutex<Pending>, Condvar)> = Arc::default();
        let mine = shared.clone();
        let thread = std::thread::Builder::new()
            .name("state-saver".into())
            .spawn(move || {
                let (lock, wake) = &*mine;
                loop {
                    let next = {
                        let mut p = lock.lock().unwrap_or_else(|e| e.into_inner());
                        while p.next.is_none() && !p.stop {
                            p = wake.wait(p).unwrap_or_else(|e| e.into_inner());
                        }
                        match p.next.take() {
                            Some(files) => files,
                            None => return,
                        }
                    };
                    if let Err(e) = file.save(&next) {
                        tracing::warn!("{e:#}; a restart would not find this configuration");
                    }
                }
            })
            .expect("spawning the state saver thread");
        Saver {
            shared,
            thread: Some(thread),
        }
    }

    /// Saves `files` soon, in place of any save not started yet.
    pub fn save(&self, files: Vec<(String, Packed)>) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap_or_else(|e| e.into_inner()).next = Some(files);
        wake.notify_one();
    }
}

impl Drop for Saver {
    fn drop(&mut self) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_saver_writes_the_latest_files_and_finishes_when_dropped() {
        let base = std::env::temp_dir().join(format!("aether-edge-saver-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (state, dir) = (base.join("state"), base.join("d"));
        std::fs::create_dir_all(&dir).unwrap();
        let saver = Saver::spawn(StateFile::open(&state, &dir).unwrap());
        for i in 0..50 {
            saver.save(vec![("x.yaml".into(), Packed::of(&format!("v{i}\n")))]);
        }
        drop(saver);
        let files = StateFile::open(&state, &dir).unwrap().load().unwrap();
        assert_eq!(files, Some(vec![("x.yaml".into(), "v49\n".into())]));
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn state_round_trips_privately_and_belongs_to_its_directory() {
        let base = std::env::temp_dir().join(format!("aether-edge-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (state, a, b) = (base.join("state"), base.join("a"), base.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let file = StateFile::open(&state, &a).unwrap();
        assert!(file.load().unwrap().is_none());
        file.save(&[("x.yaml".into(), Packed::of("kind: X\n"))])
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&state), 0o700);
        assert_eq!(mode(file.path()), 0o600);
        let files = StateFile::open(&state, &a).unwrap().load().unwrap();
        assert_eq!(files, Some(vec![("x.yaml".into(), "kind: X\n".into())]));
        let other = StateFile::open(&state, &b).unwrap();
        assert_ne!(other.path(), file.path());
        assert!(other.load().unwrap().is_none());
        // A state directory others may write is refused.
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = format!("{:#}", StateFile::open(&state, &a).err().unwrap());
        assert!(
            err.contains("is writable by other users (mode 777)"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
