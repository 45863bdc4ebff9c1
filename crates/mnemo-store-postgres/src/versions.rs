//! Memory versions: the immutable audit trail, and the SQL of its one mutation, redaction
//! ([`mnemo_store::ops::versions::redact`], which locks the store's row first). Reads take no
//! lock.

use mnemo_api::limits::MAX_INLINE_CHANGE_BYTES;
use mnemo_api::{MemoryId, MemoryStoreId, MemoryVersion, MemoryVersionId, Operation, View, WorkspaceId};
use mnemo_store::ops::{self, VersionRow};
use mnemo_store::rules::memory;
use mnemo_store::{ListMemoryVersions, Listing, MAX_FEED_PAGE, MemoryFeedEntry, Result, StoreError};
use tokio_postgres::Row;

use crate::engine::{Pg, Tx, all, col, exec, failure, opt};
use crate::memories::{bigint, size};
use crate::stores::{self, page};
use crate::{actor_columns, actor_from_columns, parse_id, ts, ts_opt};

const COLUMNS: &str = "id, memory_id, operation, path, content_sha256, content_size_bytes, created_at, \
                       actor_kind, actor_id, redacted_at, redactor_kind, redactor_id, seq";

fn from_row(store: &MemoryStoreId, r: &Row, with_content: bool) -> Result<(MemoryVersion, i64)> {
    let operation: String = col(r, 2)?;
    Ok((
        MemoryVersion {
            id: parse_id(&col::<String>(r, 0)?)?,
            memory_id: parse_id(&col::<String>(r, 1)?)?,
            memory_store_id: store.clone(),
            operation: Operation::parse(&operation)
                .ok_or_else(|| failure(format!("unknown operation `{operation}` in the database")))?,
            path: col(r, 3)?,
            content_sha256: col(r, 4)?,
            content_size_bytes: col::<Option<i64>>(r, 5)?.map(size).transpose()?,
            created_at: ts(col(r, 6)?),
            created_by: actor_from_columns(col(r, 7)?, col(r, 8)?),
            redacted_at: ts_opt(col(r, 9)?),
            redacted_by: actor_from_columns(col(r, 10)?, col(r, 11)?),
            content: if with_content { crate::engine::text_bytes(r, 13)? } else { None },
        },
        col(r, 12)?,
    ))
}

async fn load(
    tx: &Tx<'_>,
    store: &MemoryStoreId,
    store_seq: i64,
    id: &MemoryVersionId,
    view: View,
) -> Result<(MemoryVersion, i64)> {
    let row = opt(
        tx,
        &format!("SELECT {COLUMNS}, content FROM memory_versions WHERE id = $1 AND store_seq = $2"),
        &[&id.as_str(), &store_seq],
    )
    .await?;
    row.as_ref()
        .map(|r| from_row(store, r, view == View::Full))
        .transpose()?
        .ok_or_else(|| StoreError::not_found("memory version", id))
}

pub(crate) async fn get(
    tx: &Tx<'_>,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    id: &MemoryVersionId,
    view: View,
) -> Result<MemoryVersion> {
    let (_, store_seq) = stores::get_with_seq(tx, ws, store).await?;
    load(tx, store, store_seq, id, view).await.map(|(v, _)| v)
}

/// Lists a store's versions newest first.
pub(crate) async fn list(
    tx: &Tx<'_>,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    q: &ListMemoryVersions,
) -> Result<Listing<MemoryVersion>> {
    let (_, store_seq) = stores::get_with_seq(tx, ws, store).await?;
    let before = stores::before(q.after.as_ref())?;
    let Some((actor_kind, actor_id)) = q.actor_filter().params() else {
        return Ok(Listing { items: Vec::new(), next: None });
    };
    let with_content = q.view == View::Full;
    let sql = format!(
        "SELECT {COLUMNS}{} FROM memory_versions \
         WHERE store_seq = $1 AND seq < $2 \
           AND ($3::text IS NULL OR memory_id = $3) AND ($4::text IS NULL OR operation = $4) \
           AND ($5::text IS NULL OR (actor_kind = $5 AND actor_id = $6)) \
           AND created_at >= $7 AND created_at <= $8 \
         ORDER BY seq DESC LIMIT $9",
        if with_content { ", content" } else { "" }
    );
    let rows = all(
        tx,
        &sql,
        &[
            &store_seq,
            &before,
            &q.memory_id.as_ref().map(|m| m.as_str()),
            &q.operation.map(Operation::as_str),
            &actor_kind,
            &actor_id,
            &q.created_at_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
            &q.created_at_lte.map_or(i64::MAX, |t| t.timestamp_micros()),
            &(i64::from(q.limit) + 1),
        ],
    )
    .await?;
    let rows = rows.iter().map(|r| from_row(store, r, with_content)).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, q.limit))
}

/// The store's versions after position `after`, oldest first (by the `memory_versions_store`
/// index), with small versions' content under `inline`. Writers take the store's row lock
/// before they number a version, so positions grow in commit order and a snapshot never lacks
/// a smaller one.
pub(crate) async fn changes_after(
    tx: &Tx<'_>,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    after: i64,
    limit: u32,
    inline: bool,
) -> Result<Vec<MemoryFeedEntry>> {
    let (_, store_seq) = stores::get_with_seq(tx, ws, store).await?;
    let limit = i64::from(limit.min(MAX_FEED_PAGE));
    let max = MAX_INLINE_CHANGE_BYTES as i64;
    let rows = all(
        tx,
        &format!(
            "SELECT {COLUMNS}, CASE WHEN $4 AND content_size_bytes <= $5 THEN content END \
             FROM memory_versions WHERE store_seq = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        ),
        &[&store_seq, &after, &limit, &inline, &max],
    )
    .await?;
    rows.iter()
        .map(|r| from_row(store, r, true).map(|(version, seq)| memory::feed_entry(version, seq, inline)))
        .collect()
}

impl ops::VersionSql for Pg<'_, '_> {
    async fn load_version(
        &self,
        store: &MemoryStoreId,
        store_seq: i64,
        id: &MemoryVersionId,
    ) -> Result<Option<VersionRow>> {
        let row = opt(
            self,
            &format!("SELECT {COLUMNS}, content FROM memory_versions WHERE id = $1 AND store_seq = $2"),
            &[&id.as_str(), &store_seq],
        )
        .await?;
        row.as_ref().map(|r| from_row(store, r, true).map(|(version, seq)| VersionRow { version, seq })).transpose()
    }

    async fn current_version(&self, store_seq: i64, memory: &MemoryId) -> Result<Option<MemoryVersionId>> {
        let current = opt(
            self,
            "SELECT version_id FROM memories WHERE id = $1 AND store_seq = $2",
            &[&memory.as_str(), &store_seq],
        )
        .await?;
        current.map(|r| parse_id(&col::<String>(&r, 0)?)).transpose()
    }

    async fn write_redaction(&self, seq: i64, version: &MemoryVersion, now: i64) -> Result<()> {
        let (kind, redactor) = version.redacted_by.as_ref().map(actor_columns).unzip();
        let size = version.content_size_bytes.map(|n| bigint(n as usize)).transpose()?;
        let content = version.content.as_deref().map(str::as_bytes);
        exec(
            self,
            "UPDATE memory_versions SET content = $1, path = $2, content_sha256 = $3, content_size_bytes = $4, \
             redacted_at = $5, redactor_kind = $6, redactor_id = $7 WHERE seq = $8",
            &[&content, &version.path, &version.content_sha256, &size, &now, &kind, &redactor, &seq],
        )
        .await
        .map(drop)
    }
}
