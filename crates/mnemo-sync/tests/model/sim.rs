//! The executable model: `worker-behaviour.md` §6.6–§6.10 applied to an abstract folder and an
//! abstract store, step by step, with the outcome of every engine request taken from the fault
//! layer's log (which request a fault hit depends on the engine's concurrency; what it does to
//! that request does not).
//!
//! The model knows nothing of the engine's code. Where the spec leaves a choice open (what a
//! symlink at a memory's path does to a write or a deletion re-check) it encodes the choice the
//! engine documents in `fs/`: a symlink is never followed, so a write *through* it fails and a
//! re-check that meets one is "not OK" (§6.9 step 4); a recovery, like a pull, never writes
//! over anything standing at the path (a symlink there keeps the memory out of the baseline).

use std::collections::{BTreeMap, BTreeSet};

use crate::harness::{Entry, FaultKind, RACED};

/// The folder that may be a symlink to a folder outside (see `Op::LinkDir`).
pub(crate) const LINK_DIR: &str = "ln";

/// One engine request, by what it is about (memory ids resolved to paths).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Key {
    ListBasic,
    ListFull,
    Get(String),
    Create(String),
    Update(String),
    Delete(String),
    Other(String),
}

/// The engine state the spec defines (pending deletes do not matter with a zero window, and the
/// delete cap of at least 8 is never reached by this alphabet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EngineState {
    pub(crate) baseline: BTreeMap<String, Vec<u8>>,
    pub(crate) unsettled: BTreeMap<String, Vec<u8>>,
    pub(crate) refused: BTreeMap<String, Vec<u8>>,
}

/// The report fields the model predicts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) pulled: usize,
    pub(crate) uploaded: usize,
    pub(crate) removed_locally: usize,
    pub(crate) deleted_remotely: usize,
    pub(crate) conflicts: usize,
    pub(crate) refused: usize,
    pub(crate) failed: usize,
    pub(crate) recovered: bool,
    pub(crate) skipped: bool,
}

impl From<&mnemo_sync::SyncReport> for Counts {
    fn from(r: &mnemo_sync::SyncReport) -> Self {
        Self {
            pulled: r.pulled,
            uploaded: r.uploaded,
            removed_locally: r.removed_locally,
            deleted_remotely: r.deleted_remotely,
            conflicts: r.conflicts,
            refused: r.refused,
            failed: r.failed,
            recovered: r.recovered,
            skipped: r.skipped,
        }
    }
}

/// What the model expects of one engine call.
#[derive(Debug)]
pub(crate) struct Predicted {
    /// `Err(())`: the call as a whole fails.
    pub(crate) result: Result<Counts, ()>,
    /// Every request the engine should make (sorted).
    pub(crate) requests: Vec<Key>,
}

/// Both sides and the engine's memory of them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sim {
    /// Path (no leading `/`) → content.
    pub(crate) server: BTreeMap<String, String>,
    /// The folder: files and symlinks by path (folders implied).
    pub(crate) local: BTreeMap<String, Entry>,
    pub(crate) root_exists: bool,
    /// The marker names this store (false: missing or foreign; always false without a root).
    pub(crate) marker_ok: bool,
    pub(crate) state: EngineState,
    /// The state as of the last journal write.
    pub(crate) journal: EngineState,
}

/// Whether a fault loses the request (a race on a listing does nothing: it targets no memory).
fn lost(fault: Option<FaultKind>) -> bool {
    matches!(fault, Some(FaultKind::LoseRequest | FaultKind::LoseResponse))
}

/// Requests made so far, and the faults they met.
struct Requests<'a> {
    faults: &'a BTreeMap<Key, FaultKind>,
    made: Vec<Key>,
}

impl Requests<'_> {
    fn send(&mut self, key: Key) -> Option<FaultKind> {
        let fault = self.faults.get(&key).copied();
        self.made.push(key);
        fault
    }

    fn finish(mut self, result: Result<Counts, ()>) -> Predicted {
        self.made.sort();
        Predicted { result, requests: self.made }
    }
}

/// A file to upload: create, or update with the remote digest as the precondition.
struct Upload {
    path: String,
    update: bool,
    /// The baseline to keep if the upload does not land.
    fallback: Option<Vec<u8>>,
}

impl Sim {
    /// The state right after a successful mount of a store holding `memories`.
    pub(crate) fn mounted(memories: &BTreeMap<String, String>) -> Self {
        let mut sim = Self { server: memories.clone(), root_exists: true, marker_ok: true, ..Self::default() };
        for (path, content) in memories {
            sim.local.insert(path.clone(), Entry::File(content.as_bytes().to_vec()));
            sim.state.baseline.insert(path.clone(), content.as_bytes().to_vec());
        }
        sim.journal = sim.state.clone();
        sim
    }

    /// Whether the engine cannot reach a regular file at `path` without crossing a symlink.
    pub(crate) fn blocked(&self, path: &str) -> bool {
        self.local.get(path) == Some(&Entry::Link) || self.under_link_dir(path)
    }

    fn under_link_dir(&self, path: &str) -> bool {
        path.strip_prefix(LINK_DIR).is_some_and(|rest| rest.starts_with('/'))
            && self.local.get(LINK_DIR) == Some(&Entry::Link)
    }

    /// What a scan finds: the regular files (symlinks are skipped, linked folders not entered).
    fn scan(&self) -> BTreeMap<String, Vec<u8>> {
        self.local
            .iter()
            .filter_map(|(path, entry)| match entry {
                Entry::File(bytes) if !self.blocked(path) => Some((path.clone(), bytes.clone())),
                _ => None,
            })
            .collect()
    }

    /// §6.7 "settle": adopt unsettled sends the listing shows landed, then forget them all.
    fn settle(&mut self, remote: &BTreeMap<String, String>) {
        for (path, sent) in std::mem::take(&mut self.state.unsettled) {
            if remote.get(&path).map(String::as_bytes) == Some(&sent[..]) {
                self.state.baseline.insert(path, sent);
            }
        }
    }

    /// §6.8: re-create the root, reset the state, stamp and pull everything (no deletes, no
    /// uploads). The root exists from here on even if the listing fails.
    fn recover(&mut self, req: &mut Requests<'_>) -> Result<(), ()> {
        self.root_exists = true;
        // The reset is journaled before anything is written, so a crash from here on resumes
        // knowing nothing (a recovery must never turn into deletions).
        self.state = EngineState::default();
        self.journal = self.state.clone();
        self.marker_ok = true; // stamped before the listing
        if lost(req.send(Key::ListFull)) {
            return Err(());
        }
        for (path, content) in self.server.clone() {
            if self.under_link_dir(&path) || self.local.contains_key(&path) {
                continue; // "failed to write memory": never enters the baseline
            }
            let bytes = content.into_bytes();
            self.local.insert(path.clone(), Entry::File(bytes.clone()));
            self.state.baseline.insert(path, bytes);
        }
        self.journal = self.state.clone();
        Ok(())
    }

    /// One upload and its outcome (§6.7 "Upload"); the new baseline goes to `next`.
    fn upload(&mut self, u: &Upload, req: &mut Requests<'_>, next: &mut BTreeMap<String, Vec<u8>>, c: &mut Counts) {
        let Some(Entry::File(bytes)) = self.local.get(&u.path).cloned() else {
            // Vanished since the scan: cannot happen here, nothing runs concurrently.
            unreachable!("uploading {} which is not a file", u.path);
        };
        let keep_fallback = |next: &mut BTreeMap<String, Vec<u8>>| {
            if let Some(b) = &u.fallback {
                next.insert(u.path.clone(), b.clone());
            }
        };
        let Ok(text) = String::from_utf8(bytes.clone()) else {
            self.state.refused.insert(u.path.clone(), bytes);
            keep_fallback(next);
            c.refused += 1;
            return;
        };
        let path = u.path.clone();
        let landed = if u.update {
            match req.send(Key::Update(path.clone())) {
                // The precondition (the listed digest) now fails: 409, the local edit loses;
                // unless the memory already holds exactly the bytes sent (200, API §5.9), or the
                // race rewrote the bytes it held (nothing changed).
                Some(FaultKind::RaceUpdate)
                    if text != RACED && self.server.get(&path).map(String::as_str) != Some(RACED) =>
                {
                    self.server.insert(path.clone(), RACED.to_owned());
                    self.state.unsettled.insert(path, bytes);
                    keep_fallback(next);
                    c.conflicts += 1;
                    return;
                }
                // 404: created again at once, as a second request.
                Some(FaultKind::RaceDelete) => {
                    self.server.remove(&path);
                    self.create(&path, &text, req)
                }
                // (The race changed nothing, or left exactly the bytes sent.)
                Some(FaultKind::RaceUpdate) => self.apply(&path, &text, None),
                fault => self.apply(&path, &text, fault),
            }
        } else {
            self.create(&path, &text, req)
        };
        if landed {
            self.state.refused.remove(&path);
            self.state.unsettled.remove(&path);
            next.insert(path, bytes);
            c.uploaded += 1;
        } else {
            // Failed: 502, or a create that met another writer's memory (409 path conflict).
            self.state.unsettled.insert(path, bytes);
            keep_fallback(next);
            c.failed += 1;
        }
    }

    /// A create request; whether it landed with an answer.
    fn create(&mut self, path: &str, text: &str, req: &mut Requests<'_>) -> bool {
        match req.send(Key::Create(path.to_owned())) {
            Some(FaultKind::RaceUpdate) => {
                self.server.insert(path.to_owned(), RACED.to_owned());
                false
            }
            Some(FaultKind::RaceDelete) => self.apply(path, text, None),
            fault => self.apply(path, text, fault),
        }
    }

    /// An upload that met no race: whether it landed with an answer.
    fn apply(&mut self, path: &str, text: &str, fault: Option<FaultKind>) -> bool {
        if fault != Some(FaultKind::LoseRequest) {
            self.server.insert(path.to_owned(), text.to_owned());
        }
        fault.is_none()
    }

    /// `StoreSync::sync(false)` (§6.6) with a zero deletion window.
    pub(crate) fn sync(&mut self, faults: &BTreeMap<Key, FaultKind>) -> Predicted {
        self.predict(faults, Self::sync_inner)
    }

    /// What one engine call, modelled by `op`, does and reports when `faults` strike its requests.
    fn predict(
        &mut self,
        faults: &BTreeMap<Key, FaultKind>,
        op: fn(&mut Self, &mut Requests<'_>) -> Result<Counts, ()>,
    ) -> Predicted {
        let mut req = Requests { faults, made: Vec::new() };
        let result = op(self, &mut req);
        req.finish(result)
    }

    fn sync_inner(&mut self, req: &mut Requests<'_>) -> Result<Counts, ()> {
        let mut c = Counts::default();
        let local = if self.root_exists { self.scan() } else { BTreeMap::new() };
        if !self.marker_ok {
            // Step 2: with files left, leave the folder as found; else re-download.
            if local.is_empty() {
                self.recover(req)?;
                c.recovered = true;
            } else {
                c.skipped = true;
            }
            return Ok(c);
        }
        if lost(req.send(Key::ListBasic)) {
            return Err(());
        }
        let remote = self.server.clone();
        self.settle(&remote);
        // Step 5: the wipe check.
        if local.is_empty() && self.state.baseline.len() > 1 {
            self.recover(req)?;
            c.recovered = true;
            return Ok(c);
        }

        let paths: BTreeSet<String> =
            remote.keys().chain(local.keys()).chain(self.state.baseline.keys()).cloned().collect();
        let mut next: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut uploads = Vec::new();
        let mut pulls = Vec::new();
        let mut candidates = Vec::new();
        for path in paths {
            let r = remote.get(&path).map(|s| s.as_bytes().to_vec());
            let l = local.get(&path).cloned();
            let b = self.state.baseline.get(&path).cloned();
            let refused = |sha: &Vec<u8>| self.state.refused.get(&path) == Some(sha);
            match (r, l, b) {
                // Row 1.
                (None, None, _) => {}
                // Row 2 (refused: keep nothing).
                (None, Some(l), None) => {
                    if !refused(&l) {
                        uploads.push(Upload { path, update: false, fallback: None });
                    }
                }
                // Row 4: deleted remotely, unchanged here.
                (None, Some(l), Some(b)) if l == b => {
                    self.local.remove(&path);
                    c.removed_locally += 1;
                }
                // Row 5.
                (None, Some(l), Some(_)) => {
                    if !refused(&l) {
                        uploads.push(Upload { path, update: false, fallback: None });
                    }
                }
                // Row 10.
                (Some(_), None, None) => pulls.push(path),
                (Some(r), None, Some(b)) => {
                    next.insert(path.clone(), b.clone());
                    if r == b {
                        candidates.push(path); // row 7
                    } else {
                        pulls.push(path); // row 9
                    }
                }
                (Some(r), Some(l), b) => {
                    if Some(&r) != b.as_ref() {
                        if l == r {
                            next.insert(path, r); // row 11
                        } else {
                            if Some(&l) != b.as_ref() {
                                c.conflicts += 1; // row 13
                            }
                            if let Some(b) = b {
                                next.insert(path.clone(), b);
                            }
                            pulls.push(path); // rows 12–13
                        }
                    } else if l == r || refused(&l) {
                        next.insert(path, r); // row 14, or a refused row 15
                    } else {
                        uploads.push(Upload {
                            path,
                            update: true,
                            fallback: Some(r), // row 15
                        });
                    }
                }
            }
        }

        for u in uploads {
            self.upload(&u, req, &mut next, &mut c);
        }

        // §6.9 with a zero window: the re-check meets the symlink (not OK) or the absence.
        for path in candidates {
            if self.blocked(&path) {
                continue;
            }
            match req.send(Key::Delete(path.clone())) {
                // Deleted, or already gone (404): done.
                None | Some(FaultKind::RaceDelete) => {
                    self.server.remove(&path);
                    next.remove(&path);
                    c.deleted_remotely += 1;
                }
                Some(FaultKind::LoseResponse) => {
                    self.server.remove(&path);
                }
                Some(FaultKind::LoseRequest) => {}
                // The expected digest no longer matches (409): keep the baseline; the next sync
                // restores the remote version (row 9).
                Some(FaultKind::RaceUpdate) if self.server.get(&path).map(String::as_str) != Some(RACED) => {
                    self.server.insert(path, RACED.to_owned());
                }
                Some(FaultKind::RaceUpdate) => {
                    self.server.remove(&path);
                    next.remove(&path);
                    c.deleted_remotely += 1;
                }
            }
        }
        self.state.baseline = next;

        // Step 7: the content pass; a write through a symlink fails.
        for path in pulls {
            match req.send(Key::Get(path.clone())) {
                None => {}
                // The fetch brings the other writer's version.
                Some(FaultKind::RaceUpdate) => {
                    self.server.insert(path.clone(), RACED.to_owned());
                }
                // 404: deleted after the listing, ignored.
                Some(FaultKind::RaceDelete) => {
                    self.server.remove(&path);
                    continue;
                }
                Some(FaultKind::LoseRequest | FaultKind::LoseResponse) => continue,
            }
            if self.blocked(&path) {
                continue;
            }
            let bytes = self.server[&path].as_bytes().to_vec();
            self.local.insert(path.clone(), Entry::File(bytes.clone()));
            self.state.baseline.insert(path, bytes);
            c.pulled += 1;
        }
        self.journal = self.state.clone();
        Ok(c)
    }

    /// `StoreSync::flush()` (§6.10).
    pub(crate) fn flush(&mut self, faults: &BTreeMap<Key, FaultKind>) -> Predicted {
        self.predict(faults, Self::flush_inner)
    }

    fn flush_inner(&mut self, req: &mut Requests<'_>) -> Result<Counts, ()> {
        let mut c = Counts::default();
        if !self.marker_ok {
            c.skipped = true;
            return Ok(c);
        }
        let dirty: Vec<(String, Vec<u8>)> = self
            .scan()
            .into_iter()
            .filter(|(path, l)| {
                let changed = self.state.baseline.get(path) != Some(l) || self.state.unsettled.contains_key(path);
                changed && self.state.refused.get(path) != Some(l)
            })
            .collect();
        if dirty.is_empty() {
            return Ok(c);
        }
        if lost(req.send(Key::ListBasic)) {
            return Err(());
        }
        let remote = self.server.clone();
        self.settle(&remote);
        let mut uploads = Vec::new();
        for (path, l) in dirty {
            let base = self.state.baseline.get(&path).cloned();
            if base.as_ref() == Some(&l) {
                continue;
            }
            match remote.get(&path).map(|s| s.as_bytes().to_vec()) {
                Some(r) if r == l => {
                    self.state.baseline.insert(path, l);
                }
                Some(r) if Some(&r) != base.as_ref() => c.conflicts += 1,
                Some(_) => uploads.push(Upload { path, update: true, fallback: base }),
                None => uploads.push(Upload { path, update: false, fallback: base }),
            }
        }
        let mut next = self.state.baseline.clone();
        for u in uploads {
            next.remove(&u.path);
            self.upload(&u, req, &mut next, &mut c);
        }
        self.state.baseline = next;
        self.journal = self.state.clone();
        Ok(c)
    }

    /// The engine died without a teardown and a new one resumed from the journal.
    pub(crate) fn crash_and_resume(&mut self) {
        self.state = self.journal.clone();
    }
}
