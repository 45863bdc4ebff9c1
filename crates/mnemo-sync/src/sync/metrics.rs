//! What the engine reports through the `metrics` facade (recorded only when the binary installs
//! an exporter: `--metrics-listen`). Names are `mnemo_sync_*`; `kind` is `full`, `final`, `live`
//! or `flush`.

use std::time::Instant;

use super::{SyncError, SyncReport};

/// One finished sync (or flush): its duration, its outcome and what it moved.
pub(crate) fn sync_done(kind: &'static str, started: Instant, outcome: &Result<SyncReport, SyncError>) {
    let result = if outcome.is_ok() { "ok" } else { "error" };
    metrics::histogram!("mnemo_sync_duration_seconds", "kind" => kind).record(started.elapsed().as_secs_f64());
    metrics::counter!("mnemo_syncs_total", "kind" => kind, "result" => result).increment(1);
    let Ok(r) = outcome else { return };
    for (name, n) in [
        ("mnemo_sync_pulled_total", r.pulled),
        ("mnemo_sync_uploaded_total", r.uploaded),
        ("mnemo_sync_removed_locally_total", r.removed_locally),
        ("mnemo_sync_conflicts_total", r.conflicts),
        ("mnemo_sync_refused_total", r.refused),
        ("mnemo_sync_failed_total", r.failed),
    ] {
        if n > 0 {
            metrics::counter!(name, "kind" => kind).increment(n as u64);
        }
    }
}

/// Local deletions by what became of them: `made` (sent), `withheld_by_cap` (left for a later
/// sync), `log_only` (only logged, `--memory-sync-deletions log_only`).
pub(crate) fn deletions(outcome: &'static str, n: usize) {
    if n > 0 {
        metrics::counter!("mnemo_sync_deletions_total", "outcome" => outcome).increment(n as u64);
    }
}
