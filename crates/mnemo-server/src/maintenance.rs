//! Background upkeep of the stored state: `mnemo serve` applies lapsed work leases
//! ([`expire_work_leases`], every 2 s) so listings and queue figures stay fresh; a lease is
//! judged lapsed whether or not this has run. [`WRITES`] tells background tasks that this
//! process wrote, so one that only has work after a write (the webhook sender on a database no
//! other process writes) can sleep until then instead of looking every second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use mnemo_store::Store;
use tokio::sync::Notify;

/// Writes committed by this process: counted after each, so a task that read the count before
/// looking at the store and finds it unchanged later knows nothing was written since.
pub(crate) struct Writes {
    count: AtomicU64,
    notify: Notify,
}

/// The process's writes: bumped after every request that may write (anything but `GET`,
/// `HEAD` and `OPTIONS`), every append the event hub hears of (the agent loop's included),
/// every memory commit signalled, and every lease sweep that changed something.
pub(crate) static WRITES: LazyLock<Writes> =
    LazyLock::new(|| Writes { count: AtomicU64::new(0), notify: Notify::new() });

impl Writes {
    /// Something was written (and committed).
    pub(crate) fn made(&self) {
        self.count.fetch_add(1, Ordering::AcqRel);
        self.notify.notify_waiters();
    }

    /// How many writes so far: read it before looking at the store.
    pub(crate) fn seen(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    /// Resolves once a write was made after `seen` (at once if one was already).
    pub(crate) async fn since(&self, seen: u64) {
        let notified = self.notify.notified();
        let mut notified = std::pin::pin!(notified);
        // Registered before the check, so a write between the two still wakes it.
        notified.as_mut().enable();
        if self.seen() != seen {
            return;
        }
        notified.await;
    }
}

/// Applies lapsed work leases every `every` until the task is dropped: listings, statistics and
/// `has live work` judgements then never lag expiry by more than `every`. Failures are logged
/// and retried on the next tick.
pub async fn expire_work_leases(store: Arc<dyn Store>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match store.expire_work().await {
            Ok(0) => {}
            Ok(n) => {
                WRITES.made();
                metrics::counter!("mnemo_work_leases_expired_total").increment(n);
                tracing::info!(items = n, "applied lapsed work leases");
            }
            Err(e) => tracing::warn!(error = %e.chain(), "could not apply lapsed work leases"),
        }
    }
}

/// How often the audit log's old entries are deleted.
pub const AUDIT_PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Deletes audit entries older than `days` days, now and every `every` until the task is
/// dropped. Failures are logged and retried on the next tick.
pub async fn prune_audit_log(store: Arc<dyn Store>, days: u32, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match store.prune_audit_events(days).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(entries = n, days, "deleted audit entries past their retention"),
            Err(e) => tracing::warn!(error = %e.chain(), "could not delete old audit entries"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_write_after_the_count_was_read_is_seen_whether_before_or_during_the_wait() {
        let writes = Writes { count: AtomicU64::new(0), notify: Notify::new() };
        let seen = writes.seen();
        writes.made();
        // Already made: no wait.
        tokio::time::timeout(Duration::from_secs(5), writes.since(seen)).await.unwrap();
        let seen = writes.seen();
        let waiting = tokio::time::timeout(Duration::from_millis(50), writes.since(seen)).await;
        assert!(waiting.is_err(), "nothing was written since");
        let (writes, seen) = (Arc::new(writes), seen);
        let waiter = tokio::spawn({
            let writes = Arc::clone(&writes);
            async move { writes.since(seen).await }
        });
        tokio::task::yield_now().await;
        writes.made();
        tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap();
    }
}
