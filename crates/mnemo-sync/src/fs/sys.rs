//! Low-level, fd-relative file operations that never follow a symlink.
//!
//! Everything below the root is reached with `openat`/`statat`/`mkdirat`/`renameat`/`unlinkat`
//! relative to an open directory fd, so what a path string would resolve to at some later moment
//! never matters: each step either lands on a real directory or regular file, or fails.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use sha2::{Digest as _, Sha256};

use super::Digest;

use super::{Durability, FsError, RelPath};

/// Flags for opening a directory to walk through: never a symlink, never inherited by children.
pub(super) const DIR_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// Flags for opening a file to read: no symlink, and no blocking on a FIFO's writer.
pub(super) const READ_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::NOFOLLOW).union(OFlags::NONBLOCK).union(OFlags::NOCTTY).union(OFlags::CLOEXEC);

/// Flags for creating a temp file: it must be new, so nothing planted there can be written through.
const TEMP_FLAGS: OFlags =
    OFlags::WRONLY.union(OFlags::CREATE).union(OFlags::EXCL).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// `rwx------`: folders created below the root are private to the worker.
pub(super) const DIR_MODE: Mode = Mode::RWXU;

/// `rw-------`: files written into the store are private to the worker.
const FILE_MODE: Mode = Mode::RUSR.union(Mode::WUSR);

/// How many random temp names to try before giving up on a directory full of collisions.
const TEMP_ATTEMPTS: usize = 8;

/// Builds an [`FsError::Io`] from an errno.
pub(super) fn io_err(op: &'static str, path: impl Into<String>, e: Errno) -> FsError {
    FsError::Io { op, path: path.into(), source: e.into() }
}

/// The identity and timestamps of a file, as far as the stat cache cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StatKey {
    pub(super) mtime_ns: i128,
    pub(super) ctime_ns: i128,
    pub(super) size: u64,
    pub(super) ino: u64,
}

impl StatKey {
    pub(super) fn of(st: &Stat) -> Self {
        let ns = |s: i128, n: i128| s * 1_000_000_000 + n;
        Self {
            mtime_ns: ns(i128::from(st.st_mtime), i128::from(st.st_mtime_nsec)),
            ctime_ns: ns(i128::from(st.st_ctime), i128::from(st.st_ctime_nsec)),
            size: u64::try_from(st.st_size).unwrap_or(0),
            ino: st.st_ino,
        }
    }
}

/// The type of the file `st` describes.
pub(super) fn file_type(st: &Stat) -> FileType {
    FileType::from_raw_mode(st.st_mode)
}

/// Opens the root by path, refusing a symlink or anything that is not a directory.
pub(super) fn open_root(root: &Path) -> Result<OwnedFd, FsError> {
    match rustix::fs::openat(CWD, root, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => Err(FsError::RootMissing(root.to_path_buf())),
        Err(e) => Err(io_err("open the store folder", root.display().to_string(), e)),
    }
}

/// Opens the sub-directory `name` of `dir`; `Ok(None)` if it does not exist.
///
/// A symlink or non-directory in the way is [`FsError::NotRegular`] naming `shown`. With `create`,
/// a missing directory is made with mode `0700`, set with `fchmod` so the umask cannot change it.
pub(super) fn open_subdir(
    dir: BorrowedFd<'_>,
    name: &str,
    shown: &str,
    create: bool,
) -> Result<Option<OwnedFd>, FsError> {
    let open = || match rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) => Ok(None),
        Err(Errno::LOOP | Errno::NOTDIR) => Err(FsError::NotRegular(shown.to_owned())),
        Err(e) => Err(io_err("open the folder", shown, e)),
    };
    match open()? {
        Some(fd) => Ok(Some(fd)),
        None if !create => Ok(None),
        None => match rustix::fs::mkdirat(dir, name, DIR_MODE) {
            Ok(()) => {
                let fd = open()?.ok_or_else(|| io_err("open the folder", shown, Errno::NOENT))?;
                rustix::fs::fchmod(&fd, DIR_MODE).map_err(|e| io_err("set the mode of the folder", shown, e))?;
                Ok(Some(fd))
            }
            // Someone else created it between our open and mkdir; use theirs if it is a directory.
            Err(Errno::EXIST) => open(),
            Err(e) => Err(io_err("create the folder", shown, e)),
        },
    }
}

/// Walks from the root to the folder holding `rel`, creating missing folders when `create`.
///
/// `Ok(None)` means a folder on the way does not exist (only without `create`).
pub(super) fn open_parent(root: OwnedFd, rel: &RelPath, create: bool) -> Result<Option<OwnedFd>, FsError> {
    let mut dir = root;
    for (seg, shown) in rel.parents() {
        match open_subdir(dir.as_fd(), seg, shown, create)? {
            Some(sub) => dir = sub,
            None => return Ok(None),
        }
    }
    Ok(Some(dir))
}

/// `lstat` of `name` in `dir`; `Ok(None)` if it does not exist.
pub(super) fn stat_entry(dir: BorrowedFd<'_>, name: &CStr, shown: &str) -> Result<Option<Stat>, FsError> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(io_err("inspect", shown, e)),
    }
}

/// Opens the regular file `name` in `dir` for reading; `Ok(None)` if it does not exist.
///
/// It is checked with `lstat` before opening (so a device is never even opened) and with `fstat`
/// after (so a swap between the two is caught); anything but a regular file is
/// [`FsError::NotRegular`].
pub(super) fn open_regular(dir: BorrowedFd<'_>, name: &str, shown: &str) -> Result<Option<(File, Stat)>, FsError> {
    let cname = CString::new(name)
        .map_err(|_| FsError::InvalidPath { path: shown.to_owned(), reason: "contains a NUL byte" })?;
    match stat_entry(dir, &cname, shown)? {
        None => return Ok(None),
        Some(st) if file_type(&st) != FileType::RegularFile => {
            return Err(FsError::NotRegular(shown.to_owned()));
        }
        Some(_) => {}
    }
    let fd = match rustix::fs::openat(dir, &cname, READ_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP | Errno::NXIO | Errno::NODEV) => {
            return Err(FsError::NotRegular(shown.to_owned()));
        }
        Err(e) => return Err(io_err("open", shown, e)),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| io_err("inspect", shown, e))?;
    if file_type(&st) != FileType::RegularFile {
        return Err(FsError::NotRegular(shown.to_owned()));
    }
    Ok(Some((File::from(fd), st)))
}

/// Reads all of an opened file.
pub(super) fn read_all(mut file: File, size_hint: u64, shown: &str) -> Result<Vec<u8>, FsError> {
    // The hint only sizes the first allocation; a file that grows while read is still read whole.
    let cap = usize::try_from(size_hint.min(64 << 20)).unwrap_or(0);
    let mut buf = Vec::with_capacity(cap);
    file.read_to_end(&mut buf).map_err(|source| FsError::Io { op: "read", path: shown.to_owned(), source })?;
    Ok(buf)
}

/// Hashes an opened file as it streams, without holding it in memory; returns the SHA-256 and
/// the number of bytes hashed.
pub(super) fn hash_stream(file: &mut File, shown: &str) -> Result<(Digest, u64), FsError> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(FsError::Io { op: "read", path: shown.to_owned(), source });
            }
        };
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((Digest::from(hasher), total))
}

/// Removes a half-written temp file unless the write got as far as renaming it.
#[derive(Debug)]
struct TempFile<'a> {
    dir: BorrowedFd<'a>,
    name: String,
    armed: bool,
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if self.armed
            && let Err(e) = rustix::fs::unlinkat(self.dir, self.name.as_str(), AtFlags::empty())
        {
            tracing::debug!(temp = %self.name, "failed to remove the temp file: {e}");
        }
    }
}

/// Writes `bytes` to `name` in `dir` atomically: a new temp file `.fs-<16 hex>.tmp` (mode `0600`)
/// is written and fsynced, `proceed` is asked whether to go on, the temp file is renamed over
/// `name`, and the directory is fsynced (each fsync as `durability` says).
///
/// `proceed` runs as late as possible, right before the rename, so a re-check it makes leaves the
/// smallest window for a concurrent edit. `Ok(false)` means it said no; nothing was changed. On
/// every failure the temp file is removed again.
pub(super) fn write_atomic(
    dir: BorrowedFd<'_>,
    name: &str,
    shown: &str,
    bytes: &[u8],
    durability: Durability,
    proceed: impl FnOnce() -> Result<bool, FsError>,
) -> Result<bool, FsError> {
    let (temp, fd) = create_temp(dir, shown)?;
    let mut temp = TempFile { dir, name: temp, armed: true };
    // The creation mode went through the umask; set it exactly, unless the umask leaves it be.
    if !umask_keeps_file_mode() {
        rustix::fs::fchmod(&fd, FILE_MODE).map_err(|e| io_err("set the mode of", shown, e))?;
    }
    let mut file = File::from(fd);
    let io = |op: &'static str| move |source| FsError::Io { op, path: shown.to_owned(), source };
    file.write_all(bytes).map_err(io("write"))?;
    if matches!(durability, Durability::Durable | Durability::BytesOnly) {
        file.sync_all().map_err(io("sync"))?;
    }
    drop(file);
    if !proceed()? {
        return Ok(false);
    }
    match rustix::fs::renameat(dir, temp.name.as_str(), dir, name) {
        Ok(()) => temp.armed = false,
        Err(Errno::ISDIR | Errno::NOTEMPTY | Errno::NOTDIR) => {
            return Err(FsError::NotRegular(shown.to_owned()));
        }
        Err(e) => return Err(io_err("rename a temp file over", shown, e)),
    }
    if matches!(durability, Durability::Durable | Durability::FlushedByCaller) {
        rustix::fs::fsync(dir).map_err(|e| io_err("sync the folder of", shown, e))?;
    }
    Ok(true)
}

/// Creates `name` in `dir`, which must not exist yet, and writes `bytes` straight into it (mode
/// `0600`, nothing fsynced): no temp file and no rename. A failed write removes what it created.
/// A crash midway can leave the file torn, so this is only for a folder that nothing trusts until
/// a later `syncfs` and journal ([`super::NewFiles`]).
pub(super) fn write_new(dir: BorrowedFd<'_>, name: &str, shown: &str, bytes: &[u8]) -> Result<(), FsError> {
    // `O_EXCL`: whatever is already there (a file, a symlink) is an error, never written through.
    let fd = rustix::fs::openat(dir, name, TEMP_FLAGS, FILE_MODE).map_err(|e| io_err("create", shown, e))?;
    let mut created = TempFile { dir, name: name.to_owned(), armed: true };
    if !umask_keeps_file_mode() {
        rustix::fs::fchmod(&fd, FILE_MODE).map_err(|e| io_err("set the mode of", shown, e))?;
    }
    File::from(fd).write_all(bytes).map_err(|source| FsError::Io { op: "write", path: shown.to_owned(), source })?;
    created.armed = false;
    Ok(())
}

/// Whether the process umask keeps [`FILE_MODE`] intact, read once from `/proc/self/status`
/// (reading it with `umask(2)` would briefly change it for every thread). Unknown → `false`,
/// and every file gets an explicit `fchmod`.
fn umask_keeps_file_mode() -> bool {
    static KEEPS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KEEPS.get_or_init(|| {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            .is_some_and(|umask| umask & FILE_MODE.bits() == 0)
    })
}

/// Creates a fresh temp file in `dir` with a random name no one else has.
fn create_temp(dir: BorrowedFd<'_>, shown: &str) -> Result<(String, OwnedFd), FsError> {
    let mut last = Errno::EXIST;
    for _ in 0..TEMP_ATTEMPTS {
        let name = format!(".fs-{:016x}.tmp", rand::random::<u64>());
        match rustix::fs::openat(dir, name.as_str(), TEMP_FLAGS, FILE_MODE) {
            Ok(fd) => return Ok((name, fd)),
            Err(Errno::EXIST) => last = Errno::EXIST,
            Err(e) => {
                last = e;
                break;
            }
        }
    }
    Err(io_err("create a temp file for", shown, last))
}

/// Whether `name` looks like one of our temp files (left behind by a crash, or mid-write).
pub(super) fn is_temp_name(name: &str) -> bool {
    name.strip_prefix(".fs-")
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .is_some_and(|hex| hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The names in `dir`, except `.` and `..`, read through a separate fd so `dir` stays usable.
pub(super) fn list_names(dir: BorrowedFd<'_>, shown: &str) -> Result<Vec<CString>, FsError> {
    let mut stream = Dir::read_from(dir).map_err(|e| io_err("list", shown, e))?;
    let mut names = Vec::new();
    while let Some(entry) = stream.read() {
        let entry = entry.map_err(|e| io_err("list", shown, e))?;
        let name = entry.file_name();
        if name != c"." && name != c".." {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}
