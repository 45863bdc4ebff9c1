//! Memories: create, read, update (content and rename), delete, list.
//!
//! Every write first locks the store's row ([`stores::lock`]) and only then reads the memory,
//! the paths or the count it judges: writers of one store take turns, so two creates racing
//! for one path (or for the last slot under the cap), or two updates with one
//! `content_sha256` precondition, cannot both pass, and the store's version positions grow
//! in commit order. Reads take no lock.

use mnemo_api::{
    Actor, Memory, MemoryId, MemoryListItem, MemoryPath, MemoryPrefix, MemoryStoreId, MemoryVersionId, Operation, View,
    content_sha256,
};
use mnemo_store::rules::memory::{self as rules, Update};
use mnemo_store::{Cursor, ListMemories, Listing, MemoryChange, Result, StoreError, rollup};
use tokio_postgres::Row;

use crate::engine::{Tx, all, col, exec, failure, now, one, opt};
use crate::{actor_columns, parse_id, stores, ts};

/// A memory row with the bookkeeping a write needs.
struct Current {
    memory: Memory,
    seq: i64,
}

const COLUMNS: &str = "m.id, m.path, m.content_sha256, m.content_size_bytes, m.version_id, \
                       m.created_at, m.updated_at, m.seq";

/// A size column as the API's unsigned size.
pub(crate) fn size(bytes: i64) -> Result<u64> {
    u64::try_from(bytes).map_err(|_| failure(format!("negative size {bytes} in the database")))
}

/// A length as a `BIGINT`.
pub(crate) fn bigint(len: usize) -> Result<i64> {
    i64::try_from(len).map_err(|_| failure(format!("size {len} does not fit the database")))
}

fn from_row(store: &MemoryStoreId, r: &Row, with_content: bool) -> Result<(Memory, i64)> {
    Ok((
        Memory {
            id: parse_id(&col::<String>(r, 0)?)?,
            memory_store_id: store.clone(),
            path: col(r, 1)?,
            content_sha256: col(r, 2)?,
            content_size_bytes: size(col(r, 3)?)?,
            memory_version_id: parse_id(&col::<String>(r, 4)?)?,
            created_at: ts(col(r, 5)?),
            updated_at: ts(col(r, 6)?),
            content: if with_content { crate::engine::text_bytes(r, 8)? } else { None },
        },
        col(r, 7)?,
    ))
}

async fn load(tx: &Tx<'_>, store: &MemoryStoreId, store_seq: i64, id: &MemoryId) -> Result<Current> {
    let row = opt(
        tx,
        &format!(
            "SELECT {COLUMNS}, v.content FROM memories m JOIN memory_versions v ON v.seq = m.version_seq \
             WHERE m.id = $1 AND m.store_seq = $2"
        ),
        &[&id.as_str(), &store_seq],
    )
    .await?;
    let (memory, seq) = row
        .as_ref()
        .map(|r| from_row(store, r, true))
        .transpose()?
        .ok_or_else(|| StoreError::not_found("memory", id))?;
    Ok(Current { memory, seq })
}

/// The first memory (other than `except`) whose path equals, is an ancestor of, or lies below
/// `path`: the one that blocks `path` from existing. The caller holds the store's lock, so no
/// other writer adds a blocker before its write lands.
async fn blocker(
    tx: &Tx<'_>,
    store_seq: i64,
    path: &MemoryPath,
    except: Option<i64>,
) -> Result<Option<(String, String)>> {
    let except = except.unwrap_or(-1);
    // The path itself and its ancestors: at most one of them exists (they overlap each other).
    let candidates: Vec<&str> = std::iter::once(path.as_str()).chain(path.ancestors()).collect();
    let hit = opt(
        tx,
        "SELECT id, path FROM memories WHERE store_seq = $1 AND path = ANY($2) AND seq <> $3 ORDER BY path LIMIT 1",
        &[&store_seq, &candidates, &except],
    )
    .await?;
    if let Some(r) = hit {
        return Ok(Some((col(&r, 0)?, col(&r, 1)?)));
    }
    let (lo, hi) = path.descendant_range();
    let hit = opt(
        tx,
        "SELECT id, path FROM memories WHERE store_seq = $1 AND path >= $2 AND path < $3 AND seq <> $4 \
         ORDER BY path LIMIT 1",
        &[&store_seq, &lo, &hi, &except],
    )
    .await?;
    hit.map(|r| Ok((col(&r, 0)?, col(&r, 1)?))).transpose()
}

async fn check_path_free(tx: &Tx<'_>, store_seq: i64, path: &MemoryPath, except: Option<i64>) -> Result<()> {
    rules::check_path_free(path, blocker(tx, store_seq, path, except).await?)
}

/// Appends a version and returns its id and row number. The caller holds the store's lock, so
/// the store's row numbers grow in commit order.
#[allow(clippy::too_many_arguments)]
async fn insert_version(
    tx: &Tx<'_>,
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
    let size = content.map(|(text, _)| bigint(text.len())).transpose()?;
    let row = one(
        tx,
        "INSERT INTO memory_versions (id, store_seq, memory_id, operation, path, content_sha256, \
         content_size_bytes, created_at, actor_kind, actor_id, content) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING seq",
        &[
            &id.as_str(),
            &store_seq,
            &memory_id.as_str(),
            &operation.as_str(),
            &path,
            &content.map(|(_, sha)| sha),
            &size,
            &now,
            &kind,
            &actor_id,
            &content.map(|(text, _)| text.as_bytes()),
        ],
    )
    .await?;
    Ok((id, col(&row, 0)?))
}

/// Creates a memory. Under the store's lock: the store is writable, the path is free and one
/// more memory fits under the cap.
pub(crate) async fn create(
    tx: &Tx<'_>,
    store: &MemoryStoreId,
    path: &MemoryPath,
    content: String,
    actor: &Actor,
    limit: u32,
) -> Result<Memory> {
    let (s, store_seq) = stores::lock(tx, store).await?;
    rules::check_writable(&s)?;
    check_path_free(tx, store_seq, path, None).await?;
    let row = one(tx, "SELECT memory_count FROM memory_stores WHERE seq = $1", &[&store_seq]).await?;
    let count: i64 = col(&row, 0)?;
    rules::check_capacity(&s, u64::try_from(count).unwrap_or_default(), limit)?;
    let id = MemoryId::generate();
    let sha = content_sha256(content.as_bytes());
    let len = bigint(content.len())?;
    let now = now(tx).await?;
    let (version_id, version_seq) =
        insert_version(tx, store_seq, &id, Operation::Created, path.as_str(), Some((&content, &sha)), actor, now)
            .await?;
    exec(
        tx,
        "INSERT INTO memories (id, store_seq, path, content_sha256, content_size_bytes, version_seq, \
         version_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
        &[&id.as_str(), &store_seq, &path.as_str(), &sha, &len, &version_seq, &version_id.as_str(), &now],
    )
    .await?;
    exec(tx, "UPDATE memory_stores SET memory_count = memory_count + 1 WHERE seq = $1", &[&store_seq]).await?;
    Ok(Memory {
        id,
        memory_store_id: store.clone(),
        path: path.to_string(),
        content_size_bytes: content.len() as u64,
        content: Some(content),
        content_sha256: sha,
        memory_version_id: version_id,
        created_at: ts(now),
        updated_at: ts(now),
    })
}

pub(crate) async fn get(tx: &Tx<'_>, store: &MemoryStoreId, id: &MemoryId) -> Result<Memory> {
    let (_, store_seq) = stores::get_with_seq(tx, store).await?;
    load(tx, store, store_seq, id).await.map(|cur| cur.memory)
}

/// Updates a memory's content, path or both. Under the store's lock: the store is writable,
/// the `content_sha256` precondition holds against the memory as the last writer left it, and
/// a new path is free.
pub(crate) async fn update(
    tx: &Tx<'_>,
    store: &MemoryStoreId,
    id: &MemoryId,
    change: MemoryChange,
    actor: &Actor,
) -> Result<Memory> {
    let (s, store_seq) = stores::lock(tx, store).await?;
    rules::check_writable(&s)?;
    let Current { mut memory, seq } = load(tx, store, store_seq, id).await?;
    let (content, sha, moved_to) = match rules::plan_update(&memory, change)? {
        Update::Unchanged => return Ok(memory),
        Update::Write { content, sha256, moved_to } => (content, sha256, moved_to),
    };
    if let Some(to) = &moved_to {
        check_path_free(tx, store_seq, to, Some(seq)).await?;
    }
    let path = moved_to.map_or_else(|| memory.path.clone(), |p| p.to_string());
    let len = bigint(content.len())?;
    let now = now(tx).await?;
    let (version_id, version_seq) =
        insert_version(tx, store_seq, id, Operation::Modified, &path, Some((&content, &sha)), actor, now).await?;
    exec(
        tx,
        "UPDATE memories SET path = $1, content_sha256 = $2, content_size_bytes = $3, version_seq = $4, \
         version_id = $5, updated_at = $6 WHERE seq = $7",
        &[&path, &sha, &len, &version_seq, &version_id.as_str(), &now, &seq],
    )
    .await?;
    memory.path = path;
    memory.content_sha256 = sha;
    memory.content_size_bytes = content.len() as u64;
    memory.content = Some(content);
    memory.memory_version_id = version_id;
    memory.updated_at = ts(now);
    Ok(memory)
}

/// Deletes a memory, leaving a `deleted` version. Under the store's lock: the
/// `content_sha256` precondition holds against the memory as the last writer left it.
pub(crate) async fn delete(
    tx: &Tx<'_>,
    store: &MemoryStoreId,
    id: &MemoryId,
    expected_sha256: Option<&str>,
    actor: &Actor,
) -> Result<()> {
    let (_, store_seq) = stores::lock(tx, store).await?;
    let row = opt(
        tx,
        "SELECT seq, path, content_sha256 FROM memories WHERE id = $1 AND store_seq = $2",
        &[&id.as_str(), &store_seq],
    )
    .await?
    .ok_or_else(|| StoreError::not_found("memory", id))?;
    let (seq, path, sha): (i64, String, String) = (col(&row, 0)?, col(&row, 1)?, col(&row, 2)?);
    rules::check_precondition(expected_sha256, &sha)?;
    let now = now(tx).await?;
    insert_version(tx, store_seq, id, Operation::Deleted, &path, None, actor, now).await?;
    exec(tx, "DELETE FROM memories WHERE seq = $1", &[&seq]).await?;
    exec(tx, "UPDATE memory_stores SET memory_count = memory_count - 1 WHERE seq = $1", &[&store_seq]).await?;
    Ok(())
}

/// Lists in byte order of path (the column's collation is `"C"`) with keyset pagination. With
/// a depth, each run of memories below a rolled-up prefix becomes one `memory_prefix` item and
/// the scan seeks past the prefix's subtree, so a page costs O(limit) index seeks however many
/// memories hide below.
pub(crate) async fn list(tx: &Tx<'_>, store: &MemoryStoreId, q: &ListMemories) -> Result<Listing<MemoryListItem>> {
    let (_, store_seq) = stores::get_with_seq(tx, store).await?;
    let full = q.view == View::Full;
    let (lo, hi) = q.prefix.range();
    // The scan position: paths >= `from` and > `after`.
    let (mut from, mut after) = match &q.after {
        None => (lo, String::new()),
        Some(Cursor::AfterPath(p)) => (lo, p.clone()),
        Some(Cursor::FromPath(p)) => (lo.max(p.clone()), String::new()),
        Some(Cursor::Before(_) | Cursor::After(_)) => return Err(StoreError::InvalidCursor),
    };
    let sql = if full {
        format!(
            "SELECT {COLUMNS}, v.content FROM memories m JOIN memory_versions v ON v.seq = m.version_seq \
             WHERE m.store_seq = $1 AND m.path >= $2 AND m.path > $3 AND m.path < $4 ORDER BY m.path LIMIT $5"
        )
    } else {
        format!(
            "SELECT {COLUMNS} FROM memories m \
             WHERE m.store_seq = $1 AND m.path >= $2 AND m.path > $3 AND m.path < $4 ORDER BY m.path LIMIT $5"
        )
    };
    let want = q.limit as usize + 1;
    let mut items: Vec<(MemoryListItem, Cursor)> = Vec::with_capacity(want);
    'scan: while items.len() < want {
        let batch = want - items.len();
        let rows = all(tx, &sql, &[&store_seq, &from, &after, &hi, &bigint(batch)?]).await?;
        let seen = rows.len();
        for row in &rows {
            let (memory, _) = from_row(store, row, full)?;
            match rollup(&q.prefix, q.depth, &memory.path) {
                None => {
                    let cursor = Cursor::AfterPath(memory.path.clone());
                    items.push((MemoryListItem::Memory(memory), cursor));
                }
                Some(dir) => {
                    // Skip the whole subtree: the next candidate is >= dir with its `/` bumped.
                    let mut skip = dir[..dir.len() - 1].to_owned();
                    skip.push('0');
                    let item = MemoryListItem::Prefix(MemoryPrefix { path: dir.to_owned() });
                    items.push((item, Cursor::FromPath(skip.clone())));
                    from = skip;
                    after = String::new();
                    continue 'scan;
                }
            }
            if items.len() == want {
                break 'scan;
            }
        }
        if seen < batch {
            break;
        }
        if let Some((_, Cursor::AfterPath(p))) = items.last() {
            after = p.clone();
        }
    }
    let more = items.len() > q.limit as usize;
    items.truncate(q.limit as usize);
    let next = if more { items.last().map(|(_, c)| c.clone()) } else { None };
    Ok(Listing { items: items.into_iter().map(|(i, _)| i).collect(), next })
}
