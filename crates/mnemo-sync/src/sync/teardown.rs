//! The end of a mount, as `mnemo mount` and the worker's item teardown both run it: the final
//! sync, then the push-only flush, each bounded by [`TEARDOWN_BOUND`], then the removal of the
//! folder.
//!
//! A final sync or a flush that fails on a transient fault (a `5xx`, a broken connection) is
//! tried again with back-off within its bound.
//!
//! The final sync may be cut off (a frozen server, a huge store); the flush that follows still
//! uploads changed files, so edits are not lost to a slow pull. The flush may be cut off too, and
//! the dispose runs regardless: the folder goes (with its journal) rather than lingering.

use std::future::Future;
use std::time::Duration;

use mnemo_api::MemoryStoreId;

use super::StoreSync;

/// The bound of the final sync and of the flush, each.
pub const TEARDOWN_BOUND: Duration = Duration::from_secs(30);

/// What a teardown winds down: one engine, or a worker's set of them. Each step logs its own
/// outcome; the teardown only logs a step that was cut off.
pub trait Teardown: Sized {
    /// The final sync (the deletion window waived).
    fn final_sync(&mut self) -> impl Future<Output = ()> + Send;
    /// The push-only flush: upload changed files, pull and delete nothing.
    fn flush(&mut self) -> impl Future<Output = ()> + Send;
    /// Removes what the mount created.
    fn dispose(self) -> impl Future<Output = ()> + Send;
    /// The store the teardown's own log lines name, when it is about one store.
    fn memory_store_id(&self) -> Option<&MemoryStoreId> {
        None
    }
}

/// Which of a teardown's optional steps run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TeardownSteps {
    /// Sync one last time before the flush: a clean end (not after a lost lease, when the item may
    /// be someone else's now).
    pub final_sync: bool,
    /// Remove the folder at the end (`mnemo mount --keep` leaves it).
    pub dispose: bool,
}

/// Final sync (if asked) → flush → dispose (if asked), the first two each bounded by
/// [`TEARDOWN_BOUND`]. Returns the target when it was kept rather than disposed.
pub async fn teardown<T: Teardown>(target: T, steps: TeardownSteps) -> Option<T> {
    let sync_deadline = tokio::time::Instant::now() + TEARDOWN_BOUND;
    teardown_by(target, steps, sync_deadline, None).await
}

/// One target's teardown against deadlines: the final sync (if asked) must end by
/// `sync_deadline` (it is skipped when that has passed), the flush by `flush_deadline`, or
/// within [`TEARDOWN_BOUND`] of its own start when there is none. [`teardown`] and
/// [`teardown_pipelined`] differ only in the deadlines they give, so the steps, their order and
/// the warnings of a step cut off are written once, here.
async fn teardown_by<T: Teardown>(
    mut target: T,
    steps: TeardownSteps,
    sync_deadline: tokio::time::Instant,
    flush_deadline: Option<tokio::time::Instant>,
) -> Option<T> {
    if steps.final_sync {
        let cut = tokio::time::Instant::now() >= sync_deadline
            || tokio::time::timeout_at(sync_deadline, target.final_sync()).await.is_err();
        if cut {
            tracing::warn!(
                memory_store_id = target.memory_store_id().map(tracing::field::display),
                "final memory sync cut off after {}s; the flush that follows still uploads changed files",
                TEARDOWN_BOUND.as_secs()
            );
        }
    }
    let flush_deadline = flush_deadline.unwrap_or_else(|| tokio::time::Instant::now() + TEARDOWN_BOUND);
    if tokio::time::timeout_at(flush_deadline, target.flush()).await.is_err() {
        tracing::warn!(
            memory_store_id = target.memory_store_id().map(tracing::field::display),
            "memory flush cut off after {}s; changed files it had not uploaded yet are not saved",
            TEARDOWN_BOUND.as_secs()
        );
    }
    if steps.dispose {
        target.dispose().await;
        None
    } else {
        Some(target)
    }
}

/// Targets a pipelined teardown ([`teardown_pipelined`]) winds down at once.
pub const TEARDOWN_CONCURRENCY: usize = 2;

/// [`teardown`] of several targets (a worker's stores) as a pipeline: each target's final sync,
/// flush and dispose run one after the other, `concurrency` targets at a time, so what a final
/// sync holds (its walk of the folder, its listing) is released by that target's dispose before
/// the next target's starts, rather than every target's at once until the last flush.
///
/// The passes keep their bounds as deadlines shared by every target: each final sync ends
/// within [`TEARDOWN_BOUND`] of the teardown's start (a target reaching its final sync later
/// skips it, and its flush still runs); each flush ends within [`TEARDOWN_BOUND`] after that
/// (within [`TEARDOWN_BOUND`] of the start when there is no final sync: after a signal or a lost
/// lease). So the whole teardown takes no longer than the two passes one after the other.
/// Returns the targets kept rather than disposed.
pub async fn teardown_pipelined<T: Teardown + Send>(
    targets: Vec<T>,
    steps: TeardownSteps,
    concurrency: usize,
) -> Vec<T> {
    use futures::StreamExt;
    let start = tokio::time::Instant::now();
    let sync_deadline = start + TEARDOWN_BOUND;
    let flush_deadline = if steps.final_sync { sync_deadline + TEARDOWN_BOUND } else { start + TEARDOWN_BOUND };
    let one = |target: T| teardown_by(target, steps, sync_deadline, Some(flush_deadline));
    // Unordered: a target stuck in a step must not hold back the ones after it.
    let mut kept: Vec<(usize, T)> = futures::stream::iter(targets.into_iter().enumerate())
        .map(|(i, target)| async move { one(target).await.map(|t| (i, t)) })
        .buffer_unordered(concurrency.max(1))
        .filter_map(std::future::ready)
        .collect()
        .await;
    kept.sort_by_key(|(i, _)| *i);
    kept.into_iter().map(|(_, t)| t).collect()
}

/// One engine (`mnemo mount`): the reports are logged, failures warned about.
impl Teardown for StoreSync {
    async fn final_sync(&mut self) {
        match self.final_sync_retrying().await {
            Ok(report) => tracing::info!(memory_store_id = %self.store_id(), "final sync: {report}"),
            Err(e) => tracing::warn!(memory_store_id = %self.store_id(), "final memory sync failed: {e}"),
        }
    }

    async fn flush(&mut self) {
        match self.flush_retrying().await {
            Ok(report) if report.uploaded > 0 => tracing::info!(memory_store_id = %self.store_id(), "flush: {report}"),
            Ok(_) => {}
            Err(e) => tracing::warn!(memory_store_id = %self.store_id(), "memory flush failed: {e}"),
        }
    }

    async fn dispose(self) {
        StoreSync::dispose(self).await;
    }

    fn memory_store_id(&self) -> Option<&MemoryStoreId> {
        Some(self.store_id())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Records the steps it was asked to run; `stall` makes the final sync hang.
    #[derive(Clone, Default)]
    struct Probe {
        steps: Arc<Mutex<Vec<&'static str>>>,
        stall: bool,
    }

    impl Probe {
        fn note(&self, step: &'static str) {
            self.steps.lock().unwrap().push(step);
        }
    }

    impl Teardown for Probe {
        async fn final_sync(&mut self) {
            self.note("final sync");
            if self.stall {
                std::future::pending::<()>().await;
            }
        }

        async fn flush(&mut self) {
            self.note("flush");
        }

        async fn dispose(self) {
            self.note("dispose");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_steps_run_in_order_and_a_stuck_one_is_cut_off() {
        let probe = Probe { stall: true, ..Probe::default() };
        let started = tokio::time::Instant::now();
        let kept = teardown(probe.clone(), TeardownSteps { final_sync: true, dispose: true }).await;
        assert!(kept.is_none());
        assert_eq!(*probe.steps.lock().unwrap(), ["final sync", "flush", "dispose"]);
        assert_eq!(started.elapsed(), TEARDOWN_BOUND);
    }

    /// A probe that notes its steps by name in a shared log, and stalls in the steps named.
    #[derive(Clone)]
    struct Named {
        name: &'static str,
        log: Arc<Mutex<Vec<String>>>,
        stall_final: bool,
        stall_flush: bool,
        at: tokio::time::Instant,
    }

    impl Named {
        fn note(&self, step: &str) {
            let secs = self.at.elapsed().as_secs();
            self.log.lock().unwrap().push(format!("{} {step} @{secs}", self.name));
        }
    }

    impl Teardown for Named {
        async fn final_sync(&mut self) {
            self.note("final sync");
            if self.stall_final {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }

        async fn flush(&mut self) {
            self.note("flush");
            if self.stall_flush {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }

        async fn dispose(self) {
            self.note("dispose");
        }
    }

    fn named(
        log: &Arc<Mutex<Vec<String>>>,
        names: &[&'static str],
        stall_final: &str,
        stall_flush: &str,
    ) -> Vec<Named> {
        let at = tokio::time::Instant::now();
        names
            .iter()
            .map(|name| Named {
                name,
                log: Arc::clone(log),
                stall_final: *name == stall_final,
                stall_flush: *name == stall_flush,
                at,
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_pipeline_disposes_each_target_before_the_next_one_starts() {
        let log = Arc::default();
        let targets = named(&log, &["a", "b", "c"], "", "");
        let kept = teardown_pipelined(targets, TeardownSteps { final_sync: true, dispose: true }, 1).await;
        assert!(kept.is_empty());
        let expected = [
            "a final sync @0",
            "a flush @1",
            "a dispose @2",
            "b final sync @2",
            "b flush @3",
            "b dispose @4",
            "c final sync @4",
            "c flush @5",
            "c dispose @6",
        ];
        assert_eq!(*log.lock().unwrap(), expected);
    }

    #[tokio::test(start_paused = true)]
    async fn a_pipeline_keeps_each_pass_within_its_bound() {
        // `b`'s final sync hangs: it is cut off at 30 s; `c` (after it, one at a time) reaches
        // its final sync only then and skips it, but still flushes; nothing runs past 60 s.
        let log = Arc::default();
        let started = tokio::time::Instant::now();
        let targets = named(&log, &["a", "b", "c"], "b", "c");
        teardown_pipelined(targets, TeardownSteps { final_sync: true, dispose: true }, 1).await;
        let expected = [
            "a final sync @0",
            "a flush @1",
            "a dispose @2",
            "b final sync @2",
            "b flush @30",
            "b dispose @31",
            "c flush @31",
            "c dispose @60",
        ];
        assert_eq!(*log.lock().unwrap(), expected);
        assert_eq!(started.elapsed(), 2 * TEARDOWN_BOUND);

        // Without the final sync (a signal, a lost lease): every flush within 30 s of the start.
        let log = Arc::default();
        let started = tokio::time::Instant::now();
        let targets = named(&log, &["a", "b", "c"], "", "a");
        let kept = teardown_pipelined(targets, TeardownSteps { final_sync: false, dispose: false }, 2).await;
        assert_eq!(kept.len(), 3, "kept, in order");
        assert_eq!(kept.iter().map(|t| t.name).collect::<Vec<_>>(), ["a", "b", "c"]);
        let log = log.lock().unwrap().clone();
        assert_eq!(log, ["a flush @0", "b flush @0", "c flush @1"]);
        assert_eq!(started.elapsed(), TEARDOWN_BOUND);
    }

    #[tokio::test]
    async fn optional_steps_are_skipped() {
        let probe = Probe::default();
        let kept = teardown(probe.clone(), TeardownSteps { final_sync: false, dispose: false }).await;
        assert!(kept.is_some());
        assert_eq!(*probe.steps.lock().unwrap(), ["flush"]);
    }
}
