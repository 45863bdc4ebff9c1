//! Memory versions: the immutable audit trail, and its one mutation, redaction.

use mnemo_api::limits::MAX_INLINE_CHANGE_BYTES;
use mnemo_api::{MemoryId, MemoryStoreId, MemoryVersion, MemoryVersionId, Operation, View, WorkspaceId};
use mnemo_store::ops::{self, VersionRow};
use mnemo_store::rules::memory;
use mnemo_store::{ListMemoryVersions, Listing, MAX_FEED_PAGE, MemoryFeedEntry, Result, StoreError};
use rusqlite::{Connection, Row, params};

use crate::engine::{Lite, backend, query_one};
use crate::stores::{self, page};
use crate::{actor_columns, actor_from_columns, parse_id, ts, ts_opt};

const COLUMNS: &str = "id, memory_id, operation, path, content_sha256, content_size_bytes, created_at, \
                       actor_kind, actor_id, redacted_at, redactor_kind, redactor_id, seq";

fn from_row(store: &MemoryStoreId, r: &Row<'_>, with_content: bool) -> rusqlite::Result<(MemoryVersion, i64)> {
    let bad = |e: StoreError| rusqlite::Error::InvalidColumnName(e.to_string());
    let operation: String = r.get(2)?;
    Ok((
        MemoryVersion {
            id: parse_id(&r.get::<_, String>(0)?).map_err(bad)?,
            memory_id: parse_id(&r.get::<_, String>(1)?).map_err(bad)?,
            memory_store_id: store.clone(),
            operation: Operation::parse(&operation)
                .ok_or_else(|| rusqlite::Error::InvalidColumnName(format!("operation {operation}")))?,
            path: r.get(3)?,
            content_sha256: r.get(4)?,
            content_size_bytes: r.get(5)?,
            created_at: ts(r.get(6)?),
            created_by: actor_from_columns(r.get(7)?, r.get(8)?),
            redacted_at: ts_opt(r.get(9)?),
            redacted_by: actor_from_columns(r.get(10)?, r.get(11)?),
            content: if with_content { r.get(13)? } else { None },
        },
        r.get(12)?,
    ))
}

fn load(
    c: &Connection,
    store: &MemoryStoreId,
    store_seq: i64,
    id: &MemoryVersionId,
    view: View,
) -> Result<(MemoryVersion, i64)> {
    query_one(
        c,
        &format!("SELECT {COLUMNS}, content FROM memory_versions WHERE id = ?1 AND store_seq = ?2"),
        params![id.as_str(), store_seq],
        |r| from_row(store, r, view == View::Full),
    )?
    .ok_or_else(|| StoreError::not_found("memory version", id))
}

pub(crate) fn get(
    c: &Connection,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    id: &MemoryVersionId,
    view: View,
) -> Result<MemoryVersion> {
    let (_, store_seq) = stores::get_with_seq(c, ws, store)?;
    load(c, store, store_seq, id, view).map(|(v, _)| v)
}

pub(crate) fn list(
    c: &Connection,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    q: &ListMemoryVersions,
) -> Result<Listing<MemoryVersion>> {
    let (_, store_seq) = stores::get_with_seq(c, ws, store)?;
    let before = crate::stores::before(q.after.as_ref())?;
    let Some((actor_kind, actor_id)) = q.actor_filter().params() else {
        return Ok(Listing { items: Vec::new(), next: None });
    };
    let with_content = q.view == View::Full;
    let sql = format!(
        "SELECT {COLUMNS}{} FROM memory_versions \
         WHERE store_seq = ?1 AND seq < ?2 \
           AND (?3 IS NULL OR memory_id = ?3) AND (?4 IS NULL OR operation = ?4) \
           AND (?5 IS NULL OR (actor_kind = ?5 AND actor_id = ?6)) \
           AND created_at >= ?7 AND created_at <= ?8 \
         ORDER BY seq DESC LIMIT ?9",
        if with_content { ", content" } else { "" }
    );
    let mut stmt = c.prepare_cached(&sql).map_err(backend)?;
    let rows = stmt
        .query_map(
            params![
                store_seq,
                before,
                q.memory_id.as_ref().map(|m| m.as_str()),
                q.operation.map(Operation::as_str),
                actor_kind,
                actor_id,
                q.created_at_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
                q.created_at_lte.map_or(i64::MAX, |t| t.timestamp_micros()),
                i64::from(q.limit) + 1,
            ],
            |r| from_row(store, r, with_content),
        )
        .map_err(backend)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(backend)?;
    Ok(page(rows, q.limit))
}

/// The store's versions after position `after`, oldest first (by the `memory_versions_store`
/// index), with small versions' content under `inline`. The single writer commits versions in
/// position order.
pub(crate) fn changes_after(
    c: &Connection,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    after: i64,
    limit: u32,
    inline: bool,
) -> Result<Vec<MemoryFeedEntry>> {
    let (_, store_seq) = stores::get_with_seq(c, ws, store)?;
    let sql = format!(
        "SELECT {COLUMNS}, CASE WHEN ?4 AND content_size_bytes <= ?5 THEN content END \
         FROM memory_versions WHERE store_seq = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"
    );
    let mut stmt = c.prepare_cached(&sql).map_err(backend)?;
    let max = MAX_INLINE_CHANGE_BYTES as i64;
    stmt.query_map(params![store_seq, after, limit.min(MAX_FEED_PAGE), inline, max], |r| from_row(store, r, true))
        .map_err(backend)?
        .map(|row| row.map(|(version, seq)| memory::feed_entry(version, seq, inline)))
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(backend)
}

impl ops::VersionSql for Lite<'_> {
    async fn load_version(
        &self,
        store: &MemoryStoreId,
        store_seq: i64,
        id: &MemoryVersionId,
    ) -> Result<Option<VersionRow>> {
        Ok(query_one(
            self,
            &format!("SELECT {COLUMNS}, content FROM memory_versions WHERE id = ?1 AND store_seq = ?2"),
            params![id.as_str(), store_seq],
            |r| from_row(store, r, true),
        )?
        .map(|(version, seq)| VersionRow { version, seq }))
    }

    async fn current_version(&self, store_seq: i64, memory: &MemoryId) -> Result<Option<MemoryVersionId>> {
        let current: Option<String> = query_one(
            self,
            "SELECT version_id FROM memories WHERE id = ?1 AND store_seq = ?2",
            params![memory.as_str(), store_seq],
            |r| r.get(0),
        )?;
        current.as_deref().map(parse_id).transpose()
    }

    async fn write_redaction(&self, seq: i64, version: &MemoryVersion, now: i64) -> Result<()> {
        let (kind, redactor) = version.redacted_by.as_ref().map(actor_columns).unzip();
        self.execute(
            "UPDATE memory_versions SET content = ?1, path = ?2, content_sha256 = ?3, content_size_bytes = ?4, \
             redacted_at = ?5, redactor_kind = ?6, redactor_id = ?7 WHERE seq = ?8",
            params![
                version.content,
                version.path,
                version.content_sha256,
                version.content_size_bytes.map(|n| n as i64),
                now,
                kind,
                redactor,
                seq
            ],
        )
        .map(drop)
        .map_err(backend)
    }
}
