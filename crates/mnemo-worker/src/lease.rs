//! Keeping a work item's lease alive while it is served.
//!
//! The heartbeat starts before anything slow (session fetch, downloads) and runs until the item
//! is done or the lease ends. Its first recorded end reason wins; a lost lease (412, or no
//! successful heartbeat for a whole TTL) means someone else may own the item now, so the worker
//! must not stop it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mnemo_api::{EnvironmentId, WorkId, WorkState};
use mnemo_client::{Client, NO_HEARTBEAT};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The first interval, before the server has told us its TTL.
const FIRST_INTERVAL: Duration = Duration::from_secs(30);
/// The TTL assumed until the first heartbeat succeeds.
const ASSUMED_TTL: Duration = Duration::from_secs(90);

/// Why serving an item ended, as far as the lease is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseEnd {
    /// The session run (or the skip of a terminated session) finished first.
    RunnerDone,
    /// The server said the item is stopping/stopped, or did not extend the lease.
    HeartbeatStop,
    /// A heartbeat was refused for good (4xx other than 408/409/412/429).
    HeartbeatRejected,
    /// `412`: the lease belongs to someone else now.
    LeaseLost,
    /// No heartbeat succeeded for longer than the TTL.
    AssumedLost,
}

impl LeaseEnd {
    /// Whether the item may no longer be ours (then it must not be stopped).
    pub fn is_lost(self) -> bool {
        matches!(self, Self::LeaseLost | Self::AssumedLost)
    }
}

/// A running heartbeat loop.
#[derive(Debug)]
pub struct Lease {
    end: Arc<Mutex<Option<LeaseEnd>>>,
    ttl: Arc<AtomicU64>,
    /// Cancelled when the heartbeat loop ends, for whatever reason.
    ended: CancellationToken,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Lease {
    /// Starts heartbeating `work` with `client` (the item's credential).
    pub fn start(client: Client, environment: EnvironmentId, work: WorkId) -> Self {
        let end = Arc::new(Mutex::new(None));
        let ttl = Arc::new(AtomicU64::new(0));
        let ended = CancellationToken::new();
        let stop = CancellationToken::new();
        let task = tokio::spawn(heartbeat_loop(
            client,
            environment,
            work,
            Arc::clone(&end),
            Arc::clone(&ttl),
            ended.clone(),
            stop.clone(),
        ));
        Self { end, ttl, ended, stop, task: Some(task) }
    }

    /// Cancelled once the lease has ended; the session run watches it.
    pub fn ended(&self) -> CancellationToken {
        self.ended.clone()
    }

    /// The TTL the server last reported, if any heartbeat succeeded.
    pub fn ttl(&self) -> Option<Duration> {
        ttl_of(&self.ttl)
    }

    /// A shared handle on the latest TTL (0 = unknown), for the result-send retry window.
    pub fn ttl_handle(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.ttl)
    }

    /// The reason recorded so far.
    pub fn end_reason(&self) -> Option<LeaseEnd> {
        *self.end.lock().expect("lease lock")
    }

    /// Records `reason` unless one was recorded first, stops heartbeating and answers the
    /// reason that counts.
    pub async fn finish(mut self, reason: LeaseEnd) -> LeaseEnd {
        record(&self.end, reason);
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.end_reason().unwrap_or(reason)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn ttl_of(ttl: &AtomicU64) -> Option<Duration> {
    match ttl.load(Ordering::Relaxed) {
        0 => None,
        secs => Some(Duration::from_secs(secs)),
    }
}

fn record(end: &Mutex<Option<LeaseEnd>>, reason: LeaseEnd) {
    end.lock().expect("lease lock").get_or_insert(reason);
}

/// `max(1 s, min(ttl / 2, 30 s))`.
pub fn interval_for(ttl_seconds: u64) -> Duration {
    Duration::from_secs_f64((ttl_seconds as f64 / 2.0).clamp(1.0, 30.0))
}

async fn heartbeat_loop(
    client: Client,
    environment: EnvironmentId,
    work: WorkId,
    end: Arc<Mutex<Option<LeaseEnd>>>,
    ttl: Arc<AtomicU64>,
    ended: CancellationToken,
    stop: CancellationToken,
) {
    let mut expected = NO_HEARTBEAT.to_owned();
    let mut interval = FIRST_INTERVAL;
    let mut last_success = Instant::now();
    loop {
        let beat = tokio::select! {
            beat = client.heartbeat_work(&environment, &work, &expected, interval) => beat,
            () = stop.cancelled() => break,
        };
        match beat {
            Ok(hb) => {
                last_success = Instant::now();
                if hb.ttl_seconds > 0 {
                    ttl.store(hb.ttl_seconds, Ordering::Relaxed);
                    interval = interval_for(hb.ttl_seconds);
                }
                expected = hb.last_heartbeat;
                if matches!(hb.state, WorkState::Stopping | WorkState::Stopped) || !hb.lease_extended {
                    tracing::info!(work_id = %work, state = hb.state.as_str(), lease_extended = hb.lease_extended, "the work item is ending; stopping the session");
                    record(&end, LeaseEnd::HeartbeatStop);
                    break;
                }
                tracing::debug!(work_id = %work, ttl_seconds = hb.ttl_seconds, "heartbeat");
            }
            Err(e) if e.status() == Some(412) => {
                let current = match &e {
                    mnemo_client::ClientError::Api { error, .. } => {
                        error.extra.get("details").and_then(|d| d.get("current_state")).cloned()
                    }
                    _ => None,
                };
                tracing::warn!(work_id = %work, current_state = ?current, "heartbeat refused: the lease was lost");
                record(&end, LeaseEnd::LeaseLost);
                break;
            }
            Err(e) if e.is_permanent() => {
                tracing::warn!(work_id = %work, "heartbeat rejected: {e}");
                record(&end, LeaseEnd::HeartbeatRejected);
                break;
            }
            Err(e) => {
                let window = ttl_of(&ttl).unwrap_or(ASSUMED_TTL);
                if last_success.elapsed() > window {
                    tracing::warn!(work_id = %work, "no heartbeat succeeded for {}s; assuming the lease is lost: {e}", window.as_secs());
                    record(&end, LeaseEnd::AssumedLost);
                    break;
                }
                tracing::warn!(work_id = %work, "heartbeat failed, retrying: {e}");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = stop.cancelled() => break,
        }
    }
    ended.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_is_half_the_ttl_within_bounds() {
        assert_eq!(interval_for(120), Duration::from_secs(30));
        assert_eq!(interval_for(20), Duration::from_secs(10));
        assert_eq!(interval_for(1), Duration::from_secs(1));
        assert_eq!(interval_for(3), Duration::from_secs_f64(1.5));
    }

    #[test]
    fn only_lost_leases_skip_the_stop() {
        assert!(LeaseEnd::LeaseLost.is_lost());
        assert!(LeaseEnd::AssumedLost.is_lost());
        assert!(!LeaseEnd::RunnerDone.is_lost());
        assert!(!LeaseEnd::HeartbeatStop.is_lost());
        assert!(!LeaseEnd::HeartbeatRejected.is_lost());
    }

    #[test]
    fn the_first_reason_wins() {
        let end = Mutex::new(None);
        record(&end, LeaseEnd::LeaseLost);
        record(&end, LeaseEnd::RunnerDone);
        assert_eq!(*end.lock().unwrap(), Some(LeaseEnd::LeaseLost));
    }
}
