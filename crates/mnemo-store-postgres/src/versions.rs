//! Memory versions: the immutable audit trail, and its one mutation, redaction.
//!
//! Redaction locks the store's row ([`stores::lock_for_memories`]) before it reads the version and the
//! memory's current version, so no concurrent write to the memory can make the version it
//! redacts current (or stop it being current) while it judges. Reads take no lock.

use mnemo_api::{Actor, MemoryChangeEvent, MemoryStoreId, MemoryVersion, MemoryVersionId, Operation, View};
use mnemo_store::row::ActorFilter;
use mnemo_store::rules::memory::check_redactable;
use mnemo_store::{ListMemoryVersions, Listing, MAX_FEED_PAGE, MemoryFeedEntry, Result, StoreError};
use tokio_postgres::Row;

use crate::engine::{Tx, all, col, exec, failure, opt};
use crate::memories::size;
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

pub(crate) async fn get(tx: &Tx<'_>, store: &MemoryStoreId, id: &MemoryVersionId, view: View) -> Result<MemoryVersion> {
    let (_, store_seq) = stores::get_with_seq(tx, store).await?;
    load(tx, store, store_seq, id, view).await.map(|(v, _)| v)
}

/// Lists a store's versions newest first.
pub(crate) async fn list(tx: &Tx<'_>, store: &MemoryStoreId, q: &ListMemoryVersions) -> Result<Listing<MemoryVersion>> {
    let (_, store_seq) = stores::get_with_seq(tx, store).await?;
    let before = stores::before(q.after.as_ref())?;
    let (actor_kind, actor_id) = match q.actor_filter() {
        ActorFilter::Any => (None, None),
        ActorFilter::One(kind, id) => (Some(kind), Some(id)),
        ActorFilter::Nothing => return Ok(Listing { items: Vec::new(), next: None }),
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

/// Clears a version's path and content, recording who redacted it and when; redacting a
/// redacted version answers with it as it is. Under the store's lock: the version is not its
/// memory's current one.
/// The store's versions after position `after`, oldest first, without content (by the
/// `memory_versions_store` index). Writers take the store's row lock before they number a
/// version, so positions grow in commit order and a snapshot never lacks a smaller one.
pub(crate) async fn changes_after(
    tx: &Tx<'_>,
    store: &MemoryStoreId,
    after: i64,
    limit: u32,
) -> Result<Vec<MemoryFeedEntry>> {
    let (_, store_seq) = stores::get_with_seq(tx, store).await?;
    let limit = i64::from(limit.min(MAX_FEED_PAGE));
    let rows = all(
        tx,
        &format!("SELECT {COLUMNS} FROM memory_versions WHERE store_seq = $1 AND seq > $2 ORDER BY seq LIMIT $3"),
        &[&store_seq, &after, &limit],
    )
    .await?;
    rows.iter()
        .map(|r| {
            from_row(store, r, false)
                .map(|(version, seq)| MemoryFeedEntry { seq, change: MemoryChangeEvent::of(&version) })
        })
        .collect()
}

pub(crate) async fn redact(
    tx: &Tx<'_>,
    store: &MemoryStoreId,
    id: &MemoryVersionId,
    actor: &Actor,
) -> Result<MemoryVersion> {
    let locked = stores::lock_for_memories(tx, store).await?;
    let (store_seq, now) = (locked.seq, locked.now);
    let (version, seq) = load(tx, store, store_seq, id, View::Full).await?;
    if version.redacted_at.is_some() {
        return Ok(version);
    }
    let current = opt(
        tx,
        "SELECT version_id FROM memories WHERE id = $1 AND store_seq = $2",
        &[&version.memory_id.as_str(), &store_seq],
    )
    .await?;
    let current: Option<MemoryVersionId> = current.map(|r| parse_id(&col::<String>(&r, 0)?)).transpose()?;
    check_redactable(&version, current.as_ref())?;
    let (kind, redactor) = actor_columns(actor);
    exec(
        tx,
        "UPDATE memory_versions SET content = NULL, path = NULL, content_sha256 = NULL, \
         content_size_bytes = NULL, redacted_at = $1, redactor_kind = $2, redactor_id = $3 WHERE seq = $4",
        &[&now, &kind, &redactor, &seq],
    )
    .await?;
    Ok(MemoryVersion {
        path: None,
        content: None,
        content_sha256: None,
        content_size_bytes: None,
        redacted_at: Some(ts(now)),
        redacted_by: Some(actor.clone()),
        ..version
    })
}
