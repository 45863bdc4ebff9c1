//! Memories: create, read, update (content and rename), delete, list.

use mnemo_api::{
    Actor, Memory, MemoryId, MemoryListItem, MemoryPath, MemoryStoreId, MemoryVersionId, Operation, View,
    content_sha256,
};
use mnemo_store::row::RollupScan;
use mnemo_store::rules::memory::{self as rules, Update};
use mnemo_store::{ExportPart, ListMemories, Listing, MemoryChange, Result, StoreError};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::engine::{backend, query_one};
use crate::{actor_columns, now_micros, parse_id, stores, ts};

/// A memory row with the bookkeeping a write needs.
struct Current {
    memory: Memory,
    seq: i64,
}

const COLUMNS: &str = "m.id, m.path, m.content_sha256, m.content_size_bytes, m.version_id, \
                       m.created_at, m.updated_at, m.seq";

fn from_row(store: &MemoryStoreId, r: &Row<'_>, with_content: bool) -> rusqlite::Result<(Memory, i64)> {
    let bad = |e: StoreError| rusqlite::Error::InvalidColumnName(e.to_string());
    Ok((
        Memory {
            id: parse_id(&r.get::<_, String>(0)?).map_err(bad)?,
            memory_store_id: store.clone(),
            path: r.get(1)?,
            content_sha256: r.get(2)?,
            content_size_bytes: r.get(3)?,
            memory_version_id: parse_id(&r.get::<_, String>(4)?).map_err(bad)?,
            created_at: ts(r.get(5)?),
            updated_at: ts(r.get(6)?),
            content: if with_content { Some(r.get(8)?) } else { None },
        },
        r.get(7)?,
    ))
}

fn load(c: &Connection, store: &MemoryStoreId, store_seq: i64, id: &MemoryId) -> Result<Current> {
    query_one(
        c,
        &format!(
            "SELECT {COLUMNS}, v.content FROM memories m JOIN memory_versions v ON v.seq = m.version_seq \
         WHERE m.id = ?1 AND m.store_seq = ?2"
        ),
        params![id.as_str(), store_seq],
        |r| from_row(store, r, true),
    )?
    .map(|(memory, seq)| Current { memory, seq })
    .ok_or_else(|| StoreError::not_found("memory", id))
}

/// The first memory (other than `except`) whose path equals, is an ancestor of, or lies below
/// `path`: the one that blocks `path` from existing.
fn blocker(c: &Connection, store_seq: i64, path: &MemoryPath, except: Option<i64>) -> Result<Option<(String, String)>> {
    let except = except.unwrap_or(-1);
    let mut exact = c
        .prepare_cached("SELECT id, path FROM memories WHERE store_seq = ?1 AND path = ?2 AND seq != ?3")
        .map_err(backend)?;
    for candidate in std::iter::once(path.as_str()).chain(path.ancestors()) {
        let hit = exact
            .query_row(params![store_seq, candidate, except], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(backend)?;
        if hit.is_some() {
            return Ok(hit);
        }
    }
    let (lo, hi) = path.descendant_range();
    query_one(
        c,
        "SELECT id, path FROM memories WHERE store_seq = ?1 AND path >= ?2 AND path < ?3 AND seq != ?4 \
         ORDER BY path LIMIT 1",
        params![store_seq, lo, hi, except],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

fn check_path_free(c: &Connection, store_seq: i64, path: &MemoryPath, except: Option<i64>) -> Result<()> {
    rules::check_path_free(path, blocker(c, store_seq, path, except)?)
}

/// Appends a version and returns its id and row number.
#[allow(clippy::too_many_arguments)]
fn insert_version(
    c: &Connection,
    store_seq: i64,
    memory_id: &MemoryId,
    operation: Operation,
    path: &str,
    content: Option<(&str, &str)>,
    actor: &Actor,
    now: i64,
) -> Result<(MemoryVersionId, i64)> {
    let id = MemoryVersionId::generate();
    let (kind, actor_id) = actor_columns(actor);
    c.prepare_cached(
        "INSERT INTO memory_versions (id, store_seq, memory_id, operation, path, content_sha256, \
         content_size_bytes, created_at, actor_kind, actor_id, content) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )
    .and_then(|mut s| {
        s.execute(params![
            id.as_str(),
            store_seq,
            memory_id.as_str(),
            operation.as_str(),
            path,
            content.map(|(_, sha)| sha),
            content.map(|(text, _)| text.len() as i64),
            now,
            kind,
            actor_id,
            content.map(|(text, _)| text),
        ])
    })
    .map_err(backend)?;
    Ok((id, c.last_insert_rowid()))
}

pub(crate) fn create(
    c: &Connection,
    store: &MemoryStoreId,
    path: &MemoryPath,
    content: String,
    actor: &Actor,
    limit: u32,
) -> Result<(Memory, i64)> {
    let (s, store_seq) = stores::get_with_seq(c, store)?;
    rules::check_writable(&s)?;
    check_path_free(c, store_seq, path, None)?;
    let count: i64 = c
        .prepare_cached("SELECT memory_count FROM memory_stores WHERE seq = ?1")
        .and_then(|mut st| st.query_row([store_seq], |r| r.get(0)))
        .map_err(backend)?;
    rules::check_capacity(&s, count.max(0) as u64, limit)?;
    let id = MemoryId::generate();
    let sha = content_sha256(content.as_bytes());
    let now = now_micros();
    let (version_id, version_seq) =
        insert_version(c, store_seq, &id, Operation::Created, path.as_str(), Some((&content, &sha)), actor, now)?;
    c.prepare_cached(
        "INSERT INTO memories (id, store_seq, path, content_sha256, content_size_bytes, version_seq, \
         version_id, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
    )
    .and_then(|mut st| {
        st.execute(params![
            id.as_str(),
            store_seq,
            path.as_str(),
            sha,
            content.len() as i64,
            version_seq,
            version_id.as_str(),
            now
        ])
    })
    .map_err(backend)?;
    c.prepare_cached("UPDATE memory_stores SET memory_count = memory_count + 1 WHERE seq = ?1")
        .and_then(|mut st| st.execute([store_seq]))
        .map_err(backend)?;
    let memory = Memory {
        id,
        memory_store_id: store.clone(),
        path: path.to_string(),
        content_size_bytes: content.len() as u64,
        content: Some(content),
        content_sha256: sha,
        memory_version_id: version_id,
        created_at: ts(now),
        updated_at: ts(now),
    };
    Ok((memory, version_seq))
}

pub(crate) fn get(c: &Connection, store: &MemoryStoreId, id: &MemoryId) -> Result<Memory> {
    let (_, store_seq) = stores::get_with_seq(c, store)?;
    load(c, store, store_seq, id).map(|cur| cur.memory)
}

pub(crate) fn update(
    c: &Connection,
    store: &MemoryStoreId,
    id: &MemoryId,
    change: MemoryChange,
    actor: &Actor,
) -> Result<(Memory, Option<i64>)> {
    let (s, store_seq) = stores::get_with_seq(c, store)?;
    rules::check_writable(&s)?;
    let Current { mut memory, seq } = load(c, store, store_seq, id)?;
    let (content, sha, moved_to) = match rules::plan_update(&memory, change)? {
        Update::Unchanged => return Ok((memory, None)),
        Update::Write { content, sha256, moved_to } => (content, sha256, moved_to),
    };
    if let Some(to) = &moved_to {
        check_path_free(c, store_seq, to, Some(seq))?;
    }
    let path = moved_to.map_or_else(|| memory.path.clone(), |p| p.to_string());
    let now = now_micros();
    let (version_id, version_seq) =
        insert_version(c, store_seq, id, Operation::Modified, &path, Some((&content, &sha)), actor, now)?;
    c.prepare_cached(
        "UPDATE memories SET path = ?1, content_sha256 = ?2, content_size_bytes = ?3, version_seq = ?4, \
         version_id = ?5, updated_at = ?6 WHERE seq = ?7",
    )
    .and_then(|mut st| st.execute(params![path, sha, content.len() as i64, version_seq, version_id.as_str(), now, seq]))
    .map_err(backend)?;
    memory.path = path;
    memory.content_sha256 = sha;
    memory.content_size_bytes = content.len() as u64;
    memory.content = Some(content);
    memory.memory_version_id = version_id;
    memory.updated_at = ts(now);
    Ok((memory, Some(version_seq)))
}

pub(crate) fn delete(
    c: &Connection,
    store: &MemoryStoreId,
    id: &MemoryId,
    expected_sha256: Option<&str>,
    actor: &Actor,
) -> Result<i64> {
    let (_, store_seq) = stores::get_with_seq(c, store)?;
    let row: Option<(i64, String, String)> = query_one(
        c,
        "SELECT seq, path, content_sha256 FROM memories WHERE id = ?1 AND store_seq = ?2",
        params![id.as_str(), store_seq],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let (seq, path, sha) = row.ok_or_else(|| StoreError::not_found("memory", id))?;
    rules::check_precondition(expected_sha256, &sha)?;
    let (_, version_seq) = insert_version(c, store_seq, id, Operation::Deleted, &path, None, actor, now_micros())?;
    c.execute("DELETE FROM memories WHERE seq = ?1", [seq]).map_err(backend)?;
    c.execute("UPDATE memory_stores SET memory_count = memory_count - 1 WHERE seq = ?1", [store_seq])
        .map_err(backend)?;
    Ok(version_seq)
}

/// Lists in byte order of path, as a [`RollupScan`] asks.
pub(crate) fn list(c: &Connection, store: &MemoryStoreId, q: &ListMemories) -> Result<Listing<MemoryListItem>> {
    let (_, store_seq) = stores::get_with_seq(c, store)?;
    let full = q.view == View::Full;
    let sql = if full {
        format!(
            "SELECT {COLUMNS}, v.content FROM memories m JOIN memory_versions v ON v.seq = m.version_seq \
             WHERE m.store_seq = ?1 AND m.path >= ?2 AND m.path > ?3 AND m.path < ?4 ORDER BY m.path LIMIT ?5"
        )
    } else {
        format!(
            "SELECT {COLUMNS} FROM memories m \
             WHERE m.store_seq = ?1 AND m.path >= ?2 AND m.path > ?3 AND m.path < ?4 ORDER BY m.path LIMIT ?5"
        )
    };
    let mut stmt = c.prepare_cached(&sql).map_err(backend)?;
    let mut scan = RollupScan::new(q)?;
    while let Some(batch) = scan.next_batch() {
        let limit = i64::try_from(batch.limit).unwrap_or(i64::MAX);
        let memories = stmt
            .query_map(params![store_seq, batch.from, batch.after, batch.until, limit], |r| {
                from_row(store, r, full).map(|(m, _)| m)
            })
            .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
            .map_err(backend)?;
        scan.feed(&batch, memories);
    }
    Ok(scan.finish())
}

/// [`Store::export_memories`](mnemo_store::Store::export_memories) on the read connection `c`,
/// inside its one read transaction: tells `began` the snapshot's change position, then sends
/// `chunk` memories at a time in path order, then `Done`. Stops quietly when the reader goes.
pub(crate) fn export(
    c: &Connection,
    store: &MemoryStoreId,
    chunk: u32,
    began: tokio::sync::oneshot::Sender<i64>,
    out: &tokio::sync::mpsc::Sender<Result<ExportPart>>,
) -> Result<()> {
    let (_, store_seq) = stores::get_with_seq(c, store)?;
    let seq: i64 = c
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM memory_versions WHERE store_seq = ?1")
        .and_then(|mut s| s.query_row([store_seq], |r| r.get(0)))
        .map_err(backend)?;
    if began.send(seq).is_err() {
        return Ok(());
    }
    let mut stmt = c
        .prepare_cached(&format!(
            "SELECT {COLUMNS}, v.content FROM memories m JOIN memory_versions v ON v.seq = m.version_seq \
             WHERE m.store_seq = ?1 AND m.path > ?2 ORDER BY m.path LIMIT ?3"
        ))
        .map_err(backend)?;
    let mut after = String::new();
    loop {
        let memories = stmt
            .query_map(params![store_seq, after, i64::from(chunk.max(1))], |r| from_row(store, r, true).map(|(m, _)| m))
            .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
            .map_err(backend)?;
        let last = memories.len() < chunk.max(1) as usize;
        if let Some(m) = memories.last() {
            after.clone_from(&m.path);
        }
        if !memories.is_empty() && out.blocking_send(Ok(ExportPart::Memories(memories))).is_err() {
            return Ok(());
        }
        if last {
            let _ = out.blocking_send(Ok(ExportPart::Done));
            return Ok(());
        }
    }
}
