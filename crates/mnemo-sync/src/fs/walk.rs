//! Recursive walks below the root: listing regular files, removing a tree, pruning empty folders.
//!
//! Each level is opened with `openat(.., O_DIRECTORY | O_NOFOLLOW)` from its parent's fd, so a
//! symlinked directory is never descended, even if a real directory is swapped for one between
//! listing and opening it.

use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{AtFlags, FileType, Stat};
use rustix::io::Errno;

use super::sys::{self, io_err};
use super::{FsError, MARKER_NAME, RelPath};

/// How deep a scan descends. Memory paths have at most 20 segments, so anything deeper can never
/// be synced and is not worth an fd per level.
const SCAN_MAX_DEPTH: usize = 64;

/// How deep a removal descends before giving up, so a pathological tree cannot exhaust fds.
const REMOVE_MAX_DEPTH: usize = 256;

/// Calls `on_file(dir, name, rel, lstat)` for every regular file below `dir`.
///
/// Skipped: symlinks, FIFOs, sockets, devices, the marker directly under the root, our own temp
/// files, and names that are not valid [`RelPath`] segments (not UTF-8, or with a backslash),
/// since none of them can ever be synced. Entries that vanish mid-walk are skipped too. Any other
/// error (an unreadable folder, say) fails the whole walk: leaving a file out of a listing would
/// make it look deleted.
pub(super) fn walk_files<F>(
    dir: BorrowedFd<'_>,
    prefix: Option<&RelPath>,
    shown: &str,
    depth: usize,
    on_file: &mut F,
) -> Result<(), FsError>
where
    F: FnMut(BorrowedFd<'_>, &str, RelPath, &Stat) -> Result<(), FsError>,
{
    for cname in sys::list_names(dir, shown)? {
        let Ok(name) = cname.to_str() else {
            tracing::debug!(folder = shown, name = ?cname, "skipping a file name that is not utf-8");
            continue;
        };
        if (prefix.is_none() && name == MARKER_NAME) || sys::is_temp_name(name) {
            continue;
        }
        let rel = match RelPath::join_entry(prefix, name) {
            Ok(rel) => rel,
            Err(e) => {
                tracing::debug!(folder = shown, "skipping a file that cannot be synced: {e}");
                continue;
            }
        };
        let Some(st) = sys::stat_entry(dir, &cname, rel.as_str())? else {
            continue;
        };
        match sys::file_type(&st) {
            FileType::RegularFile => on_file(dir, name, rel, &st)?,
            FileType::Directory if depth < SCAN_MAX_DEPTH => {
                match sys::open_subdir(dir, name, rel.as_str(), false) {
                    Ok(Some(sub)) => walk_files(sub.as_fd(), Some(&rel), rel.as_str(), depth + 1, on_file)?,
                    // Gone, or swapped for a symlink since the lstat: not descended.
                    Ok(None) | Err(FsError::NotRegular(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            FileType::Directory => {
                tracing::debug!(folder = %rel, "not descending a folder nested this deep");
            }
            other => tracing::trace!(path = %rel, kind = ?other, "skipping a non-regular file"),
        }
    }
    Ok(())
}

/// Removes everything inside `dir` without following a symlink: a symlink is unlinked itself,
/// whatever it points to.
pub(super) fn remove_contents(dir: BorrowedFd<'_>, shown: &str, depth: usize) -> Result<(), FsError> {
    if depth > REMOVE_MAX_DEPTH {
        return Err(io_err("remove the deeply nested folder", shown, Errno::LOOP));
    }
    for name in sys::list_names(dir, shown)? {
        let child = format!("{shown}/{}", name.to_string_lossy());
        let Some(st) = sys::stat_entry(dir, &name, &child)? else {
            continue;
        };
        if sys::file_type(&st) == FileType::Directory {
            match open_dir(dir, &name) {
                Ok(sub) => {
                    remove_contents(sub.as_fd(), &child, depth + 1)?;
                    unlink(dir, &name, AtFlags::REMOVEDIR, &child)?;
                }
                // Swapped for a symlink or file since the lstat: unlink whatever it is now.
                Err(Errno::LOOP | Errno::NOTDIR) => unlink(dir, &name, AtFlags::empty(), &child)?,
                Err(Errno::NOENT) => {}
                Err(e) => return Err(io_err("open the folder", child, e)),
            }
        } else {
            unlink(dir, &name, AtFlags::empty(), &child)?;
        }
    }
    Ok(())
}

/// Removes the empty folders below `dir`, deepest first. Best effort: a folder that is not empty
/// (or cannot be removed) is left, and symlinks are never followed.
pub(super) fn prune_empty(dir: BorrowedFd<'_>, shown: &str, depth: usize) {
    if depth > SCAN_MAX_DEPTH {
        return;
    }
    let names = match sys::list_names(dir, shown) {
        Ok(names) => names,
        Err(e) => {
            tracing::debug!("failed to prune empty folders: {e}");
            return;
        }
    };
    for name in names {
        let child = format!("{shown}/{}", name.to_string_lossy());
        let is_dir = matches!(
            sys::stat_entry(dir, &name, &child),
            Ok(Some(st)) if sys::file_type(&st) == FileType::Directory
        );
        if !is_dir {
            continue;
        }
        let Ok(sub) = open_dir(dir, &name) else {
            continue;
        };
        prune_empty(sub.as_fd(), &child, depth + 1);
        drop(sub);
        match rustix::fs::unlinkat(dir, name.as_c_str(), AtFlags::REMOVEDIR) {
            Ok(()) => tracing::debug!(folder = %child, "removed an empty folder"),
            Err(Errno::NOTEMPTY | Errno::EXIST | Errno::NOENT) => {}
            Err(e) => tracing::debug!(folder = %child, "failed to remove an empty folder: {e}"),
        }
    }
}

/// Opens a sub-directory by its raw name, refusing symlinks.
fn open_dir(dir: BorrowedFd<'_>, name: &CStr) -> Result<std::os::fd::OwnedFd, Errno> {
    rustix::fs::openat(dir, name, sys::DIR_FLAGS, rustix::fs::Mode::empty())
}

/// `unlinkat` that treats an entry already gone as done.
fn unlink(dir: BorrowedFd<'_>, name: &CStr, flags: AtFlags, shown: &str) -> Result<(), FsError> {
    match rustix::fs::unlinkat(dir, name, flags) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(io_err("remove", shown, e)),
    }
}
