//! [`FileStore`]: the operations the sync engine performs on one store folder.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{AtFlags, CWD, FileType};
use rustix::io::Errno;

use super::sys::{self, StatKey, io_err};
use super::{Digest, Durability, FsError, LocalFile, MARKER_NAME, MarkerState, RelPath, marker_text, walk};

/// Files changed this recently are re-hashed on every scan: on filesystems with coarse
/// timestamps a second edit within the same tick leaves the stat unchanged.
const SETTLE_NS: i128 = 2_000_000_000;

/// What the stat cache remembers about one file.
#[derive(Debug, Clone)]
struct CacheEntry {
    key: StatKey,
    sha256: Digest,
}

/// One memory store's folder on disk, confined to its root.
///
/// Every method opens the root afresh (the agent may delete and re-create it between calls) and
/// reaches files only through directory fds, never following a symlink. All methods block; the
/// engine calls them from `spawn_blocking`.
#[derive(Debug)]
pub struct FileStore {
    /// The folder the store is materialised in; it is opened with `O_NOFOLLOW` each time.
    root: PathBuf,
    /// Whether reads and writes refuse bytes that are not UTF-8.
    utf8_only: bool,
    /// The last scan's stat and hash per path, so unchanged files are not re-read every scan.
    cache: Mutex<HashMap<RelPath, CacheEntry>>,
    /// How many files scans served from the cache, so tests can see that it is used.
    #[cfg(test)]
    cache_hits: std::sync::atomic::AtomicUsize,
}

impl FileStore {
    /// A store rooted at `root`, refusing non-UTF-8 content. Does no I/O.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            utf8_only: true,
            cache: Mutex::new(HashMap::new()),
            #[cfg(test)]
            cache_hits: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Turns the UTF-8-only check of reads and writes on or off.
    #[must_use]
    pub fn with_utf8_only(mut self, on: bool) -> Self {
        self.utf8_only = on;
        self
    }

    /// The folder the store lives in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the root exists as a real directory (lstat; a symlink is not).
    pub fn root_exists(&self) -> bool {
        rustix::fs::statat(CWD, &self.root, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| sys::file_type(&st) == FileType::Directory)
    }

    /// Creates the root and any missing ancestors with mode `0700`.
    ///
    /// An existing real directory is left as it is. A symlink or file at the root's path is
    /// [`FsError::RootMissing`]: it is not the folder, and it is not ours to replace. Ancestors
    /// are the host's mount path and are followed like any path.
    pub fn create_root(&self) -> Result<(), FsError> {
        let shown = self.root.display().to_string();
        match rustix::fs::statat(CWD, &self.root, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if sys::file_type(&st) == FileType::Directory => return Ok(()),
            Ok(_) => return Err(FsError::RootMissing(self.root.clone())),
            Err(Errno::NOENT) => {}
            Err(e) => return Err(io_err("inspect", shown, e)),
        }
        if let Some(parent) = self.root.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_ancestors(parent)?;
        }
        match rustix::fs::mkdirat(CWD, &self.root, sys::DIR_MODE) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(io_err("create the folder", shown, e)),
        }
        let root = sys::open_root(&self.root)?;
        rustix::fs::fchmod(&root, sys::DIR_MODE).map_err(|e| io_err("set the mode of the folder", shown, e))
    }

    /// Every regular file below the root except the root's marker, with its hash.
    ///
    /// Hashes come from the stat cache when the file's mtime, ctime, size and inode are unchanged
    /// and it has not been touched in the last two seconds; everything else is re-read.
    /// Symlinks, FIFOs, sockets and devices are skipped and symlinked folders are not descended.
    /// [`FsError::RootMissing`] if the root is gone.
    pub fn scan(&self) -> Result<BTreeMap<RelPath, LocalFile>, FsError> {
        let root = sys::open_root(&self.root)?;
        let mut cache = self.lock_cache();
        let now = now_ns();
        let mut next = HashMap::with_capacity(cache.len());
        let mut out = BTreeMap::new();
        let shown = self.root.display().to_string();
        walk::walk_files(root.as_fd(), None, &shown, 0, &mut |dir, name, rel, st| {
            let key = StatKey::of(st);
            if let Some(entry) = cache.get(&rel).filter(|e| e.key == key && settled(key, now)) {
                #[cfg(test)]
                self.cache_hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let file = LocalFile { sha256: entry.sha256, size: key.size };
                next.insert(rel.clone(), entry.clone());
                out.insert(rel, file);
                return Ok(());
            }
            let (mut file, before) = match sys::open_regular(dir, name, rel.as_str()) {
                Ok(Some(opened)) => opened,
                // Removed, or replaced by something that is not a file, since it was listed.
                Ok(None) | Err(FsError::NotRegular(_)) => return Ok(()),
                Err(e) => return Err(e),
            };
            let (sha256, size) = sys::hash_stream(&mut file, rel.as_str())?;
            let after = rustix::fs::fstat(&file).map_err(|e| io_err("inspect", rel.as_str(), e))?;
            let key = StatKey::of(&before);
            // Only a hash of a file that stood still while read, and had already settled, can be
            // trusted later on the strength of its stat alone.
            if key == StatKey::of(&after) && settled(key, now) {
                let entry = CacheEntry { key, sha256 };
                next.insert(rel.clone(), entry);
            }
            out.insert(rel, LocalFile { sha256, size });
            Ok(())
        })?;
        *cache = next;
        Ok(out)
    }

    /// The hash of one file right now, always re-read; `Ok(None)` if it (or a folder on its way)
    /// does not exist. A symlink, FIFO or directory at the path, or a symlink or file in place of
    /// one of its folders, is [`FsError::NotRegular`].
    pub fn hash_now(&self, rel: &RelPath) -> Result<Option<Digest>, FsError> {
        let Some(parent) = sys::open_parent(sys::open_root(&self.root)?, rel, false)? else {
            return Ok(None);
        };
        current_hash(parent.as_fd(), rel)
    }

    /// The bytes of one file right now and their hash, read once; `Ok(None)` if it (or a folder
    /// on its way) does not exist. Refuses what [`FileStore::hash_now`] refuses; the bytes are
    /// not checked to be UTF-8.
    pub fn read_now(&self, rel: &RelPath) -> Result<Option<(Digest, Vec<u8>)>, FsError> {
        Ok(self.read_raw(rel)?.map(|bytes| (Digest::of(&bytes), bytes)))
    }

    /// The bytes of one regular file. A missing file is an [`FsError::Io`] for which
    /// [`FsError::is_not_found`] holds; non-UTF-8 content is [`FsError::NotUtf8`] in UTF-8 mode.
    pub fn read(&self, rel: &RelPath) -> Result<Vec<u8>, FsError> {
        let bytes = self.read_raw(rel)?.ok_or_else(|| io_err("open", rel.as_str(), Errno::NOENT))?;
        self.check_utf8(rel, &bytes)?;
        Ok(bytes)
    }

    /// The bytes of one regular file, unchecked; `Ok(None)` if it (or a folder on its way) does
    /// not exist.
    fn read_raw(&self, rel: &RelPath) -> Result<Option<Vec<u8>>, FsError> {
        let Some(parent) = sys::open_parent(sys::open_root(&self.root)?, rel, false)? else {
            return Ok(None);
        };
        let Some((file, st)) = sys::open_regular(parent.as_fd(), rel.file_name(), rel.as_str())? else {
            return Ok(None);
        };
        sys::read_all(file, StatKey::of(&st).size, rel.as_str()).map(Some)
    }

    /// Writes `bytes` to the file atomically, creating missing folders below the root (`0700`);
    /// the file ends up with mode `0600`. The root itself is never created: if it is gone this
    /// is [`FsError::RootMissing`].
    pub fn write(&self, rel: &RelPath, bytes: &[u8]) -> Result<(), FsError> {
        self.check_writable(rel, bytes)?;
        let parent = self.open_parent_creating(rel)?;
        sys::write_atomic(parent.as_fd(), rel.file_name(), rel.as_str(), bytes, Durability::Durable, || Ok(true))?;
        Ok(())
    }

    /// Writes like [`FileStore::write`] (atomic, confined, same modes) but without fsyncing the
    /// file and its folder: for bulk downloads that end with one [`FileStore::sync_filesystem`]
    /// before anything records the files as synced.
    pub fn write_deferred(&self, rel: &RelPath, bytes: &[u8]) -> Result<(), FsError> {
        self.check_writable(rel, bytes)?;
        let parent = self.open_parent_creating(rel)?;
        sys::write_atomic(parent.as_fd(), rel.file_name(), rel.as_str(), bytes, Durability::Deferred, || Ok(true))?;
        Ok(())
    }

    /// A writer of files that do not exist yet, for filling a folder this process has just
    /// created (see [`NewFiles`]).
    pub fn new_files(&self) -> Result<NewFiles<'_>, FsError> {
        Ok(NewFiles { store: self, root: sys::open_root(&self.root)?, parent: None })
    }

    /// Flushes everything written on the root's filesystem to disk (`syncfs`): one flush for a
    /// batch of [`FileStore::write_deferred`] writes.
    pub fn sync_filesystem(&self) -> Result<(), FsError> {
        let root = sys::open_root(&self.root)?;
        rustix::fs::syncfs(&root).map_err(|e| FsError::Io {
            op: "sync the filesystem of",
            path: self.root.display().to_string(),
            source: e.into(),
        })
    }

    /// Writes like [`FileStore::write`], but only if the file's hash right before the rename still
    /// equals `expected` (`None`: the file must be absent). `Ok(false)` means it changed since the
    /// caller looked, and it was left alone.
    ///
    /// The re-check happens after the new content is on disk in a temp file, so the window in
    /// which a concurrent edit can be overwritten is as short as the hash of the current file.
    pub fn write_if_unchanged(&self, rel: &RelPath, expected: Option<Digest>, bytes: &[u8]) -> Result<bool, FsError> {
        self.write_if_unchanged_with(rel, expected, bytes, Durability::Durable)
    }

    /// [`FileStore::write_if_unchanged`] with a chosen [`Durability`] (with
    /// [`Durability::BytesOnly`], the caller makes the rename durable with
    /// [`FileStore::sync_folder_of`] before it records the file as written).
    pub fn write_if_unchanged_with(
        &self,
        rel: &RelPath,
        expected: Option<Digest>,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<bool, FsError> {
        self.check_writable(rel, bytes)?;
        let existing = sys::open_parent(sys::open_root(&self.root)?, rel, false)?;
        let parent = match existing {
            Some(parent) => parent,
            // A file that should be there cannot be if its folder is missing.
            None if expected.is_some() => return Ok(false),
            None => self.open_parent_creating(rel)?,
        };
        let dir = parent.as_fd();
        sys::write_atomic(dir, rel.file_name(), rel.as_str(), bytes, durability, || {
            Ok(current_hash(dir, rel)? == expected)
        })
    }

    /// Fsyncs the folder that holds `rel` (a rename into it made with
    /// [`Durability::BytesOnly`] is durable afterwards); a folder that is gone has nothing to
    /// make durable.
    pub fn sync_folder_of(&self, rel: &RelPath) -> Result<(), FsError> {
        let Some(parent) = sys::open_parent(sys::open_root(&self.root)?, rel, false)? else {
            return Ok(());
        };
        rustix::fs::fsync(parent.as_fd()).map_err(|e| io_err("sync the folder of", rel.as_str(), e))
    }

    /// Removes the file, but only if its hash right now equals `expected`. `Ok(true)` if it was
    /// removed or is already gone, `Ok(false)` if it changed and was left alone.
    pub fn remove_if_unchanged(&self, rel: &RelPath, expected: Digest) -> Result<bool, FsError> {
        check_not_reserved(rel)?;
        let Some(parent) = sys::open_parent(sys::open_root(&self.root)?, rel, false)? else {
            return Ok(true);
        };
        let dir = parent.as_fd();
        match current_hash(dir, rel)? {
            None => return Ok(true),
            Some(current) if current != expected => return Ok(false),
            Some(_) => {}
        }
        match rustix::fs::unlinkat(dir, rel.file_name(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(io_err("remove", rel.as_str(), e)),
        }
        rustix::fs::fsync(dir).map_err(|e| io_err("sync the folder of", rel.as_str(), e))?;
        Ok(true)
    }

    /// Removes empty folders below the root, such as those left after removals; never the root
    /// itself. Best effort: failures are logged at debug level and skipped.
    pub fn prune_empty_dirs(&self) {
        match sys::open_root(&self.root) {
            Ok(root) => walk::prune_empty(root.as_fd(), &self.root.display().to_string(), 0),
            Err(e) => tracing::debug!("failed to prune empty folders: {e}"),
        }
    }

    /// Writes the marker file for `store_id` at the root, atomically and with mode `0600`.
    pub fn write_marker(&self, store_id: &str) -> Result<(), FsError> {
        let root = sys::open_root(&self.root)?;
        let text = marker_text(store_id);
        sys::write_atomic(root.as_fd(), MARKER_NAME, MARKER_NAME, text.as_bytes(), Durability::Durable, || Ok(true))?;
        Ok(())
    }

    /// Whether the root's marker names `store_id`, compared by SHA-256 of the exact text.
    ///
    /// A missing root or marker is [`MarkerState::Missing`]; a marker that is a symlink, FIFO,
    /// directory or unreadable is [`MarkerState::Mismatch`], since it cannot vouch for the folder.
    pub fn check_marker(&self, store_id: &str) -> MarkerState {
        let root = match sys::open_root(&self.root) {
            Ok(root) => root,
            Err(FsError::RootMissing(_)) => return MarkerState::Missing,
            Err(e) => {
                tracing::debug!("failed to check the marker file: {e}");
                return MarkerState::Mismatch;
            }
        };
        let want = Digest::of(marker_text(store_id).as_bytes());
        let found = sys::open_regular(root.as_fd(), MARKER_NAME, MARKER_NAME)
            .and_then(|opened| opened.map(|(mut f, _)| hash(&mut f, MARKER_NAME)).transpose());
        match found {
            Ok(None) => MarkerState::Missing,
            Ok(Some(got)) if got == want => MarkerState::Matches,
            Ok(Some(_)) => MarkerState::Mismatch,
            Err(e) => {
                tracing::debug!("failed to check the marker file: {e}");
                MarkerState::Mismatch
            }
        }
    }

    /// Removes the root and everything in it without following any symlink (a symlink is removed,
    /// never what it points to). A root that is already gone is fine; a root path that is a
    /// symlink or file is unlinked itself, so the path is free for the next session.
    pub fn remove_root(&self) -> Result<(), FsError> {
        let shown = self.root.display().to_string();
        self.lock_cache().clear();
        match rustix::fs::statat(CWD, &self.root, AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(io_err("inspect", shown, e)),
            Ok(st) if sys::file_type(&st) != FileType::Directory => {
                return match rustix::fs::unlinkat(CWD, &self.root, AtFlags::empty()) {
                    Ok(()) | Err(Errno::NOENT) => Ok(()),
                    Err(e) => Err(io_err("remove", shown, e)),
                };
            }
            Ok(_) => {}
        }
        let root = sys::open_root(&self.root)?;
        walk::remove_contents(root.as_fd(), &shown, 0)?;
        drop(root);
        match rustix::fs::unlinkat(CWD, &self.root, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(io_err("remove the folder", shown, e)),
        }
    }

    /// Walks to the folder of `rel`, creating missing folders below (never including) the root.
    fn open_parent_creating(&self, rel: &RelPath) -> Result<OwnedFd, FsError> {
        sys::open_parent(sys::open_root(&self.root)?, rel, true)?
            .ok_or_else(|| io_err("create a folder for", rel.as_str(), Errno::NOENT))
    }

    fn check_utf8(&self, rel: &RelPath, bytes: &[u8]) -> Result<(), FsError> {
        if self.utf8_only && std::str::from_utf8(bytes).is_err() {
            return Err(FsError::NotUtf8(rel.as_str().to_owned()));
        }
        Ok(())
    }

    fn check_writable(&self, rel: &RelPath, bytes: &[u8]) -> Result<(), FsError> {
        check_not_reserved(rel)?;
        self.check_utf8(rel, bytes)
    }

    fn lock_cache(&self) -> MutexGuard<'_, HashMap<RelPath, CacheEntry>> {
        // The cache is only ever replaced whole, so a panic mid-scan cannot leave it half-built.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves how many cache hits scans have had so far.
    #[cfg(test)]
    pub(super) fn cache_hits(&self) -> usize {
        self.cache_hits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Overwrites the cached hash of `rel`, so a test can tell a cached answer from a re-read.
    #[cfg(test)]
    pub(super) fn poison_cache(&self, rel: &RelPath, sha256: Digest) -> bool {
        self.lock_cache().get_mut(rel).map(|e| e.sha256 = sha256).is_some()
    }
}

/// The marker's place (and anything below a folder by that name) is the store's, not a memory's:
/// writing or removing it through the file API could forge or break the folder's trust check.
fn check_not_reserved(rel: &RelPath) -> Result<(), FsError> {
    if rel.first_segment() == MARKER_NAME {
        let reason = if rel.is_top_level(MARKER_NAME) {
            "is the store's reserved marker file"
        } else {
            "is inside the store's reserved marker file"
        };
        return Err(FsError::InvalidPath { path: rel.as_str().to_owned(), reason });
    }
    Ok(())
}

/// The hash of the file `rel` in its already-open parent folder, or `None` if it is absent.
fn current_hash(parent: BorrowedFd<'_>, rel: &RelPath) -> Result<Option<Digest>, FsError> {
    sys::open_regular(parent, rel.file_name(), rel.as_str())?
        .map(|(mut file, _)| hash(&mut file, rel.as_str()))
        .transpose()
}

fn hash(file: &mut File, shown: &str) -> Result<Digest, FsError> {
    sys::hash_stream(file, shown).map(|(sha, _)| sha)
}

/// Whether a file with this stat has stood still long enough for its stat to vouch for its bytes.
fn settled(key: StatKey, now: i128) -> bool {
    now - key.mtime_ns >= SETTLE_NS && now - key.ctime_ns >= SETTLE_NS
}

fn now_ns() -> i128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

/// Writes files that must not exist yet straight to their paths, confined to the root like
/// every [`FileStore`] write (same modes, folders created as needed): no temp file, no rename, no
/// fsync, and the folder last written to stays open for the next file.
///
/// Only for a folder that nothing trusts yet: a first download, which ends with one
/// [`FileStore::sync_filesystem`] before its journal names the files. A crash midway can leave a
/// torn file, but a folder without a journal is never resumed (it is left as found), so a torn
/// file can never be taken for the store's content or uploaded.
#[derive(Debug)]
pub struct NewFiles<'a> {
    store: &'a FileStore,
    root: OwnedFd,
    /// The folder of the previous file below the root: its path (with the trailing `/`) and fd.
    parent: Option<(String, OwnedFd)>,
}

impl NewFiles<'_> {
    /// Creates `rel` holding `bytes`; anything already at that path is an error and left alone.
    pub fn create(&mut self, rel: &RelPath, bytes: &[u8]) -> Result<(), FsError> {
        self.store.check_writable(rel, bytes)?;
        let dirs = &rel.as_str()[..rel.as_str().len() - rel.file_name().len()];
        if dirs.is_empty() {
            return sys::write_new(self.root.as_fd(), rel.file_name(), rel.as_str(), bytes);
        }
        if !matches!(&self.parent, Some((open, _)) if open == dirs) {
            self.parent = None;
            let mut dir: Option<OwnedFd> = None;
            for (seg, shown) in rel.parents() {
                let at = dir.as_ref().map_or(self.root.as_fd(), AsFd::as_fd);
                let sub = sys::open_subdir(at, seg, shown, true)?
                    .ok_or_else(|| io_err("create a folder for", rel.as_str(), Errno::NOENT))?;
                dir = Some(sub);
            }
            self.parent = dir.map(|fd| (dirs.to_owned(), fd));
        }
        let Some((_, dir)) = &self.parent else { unreachable!("a path with folders has a parent") };
        sys::write_new(dir.as_fd(), rel.file_name(), rel.as_str(), bytes)
    }
}

/// Creates `dir` and its missing ancestors with mode `0700`. These are the host's mount path, so
/// existing symlinks among them are followed, as for any configured path.
fn create_ancestors(dir: &Path) -> Result<(), FsError> {
    match rustix::fs::stat(dir) {
        Ok(st) if sys::file_type(&st) == FileType::Directory => return Ok(()),
        Ok(_) => {
            let shown = dir.display().to_string();
            return Err(io_err("create the folder", shown, Errno::NOTDIR));
        }
        Err(Errno::NOENT) => {}
        Err(e) => return Err(io_err("inspect", dir.display().to_string(), e)),
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_ancestors(parent)?;
    }
    let shown = || dir.display().to_string();
    match rustix::fs::mkdirat(CWD, dir, sys::DIR_MODE) {
        Ok(()) => {
            let fd = sys::open_root(dir)?;
            rustix::fs::fchmod(&fd, sys::DIR_MODE).map_err(|e| io_err("set the mode of the folder", shown(), e))
        }
        Err(Errno::EXIST) => Ok(()),
        Err(e) => Err(io_err("create the folder", shown(), e)),
    }
}
