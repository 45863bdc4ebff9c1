//! Change hints from the filesystem, so a sync with no local change neither walks nor hashes
//! the tree.
//!
//! The watcher (inotify through `notify`) only ever *narrows* what a sync re-reads: it records
//! which paths changed. Anything it cannot vouch for — a queue overflow, a watcher error, an
//! event on the root or on a directory — asks for a full walk, and the engine walks the whole
//! tree anyway every few syncs as a safety net.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use notify::event::{AccessKind, AccessMode, EventKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};

use std::time::{Duration, Instant};

use crate::fs::{FileStore, MARKER_NAME, RelPath};

/// How long a sync waits for the watcher to catch up before walking instead.
const BARRIER_TIMEOUT: Duration = Duration::from_millis(250);

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
    fn record(&mut self, root: &Path, event: notify::Result<notify::Event>) {
        let event = match event {
            Ok(event) if !event.need_rescan() => event,
            _ => {
                self.rescan = true;
                return;
            }
        };
        // Opening and reading (our own scans included) change nothing; a close after writing does.
        if let EventKind::Access(kind) = event.kind
            && kind != AccessKind::Close(AccessMode::Write)
        {
            return;
        }
        for path in &event.paths {
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            if rel.as_os_str().is_empty() {
                // The root itself changed (removed, renamed, re-created).
                self.rescan = true;
                continue;
            }
            if rel == Path::new(MARKER_NAME) {
                continue; // checked on every sync anyway
            }
            if let Some(name) = rel.to_str() {
                if self.barrier.as_deref() == Some(name) {
                    self.barrier_seen = true;
                    continue;
                }
                if is_temp_name(name.rsplit('/').next().unwrap_or(name)) {
                    continue;
                }
            }
            // Names a scan skips anyway (not UTF-8, …) are not worth a walk.
            if let Some(Ok(rel)) = rel.to_str().map(RelPath::parse) {
                // Once live sync has stopped, its sink records nothing.
                let hinted = self.live.as_ref().is_some_and(|live| live.saw(rel.clone()));
                self.unhinted |= !hinted;
                self.paths.insert(rel);
            }
        }
    }
}

/// A recursive watch on one store folder.
pub(crate) struct Watch {
    _watcher: RecommendedWatcher,
    dirty: Arc<Mutex<Dirty>>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").finish_non_exhaustive()
    }
}

impl Watch {
    /// Starts watching `root` and everything below it; changed paths also go to `live`.
    pub(crate) fn start(root: &Path, live: Option<LiveSink>) -> notify::Result<Self> {
        let dirty = Arc::new(Mutex::new(Dirty { live, ..Dirty::default() }));
        let sink = Arc::clone(&dirty);
        let base: PathBuf = root.to_owned();
        let mut watcher = notify::recommended_watcher(move |event| {
            sink.lock().expect("watch state poisoned").record(&base, event);
        })?;
        watcher.watch(root, RecursiveMode::Recursive)?;
        Ok(Self { _watcher: watcher, dirty })
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
    use notify::event::{CreateKind, Flag};

    fn event(paths: &[&str]) -> notify::Result<notify::Event> {
        let mut e = notify::Event::new(EventKind::Create(CreateKind::File));
        for p in paths {
            e = e.add_path(PathBuf::from(p));
        }
        Ok(e)
    }

    #[test]
    fn events_become_relative_paths_and_anything_doubtful_a_rescan() {
        let root = Path::new("/mnt/memory/prefs");
        let mut d = Dirty::default();
        d.record(root, event(&["/mnt/memory/prefs/a.md", "/mnt/memory/prefs/d/b.md", "/elsewhere/x"]));
        d.record(root, event(&["/mnt/memory/prefs/.anthropic-memory-store"]));
        assert!(!d.rescan);
        let got: Vec<_> = d.paths.iter().map(RelPath::as_str).collect();
        assert_eq!(got, ["a.md", "d/b.md"]);

        let mut overflow = Dirty::default();
        overflow.record(root, Ok(notify::Event::new(EventKind::Other).set_flag(Flag::Rescan)));
        assert!(overflow.rescan);
        let mut failed = Dirty::default();
        failed.record(root, Err(notify::Error::generic("boom")));
        assert!(failed.rescan);
        let mut on_root = Dirty::default();
        on_root.record(root, event(&["/mnt/memory/prefs"]));
        assert!(on_root.rescan);

        let mut reads = Dirty::default();
        let open = notify::Event::new(EventKind::Access(AccessKind::Open(AccessMode::Read)))
            .add_path(PathBuf::from("/mnt/memory/prefs/d"));
        reads.record(root, Ok(open));
        assert!(reads.paths.is_empty() && !reads.rescan, "reads are not changes");
    }

    #[test]
    fn a_real_watch_reports_a_written_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let watch = Watch::start(dir.path(), None).unwrap();
        std::fs::write(dir.path().join("sub/x.md"), "x").unwrap();
        // A new directory is reported itself (files created in it before its watch exists may
        // not be, which is why the engine walks when it sees a directory).
        std::fs::create_dir(dir.path().join("new")).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut seen = BTreeSet::new();
        while std::time::Instant::now() < deadline {
            match watch.take() {
                Changes::Rescan => panic!("no rescan expected"),
                Changes::Paths(p) => seen.extend(p),
            }
            if seen.iter().any(|p| p.as_str() == "sub/x.md") && seen.iter().any(|p| p.as_str() == "new") {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("the write was never reported: {seen:?}");
    }
}
