//! `aether-edge --version` names the commit it was built from: `git` at build
//! time, or `AETHER_EDGE_COMMIT` where there is no repository (an image build
//! from a source tarball); else "unknown". A `-dirty` suffix says the work tree
//! had changes when this was last built (it is not rebuilt for an edit alone).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=AETHER_EDGE_COMMIT");
    let commit = std::env::var("AETHER_EDGE_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            let head = git(&["rev-parse", "--short=12", "HEAD"])?;
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            // Rebuild when HEAD moves (a commit, a checkout); `--git-path`
            // finds each file in a linked work tree too. A path that does not
            // exist would rerun this on every build, so only existing ones.
            let mut watched = vec!["HEAD".to_string()];
            watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
            for name in watched {
                if let Some(path) = git(&["rev-parse", "--git-path", &name])
                    && std::path::Path::new(&path).exists()
                {
                    println!("cargo:rerun-if-changed={path}");
                }
            }
            Some(if dirty { format!("{head}-dirty") } else { head })
        })
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=AETHER_EDGE_COMMIT={commit}");
}
