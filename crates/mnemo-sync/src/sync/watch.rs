//! Change hints from the filesystem, so a sync with no local change neither walks nor hashes
//! the tree.
//!
//! The watcher (inotify, read by a task on the async runtime) only ever *narrows* what a sync
//! re-reads: it records which paths changed. Anything it cannot vouch for — a queue overflow, a
//! watcher error, an event on the root — asks for a full walk, and the engine walks the whole
//! tree anyway every few syncs as a safety net. A folder created (or moved in) is watched as
//! soon as its event is read, and reported itself: files made in it before its watch existed
//! are found by the engine, which walks a folder it is told about.

use std::collections::{BTreeSet, HashMap};
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use tokio::io::unix::AsyncFd;

use std::time::{Duration, Instant};

use crate::fs::{FileStore, MARKER_NAME, RelPath};

/// How long a sync waits for the watcher to catch up before walking instead.
const BARRIER_TIMEOUT: Duration = Duration::from_millis(250);

/// What every folder is watched for: whatever changes a name or a file's bytes or mode (not
/// opens and reads, which our own scans cause).
const FOLDER_EVENTS: WatchFlags = WatchFlags::ATTRIB
    .union(WatchFlags::CREATE)
    .union(WatchFlags::DELETE)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    // A folder only, never through a symlink; no events for names already unlinked.
    .union(WatchFlags::ONLYDIR)
    .union(WatchFlags::DONT_FOLLOW)
    .union(WatchFlags::EXCL_UNLINK);

/// The root is also watched for its own removal or move.
const ROOT_EVENTS: WatchFlags = FOLDER_EVENTS.union(WatchFlags::DELETE_SELF).union(WatchFlags::MOVE_SELF);

/// What changed since the last [`Watch::take`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Changes {
    /// Walk everything: the hints are incomplete.
    Rescan,
    /// Only these paths (files or directories) may have changed.
    Paths(BTreeSet<RelPath>),
}

#[derive(Debug, Default)]
struct Dirty {
    paths: BTreeSet<RelPath>,
    rescan: bool,
    /// The barrier file being waited for, and whether its event has arrived.
    barrier: Option<String>,
    barrier_seen: bool,
    /// Live sync's sink: every changed path is also sent here (the sync's own set is kept).
    live: Option<LiveSink>,
    /// A path was recorded that no live sync took (none attached, or it stopped): only a full
    /// sync syncs it.
    unhinted: bool,
}

/// Where a watch records each changed path for live sync ([`super::live`]).
pub(crate) type LiveSink = std::sync::Arc<super::live::LocalHints>;

/// Our own temp files (`.fs-<16 hex>.tmp`): scans skip them, so their events mean nothing.
fn is_temp_name(name: &str) -> bool {
    name.strip_prefix(".fs-")
        .and_then(|r| r.strip_suffix(".tmp"))
        .is_some_and(|hex| hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl Dirty {
    /// A change of `rel` (a path below the root, `/`-separated).
    fn record(&mut self, rel: &str) {
        if rel == MARKER_NAME {
            return; // checked on every sync anyway
        }
        if self.barrier.as_deref() == Some(rel) {
            self.barrier_seen = true;
            return;
        }
        if is_temp_name(rel.rsplit('/').next().unwrap_or(rel)) {
            return;
        }
        // Names a scan skips anyway (not UTF-8, …) are not worth a walk.
        if let Ok(rel) = RelPath::parse(rel) {
            // Once live sync has stopped, its sink records nothing.
            let hinted = self.live.as_ref().is_some_and(|live| live.saw(rel.clone()));
            self.unhinted |= !hinted;
            self.paths.insert(rel);
        }
    }
}

/// A recursive watch on one store folder.
pub(crate) struct Watch {
    dirty: Arc<Mutex<Dirty>>,
    /// The task that reads the events; aborted (closing the inotify instance) on drop.
    reader: tokio::task::AbortHandle,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").finish_non_exhaustive()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The folders watched, by watch descriptor, as paths below the root (`""`: the root).
struct Folders {
    root: std::path::PathBuf,
    by_wd: HashMap<i32, String>,
}

impl Folders {
    /// Watches the folder `rel` and every folder below it. Entries are told apart by the type
    /// their folder listing gives (no `stat` per file: a store of thousands of files is watched
    /// in a few folder reads).
    fn add_tree(&mut self, fd: impl AsFd + Copy, rel: &str) -> std::io::Result<()> {
        if !self.add_one(fd, rel)? {
            return Ok(());
        }
        let abs = if rel.is_empty() { self.root.clone() } else { self.root.join(rel) };
        let entries = match std::fs::read_dir(&abs) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !rel.is_empty() => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue; // a scan skips it too
            };
            let child = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            self.add_tree(fd, &child)?;
        }
        Ok(())
    }

    /// Watches the folder `rel` alone; `false` if it is gone (or replaced by a file) before it
    /// could be watched, which its parent's event tells.
    fn add_one(&mut self, fd: impl AsFd + Copy, rel: &str) -> std::io::Result<bool> {
        let abs = if rel.is_empty() { self.root.clone() } else { self.root.join(rel) };
        let events = if rel.is_empty() { ROOT_EVENTS } else { FOLDER_EVENTS };
        match inotify::add_watch(fd, &abs, events) {
            Ok(wd) => {
                self.by_wd.insert(wd, rel.to_owned());
                Ok(true)
            }
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) if !rel.is_empty() => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Stops watching the folder `rel` and those below it (moved away: their watches would
    /// report paths under a name that is gone).
    fn forget_tree(&mut self, fd: impl AsFd + Copy, rel: &str) {
        let below = format!("{rel}/");
        self.by_wd.retain(|wd, path| {
            let keep = path != rel && !path.starts_with(&below);
            if !keep {
                let _ = inotify::remove_watch(fd, *wd);
            }
            keep
        });
    }

    /// Takes one event into `dirty` (watching a folder it names as new).
    fn note(&mut self, fd: impl AsFd + Copy, event: &inotify::Event<'_>, dirty: &Mutex<Dirty>) {
        let flags = event.events();
        if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
            dirty.lock().expect("watch state poisoned").rescan = true;
            return;
        }
        let Some(folder) = self.by_wd.get(&event.wd()) else { return };
        let is_root = folder.is_empty();
        if flags.contains(ReadFlags::IGNORED) {
            // The folder is gone (or no longer watched): the root's going asks for a walk.
            self.by_wd.remove(&event.wd());
            if is_root {
                dirty.lock().expect("watch state poisoned").rescan = true;
            }
            return;
        }
        let Some(name) = event.file_name().map(CStr::to_bytes) else {
            // The folder's own event: the root removed, moved or changed asks for a walk; a
            // subfolder's own events reach its parent's watch by name as well.
            if is_root {
                dirty.lock().expect("watch state poisoned").rescan = true;
            }
            return;
        };
        let Ok(name) = std::str::from_utf8(name) else { return };
        let rel = if is_root { name.to_owned() } else { format!("{folder}/{name}") };
        if flags.contains(ReadFlags::ISDIR) {
            if flags.contains(ReadFlags::MOVED_FROM) {
                self.forget_tree(fd, &rel);
            }
            if flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO)
                && let Err(e) = self.add_tree(fd, &rel)
            {
                tracing::debug!(path = %rel, "cannot watch a new folder; the next sync walks: {e}");
                dirty.lock().expect("watch state poisoned").rescan = true;
            }
        }
        dirty.lock().expect("watch state poisoned").record(&rel);
    }
}

/// Reads the instance's events until it fails (then the next sync walks) or the watch is
/// dropped (the task is aborted).
async fn read_events(fd: AsyncFd<OwnedFd>, mut folders: Folders, dirty: Arc<Mutex<Dirty>>) {
    // Room for many events per read (each is 16 bytes and its name).
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 16 * 1024];
    loop {
        let mut ready = match fd.readable().await {
            Ok(ready) => ready,
            Err(e) => return fail(&dirty, &e),
        };
        let mut reader = inotify::Reader::new(fd.get_ref(), &mut buf);
        loop {
            match reader.next() {
                Ok(event) => folders.note(fd.get_ref(), &event, &dirty),
                Err(rustix::io::Errno::AGAIN) => {
                    ready.clear_ready();
                    break;
                }
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return fail(&dirty, &e.into()),
            }
        }
    }
}

/// The inotify instance on the runtime's reactor (inside the runtime's context).
#[allow(unsafe_code, reason = "tokio's registration of a file descriptor, see the SAFETY note")]
fn register(fd: OwnedFd) -> std::io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: `register` asks that the descriptor stay open and the same for the `AsyncFd`'s
    // whole life. It takes the `OwnedFd` itself, which closes its descriptor only when dropped
    // (with the `AsyncFd`) and always answers the same descriptor.
    unsafe { AsyncFd::register(fd) }.map_err(|e| e.into_parts().1)
}

fn fail(dirty: &Mutex<Dirty>, e: &std::io::Error) {
    tracing::debug!("the filesystem watch stopped; syncs walk from now on: {e}");
    dirty.lock().expect("watch state poisoned").rescan = true;
}

impl Watch {
    /// Starts watching `root` and everything below it; changed paths also go to `live`. Needs
    /// the async runtime (its events are read by a task).
    pub(crate) fn start(root: &Path, live: Option<LiveSink>) -> std::io::Result<Self> {
        Self::start_with(root, live, |folders, fd| folders.add_tree(fd, ""))
    }

    /// Starts watching `root` and exactly the folders below it named in `known` (every folder
    /// there is, with its parents: a download that made the tree knows them), listing none.
    pub(crate) fn start_over<'a>(
        root: &Path,
        known: impl IntoIterator<Item = &'a str>,
        live: Option<LiveSink>,
    ) -> std::io::Result<Self> {
        Self::start_with(root, live, |folders, fd| {
            folders.add_one(fd, "")?;
            known.into_iter().try_for_each(|rel| folders.add_one(fd, rel).map(drop))
        })
    }

    fn start_with(
        root: &Path,
        live: Option<LiveSink>,
        watch: impl FnOnce(&mut Folders, &OwnedFd) -> std::io::Result<()>,
    ) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
        let mut folders = Folders { root: root.to_owned(), by_wd: HashMap::new() };
        watch(&mut folders, &fd)?;
        let dirty = Arc::new(Mutex::new(Dirty { live, ..Dirty::default() }));
        let fd = {
            let _entered = runtime.enter();
            register(fd)?
        };
        let reader = runtime.spawn(read_events(fd, folders, Arc::clone(&dirty))).abort_handle();
        Ok(Self { dirty, reader })
    }

    /// Sends every changed path from now on to `live` as well.
    pub(crate) fn set_live(&self, live: LiveSink) {
        self.dirty.lock().expect("watch state poisoned").live = Some(live);
    }

    /// Whether a change since the last [`take`](Self::take) waits for a full sync: a rescan is
    /// asked for, or a path changed that live sync did not take (paths it took are still
    /// handed to the next full sync, which only re-reads them).
    pub(crate) fn left_to_full_sync(&self) -> bool {
        let dirty = self.dirty.lock().expect("watch state poisoned");
        dirty.rescan || dirty.unhinted
    }

    /// Hands over what changed since the last call.
    pub(crate) fn take(&self) -> Changes {
        let mut dirty = self.dirty.lock().expect("watch state poisoned");
        let live = dirty.live.take();
        let taken = std::mem::take(&mut *dirty);
        dirty.live = live;
        if taken.rescan { Changes::Rescan } else { Changes::Paths(taken.paths) }
    }

    /// Hands over what changed up to *now*. Events reach the watcher a little after the writes
    /// that cause them, so a write made just before a sync could be missed; a barrier file is
    /// written into the root and its event awaited first (inotify reports events in order).
    /// If the barrier does not come back in time, the answer is "walk everything".
    pub(crate) fn take_settled(&self, files: &FileStore) -> Changes {
        let name = format!(".fs-{:016x}.tmp", rand::random::<u64>());
        let Ok(rel) = RelPath::parse(&name) else { return Changes::Rescan };
        {
            let mut dirty = self.dirty.lock().expect("watch state poisoned");
            dirty.barrier = Some(name);
            dirty.barrier_seen = false;
        }
        if files.write_deferred(&rel, b"").is_err() {
            return Changes::Rescan;
        }
        let _ = files.remove_if_unchanged(&rel, crate::fs::Digest::of(b""));
        let deadline = Instant::now() + BARRIER_TIMEOUT;
        loop {
            {
                let mut dirty = self.dirty.lock().expect("watch state poisoned");
                if dirty.barrier_seen {
                    dirty.barrier = None;
                    drop(dirty);
                    return self.take();
                }
            }
            if Instant::now() > deadline {
                self.dirty.lock().expect("watch state poisoned").barrier = None;
                return Changes::Rescan;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_paths_skip_the_marker_our_temp_files_and_the_barrier() {
        let mut d = Dirty::default();
        for rel in ["a.md", "d/b.md", MARKER_NAME, "d/.fs-0123456789abcdef.tmp"] {
            d.record(rel);
        }
        d.barrier = Some(".fs-00000000000000ff.tmp".into());
        d.record(".fs-00000000000000ff.tmp");
        assert!(d.barrier_seen && !d.rescan);
        let got: Vec<_> = d.paths.iter().map(RelPath::as_str).collect();
        assert_eq!(got, ["a.md", "d/b.md"]);
        assert!(d.unhinted, "no live sync took them");
    }

    /// Collects what `watch` reports until `done` holds of it (or fails after 5 s).
    async fn until(watch: &Watch, done: impl Fn(&BTreeSet<String>) -> bool) -> BTreeSet<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = BTreeSet::new();
        loop {
            match watch.take() {
                Changes::Rescan => panic!("no rescan expected; seen so far: {seen:?}"),
                Changes::Paths(p) => seen.extend(p.iter().map(|p| p.as_str().to_owned())),
            }
            if done(&seen) {
                return seen;
            }
            assert!(Instant::now() < deadline, "not reported in 5 s: {seen:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn a_real_watch_reports_writes_in_folders_old_and_new() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub/deep")).unwrap();
        let watch = Watch::start(dir.path(), None).unwrap();
        std::fs::write(dir.path().join("sub/deep/x.md"), "x").unwrap();
        // A new folder is reported itself, and from then on what is written in it.
        std::fs::create_dir(dir.path().join("new")).unwrap();
        until(&watch, |s| s.contains("sub/deep/x.md") && s.contains("new")).await;
        std::fs::write(dir.path().join("new/y.md"), "y").unwrap();
        until(&watch, |s| s.contains("new/y.md")).await;
        // Reading is no change.
        let _ = std::fs::read(dir.path().join("new/y.md")).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(watch.take(), Changes::Paths(BTreeSet::new()));
    }

    #[tokio::test]
    async fn a_watch_over_known_folders_lists_none_and_reports_as_a_walked_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("notes/d00")).unwrap();
        let watch = Watch::start_over(dir.path(), ["notes", "notes/d00"], None).unwrap();
        std::fs::write(dir.path().join("notes/d00/m.md"), "m").unwrap();
        std::fs::create_dir(dir.path().join("notes/d01")).unwrap();
        until(&watch, |s| s.contains("notes/d00/m.md") && s.contains("notes/d01")).await;
        std::fs::write(dir.path().join("notes/d01/n.md"), "n").unwrap();
        until(&watch, |s| s.contains("notes/d01/n.md")).await;
        // A folder named but gone is no error (its parent told, or will).
        assert!(Watch::start_over(dir.path(), ["gone"], None).is_ok());
    }

    #[tokio::test]
    async fn a_moved_folder_reports_under_its_new_name_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/inner")).unwrap();
        let watch = Watch::start(dir.path(), None).unwrap();
        std::fs::rename(dir.path().join("a"), dir.path().join("b")).unwrap();
        until(&watch, |s| s.contains("a") && s.contains("b")).await;
        std::fs::write(dir.path().join("b/inner/z.md"), "z").unwrap();
        let seen = until(&watch, |s| s.contains("b/inner/z.md")).await;
        assert!(!seen.iter().any(|p| p.starts_with("a/")), "{seen:?}");
        // Moved out of the tree, it is no longer watched.
        let outside = tempfile::tempdir().unwrap();
        std::fs::rename(dir.path().join("b"), outside.path().join("b")).unwrap();
        until(&watch, |s| s.contains("b")).await;
        std::fs::write(outside.path().join("b/inner/w.md"), "w").unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(watch.take(), Changes::Paths(BTreeSet::new()));
    }

    #[tokio::test]
    async fn the_root_going_asks_for_a_walk() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        std::fs::create_dir(&root).unwrap();
        let watch = Watch::start(&root, None).unwrap();
        std::fs::remove_dir(&root).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while watch.take() != Changes::Rescan {
            assert!(Instant::now() < deadline, "the root's removal was never reported");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[test]
    fn a_watch_needs_the_runtime_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Watch::start(dir.path(), None).is_err());
    }
}
