//! Uploading one file: create or conditional update, and what each answer means.

use std::collections::BTreeMap;
use std::sync::Arc;

use mnemo_api::{Precondition, UpdateMemory, content_sha256};

use super::run::SyncReport;
use super::{StoreSync, blocking};
use crate::fs::RelPath;

/// A file to upload.
#[derive(Debug, Clone)]
pub(crate) struct Upload {
    pub(crate) rel: RelPath,
    /// The memory to update and the digest it must hold; `None` creates a new memory.
    pub(crate) existing: Option<(super::Remote, String)>,
    /// The baseline to keep if the upload does not land.
    pub(crate) fallback: Option<String>,
}

/// How an upload ended.
#[derive(Debug)]
pub(crate) enum UploadOutcome {
    /// The server holds the file; its digest as the server reports it.
    Uploaded(String),
    /// The file vanished before it could be read; the next sync decides.
    Vanished,
    /// The server (or a local check) refused this content; not retried until it changes.
    Refused { sha: String, reason: String },
    /// The precondition lost a race with another writer; the next sync pulls the winner.
    LostRace { sent: String },
    /// Anything else; retried at the next sync.
    Failed { sent: Option<String>, reason: String },
}

impl StoreSync {
    /// Reads and sends one file.
    pub(crate) async fn upload(&self, u: &Upload) -> UploadOutcome {
        let (files, rel) = (Arc::clone(&self.files), u.rel.clone());
        let bytes = match blocking(move || files.read(&rel)).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(e)) if e.is_not_found() => return UploadOutcome::Vanished,
            Ok(Err(e)) if e.is_refusal() => {
                let (files, rel) = (Arc::clone(&self.files), u.rel.clone());
                return match blocking(move || files.hash_now(&rel)).await {
                    Ok(Ok(Some(sha))) => UploadOutcome::Refused { sha, reason: e.to_string() },
                    _ => UploadOutcome::Failed { sent: None, reason: e.to_string() },
                };
            }
            Ok(Err(e)) => {
                return UploadOutcome::Failed { sent: None, reason: e.to_string() };
            }
            Err(e) => {
                return UploadOutcome::Failed { sent: None, reason: e.to_string() };
            }
        };
        let sha = content_sha256(&bytes);
        let Ok(text) = String::from_utf8(bytes) else {
            return UploadOutcome::Refused { sha, reason: "the file is not valid UTF-8 text".into() };
        };
        let store = &self.cfg.store_id;
        let path = u.rel.to_memory_path();
        let result = match &u.existing {
            Some((memory, precondition)) => {
                let body = UpdateMemory {
                    content: Some(text.clone()),
                    precondition: Some(Precondition::ContentSha256 { content_sha256: precondition.clone() }),
                    ..Default::default()
                };
                match self.client.update_memory(store, &memory.id, &body, None).await {
                    // Deleted remotely since the listing: create it again.
                    Err(e) if e.is_not_found() => self.client.create_memory(store, &path, &text, None).await,
                    Err(e) if e.is_conflict() => return UploadOutcome::LostRace { sent: sha },
                    other => other,
                }
            }
            None => self.client.create_memory(store, &path, &text, None).await,
        };
        match result {
            Ok(memory) => UploadOutcome::Uploaded(memory.content_sha256),
            Err(e) if matches!(e.status(), Some(400 | 413)) => UploadOutcome::Refused { sha, reason: e.to_string() },
            Err(e) => UploadOutcome::Failed { sent: Some(sha), reason: e.to_string() },
        }
    }

    /// Records an upload's outcome in the state, the next baseline and the report.
    pub(crate) fn apply_upload(
        &mut self,
        u: &Upload,
        outcome: UploadOutcome,
        next: &mut BTreeMap<RelPath, String>,
        report: &mut SyncReport,
    ) {
        let store = &self.cfg.store_id;
        let rel = &u.rel;
        let mut keep_fallback = || {
            if let Some(b) = &u.fallback {
                next.insert(rel.clone(), b.clone());
            }
        };
        match outcome {
            UploadOutcome::Uploaded(sha) => {
                self.state.refused.remove(rel);
                self.state.unsettled.remove(rel);
                next.insert(rel.clone(), sha);
                report.uploaded += 1;
            }
            UploadOutcome::Vanished => keep_fallback(),
            UploadOutcome::Refused { sha, reason } => {
                tracing::warn!(path = %rel, memory_store_id = %store, "the server rejected this memory file, so it stays un-synced until its content changes: {reason}");
                self.state.refused.insert(rel.clone(), sha);
                keep_fallback();
                report.refused += 1;
            }
            UploadOutcome::LostRace { sent } => {
                tracing::warn!(path = %rel, memory_store_id = %store, "memory changed remotely before the upload landed; the upload was refused and the local edit loses");
                self.state.unsettled.insert(rel.clone(), sent);
                keep_fallback();
                report.conflicts += 1;
            }
            UploadOutcome::Failed { sent, reason } => {
                tracing::warn!(path = %rel, memory_store_id = %store, "failed to upload memory: {reason}");
                if let Some(sent) = sent {
                    self.state.unsettled.insert(rel.clone(), sent);
                }
                keep_fallback();
                report.failed += 1;
            }
        }
    }
}
