//! Records the git commit the binary is built from, for `mnemo --version`.
//!
//! `MNEMO_GIT_COMMIT` wins when set (the Docker build passes it, having no `.git`); otherwise
//! `git rev-parse --short HEAD`, with `-dirty` when tracked files differ from that commit;
//! otherwise `unknown` (a source tarball, no git installed).
//!
//! Reruns are kept to what can change the answer: moving HEAD (checkout, commit, reset), staging
//! (the index), and editing the inputs of the build (`crates/`, the workspace manifest and lock
//! file). A plain rebuild with nothing changed does not rerun this script.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MNEMO_GIT_COMMIT");
    let commit = match std::env::var("MNEMO_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_owned(),
        _ => from_git().unwrap_or_else(|| "unknown".to_owned()),
    };
    println!("cargo:rustc-env=MNEMO_GIT_COMMIT={commit}");
}

/// The short commit plus `-dirty`, or `None` when this is not a git checkout.
fn from_git() -> Option<String> {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    let workspace = manifest_dir.parent()?.parent()?;
    // Watch the repository's files before asking git, so that a checkout that has no commit
    // yet still reruns this once it has one.
    let git_dir = git(workspace, &["rev-parse", "--absolute-git-dir"])?;
    let git_dir = Path::new(&git_dir);
    watch(&git_dir.join("HEAD"));
    watch(&git_dir.join("index"));
    if let Some(head_ref) = git(workspace, &["symbolic-ref", "-q", "HEAD"]) {
        // A worktree keeps its refs in the common directory.
        let common = git(workspace, &["rev-parse", "--path-format=absolute", "--git-common-dir"])
            .map_or_else(|| git_dir.to_path_buf(), PathBuf::from);
        watch(&common.join(&head_ref));
        watch(&common.join("packed-refs"));
    }
    watch(&workspace.join("crates"));
    watch(&workspace.join("Cargo.toml"));
    watch(&workspace.join("Cargo.lock"));

    let commit = git(workspace, &["rev-parse", "--short", "HEAD"])?;
    // `--no-optional-locks`: a status run by a build must not rewrite the index (which would
    // rerun this script on the next build). Untracked files do not count, as with
    // `git describe --dirty`.
    let dirty = git(workspace, &["--no-optional-locks", "status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{commit}-dirty") } else { commit })
}

fn watch(path: &Path) {
    // Cargo treats a missing path as changed on every build, so only existing ones are named.
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// The trimmed stdout of a successful `git ARGS` in `dir`.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
