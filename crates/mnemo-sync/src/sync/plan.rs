//! The reconciliation rules as one pure function: no I/O, no engine state.
//!
//! For each path the engine gathers what the server lists (**R**), what the file holds now
//! (**L**), what both sides agreed on at the last successful sync (**B**, the baseline), whether
//! the store is read-only and which local content the server already refused. [`decide`] turns
//! that into one [`Decision`]: what to do, which warning to log, and the baseline to keep when
//! the action does not produce a new one. An action that acts on the listed memory (update,
//! pull, delete) carries it, so the engine performs the I/O afterwards without looking anything
//! up again.
//!
//! The row numbers refer to the table in `worker-behaviour.md` §6.7.

use crate::fs::Digest;

/// What the rules need of a listed memory: its digest. The engine passes its listing entries,
/// so a decision hands back the very memory to update, pull or delete; the table test passes
/// bare digests.
pub trait Listed {
    /// `content_sha256` of the memory.
    fn content_sha256(&self) -> Digest;
}

impl Listed for Digest {
    fn content_sha256(&self) -> Digest {
        *self
    }
}

/// What the engine knows about one path at the start of a sync. `'r` is the listing's lifetime
/// (a [`Decision`] may borrow from it); the digests are copied.
#[derive(Debug)]
pub struct PathState<'r, R: ?Sized = Digest> {
    /// The memory the listing shows at this path.
    pub remote: Option<&'r R>,
    /// SHA-256 of the local file now.
    pub local: Option<Digest>,
    /// The digest both sides agreed on at the last successful sync of this path.
    pub baseline: Option<Digest>,
    /// The store is attached read-only: pull, never push.
    pub read_only: bool,
    /// The local digest the server (or a local check) refused for this path, if any.
    pub refused: Option<Digest>,
}

impl<R: ?Sized> Default for PathState<'_, R> {
    fn default() -> Self {
        Self { remote: None, local: None, baseline: None, read_only: false, refused: None }
    }
}

/// Something worth telling the operator about a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warning {
    /// Row 5 (info level): the server deleted a memory whose file holds an un-pushed edit.
    RecreatingDeletedRemotely,
    /// Row 6: as row 5, but a read-only store cannot push the edit.
    KeepingDeletedRemotelyReadOnly,
    /// Row 9: deleted here, changed there — the remote version comes back.
    RestoringDeletedLocally,
    /// Row 13: changed on both sides — the store wins.
    BothChanged,
}

impl Warning {
    /// The log message, as the reference worker words it.
    pub fn message(self) -> &'static str {
        match self {
            Self::RecreatingDeletedRemotely => {
                "memory deleted remotely but edited locally; re-creating it from the file"
            }
            Self::KeepingDeletedRemotelyReadOnly => {
                "memory deleted remotely but edited locally; keeping the file, which a read-only store cannot push"
            }
            Self::RestoringDeletedLocally => {
                "memory deleted locally but changed remotely; restoring the remote version"
            }
            Self::BothChanged => "memory changed both locally and remotely; keeping the remote version",
        }
    }
}

/// What to do with a path.
#[derive(Debug, PartialEq, Eq)]
pub enum Action<'r, R: ?Sized = Digest> {
    /// Nothing to send or fetch; the baseline becomes [`Decision::baseline`].
    Keep,
    /// Upload the file as a new memory (`POST …/memories`); the baseline becomes the digest the
    /// server returns, or none if the upload fails.
    Create,
    /// Upload the file over `memory`, conditional on its digest (row 15); the baseline becomes
    /// the returned digest, or stays at the remote digest if the upload fails.
    Update { memory: &'r R },
    /// Fetch `memory`'s content and write it, after re-checking that the file still holds
    /// `expect_local`; the baseline advances when the write lands.
    Pull { memory: &'r R, expect_local: Option<Digest> },
    /// The server deleted an unchanged memory: remove the file if it still holds this digest
    /// (row 4). If it changed since the scan, decide again with the fresh digest.
    RemoveLocal { expect_local: Digest },
    /// A local deletion of the unchanged `memory`: a candidate for a remote delete conditional
    /// on `base` (row 7), once corroborated; the baseline stays until the delete lands.
    DeleteCandidate { memory: &'r R, base: Digest },
}

/// The outcome for one path.
#[derive(Debug, PartialEq, Eq)]
pub struct Decision<'r, R: ?Sized = Digest> {
    pub action: Action<'r, R>,
    /// The baseline to keep unless the action replaces it (see [`Action`]).
    pub baseline: Option<Digest>,
    pub warning: Option<Warning>,
    /// Forget any pending-delete record for this path.
    pub clear_pending_delete: bool,
}

impl<'r, R: ?Sized> Decision<'r, R> {
    fn new(action: Action<'r, R>, baseline: Option<Digest>) -> Self {
        Self { action, baseline, warning: None, clear_pending_delete: false }
    }

    fn warn(mut self, warning: Warning) -> Self {
        self.warning = Some(warning);
        self
    }

    fn clearing(mut self) -> Self {
        self.clear_pending_delete = true;
        self
    }
}

/// Applies the reconciliation table to one path.
pub fn decide<'r, R: Listed + ?Sized>(s: &PathState<'r, R>) -> Decision<'r, R> {
    let refused = |sha: Digest| s.refused == Some(sha);
    let decision = match (s.remote, s.local, s.baseline) {
        // Row 1: gone on both sides.
        (None, None, _) => Decision::new(Action::Keep, None).clearing(),
        // Rows 2–3: a new local file.
        (None, Some(l), None) => {
            if s.read_only || refused(l) {
                Decision::new(Action::Keep, None)
            } else {
                Decision::new(Action::Create, None)
            }
        }
        // Row 4: the server deleted a memory the file still holds unchanged.
        (None, Some(l), Some(b)) if l == b => Decision::new(Action::RemoveLocal { expect_local: l }, Some(b)),
        // Rows 5–6: deleted remotely, edited locally.
        (None, Some(l), Some(_)) => {
            if s.read_only {
                Decision::new(Action::Keep, None).warn(Warning::KeepingDeletedRemotelyReadOnly)
            } else if refused(l) {
                Decision::new(Action::Keep, None)
            } else {
                Decision::new(Action::Create, None).warn(Warning::RecreatingDeletedRemotely)
            }
        }
        // Row 10: a new remote memory.
        (Some(memory), None, None) => Decision::new(Action::Pull { memory, expect_local: None }, None),
        (Some(memory), None, Some(b)) => {
            if memory.content_sha256() != b {
                // Row 9: deleted here, changed there.
                Decision::new(Action::Pull { memory, expect_local: None }, Some(b))
                    .warn(Warning::RestoringDeletedLocally)
                    .clearing()
            } else if s.read_only {
                // Row 8: a read-only store neither pushes nor undoes the local deletion.
                Decision::new(Action::Keep, Some(b))
            } else {
                // Row 7.
                Decision::new(Action::DeleteCandidate { memory, base: b }, Some(b))
            }
        }
        (Some(memory), Some(l), b) => {
            let r = memory.content_sha256();
            if Some(r) != b {
                if l == r {
                    // Row 11: the file already holds the remote bytes.
                    Decision::new(Action::Keep, Some(r))
                } else if Some(l) == b {
                    // Row 12: remote-only change.
                    Decision::new(Action::Pull { memory, expect_local: Some(l) }, b)
                } else {
                    // Row 13: both changed; the store wins (read-only too).
                    Decision::new(Action::Pull { memory, expect_local: Some(l) }, b).warn(Warning::BothChanged)
                }
            } else if l == r {
                // Row 14: in sync.
                Decision::new(Action::Keep, Some(r))
            } else if s.read_only || refused(l) {
                // Row 16, or a refused row 15.
                Decision::new(Action::Keep, Some(r))
            } else {
                // Row 15: local-only change.
                Decision::new(Action::Update { memory }, Some(r))
            }
        }
    };
    // Whenever a file exists locally, any pending delete of its path is void.
    if s.local.is_some() { decision.clearing() } else { decision }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &Digest = &Digest::from_bytes([0xaa; 32]);
    const B: &Digest = &Digest::from_bytes([0xbb; 32]);
    const C: &Digest = &Digest::from_bytes([0xcc; 32]);

    struct Row {
        n: u8,
        remote: Option<&'static Digest>,
        local: Option<&'static Digest>,
        baseline: Option<&'static Digest>,
        read_only: bool,
        refused: Option<&'static Digest>,
        action: Action<'static>,
        baseline_after: Option<&'static Digest>,
        warning: Option<Warning>,
    }

    impl Row {
        /// The path state the row starts from.
        fn state(&self) -> PathState<'static> {
            PathState {
                remote: self.remote,
                local: self.local.copied(),
                baseline: self.baseline.copied(),
                read_only: self.read_only,
                refused: self.refused.copied(),
            }
        }
    }

    fn pull(memory: &'static Digest, expect: Option<&Digest>) -> Action<'static> {
        Action::Pull { memory, expect_local: expect.copied() }
    }

    /// One row per rule of the table (and the refusal variants of the upload rows).
    fn rows() -> Vec<Row> {
        use Warning::*;
        let r = |n, remote, local, baseline, read_only, action, baseline_after, warning| Row {
            n,
            remote,
            local,
            baseline,
            read_only,
            refused: None,
            action,
            baseline_after,
            warning,
        };
        vec![
            r(1, None, None, None, false, Action::Keep, None, None),
            r(1, None, None, Some(A), false, Action::Keep, None, None),
            r(2, None, Some(A), None, false, Action::Create, None, None),
            Row { refused: Some(A), ..r(2, None, Some(A), None, false, Action::Keep, None, None) },
            r(3, None, Some(A), None, true, Action::Keep, None, None),
            r(4, None, Some(A), Some(A), false, Action::RemoveLocal { expect_local: *A }, Some(A), None),
            r(4, None, Some(A), Some(A), true, Action::RemoveLocal { expect_local: *A }, Some(A), None),
            r(5, None, Some(B), Some(A), false, Action::Create, None, Some(RecreatingDeletedRemotely)),
            Row { refused: Some(B), ..r(5, None, Some(B), Some(A), false, Action::Keep, None, None) },
            r(6, None, Some(B), Some(A), true, Action::Keep, None, Some(KeepingDeletedRemotelyReadOnly)),
            r(7, Some(A), None, Some(A), false, Action::DeleteCandidate { memory: A, base: *A }, Some(A), None),
            r(8, Some(A), None, Some(A), true, Action::Keep, Some(A), None),
            r(9, Some(B), None, Some(A), false, pull(B, None), Some(A), Some(RestoringDeletedLocally)),
            r(9, Some(B), None, Some(A), true, pull(B, None), Some(A), Some(RestoringDeletedLocally)),
            r(10, Some(A), None, None, false, pull(A, None), None, None),
            r(11, Some(B), Some(B), Some(A), false, Action::Keep, Some(B), None),
            r(11, Some(B), Some(B), None, false, Action::Keep, Some(B), None),
            r(12, Some(B), Some(A), Some(A), false, pull(B, Some(A)), Some(A), None),
            r(12, Some(B), Some(A), Some(A), true, pull(B, Some(A)), Some(A), None),
            r(13, Some(B), Some(C), Some(A), false, pull(B, Some(C)), Some(A), Some(BothChanged)),
            r(13, Some(B), Some(C), Some(A), true, pull(B, Some(C)), Some(A), Some(BothChanged)),
            r(13, Some(B), Some(C), None, false, pull(B, Some(C)), None, Some(BothChanged)),
            r(14, Some(A), Some(A), Some(A), false, Action::Keep, Some(A), None),
            r(15, Some(A), Some(B), Some(A), false, Action::Update { memory: A }, Some(A), None),
            Row { refused: Some(B), ..r(15, Some(A), Some(B), Some(A), false, Action::Keep, Some(A), None) },
            // A refusal of older content does not block the new content.
            Row {
                refused: Some(C),
                ..r(15, Some(A), Some(B), Some(A), false, Action::Update { memory: A }, Some(A), None)
            },
            r(16, Some(A), Some(B), Some(A), true, Action::Keep, Some(A), None),
        ]
    }

    #[test]
    fn every_rule_of_the_table() {
        for row in rows() {
            let state = row.state();
            let d = decide(&state);
            assert_eq!(d.action, row.action, "row {}: {state:?}", row.n);
            assert_eq!(d.baseline.as_ref(), row.baseline_after, "row {} baseline: {state:?}", row.n);
            assert_eq!(d.warning, row.warning, "row {} warning: {state:?}", row.n);
        }
    }

    #[test]
    fn a_present_file_always_voids_a_pending_delete() {
        for row in rows() {
            let d = decide(&row.state());
            if row.local.is_some() {
                assert!(d.clear_pending_delete, "row {}", row.n);
            }
            if row.n == 7 || row.n == 8 {
                assert!(!d.clear_pending_delete, "row {} keeps its pending record", row.n);
            }
        }
    }

    #[test]
    fn read_only_stores_never_upload_or_delete_remotely() {
        let shas = [None, Some(A), Some(B), Some(C)];
        for remote in shas {
            for local in shas {
                for baseline in shas {
                    for refused in shas {
                        let d = decide(&PathState {
                            remote,
                            local: local.copied(),
                            baseline: baseline.copied(),
                            read_only: true,
                            refused: refused.copied(),
                        });
                        assert!(
                            !matches!(
                                d.action,
                                Action::Create | Action::Update { .. } | Action::DeleteCandidate { .. }
                            ),
                            "{remote:?} {local:?} {baseline:?}: {:?}",
                            d.action
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn an_agreed_state_is_stable() {
        // After a sync in which both sides agree, deciding again changes nothing.
        for sha in [A, B] {
            let d =
                decide(&PathState { remote: Some(sha), local: Some(*sha), baseline: Some(*sha), ..Default::default() });
            assert_eq!((d.action, d.baseline.as_ref()), (Action::Keep, Some(sha)));
        }
    }
}
