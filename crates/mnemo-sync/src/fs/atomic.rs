//! Atomic writes of single files addressed by path: the folder's own write sequence
//! ([`sys::write_atomic`]: temp file `.fs-<hex>.tmp` with mode `0600`, fsync, rename over the
//! target, fsync of the directory) for files outside any memory folder — the journal beside a
//! folder, the worker's per-session records. Unlike the folder's files, the path is followed
//! like any path: it is the host's, not the agent's.

use std::io;
use std::path::Path;

use rustix::fs::{CWD, Mode, OFlags};

use super::{Durability, FsError, sys};

/// Writes `bytes` to `path` atomically and durably: after `Ok`, `path` holds exactly `bytes`
/// (mode `0600`) even across a power cut, and a crash before never leaves it torn.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    atomic_write_with(path, bytes, Durability::Durable, || true).map(drop)
}

/// [`atomic_write`] with a chosen [`Durability`] and a last word: `before_rename` runs once the
/// temp file is written, right before the rename (with [`Durability::FlushedByCaller`], that is
/// where the caller flushes it). `Ok(false)` means it said no: `path` was left alone and the temp
/// file removed.
pub fn atomic_write_with(
    path: &Path,
    bytes: &[u8],
    durability: Durability,
    before_rename: impl FnOnce() -> bool,
) -> io::Result<bool> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir = rustix::fs::openat(CWD, parent, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    let shown = path.display().to_string();
    sys::write_atomic(std::os::fd::AsFd::as_fd(&dir), name, &shown, bytes, durability, || Ok(before_rename())).map_err(
        |e| match e {
            FsError::Io { source, .. } => source,
            other => io::Error::other(other.to_string()),
        },
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn writes_replace_the_file_whole_and_leave_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record.json");
        atomic_write(&path, b"first").unwrap();
        atomic_write(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(names(dir.path()), ["record.json"]);
    }

    #[test]
    fn a_refusal_before_the_rename_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        atomic_write(&path, b"old").unwrap();
        let mut asked = false;
        let written = atomic_write_with(&path, b"new", Durability::FlushedByCaller, || {
            asked = true;
            false
        });
        assert!(!written.unwrap() && asked);
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(names(dir.path()), ["j"]);
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = atomic_write(&dir.path().join("gone/x"), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(atomic_write(Path::new("/"), b"x").unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
