//! Background upkeep of the stored state: `mnemo serve` applies lapsed work leases
//! ([`expire_work_leases`], every 2 s) so listings and queue figures stay fresh; a lease is
//! judged lapsed whether or not this has run.

use std::sync::Arc;
use std::time::Duration;

use mnemo_store::Store;

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
                metrics::counter!("mnemo_work_leases_expired_total").increment(n);
                tracing::info!(items = n, "applied lapsed work leases");
            }
            Err(e) => tracing::warn!(error = %e.chain(), "could not apply lapsed work leases"),
        }
    }
}
