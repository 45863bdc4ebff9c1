//! Uploading one file: create or conditional update, and what each answer means.

use std::collections::BTreeMap;
use std::sync::Arc;

use mnemo_api::limits::MAX_BATCH_WRITES;
use mnemo_api::{CreateMemory, Memory, MemoryWrite, MemoryWriteBatch, Precondition, UpdateMemory};
use mnemo_client::ClientError;

use super::run::SyncReport;
use super::{StoreSync, blocking};
use crate::fs::{Digest, FileStore, RelPath};

/// A file to upload.
#[derive(Debug, Clone)]
pub(crate) struct Upload {
    pub(crate) rel: RelPath,
    /// The memory to update and the digest it must hold; `None` creates a new memory.
    pub(crate) existing: Option<(super::Remote, Digest)>,
    /// The baseline to keep if the upload does not land.
    pub(crate) fallback: Option<Digest>,
    /// The file as the sync read it when it planned the upload (live sync, which reads each
    /// changed file to judge it); `None`: read when sent.
    pub(crate) read: Option<Ready>,
}

/// How an upload ended.
#[derive(Debug)]
pub(crate) enum UploadOutcome {
    /// The server holds the file in this memory; its digest as the server reports it.
    Uploaded { sha: Digest, id: mnemo_api::MemoryId },
    /// The file vanished before it could be read; the next sync decides.
    Vanished,
    /// The server (or a local check) refused this content; not retried until it changes.
    Refused { sha: Digest, reason: String },
    /// The precondition lost a race with another writer; the next sync pulls the winner.
    LostRace { sent: Digest },
    /// Anything else; retried at the next sync.
    Failed { sent: Option<Digest>, reason: String },
}

/// A file read for upload: its digest and its text.
#[derive(Debug, Clone)]
pub(crate) struct Ready {
    pub(crate) sha: Digest,
    text: String,
}

impl Ready {
    /// Bytes read from a file, when they are text (else they are read again when sent, which
    /// refuses them with its reason).
    pub(crate) fn of(sha: Digest, bytes: Vec<u8>) -> Option<Self> {
        String::from_utf8(bytes).ok().map(|text| Self { sha, text })
    }
}

/// Reads a file to upload; the outcome instead when it cannot be sent.
fn read_for_upload(files: &FileStore, rel: &RelPath) -> Result<Ready, UploadOutcome> {
    let bytes = match files.read(rel) {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Err(UploadOutcome::Vanished),
        Err(e) if e.is_refusal() => {
            return Err(match files.hash_now(rel) {
                Ok(Some(sha)) => UploadOutcome::Refused { sha, reason: e.to_string() },
                _ => UploadOutcome::Failed { sent: None, reason: e.to_string() },
            });
        }
        Err(e) => return Err(UploadOutcome::Failed { sent: None, reason: e.to_string() }),
    };
    let sha = Digest::of(&bytes);
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Ready { sha, text }),
        Err(_) => Err(UploadOutcome::Refused { sha, reason: "the file is not valid UTF-8 text".into() }),
    }
}

/// What the server's answer to a create or an update means for the sync.
fn outcome_of(result: Result<Memory, ClientError>, update: bool, sha: Digest) -> UploadOutcome {
    match result {
        // The server's digest, as the reference keeps it; the bytes sent if it gave none that
        // reads as one (it stored them).
        Ok(memory) => {
            UploadOutcome::Uploaded { sha: Digest::parse_hex(&memory.content_sha256).unwrap_or(sha), id: memory.id }
        }
        Err(e) if update && e.is_conflict() => UploadOutcome::LostRace { sent: sha },
        Err(e) if matches!(e.status(), Some(400 | 413)) => UploadOutcome::Refused { sha, reason: e.to_string() },
        Err(e) => UploadOutcome::Failed { sent: Some(sha), reason: e.to_string() },
    }
}

/// An upload of a batch: how big its write is in the request body, at most (JSON escapes a
/// quote, a backslash or a control character in up to six bytes).
fn json_bound(text: &str, path: &str) -> usize {
    let escaped = |s: &str| s.len() + s.bytes().filter(|b| *b < 0x20 || matches!(b, b'"' | b'\\')).count() * 5;
    escaped(text) + escaped(path) + 256
}

/// Takes a batch write's content back out (every write of a sync's batch carries one).
fn content_of(write: &mut MemoryWrite) -> String {
    match write {
        MemoryWrite::Create(create) => create.content.take(),
        MemoryWrite::Update { change, .. } => change.content.take(),
    }
    .unwrap_or_default()
}

/// Request bytes a batch may carry: the server's body limit (1 MiB) with room to spare.
const BATCH_BODY_BUDGET: usize = 900 * 1024;

impl StoreSync {
    /// Reads and sends one file.
    pub(crate) async fn upload(&self, u: &Upload) -> UploadOutcome {
        if let Some(ready) = &u.read {
            return self.send_one(u, ready.clone()).await;
        }
        let (files, rel) = (Arc::clone(&self.files), u.rel.clone());
        let ready = match blocking(move || read_for_upload(&files, &rel)).await {
            Ok(Ok(ready)) => ready,
            Ok(Err(outcome)) => return outcome,
            Err(e) => return UploadOutcome::Failed { sent: None, reason: e.to_string() },
        };
        self.send_one(u, ready).await
    }

    async fn send_one(&self, u: &Upload, Ready { sha, text }: Ready) -> UploadOutcome {
        let store = &self.cfg.store_id;
        let path = u.rel.to_memory_path();
        self.wrote();
        let result = match &u.existing {
            Some((memory, precondition)) => {
                let body = UpdateMemory {
                    content: Some(text.clone()),
                    precondition: Some(Precondition::ContentSha256 { content_sha256: precondition.to_hex() }),
                    ..Default::default()
                };
                match self.client.update_memory(store, &memory.id, &body, None).await {
                    // Deleted remotely since the listing: create it again.
                    Err(e) if e.is_not_found() => {
                        self.log_warning(&u.rel, super::plan::Warning::RecreatingDeletedRemotely);
                        return outcome_of(self.client.create_memory(store, &path, &text, None).await, false, sha);
                    }
                    other => other,
                }
            }
            None => self.client.create_memory(store, &path, &text, None).await,
        };
        outcome_of(result, u.existing.is_some(), sha)
    }

    /// Sends uploads in path order, one outcome each (in the same order). When the server
    /// applies memory batches (`mnemo serve`), they go in as few requests as the batch limits
    /// allow, each committed at once (one flush to disk instead of one per file) and applied in
    /// the same order as one by one; otherwise (the hosted API) one request per file.
    /// Files the sync already read (`Upload::read`) are sent as read, without a second read.
    pub(crate) async fn upload_in_order(&self, uploads: &mut [Upload]) -> Vec<UploadOutcome> {
        if uploads.len() < 2 || !self.client.offers_memory_batch() {
            let mut outcomes = Vec::with_capacity(uploads.len());
            for u in uploads.iter_mut() {
                outcomes.push(match u.read.take() {
                    Some(ready) => self.send_one(u, ready).await,
                    None => self.upload(u).await,
                });
            }
            return outcomes;
        }
        let mut read: Vec<Option<Result<Ready, UploadOutcome>>> =
            uploads.iter_mut().map(|u| u.read.take().map(Ok)).collect();
        // The rest are read in one trip to the blocking pool.
        let unread: Vec<RelPath> =
            uploads.iter().zip(&read).filter(|(_, r)| r.is_none()).map(|(u, _)| u.rel.clone()).collect();
        if !unread.is_empty() {
            let files = Arc::clone(&self.files);
            match blocking(move || unread.iter().map(|rel| read_for_upload(&files, rel)).collect::<Vec<_>>()).await {
                Ok(fresh) => {
                    let mut fresh = fresh.into_iter();
                    for slot in read.iter_mut().filter(|r| r.is_none()) {
                        *slot = fresh.next();
                    }
                }
                Err(e) => {
                    return uploads
                        .iter()
                        .map(|_| UploadOutcome::Failed { sent: None, reason: e.to_string() })
                        .collect();
                }
            }
        }
        let read = read.into_iter().map(|r| r.expect("every upload is read"));
        let uploads: &[Upload] = uploads;
        let mut outcomes: Vec<Option<UploadOutcome>> = Vec::with_capacity(uploads.len());
        // The uploads of the batch being filled: their index and what was read.
        let mut batch: Vec<(usize, Ready)> = Vec::new();
        let mut bytes = 0;
        for (i, ready) in read.enumerate() {
            let ready = match ready {
                Ok(ready) => ready,
                Err(outcome) => {
                    outcomes.push(Some(outcome));
                    continue;
                }
            };
            outcomes.push(None);
            let size = json_bound(&ready.text, uploads[i].rel.as_str());
            if !batch.is_empty() && (batch.len() == MAX_BATCH_WRITES || bytes + size > BATCH_BODY_BUDGET) {
                self.send_batch(uploads, std::mem::take(&mut batch), &mut outcomes).await;
                bytes = 0;
            }
            if size > BATCH_BODY_BUDGET {
                // Too big for any batch: alone, as its own request (which may refuse it).
                outcomes[i] = Some(self.send_one(&uploads[i], ready).await);
                continue;
            }
            bytes += size;
            batch.push((i, ready));
        }
        if !batch.is_empty() {
            self.send_batch(uploads, batch, &mut outcomes).await;
        }
        outcomes.into_iter().map(|o| o.expect("every upload has an outcome")).collect()
    }

    /// Sends one batch and records each upload's outcome at its index.
    async fn send_batch(&self, uploads: &[Upload], batch: Vec<(usize, Ready)>, outcomes: &mut [Option<UploadOutcome>]) {
        let store = &self.cfg.store_id;
        // The contents move into the request; a write sent again alone takes its own back.
        let (sent, writes): (Vec<(usize, Digest)>, Vec<MemoryWrite>) = batch
            .into_iter()
            .map(|(i, Ready { sha, text })| {
                let u = &uploads[i];
                let write = match &u.existing {
                    Some((memory, precondition)) => MemoryWrite::Update {
                        memory_id: memory.id.to_string(),
                        change: UpdateMemory {
                            content: Some(text),
                            precondition: Some(Precondition::ContentSha256 { content_sha256: precondition.to_hex() }),
                            ..Default::default()
                        },
                    },
                    None => MemoryWrite::Create(CreateMemory { path: u.rel.to_memory_path(), content: Some(text) }),
                };
                ((i, sha), write)
            })
            .unzip();
        let mut body = MemoryWriteBatch { writes };
        self.wrote();
        let answers = match self.client.write_memories(store, &body).await {
            Ok(answers) => answers,
            // A route the server named but does not answer (a replica behind the same address
            // without it): one by one instead.
            Err(e) if e.is_not_found() => {
                tracing::debug!(memory_store_id = %store, "the memory batch was not found; uploading one by one: {e}");
                for ((i, sha), write) in sent.into_iter().zip(&mut body.writes) {
                    outcomes[i] = Some(self.send_one(&uploads[i], Ready { sha, text: content_of(write) }).await);
                }
                return;
            }
            Err(e) => {
                let reason = e.to_string();
                for (i, sha) in sent {
                    outcomes[i] = Some(UploadOutcome::Failed { sent: Some(sha), reason: reason.clone() });
                }
                return;
            }
        };
        for (((i, sha), write), answer) in sent.into_iter().zip(&mut body.writes).zip(answers) {
            let u = &uploads[i];
            outcomes[i] = Some(match answer {
                // Deleted remotely since the listing: create it again, as one by one would.
                Err(e) if u.existing.is_some() && e.is_not_found() => {
                    let ready = Ready { sha, text: content_of(write) };
                    self.send_one(&Upload { existing: None, read: None, ..u.clone() }, ready).await
                }
                answer => outcome_of(answer, u.existing.is_some(), sha),
            });
        }
    }

    /// Records an upload's outcome in the state, the next baseline and the report.
    pub(crate) fn apply_upload(
        &mut self,
        u: &Upload,
        outcome: UploadOutcome,
        next: &mut BTreeMap<RelPath, Digest>,
        report: &mut SyncReport,
    ) {
        let store = &self.cfg.store_id;
        let rel = &u.rel;
        let mut keep_fallback = || {
            if let Some(b) = u.fallback {
                next.insert(rel.clone(), b);
            }
        };
        match outcome {
            UploadOutcome::Uploaded { sha, id } => {
                self.state.refused.remove(rel);
                self.state.unsettled.remove(rel);
                self.learned_id(rel, id);
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
