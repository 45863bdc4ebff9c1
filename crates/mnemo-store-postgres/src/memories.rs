//! Memories: the SQL of their writes ([`ops::MemorySql`]), reads, listings and exports.
//!
//! The writes ([`mnemo_store::ops::memories`]) lock the store's row first and only then read
//! what they judge; reads take no lock.

use std::collections::HashMap;

use mnemo_api::{Memory, MemoryId, MemoryListItem, MemorySearchResult, MemoryStoreId, View, WorkspaceId};
use mnemo_search::Scope;
use mnemo_store::ops::{self, MemoryRow, NewVersion, Written};
use mnemo_store::row::RollupScan;
use mnemo_store::rules::memory::{Blocker, Overlap};
use mnemo_store::search::{Candidate, CandidateSource, SearchMemories, SearchScan, SearchScope};
use mnemo_store::{ExportPart, ListMemories, Listing, Result, StoreError};
use tokio_postgres::Row;

use crate::engine::{Pg, Tx, all, col, failure, one, opt};
use crate::search_index::Replica;
use crate::{actor_columns, parse_id, stores, ts};

pub(crate) const COLUMNS: &str = "m.id, m.path, m.content_sha256, m.content_size_bytes, m.version_id, \
                       m.created_at, m.updated_at, m.seq";

/// A size column as the API's unsigned size.
pub(crate) fn size(bytes: i64) -> Result<u64> {
    u64::try_from(bytes).map_err(|_| failure(format!("negative size {bytes} in the database")))
}

/// A length as a `BIGINT`.
pub(crate) fn bigint(len: usize) -> Result<i64> {
    i64::try_from(len).map_err(|_| failure(format!("size {len} does not fit the database")))
}

pub(crate) fn from_row(store: &MemoryStoreId, r: &Row, with_content: bool) -> Result<(Memory, i64)> {
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

async fn load(
    tx: &Tx<'_>,
    store: &MemoryStoreId,
    store_seq: i64,
    id: &MemoryId,
    with_content: bool,
) -> Result<Option<MemoryRow>> {
    let sql = if with_content {
        format!(
            "SELECT {COLUMNS}, v.content FROM memories m JOIN memory_versions v ON v.seq = m.version_seq \
             WHERE m.id = $1 AND m.store_seq = $2"
        )
    } else {
        format!("SELECT {COLUMNS} FROM memories m WHERE m.id = $1 AND m.store_seq = $2")
    };
    let row = opt(tx, &sql, &[&id.as_str(), &store_seq]).await?;
    row.as_ref().map(|r| from_row(store, r, with_content).map(|(memory, seq)| MemoryRow { memory, seq })).transpose()
}

pub(crate) async fn get(tx: &Tx<'_>, ws: &WorkspaceId, store: &MemoryStoreId, id: &MemoryId) -> Result<Memory> {
    let (_, store_seq) = stores::get_with_seq(tx, ws, store).await?;
    load(tx, store, store_seq, id, true).await?.map(|row| row.memory).ok_or_else(|| StoreError::not_found("memory", id))
}

/// Appends a version and, in the same statement, the writes that go with it: each of `then` is
/// a data-modifying statement that may use the version's parameters (`$1` id, `$2` store,
/// `$3` memory id, `$5` path, `$6` digest, `$7` size), its position (`(SELECT seq FROM v)`) and
/// time (`(SELECT t FROM now)`), plus `extra` from `$11` on. One round trip under the store's
/// lock, which keeps the store's version positions growing in commit order; the time is read
/// by this statement, after the lock was granted, so it grows with them (a clock read with the
/// lock could predate a wait for it). The content is left with this replica's search indexer
/// ([`crate::search_index::Written`]), which then need not read it back.
async fn write_version(
    tx: &Pg<'_, '_>,
    store_seq: i64,
    version: &NewVersion<'_>,
    then: &[&str],
    extra: &[crate::engine::Param<'_>],
) -> Result<Written> {
    let (kind, actor_id) = actor_columns(version.actor);
    let size = version.content.map(|(text, _)| bigint(text.len())).transpose()?;
    let mut sql = String::from(
        "WITH now AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8 AS t), \
         v AS (INSERT INTO memory_versions (id, store_seq, memory_id, operation, path, content_sha256, \
         content_size_bytes, created_at, actor_kind, actor_id, content) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, (SELECT t FROM now), $8, $9, $10) RETURNING seq, created_at)",
    );
    for (i, statement) in then.iter().enumerate() {
        sql.push_str(&format!(", w{i} AS ({statement})"));
    }
    sql.push_str(" SELECT seq, created_at FROM v");
    let (operation, digest) = (version.operation.as_str(), version.content.map(|(_, sha)| sha));
    let content = version.content.map(|(text, _)| text.as_bytes());
    let (id_text, memory_id) = (version.id.as_str(), version.memory_id.as_str());
    let mut params: Vec<crate::engine::Param<'_>> =
        vec![&id_text, &store_seq, &memory_id, &operation, &version.path, &digest, &size, &kind, &actor_id, &content];
    params.extend_from_slice(extra);
    let row = one(tx, &sql, &params).await?;
    let written = Written { seq: col(&row, 0)?, at: col(&row, 1)? };
    if let Some((text, digest)) = version.content {
        tx.wrote(written.seq, text, digest);
    }
    Ok(written)
}

/// Every primitive runs under the store's row lock the operation took first
/// ([`ops::StoreSql::lock_store`]), so no other writer adds a blocker or changes the count
/// between the judgement and the write.
impl ops::MemorySql for Pg<'_, '_> {
    async fn find_blocker(&self, store: i64, overlap: &Overlap<'_>, except: Option<i64>) -> Result<Option<Blocker>> {
        let except = except.unwrap_or(-1);
        // The paths at or above (at most one of them exists: they overlap each other), and
        // whatever lies below. In byte order those sort before anything below the path, so the
        // first row is the blocker `Overlap` names. Two probes of the `(store_seq, path)` index:
        // as one `OR`, a plan cached for every path walked the whole store in path order
        // (0.86 s at 82,000 memories, on every write).
        let candidates: Vec<&str> = overlap.at_or_above().collect();
        let (lo, hi) = overlap.below();
        let hit = opt(
            self,
            "SELECT id, path FROM ( \
             (SELECT id, path FROM memories WHERE store_seq = $1 AND seq <> $2 AND path = ANY($3) \
              ORDER BY path LIMIT 1) \
             UNION ALL \
             (SELECT id, path FROM memories WHERE store_seq = $1 AND seq <> $2 AND path >= $4 AND path < $5 \
              ORDER BY path LIMIT 1)) b ORDER BY path LIMIT 1",
            &[&store, &except, &candidates, &lo, &hi],
        )
        .await?;
        hit.map(|r| Ok((col(&r, 0)?, col(&r, 1)?))).transpose()
    }

    async fn load_memory(
        &self,
        store: &MemoryStoreId,
        store_seq: i64,
        id: &MemoryId,
        with_content: bool,
    ) -> Result<Option<MemoryRow>> {
        load(self, store, store_seq, id, with_content).await
    }

    async fn insert_memory(&self, store: i64, version: &NewVersion<'_>) -> Result<Written> {
        write_version(
            self,
            store,
            version,
            &[
                "INSERT INTO memories (id, store_seq, path, content_sha256, content_size_bytes, version_seq, \
                 version_id, created_at, updated_at) SELECT $3, $2, $5, $6, $7, v.seq, $1, v.created_at, v.created_at \
                 FROM v",
                "UPDATE memory_stores SET memory_count = memory_count + 1 WHERE seq = $2",
            ],
            &[],
        )
        .await
    }

    async fn rewrite_memory(&self, store: i64, memory: i64, version: &NewVersion<'_>) -> Result<Written> {
        write_version(
            self,
            store,
            version,
            &["UPDATE memories SET path = $5, content_sha256 = $6, content_size_bytes = $7, \
               version_seq = (SELECT seq FROM v), version_id = $1, updated_at = (SELECT t FROM now) WHERE seq = $11"],
            &[&memory],
        )
        .await
    }

    async fn remove_memory(&self, store: i64, memory: i64, version: &NewVersion<'_>) -> Result<Written> {
        write_version(
            self,
            store,
            version,
            &[
                "DELETE FROM memories WHERE seq = $11",
                "UPDATE memory_stores SET memory_count = memory_count - 1 WHERE seq = $2",
            ],
            &[&memory],
        )
        .await
    }
}

/// Lists in byte order of path (the column's collation is `"C"`), as a [`RollupScan`] asks.
pub(crate) async fn list(
    tx: &Tx<'_>,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    q: &ListMemories,
) -> Result<Listing<MemoryListItem>> {
    let (_, store_seq) = stores::get_with_seq(tx, ws, store).await?;
    let full = q.view == View::Full;
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
    let mut scan = RollupScan::new(q)?;
    while let Some(batch) = scan.next_batch() {
        let rows = all(tx, &sql, &[&store_seq, &batch.from, &batch.after, &batch.until, &bigint(batch.limit)?]).await?;
        let memories = rows.iter().map(|r| from_row(store, r, full).map(|(m, _)| m)).collect::<Result<Vec<_>>>()?;
        scan.feed(&batch, memories);
    }
    Ok(scan.finish())
}

/// [`Store::export_memories`](mnemo_store::Store::export_memories) on `client`, in one
/// read-only repeatable-read transaction: tells `began` the snapshot's change position, then
/// sends `chunk` memories at a time in path order (keyset on the `(store_seq, path)` index),
/// then `Done`. Stops (rolling back) when the reader goes.
pub(crate) async fn export(
    client: &mut deadpool_postgres::Object,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    chunk: u32,
    began: tokio::sync::oneshot::Sender<i64>,
    out: &tokio::sync::mpsc::Sender<Result<ExportPart>>,
) -> Result<()> {
    let tx = crate::engine::begin_read(client).await?;
    let seq = stores::change_seq(&tx, ws, store).await?;
    let (_, store_seq) = stores::get_with_seq(&tx, ws, store).await?;
    if began.send(seq).is_err() {
        return Ok(());
    }
    let sql = format!(
        "SELECT {COLUMNS}, v.content FROM memories m JOIN memory_versions v ON v.seq = m.version_seq \
         WHERE m.store_seq = $1 AND m.path > $2 ORDER BY m.path LIMIT $3"
    );
    let chunk = chunk.max(1);
    let mut after = String::new();
    loop {
        let rows = all(&tx, &sql, &[&store_seq, &after, &i64::from(chunk)]).await?;
        let memories = rows.iter().map(|r| from_row(store, r, true).map(|(m, _)| m)).collect::<Result<Vec<_>>>()?;
        let last = memories.len() < chunk as usize;
        if let Some(m) = memories.last() {
            after.clone_from(&m.path);
        }
        if !memories.is_empty() && out.send(Ok(ExportPart::Memories(memories))).await.is_err() {
            return Ok(());
        }
        if last {
            break;
        }
    }
    tx.commit().await.map_err(crate::engine::backend)?;
    let _ = out.send(Ok(ExportPart::Done)).await;
    Ok(())
}

/// The stores a search looks in, as row numbers; a named store that is not the workspace's is
/// not found.
pub(crate) async fn search_stores(tx: &Tx<'_>, ws: &WorkspaceId, scope: &SearchScope) -> Result<Vec<i64>> {
    let rows = match scope {
        SearchScope::Store(id) => return Ok(vec![stores::get_with_seq(tx, ws, id).await?.1]),
        SearchScope::Workspace(None) => {
            all(tx, "SELECT seq FROM memory_stores WHERE workspace_id = $1", &[&ws.as_str()]).await?
        }
        SearchScope::Workspace(Some(ids)) => {
            let ids: Vec<&str> = ids.iter().map(MemoryStoreId::as_str).collect();
            all(tx, "SELECT seq FROM memory_stores WHERE workspace_id = $1 AND id = ANY($2)", &[&ws.as_str(), &ids])
                .await?
        }
    };
    rows.iter().map(|r| col(r, 0)).collect()
}

/// An `ILIKE` pattern finding `text` anywhere.
fn like_anywhere(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    format!("%{escaped}%")
}

/// [`Store::search_memories`](mnemo_store::Store::search_memories): first the memories past
/// this replica's index cursor (`search_index.rs`: changed since the index took them in, or
/// not yet taken in), judged by the rule on their current content; then the index's ranking
/// ([`mnemo_search`]: BM25 over words, a path hit weighing twice a content hit), each hit read
/// here and judged on its current content. When the index cannot narrow the query (no term of a
/// word character, or only terms as broad as `a`), the stores' memories are scanned in path
/// order.
pub(crate) async fn search(
    tx: &Tx<'_>,
    replica: &Replica,
    ws: &WorkspaceId,
    request: &SearchMemories,
) -> Result<Listing<MemorySearchResult>> {
    let stores = search_stores(tx, ws, &request.scope).await?;
    let store_seqs: Vec<u64> = stores.iter().filter_map(|s| u64::try_from(*s).ok()).collect();
    let query = &request.query;
    let scope = Scope {
        stores: &store_seqs,
        paths: &query.paths,
        excluded_paths: &query.excluded_paths,
        path_prefix: request.path_prefix.as_deref(),
    };
    // The cursor first, then the index: the index is at least as far along as the cursor says.
    let ((xid, seq), taken_seqs, taken_xids) = replica.position();
    let xid = xid.to_string();
    let prepared = replica.index().prepare(&query.index_plan(), &scope);
    // What `ILIKE` can leave out of the waiting memories or a scan, never dropping a match: an
    // excluded word of ASCII text (its bytes, case folded as the rule folds ASCII; `escape`
    // encoding keeps ASCII as it is and reads U+0000, which text cannot hold). A searched term
    // is not checked so: `ILIKE` folds only ASCII, and the rule folds `K` (the Kelvin sign) to
    // `k`.
    let excluded: Vec<String> = query
        .index_filter()
        .excludes
        .iter()
        .filter(|t| !t.contains([' ', '\0', '\\']))
        .map(|t| like_anywhere(t))
        .collect();
    let mut likes = String::new();
    for i in 0..excluded.len() {
        let n = i + 4;
        likes.push_str(&format!(" AND NOT (encode(v.content, 'escape') ILIKE ${n} OR m.path ILIKE ${n})"));
    }
    let mut scan = SearchScan::new(request)?;
    let read = |r: &tokio_postgres::Row| -> Result<(i64, Candidate)> {
        let store: MemoryStoreId = parse_id(&col::<String>(r, 10)?)?;
        let (memory, seq) = from_row(&store, r, true)?;
        Ok((seq, Candidate { memory, score: col(r, 9)? }))
    };
    let Some(mut prepared) = prepared else {
        // The index cannot narrow it: every memory of the stores, in path order.
        let sql = format!(
            "SELECT {COLUMNS}, v.content, 0::float8, st.id FROM memories m \
             JOIN memory_versions v ON v.seq = m.version_seq JOIN memory_stores st ON st.seq = m.store_seq \
             WHERE m.store_seq = ANY($1){likes} ORDER BY m.path, m.seq LIMIT $2 OFFSET $3"
        );
        while let Some(batch) = scan.next_batch() {
            if batch.source == CandidateSource::Waiting {
                scan.feed(&batch, Vec::new());
                continue;
            }
            let (limit, offset) =
                (i64::try_from(batch.limit).unwrap_or(i64::MAX), i64::try_from(batch.offset).unwrap_or(i64::MAX));
            let mut params: Vec<crate::engine::Param<'_>> = vec![&stores, &limit, &offset];
            params.extend(excluded.iter().map(|p| p as crate::engine::Param<'_>));
            let rows = all(tx, &sql, &params).await?;
            let candidates = rows.iter().map(|r| read(r).map(|(_, c)| c)).collect::<Result<Vec<_>>>()?;
            scan.feed(&batch, candidates);
        }
        return Ok(scan.finish());
    };
    // Past the cursor, and not taken in.
    let past = "(l.xid, l.memory_seq) >= ($XID::text::xid8, $SEQ) AND NOT EXISTS (SELECT 1 FROM \
                unnest($TSEQ::int8[], $TXID::int8[]) t(seq, xid) WHERE t.seq = l.memory_seq AND t.xid = (l.xid::text)::int8)";
    // Driven from the few rows past the cursor (a memory may have several: `DISTINCT`, which
    // also keeps the planner from turning this into a walk of every memory of the stores).
    let waiting = format!(
        "SELECT {COLUMNS}, v.content, 0::float8, st.id FROM \
         (SELECT DISTINCT l.memory_seq FROM memory_search_log l WHERE {}) w \
         JOIN memories m ON m.seq = w.memory_seq JOIN memory_versions v ON v.seq = m.version_seq \
         JOIN memory_stores st ON st.seq = m.store_seq \
         WHERE m.store_seq = ANY($1){likes} ORDER BY m.seq LIMIT $2 OFFSET $3",
        past.replace("$XID", &format!("${}", 4 + excluded.len()))
            .replace("$SEQ", &format!("${}", 5 + excluded.len()))
            .replace("$TSEQ", &format!("${}", 6 + excluded.len()))
            .replace("$TXID", &format!("${}", 7 + excluded.len()))
    );
    // The index's hits as they are now; those past the cursor were read above.
    let hit_rows = format!(
        "SELECT {COLUMNS}, v.content, 0::float8, st.id FROM memories m \
         JOIN memory_versions v ON v.seq = m.version_seq JOIN memory_stores st ON st.seq = m.store_seq \
         WHERE m.seq = ANY($1) AND m.seq NOT IN (SELECT l.memory_seq FROM memory_search_log l WHERE {})",
        past.replace("$XID", "$2").replace("$SEQ", "$3").replace("$TSEQ", "$4").replace("$TXID", "$5")
    );
    while let Some(batch) = scan.next_batch() {
        match batch.source {
            CandidateSource::Waiting => {
                let (limit, offset) =
                    (i64::try_from(batch.limit).unwrap_or(i64::MAX), i64::try_from(batch.offset).unwrap_or(i64::MAX));
                let mut params: Vec<crate::engine::Param<'_>> = vec![&stores, &limit, &offset];
                params.extend(excluded.iter().map(|p| p as crate::engine::Param<'_>));
                params.extend([&xid as crate::engine::Param<'_>, &seq, &taken_seqs, &taken_xids]);
                let rows = all(tx, &waiting, &params).await?;
                let candidates = rows.iter().map(|r| read(r).map(|(_, c)| c)).collect::<Result<Vec<_>>>()?;
                scan.feed(&batch, candidates);
            }
            CandidateSource::Indexed => {
                // A phrase of common words, ranked by its words alone, that has not filled the
                // page from its first candidates: the page again, from the exact ranking.
                let Some(hits) = prepared.batch(batch.offset, batch.limit).map_err(|e| failure(e.to_string()))? else {
                    scan.restart();
                    continue;
                };
                let named: Vec<i64> = hits.iter().map(|h| h.0).collect();
                let rows = all(tx, &hit_rows, &[&named, &xid, &seq, &taken_seqs, &taken_xids]).await?;
                let found: HashMap<i64, Candidate> = rows.iter().map(read).collect::<Result<_>>()?;
                scan.feed_hits(&batch, &hits, found);
            }
        }
    }
    Ok(scan.finish())
}
