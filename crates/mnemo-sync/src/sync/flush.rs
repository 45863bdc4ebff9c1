//! The push-only flush of a teardown: upload what changed, pull and delete nothing.

use std::sync::Arc;

use mnemo_api::View;

use super::upload::Upload;
use super::{StoreSync, SyncError, SyncReport, blocking, marker_reason};
use crate::fs::MarkerState;

impl StoreSync {
    /// Uploads every file that differs from the baseline (or has an unsettled send), unless the
    /// remote changed too. Read-only stores and folders failing the marker check upload nothing.
    pub async fn flush(&mut self) -> Result<SyncReport, SyncError> {
        let started = std::time::Instant::now();
        let outcome = self.flush_unrecorded().await;
        super::metrics::sync_done("flush", started, &outcome);
        outcome
    }

    /// [`flush`](Self::flush) without its metrics.
    async fn flush_unrecorded(&mut self) -> Result<SyncReport, SyncError> {
        let mut report = SyncReport::default();
        if self.cfg.read_only {
            return Ok(report);
        }
        let files = Arc::clone(&self.files);
        let local = blocking(move || files.scan()).await?;
        let marker = self.marker().await?;
        let local = match (marker, local) {
            (MarkerState::Matches, Ok(local)) => local,
            (marker, _) => {
                let reason = marker_reason(marker);
                tracing::warn!(memory_store_id = %self.cfg.store_id, "{reason}; not uploading anything from the memory store folder");
                report.skipped = true;
                return Ok(report);
            }
        };
        let dirty: Vec<_> = local
            .iter()
            .filter(|(rel, f)| {
                let changed =
                    self.state.baseline.get(*rel) != Some(&f.sha256) || self.state.unsettled.contains_key(*rel);
                changed && self.state.refused.get(*rel) != Some(&f.sha256)
            })
            .map(|(rel, f)| (rel.clone(), f.sha256))
            .collect();
        if dirty.is_empty() {
            return Ok(report);
        }
        let remote = self.list(View::Basic).await?;
        self.settle(&remote);
        let mut uploads = Vec::new();
        for (rel, sha) in dirty {
            let base = self.state.baseline.get(&rel).copied();
            if base == Some(sha) {
                continue;
            }
            match remote.get(&rel) {
                Some(m) if m.content_sha256 == sha => {
                    self.state.baseline.insert(rel, sha);
                }
                Some(m) if Some(m.content_sha256) != base => {
                    tracing::warn!(path = %rel, memory_store_id = %self.cfg.store_id, "memory changed both locally and remotely; the flush leaves the remote version");
                    report.conflicts += 1;
                }
                Some(m) => uploads.push(Upload {
                    rel,
                    existing: Some((m.clone(), m.content_sha256)),
                    fallback: base,
                    read: None,
                }),
                None => uploads.push(Upload { rel, existing: None, fallback: base, read: None }),
            }
        }
        let mut next = self.state.baseline.clone();
        for (upload, outcome) in self.run_uploads(uploads).await {
            next.remove(&upload.rel);
            self.apply_upload(&upload, outcome, &mut next, &mut report);
        }
        self.state.baseline = next;
        self.save_journal().await;
        Ok(report)
    }
}
