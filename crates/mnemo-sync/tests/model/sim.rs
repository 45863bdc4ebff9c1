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
    /// A live sync's content-free listing of one folder (`/`, `/d/`, …).
    ListFolder(String),
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
    /// For a live sync: the paths it reconciled (see [`Sim::sync_paths`]).
    pub(crate) reconciled: BTreeSet<String>,
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
    /// The engine listed (or downloaded) the whole store and sent no write since: a live sync
    /// then asks for the store's (conditional) listing instead of one listing per folder.
    pub(crate) listing_current: bool,
    /// Which memory each server path is (a memory deleted and created again is another one):
    /// its generation, from `next_gen`.
    pub(crate) gens: BTreeMap<String, u64>,
    pub(crate) next_gen: u64,
    /// The memory the engine knows at each path (from its last listing of the whole store, the
    /// folder listings and the answers to its uploads since): a live sync that needs no listing
    /// sends its updates to these.
    pub(crate) known: BTreeMap<String, u64>,
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
        Predicted { result, requests: self.made, reconciled: BTreeSet::new() }
    }
}

/// What the table of §6.7 decides for one path (the model's own transcription of the spec).
enum Act {
    Nothing,
    Create,
    /// Row 15, with the remote digest as the precondition and the baseline kept on failure.
    Update {
        fallback: Vec<u8>,
    },
    /// Row 4: remove the file if it still holds these bytes, else decide again.
    RemoveLocal {
        expect: Vec<u8>,
    },
    /// Fetch and write, if the file still holds `expect` (`None`: no file).
    Pull {
        expect: Option<Vec<u8>>,
    },
    /// Row 7 (the baseline is kept until the deletion lands).
    DeleteCandidate,
}

/// The decided work of one sync, carried out in the engine's order.
#[derive(Default)]
struct Work {
    next: BTreeMap<String, Vec<u8>>,
    removals: Vec<(String, Vec<u8>)>,
    uploads: Vec<Upload>,
    pulls: Vec<(String, Option<Vec<u8>>)>,
    candidates: Vec<String>,
}

/// The folder listing that shows `path`, as the engine's live sync asks for it.
pub(crate) fn folder_of(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((dir, _)) => format!("/{dir}/"),
        None => "/".to_owned(),
    }
}

/// A file to upload: create, or update with the remote digest as the precondition.
struct Upload {
    path: String,
    update: bool,
    /// The memory an update names (the one listed, or the one the engine knows).
    memory: Option<u64>,
    /// The baseline to keep if the upload does not land.
    fallback: Option<Vec<u8>>,
    /// The bytes a live sync read when it judged the file (text that changed): sent as read,
    /// whatever the file holds by then. `None`: the file as it is when sent.
    read: Option<Vec<u8>>,
}

impl Sim {
    /// The state right after a successful mount of a store holding `memories`.
    pub(crate) fn mounted(memories: &BTreeMap<String, String>) -> Self {
        let mut sim = Self { root_exists: true, marker_ok: true, listing_current: true, ..Self::default() };
        for (path, content) in memories {
            sim.local.insert(path.clone(), Entry::File(content.as_bytes().to_vec()));
            sim.state.baseline.insert(path.clone(), content.as_bytes().to_vec());
            sim.put(path, content);
        }
        sim.known = sim.gens.clone();
        sim.journal = sim.state.clone();
        sim
    }

    /// The server's memory at `path` now holds `content` (an update, or a new memory).
    pub(crate) fn put(&mut self, path: &str, content: &str) {
        if !self.gens.contains_key(path) {
            self.next_gen += 1;
            self.gens.insert(path.to_owned(), self.next_gen);
        }
        self.server.insert(path.to_owned(), content.to_owned());
    }

    /// The server's memory at `path` is deleted.
    pub(crate) fn gone(&mut self, path: &str) {
        self.server.remove(path);
        self.gens.remove(path);
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
        self.listing_current = false;
        self.known.clear();
        if lost(self.send(req, Key::ListFull)) {
            return Err(());
        }
        self.known = self.gens.clone();
        for (path, content) in self.server.clone() {
            if self.under_link_dir(&path) || self.local.contains_key(&path) {
                continue; // "failed to write memory": never enters the baseline
            }
            let bytes = content.into_bytes();
            self.local.insert(path.clone(), Entry::File(bytes.clone()));
            self.state.baseline.insert(path, bytes);
        }
        self.listing_current = true;
        self.journal = self.state.clone();
        Ok(())
    }

    /// One upload and its outcome (§6.7 "Upload"); the new baseline goes to `next`.
    fn upload(&mut self, u: &Upload, req: &mut Requests<'_>, next: &mut BTreeMap<String, Vec<u8>>, c: &mut Counts) {
        let bytes = match (&u.read, self.local.get(&u.path)) {
            (Some(read), _) => read.clone(),
            (None, Some(Entry::File(bytes))) => bytes.clone(),
            // Vanished since the scan: cannot happen here, nothing runs concurrently.
            (None, _) => unreachable!("uploading {} which is not a file", u.path),
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
            match self.send(req, Key::Update(path.clone())) {
                // The precondition (the listed digest) now fails: 409, the local edit loses;
                // unless the memory already holds exactly the bytes sent (200, API §5.9), or the
                // race rewrote the bytes it held (nothing changed).
                Some(FaultKind::RaceUpdate)
                    if text != RACED && self.server.get(&path).map(String::as_str) != Some(RACED) =>
                {
                    self.put(&path, RACED);
                    self.state.unsettled.insert(path, bytes);
                    keep_fallback(next);
                    c.conflicts += 1;
                    return;
                }
                // 404: created again at once, as a second request.
                Some(FaultKind::RaceDelete) => {
                    self.gone(&path);
                    self.create(&path, &text, req)
                }
                // (The race changed nothing, or left exactly the bytes sent.)
                Some(FaultKind::RaceUpdate) => self.apply(&path, &text, None),
                // What the update meets, where a live sync took the store for what both sides
                // last agreed on and the feed had not told it otherwise yet: the memory it names
                // may be gone (404: created again), or hold other bytes than its precondition
                // (409 unless they are the bytes sent: the local edit loses, as in a race).
                fault => {
                    let same = u.memory.is_some() && self.gens.get(&path) == u.memory.as_ref();
                    let held = self.server.get(&path).map(String::as_bytes);
                    let agrees = held == u.fallback.as_deref() || held == Some(text.as_bytes());
                    if same && agrees {
                        self.apply(&path, &text, fault)
                    } else if lost(fault) {
                        false // refused or never sent: nothing changed, and no answer came
                    } else if !same {
                        self.create(&path, &text, req)
                    } else {
                        self.state.unsettled.insert(path, bytes);
                        keep_fallback(next);
                        c.conflicts += 1;
                        return;
                    }
                }
            }
        } else {
            self.create(&path, &text, req)
        };
        if landed {
            // The answer names the memory: the engine knows it from now on.
            if let Some(g) = self.gens.get(&path) {
                self.known.insert(path.clone(), *g);
            }
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
        let fault = self.send(req, Key::Create(path.to_owned()));
        if self.server.contains_key(path) {
            // Another writer's memory at the path already (a live sync that had not heard of
            // it): 409 whatever else happens (a racer's create fails the same way), nothing
            // changes.
            return false;
        }
        match fault {
            Some(FaultKind::RaceUpdate) => {
                self.put(path, RACED);
                false
            }
            Some(FaultKind::RaceDelete) => self.apply(path, text, None),
            fault => self.apply(path, text, fault),
        }
    }

    /// An upload that met no race: whether it landed with an answer.
    fn apply(&mut self, path: &str, text: &str, fault: Option<FaultKind>) -> bool {
        if fault != Some(FaultKind::LoseRequest) {
            self.put(path, text);
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

    /// Sends one request: the fault it meets, after an edit in flight it carries has landed
    /// (`FaultKind::RaceLocal`: the request itself goes through).
    fn send(&mut self, req: &mut Requests<'_>, key: Key) -> Option<FaultKind> {
        if matches!(key, Key::Create(_) | Key::Update(_) | Key::Delete(_)) {
            self.listing_current = false;
        }
        let fault = req.send(key.clone());
        let Some(FaultKind::RaceLocal(target, content)) = fault else {
            return fault;
        };
        let path = match key {
            Key::Get(path) => path,
            _ => target.to_owned(),
        };
        if self.root_exists && !self.blocked(&path) {
            self.local.insert(path, Entry::File(content.as_bytes().to_vec()));
        }
        None
    }

    /// The bytes of the regular file at `path` now (`None`: none, or behind a symlink).
    fn file(&self, path: &str) -> Option<Vec<u8>> {
        match self.local.get(path) {
            Some(Entry::File(bytes)) if !self.blocked(path) => Some(bytes.clone()),
            _ => None,
        }
    }

    /// The table of §6.7 for one path: the action, and the baseline to keep in `next` when the
    /// action does not produce one.
    fn decide(
        &self,
        path: &str,
        r: Option<Vec<u8>>,
        l: Option<Vec<u8>>,
        b: Option<Vec<u8>>,
        next: &mut BTreeMap<String, Vec<u8>>,
        c: &mut Counts,
    ) -> Act {
        let refused = |sha: &Vec<u8>| self.state.refused.get(path) == Some(sha);
        match (r, l, b) {
            // Row 1.
            (None, None, _) => Act::Nothing,
            // Rows 2 and 5 (refused: keep nothing).
            (None, Some(l), None) => {
                if refused(&l) {
                    Act::Nothing
                } else {
                    Act::Create
                }
            }
            // Row 4: deleted remotely, unchanged here.
            (None, Some(l), Some(b)) if l == b => Act::RemoveLocal { expect: l },
            // Row 5.
            (None, Some(l), Some(_)) => {
                if refused(&l) {
                    Act::Nothing
                } else {
                    Act::Create
                }
            }
            // Row 10.
            (Some(_), None, None) => Act::Pull { expect: None },
            (Some(r), None, Some(b)) => {
                next.insert(path.to_owned(), b.clone());
                if r == b {
                    Act::DeleteCandidate // row 7
                } else {
                    Act::Pull { expect: None } // row 9
                }
            }
            (Some(r), Some(l), b) => {
                if Some(&r) != b.as_ref() {
                    if l == r {
                        next.insert(path.to_owned(), r); // row 11
                        Act::Nothing
                    } else {
                        if Some(&l) != b.as_ref() {
                            c.conflicts += 1; // row 13
                        }
                        if let Some(b) = b {
                            next.insert(path.to_owned(), b);
                        }
                        Act::Pull { expect: Some(l) } // rows 12–13
                    }
                } else if l == r || refused(&l) {
                    next.insert(path.to_owned(), r); // row 14, or a refused row 15
                    Act::Nothing
                } else {
                    Act::Update { fallback: r } // row 15
                }
            }
        }
    }

    /// Files a decision in `work`.
    fn file_act(work: &mut Work, path: &str, act: Act) {
        match act {
            Act::Nothing => {}
            Act::Create | Act::Update { .. } => {
                let (update, fallback) = match act {
                    Act::Update { fallback } => (true, Some(fallback)),
                    _ => (false, None),
                };
                // In path order (a removal decided again may add one after later paths).
                let at = work.uploads.partition_point(|u| u.path.as_str() < path);
                work.uploads.insert(at, Upload { path: path.to_owned(), update, memory: None, fallback, read: None });
            }
            Act::RemoveLocal { expect } => work.removals.push((path.to_owned(), expect)),
            Act::Pull { expect } => work.pulls.push((path.to_owned(), expect)),
            Act::DeleteCandidate => work.candidates.push(path.to_owned()),
        }
    }

    /// The local removals (row 4): a file that no longer holds what was decided on is decided
    /// again with its fresh bytes; one that vanished keeps no baseline.
    fn remove_locals(&mut self, work: &mut Work, c: &mut Counts) {
        for (path, expect) in std::mem::take(&mut work.removals) {
            let mut expect = expect;
            loop {
                match self.file(&path) {
                    Some(now) if now == expect => {
                        self.local.remove(&path);
                        c.removed_locally += 1;
                    }
                    Some(fresh) => {
                        let b = self.state.baseline.get(&path).cloned();
                        let r = self.server.get(&path).map(|s| s.as_bytes().to_vec());
                        match self.decide(&path, r, Some(fresh), b, &mut work.next, c) {
                            Act::RemoveLocal { expect: again } => {
                                expect = again;
                                continue;
                            }
                            act => Self::file_act(work, &path, act),
                        }
                    }
                    None => {}
                }
                break;
            }
        }
    }

    /// Step 7, the content pass: a write through a symlink fails, and one over a file that no
    /// longer holds what was decided on is declined (pulled next time).
    fn pull_all(&mut self, pulls: Vec<(String, Option<Vec<u8>>)>, req: &mut Requests<'_>, c: &mut Counts) {
        for (path, expect) in pulls {
            match self.send(req, Key::Get(path.clone())) {
                None => {}
                // The fetch brings the other writer's version.
                Some(FaultKind::RaceUpdate) => {
                    self.put(&path, RACED);
                }
                // 404: deleted after the listing, ignored.
                Some(FaultKind::RaceDelete) => {
                    self.gone(&path);
                    continue;
                }
                Some(FaultKind::LoseRequest | FaultKind::LoseResponse) => continue,
                Some(FaultKind::RaceLocal(..)) => unreachable!("`send` lets an edit in flight through"),
            }
            if self.blocked(&path) || self.file(&path) != expect {
                continue;
            }
            let bytes = self.server[&path].as_bytes().to_vec();
            self.local.insert(path.clone(), Entry::File(bytes.clone()));
            self.state.baseline.insert(path, bytes);
            c.pulled += 1;
        }
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
        if lost(self.send(req, Key::ListBasic)) {
            return Err(());
        }
        self.listing_current = true;
        self.known = self.gens.clone();
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
        let mut work = Work::default();
        for path in paths {
            let r = remote.get(&path).map(|s| s.as_bytes().to_vec());
            let l = local.get(&path).cloned();
            let b = self.state.baseline.get(&path).cloned();
            let act = self.decide(&path, r, l, b, &mut work.next, &mut c);
            Self::file_act(&mut work, &path, act);
        }
        self.remove_locals(&mut work, &mut c);

        for mut u in std::mem::take(&mut work.uploads) {
            u.memory = self.gens.get(&u.path).copied();
            self.upload(&u, req, &mut work.next, &mut c);
        }

        // §6.9 with a zero window: the re-check meets the symlink (not OK) or the absence.
        let mut next = work.next;
        for path in work.candidates {
            if self.blocked(&path) {
                continue;
            }
            match self.send(req, Key::Delete(path.clone())) {
                // Deleted, or already gone (404): done.
                None | Some(FaultKind::RaceDelete) => {
                    self.gone(&path);
                    next.remove(&path);
                    c.deleted_remotely += 1;
                }
                // The delete is not known to have happened: a failure of this sync (the
                // baseline keeps the file, so the next sync tries again or restores it).
                Some(FaultKind::LoseResponse) => {
                    self.gone(&path);
                    c.failed += 1;
                }
                Some(FaultKind::LoseRequest) => c.failed += 1,
                // The expected digest no longer matches (409): keep the baseline; the next sync
                // restores the remote version (row 9).
                Some(FaultKind::RaceUpdate) if self.server.get(&path).map(String::as_str) != Some(RACED) => {
                    self.put(&path, RACED);
                }
                Some(FaultKind::RaceUpdate) => {
                    self.gone(&path);
                    next.remove(&path);
                    c.deleted_remotely += 1;
                }
                Some(FaultKind::RaceLocal(..)) => unreachable!("`send` lets an edit in flight through"),
            }
        }
        self.state.baseline = next;
        self.pull_all(work.pulls, req, &mut c);
        self.journal = self.state.clone();
        Ok(c)
    }

    /// `StoreSync::sync_paths` (live sync) of `paths` (path → whether the store's feed named it),
    /// as the module docs of `sync/live.rs` put it: the marker check; each path hashed now (a
    /// directory stands for every file below it, as the watcher flags them); a path only the
    /// watcher flagged whose file is gone or still holds the baseline is dropped; if any path is
    /// left, the listing (the whole store's when the engine listed it last and has sent no write
    /// since, and no path was named by the feed; else one content-free listing per folder), the
    /// unsettled uploads of those paths settled,
    /// and §6.7 for each of them — on the bytes hashed before the listings — with the removal,
    /// upload and content passes of a full sync, except that a row-7 candidate (a local
    /// deletion) keeps its baseline and waits for a full sync.
    ///
    /// A directory path must be flagged local only: whether a directory the test emptied still
    /// stands on disk is not modelled, and only a remote-flagged absent path makes a request.
    pub(crate) fn sync_paths(
        &mut self,
        paths: &BTreeMap<String, bool>,
        faults: &BTreeMap<Key, FaultKind>,
    ) -> Predicted {
        let mut req = Requests { faults, made: Vec::new() };
        let mut reconciled = BTreeSet::new();
        let result = self.sync_paths_inner(paths, &mut req, &mut reconciled);
        let mut predicted = req.finish(result);
        predicted.reconciled = reconciled;
        predicted
    }

    fn sync_paths_inner(
        &mut self,
        paths: &BTreeMap<String, bool>,
        req: &mut Requests<'_>,
        reconciled: &mut BTreeSet<String>,
    ) -> Result<Counts, ()> {
        let mut c = Counts::default();
        if paths.is_empty() {
            return Ok(c);
        }
        if !self.marker_ok {
            c.skipped = true;
            return Ok(c);
        }
        let mut hashed: Vec<(String, bool, Option<Vec<u8>>)> = Vec::new();
        // The changed text files read here, sent as read (not those a new folder's walk finds).
        let mut read: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut dirs = Vec::new();
        for (path, &remote) in paths {
            let below = format!("{path}/");
            if self.blocked(path) {
                // A symlink (or a path behind one) is left to the full sync.
            } else if self.local.keys().any(|k| k.starts_with(&below)) {
                dirs.push(below);
            } else {
                let bytes = self.file(path);
                if let Some(b) = &bytes
                    && Some(b) != self.state.baseline.get(path)
                    && std::str::from_utf8(b).is_ok()
                {
                    read.insert(path.clone(), b.clone());
                }
                hashed.push((path.clone(), remote, bytes));
            }
        }
        if !dirs.is_empty() {
            let below = self.scan().into_iter().filter(|(p, _)| dirs.iter().any(|d| p.starts_with(d.as_str())));
            hashed.extend(below.map(|(p, bytes)| (p, false, Some(bytes))));
        }
        let mut local: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
        let mut store_changed = false;
        for (path, remote, bytes) in hashed {
            let unchanged = bytes.is_none() || bytes.as_ref() == self.state.baseline.get(&path);
            if !remote && unchanged {
                continue;
            }
            store_changed |= remote;
            local.insert(path, bytes);
        }
        if local.is_empty() {
            return Ok(c);
        }
        // No path named by the feed, and the engine can tell each path's memory as both sides
        // last agreed on it (a baseline and a memory it knows, or neither) with no upload of
        // unknown outcome: no listing at all. The paths whose store moved meanwhile (the feed
        // had not told yet) are not reconciled: their uploads are refused, and a full sync
        // settles them.
        let agreed = !store_changed
            && local.keys().all(|p| {
                !self.state.unsettled.contains_key(p)
                    && self.state.baseline.contains_key(p) == self.known.contains_key(p)
            });
        let mut moved = BTreeSet::new();
        let remote = if agreed {
            let mut remote = BTreeMap::new();
            for path in local.keys() {
                let baseline = self.state.baseline.get(path).map(|b| String::from_utf8(b.clone()).expect("text"));
                if self.server.get(path) != baseline.as_ref() || self.gens.get(path) != self.known.get(path) {
                    moved.insert(path.clone());
                }
                if let Some(b) = baseline {
                    remote.insert(path.clone(), b);
                }
            }
            remote
        } else {
            self.list_for_live(&local, store_changed, req)?
        };
        self.apply_live(local, &remote, agreed, &moved, &read, req, reconciled, c)
    }

    /// The listing of a live sync that needs one: the whole store's conditional one when the
    /// engine listed it last and sent no write since, else one per folder.
    fn list_for_live(
        &mut self,
        local: &BTreeMap<String, Option<Vec<u8>>>,
        store_changed: bool,
        req: &mut Requests<'_>,
    ) -> Result<BTreeMap<String, String>, ()> {
        if self.listing_current && !store_changed {
            // No write sent and no change heard of since the last listing of the whole store:
            // its conditional listing.
            if lost(self.send(req, Key::ListBasic)) {
                return Err(());
            }
            self.listing_current = true;
            self.known = self.gens.clone();
        } else {
            self.listing_current = false;
            let folders: BTreeSet<String> = local.keys().map(|p| folder_of(p)).collect();
            for folder in folders {
                if lost(self.send(req, Key::ListFolder(folder))) {
                    return Err(());
                }
            }
            for path in local.keys() {
                if let Some(g) = self.gens.get(path) {
                    self.known.insert(path.clone(), *g);
                }
            }
        }
        Ok(self.server.clone())
    }

    /// The rest of a live sync, on `remote` (listed, or as agreed).
    #[allow(clippy::too_many_arguments)]
    fn apply_live(
        &mut self,
        local: BTreeMap<String, Option<Vec<u8>>>,
        remote: &BTreeMap<String, String>,
        agreed: bool,
        moved: &BTreeSet<String>,
        read: &BTreeMap<String, Vec<u8>>,
        req: &mut Requests<'_>,
        reconciled: &mut BTreeSet<String>,
        mut c: Counts,
    ) -> Result<Counts, ()> {
        for path in local.keys() {
            if let Some(sent) = self.state.unsettled.remove(path)
                && remote.get(path).map(String::as_bytes) == Some(&sent[..])
            {
                self.state.baseline.insert(path.clone(), sent);
            }
        }
        let mut work = Work { next: self.state.baseline.clone(), ..Work::default() };
        for (path, l) in &local {
            work.next.remove(path);
            let r = remote.get(path).map(|s| s.as_bytes().to_vec());
            let b = self.state.baseline.get(path).cloned();
            let act = self.decide(path, r, l.clone(), b, &mut work.next, &mut c);
            Self::file_act(&mut work, path, act);
        }
        reconciled.extend(local.into_keys().filter(|p| !moved.contains(p)));
        self.remove_locals(&mut work, &mut c);
        for mut u in std::mem::take(&mut work.uploads) {
            // Live sync sends a changed text file as it read it above.
            u.read = read.get(&u.path).cloned();
            u.memory = if agreed { self.known.get(&u.path) } else { self.gens.get(&u.path) }.copied();
            self.upload(&u, req, &mut work.next, &mut c);
        }
        // Row-7 candidates keep the baseline `decide` put in `next` and wait for a full sync.
        self.state.baseline = work.next;
        self.pull_all(work.pulls, req, &mut c);
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
        if lost(self.send(req, Key::ListBasic)) {
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
                Some(_) => {
                    let memory = self.gens.get(&path).copied();
                    uploads.push(Upload { path, update: true, memory, fallback: base, read: None })
                }
                None => uploads.push(Upload { path, update: false, memory: None, fallback: base, read: None }),
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
        self.listing_current = false;
        self.known.clear();
    }
}
