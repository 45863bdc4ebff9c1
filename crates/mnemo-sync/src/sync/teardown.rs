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
pub async fn teardown<T: Teardown>(mut target: T, steps: TeardownSteps) -> Option<T> {
    if steps.final_sync && tokio::time::timeout(TEARDOWN_BOUND, target.final_sync()).await.is_err() {
        tracing::warn!(
            memory_store_id = target.memory_store_id().map(tracing::field::display),
            "final memory sync cut off after {}s; the flush that follows still uploads changed files",
            TEARDOWN_BOUND.as_secs()
        );
    }
    if tokio::time::timeout(TEARDOWN_BOUND, target.flush()).await.is_err() {
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

    #[tokio::test]
    async fn optional_steps_are_skipped() {
        let probe = Probe::default();
        let kept = teardown(probe.clone(), TeardownSteps { final_sync: false, dispose: false }).await;
        assert!(kept.is_some());
        assert_eq!(*probe.steps.lock().unwrap(), ["flush"]);
    }
}
