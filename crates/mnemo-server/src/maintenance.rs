//! Background upkeep of the stored state: `mnemo serve` applies lapsed work leases
//! ([`expire_work_leases`], as each lapses) so listings and queue figures stay fresh; a lease is
//! judged lapsed whether or not this has run. [`WRITES`] tells background tasks that this
//! process wrote, so one that only has work after a write (the webhook sender on a database no
//! other process writes) can sleep until then instead of looking every second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use mnemo_api::{AuditActor, AuditActorType, AuditOutcome, AuditResource};
use mnemo_store::ops::NewAuditEvent;
use mnemo_store::ops::retention::RetentionStore;
use mnemo_store::rules::audit::AuditAction;
use mnemo_store::rules::retention::{self, Retention};
use mnemo_store::{Store, StoreError};
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

/// The longest the lease sweep sleeps with no lease due: a lease written by another replica
/// that signals nothing is applied no later than this (every call that touches an item judges
/// its lease anyway; the sweep only keeps listings and statistics fresh).
pub(crate) const LEASE_SWEEP_IDLE: Duration = Duration::from_secs(60);

/// Applies lapsed work leases until the task is dropped, sleeping until the next one lapses
/// (as the store tells) rather than writing on a tick: an idle server makes no write. A write
/// by this process, or a work change another replica signals, may add or move a lease, so the
/// sweep looks again within `every` of one; listings, statistics and `has live work`
/// judgements then never lag expiry by more than `every` for leases this process wrote.
/// Failures are logged and retried after `every`.
pub async fn expire_work_leases(store: Arc<dyn Store>, every: Duration) {
    let mut signals = store.signals();
    loop {
        let seen = WRITES.seen();
        let next = match store.next_work_lapse().await {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %e.chain(), "could not read when work leases lapse");
                tokio::time::sleep(every).await;
                continue;
            }
        };
        if next == Some(Duration::ZERO) {
            match store.expire_work().await {
                // Lapsed, but held by another writer (which judges it): look again later.
                Ok(0) => tokio::time::sleep(every).await,
                Ok(n) => {
                    WRITES.made();
                    metrics::counter!("mnemo_work_leases_expired_total").increment(n);
                    tracing::info!(items = n, "applied lapsed work leases");
                }
                Err(e) => {
                    tracing::warn!(error = %e.chain(), "could not apply lapsed work leases");
                    tokio::time::sleep(every).await;
                }
            }
            continue;
        }
        let due = tokio::time::Instant::now() + next.unwrap_or(LEASE_SWEEP_IDLE).min(LEASE_SWEEP_IDLE);
        tokio::select! {
            () = tokio::time::sleep_until(due) => continue,
            () = WRITES.since(seen) => {}
            () = work_changed(&mut signals) => {}
        }
        // Something may have leased: look again, at most once per `every`.
        tokio::time::sleep_until(due.min(tokio::time::Instant::now() + every)).await;
    }
}

/// Resolves on a work change another process signalled (or signals that may have been lost);
/// never without signals.
async fn work_changed(signals: &mut Option<tokio::sync::broadcast::Receiver<mnemo_store::Signal>>) {
    use tokio::sync::broadcast::error::RecvError;
    if let Some(rx) = signals {
        loop {
            match rx.recv().await {
                Ok(mnemo_store::Signal::Work | mnemo_store::Signal::Resync) | Err(RecvError::Lagged(_)) => return,
                Ok(_) => {}
                Err(RecvError::Closed) => break,
            }
        }
        *signals = None;
    }
    std::future::pending().await
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

/// How often expired versions are purged unless `--version-purge-every` says otherwise.
pub const VERSION_PURGE_EVERY: Duration = Duration::from_secs(60);

/// What one purge pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgePass {
    /// Versions deleted, in every store.
    pub versions: u64,
    /// Their content bytes.
    pub bytes: u64,
    /// Stores that lost versions.
    pub stores: u64,
    /// Whether it stopped early because another replica was purging (that replica's pass
    /// covers the rest).
    pub yielded: bool,
}

/// Purges expired versions now and every `every` until the task is dropped
/// ([`purge_pass`]). Failures are logged and retried on the next tick.
pub async fn purge_expired_versions(store: Arc<dyn Store>, default: Retention, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_full = Instant::now();
    loop {
        tick.tick().await;
        match purge_pass(&*store, default).await {
            Ok(pass) => {
                if !pass.yielded {
                    last_full = Instant::now();
                }
                if pass.versions > 0 {
                    tracing::info!(
                        versions = pass.versions,
                        bytes = pass.bytes,
                        stores = pass.stores,
                        "purged expired memory versions"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e.chain(), "could not purge expired memory versions"),
        }
        // How far behind purging may be: the time since a pass last went over every store.
        metrics::gauge!("mnemo_version_purge_lag_seconds").set(last_full.elapsed().as_secs_f64());
    }
}

/// One pass over every store (archived ones too): each one's versions past its retention
/// ([`retention::effective`] of `default` and its own) go in batches of
/// [`retention::PURGE_BATCH`], each one short transaction followed by a pause as long as it
/// took, so writers have the database at least half the time. A
/// store that lost versions gets an audit entry (`memory_version.purge`, actor
/// `system`/`retention`, with counts only) and the metrics `mnemo_versions_purged_total` and
/// `mnemo_version_purge_bytes_total` grow. When another replica holds the purge, this pass
/// stops: one replica purges at a time.
pub async fn purge_pass(store: &dyn Store, default: Retention) -> Result<PurgePass, StoreError> {
    let started = Instant::now();
    let mut pass = PurgePass::default();
    'stores: for target in store.retention_stores().await? {
        let applies = retention::effective(default, target.own);
        if applies == Retention::Forever {
            continue;
        }
        let (mut after, mut versions, mut bytes) = (0, 0, 0);
        loop {
            let began = Instant::now();
            let Some(batch) =
                store.purge_versions(&target.workspace, &target.store, applies, after, retention::PURGE_BATCH).await?
            else {
                pass.yielded = true;
                record_purge(store, &target, applies, versions, bytes).await;
                break 'stores;
            };
            versions += batch.versions;
            bytes += batch.bytes;
            after = batch.next_after;
            if batch.done {
                break;
            }
            // As long a pause as the batch took: the store's writers have the database at
            // least half the time while a purge runs (SQLite has one writer).
            tokio::time::sleep(began.elapsed()).await;
        }
        if versions > 0 {
            pass.stores += 1;
        }
        pass.versions += versions;
        pass.bytes += bytes;
        record_purge(store, &target, applies, versions, bytes).await;
    }
    metrics::histogram!("mnemo_version_purge_pass_seconds").record(started.elapsed().as_secs_f64());
    Ok(pass)
}

/// The audit entry and metrics of a store's purge (nothing when nothing went).
async fn record_purge(store: &dyn Store, target: &RetentionStore, applied: Retention, versions: u64, bytes: u64) {
    if versions == 0 {
        return;
    }
    metrics::counter!("mnemo_versions_purged_total").increment(versions);
    metrics::counter!("mnemo_version_purge_bytes_total").increment(bytes);
    let event = NewAuditEvent {
        action: AuditAction::MemoryVersionPurge,
        workspace: Some(target.workspace.clone()),
        actor: AuditActor { kind: AuditActorType::System, id: "retention".into() },
        resource: Some(AuditResource { kind: "memory_store".into(), id: target.store.to_string() }),
        client_ip: None,
        outcome: AuditOutcome::Success,
        details: serde_json::json!({ "versions": versions, "bytes": bytes, "retention": applied.to_string() }),
    };
    if let Err(e) = store.record_audit_event(event).await {
        tracing::error!(error = %e.chain(), "could not record a purge in the audit log");
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
