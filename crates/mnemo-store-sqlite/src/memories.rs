//! Memories: the SQL of their writes ([`ops::MemorySql`]), reads, listings and exports.

use mnemo_api::{Memory, MemoryId, MemoryListItem, MemorySearchResult, MemoryStoreId, View, WorkspaceId};
use mnemo_search::{Scope, SearchIndex};
use mnemo_store::ops::{self, MemoryRow, NewVersion, Written};
use mnemo_store::row::RollupScan;
use mnemo_store::rules::memory::{Blocker, Overlap};
use mnemo_store::search::{Candidate, CandidateSource, SearchMemories, SearchScan, SearchScope};
use mnemo_store::{ExportPart, ListMemories, Listing, Result, StoreError};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::engine::{Lite, backend, query_all, query_one};
use crate::{actor_columns, now_micros, parse_id, stores, ts};

pub(crate) const COLUMNS: &str = "m.id, m.path, m.content_sha256, m.content_size_bytes, m.version_id, \
                       m.created_at, m.updated_at, m.seq";

pub(crate) fn from_row(store: &MemoryStoreId, r: &Row<'_>, with_content: bool) -> rusqlite::Result<(Memory, i64)> {
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

fn load(
    c: &Connection,
    store: &MemoryStoreId,
    store_seq: i64,
    id: &MemoryId,
    with_content: bool,
) -> Result<Option<MemoryRow>> {
    let sql = if with_content {
        format!(
            "SELECT {COLUMNS}, v.content FROM memories m JOIN memory_versions v ON v.seq = m.version_seq \
             WHERE m.id = ?1 AND m.store_seq = ?2"
        )
    } else {
        format!("SELECT {COLUMNS} FROM memories m WHERE m.id = ?1 AND m.store_seq = ?2")
    };
    Ok(query_one(c, &sql, params![id.as_str(), store_seq], |r| from_row(store, r, with_content))?
        .map(|(memory, seq)| MemoryRow { memory, seq }))
}

pub(crate) fn get(c: &Connection, ws: &WorkspaceId, store: &MemoryStoreId, id: &MemoryId) -> Result<Memory> {
    let (_, store_seq) = stores::get_with_seq(c, ws, store)?;
    load(c, store, store_seq, id, true)?.map(|row| row.memory).ok_or_else(|| StoreError::not_found("memory", id))
}

/// Appends a version; its position and time.
fn insert_version(c: &Connection, store_seq: i64, version: &NewVersion<'_>) -> Result<Written> {
    let (kind, actor_id) = actor_columns(version.actor);
    let now = now_micros();
    let content = version.content;
    c.prepare_cached(
        "INSERT INTO memory_versions (id, store_seq, memory_id, operation, path, content_sha256, \
         content_size_bytes, created_at, actor_kind, actor_id, content) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )
    .and_then(|mut s| {
        s.execute(params![
            version.id.as_str(),
            store_seq,
            version.memory_id.as_str(),
            version.operation.as_str(),
            version.path,
            content.map(|(_, sha)| sha),
            content.map(|(text, _)| text.len() as i64),
            now,
            kind,
            actor_id,
            content.map(|(text, _)| text),
        ])
    })
    .map_err(backend)?;
    Ok(Written { seq: c.last_insert_rowid(), at: now })
}

/// The digest and text of a version that has content.
fn content_of<'a>(version: &NewVersion<'a>) -> Result<(&'a str, &'a str)> {
    version.content.ok_or_else(|| StoreError::backend("a memory's version must hold content"))
}

/// SQLite's single writer serialises every job, so a judged state is the state a write lands on.
impl ops::MemorySql for Lite<'_> {
    async fn find_blocker(&self, store: i64, overlap: &Overlap<'_>, except: Option<i64>) -> Result<Option<Blocker>> {
        let except = except.unwrap_or(-1);
        let mut exact = self
            .prepare_cached("SELECT id, path FROM memories WHERE store_seq = ?1 AND path = ?2 AND seq != ?3")
            .map_err(backend)?;
        for candidate in overlap.at_or_above() {
            let hit = exact
                .query_row(params![store, candidate, except], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .map_err(backend)?;
            if hit.is_some() {
                return Ok(hit);
            }
        }
        let (lo, hi) = overlap.below();
        query_one(
            self,
            "SELECT id, path FROM memories WHERE store_seq = ?1 AND path >= ?2 AND path < ?3 AND seq != ?4 \
             ORDER BY path LIMIT 1",
            params![store, lo, hi, except],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    async fn load_memory(
        &self,
        store: &MemoryStoreId,
        store_seq: i64,
        id: &MemoryId,
        with_content: bool,
    ) -> Result<Option<MemoryRow>> {
        load(self, store, store_seq, id, with_content)
    }

    async fn insert_memory(&self, store: i64, version: &NewVersion<'_>) -> Result<Written> {
        let (text, sha) = content_of(version)?;
        let written = insert_version(self, store, version)?;
        self.prepare_cached(
            "INSERT INTO memories (id, store_seq, path, content_sha256, content_size_bytes, version_seq, \
             version_id, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
        )
        .and_then(|mut st| {
            st.execute(params![
                version.memory_id.as_str(),
                store,
                version.path,
                sha,
                text.len() as i64,
                written.seq,
                version.id.as_str(),
                written.at
            ])
        })
        .map_err(backend)?;
        self.prepare_cached("UPDATE memory_stores SET memory_count = memory_count + 1 WHERE seq = ?1")
            .and_then(|mut st| st.execute([store]))
            .map_err(backend)?;
        Ok(written)
    }

    async fn rewrite_memory(&self, store: i64, memory: i64, version: &NewVersion<'_>) -> Result<Written> {
        let (text, sha) = content_of(version)?;
        let written = insert_version(self, store, version)?;
        self.prepare_cached(
            "UPDATE memories SET path = ?1, content_sha256 = ?2, content_size_bytes = ?3, version_seq = ?4, \
             version_id = ?5, updated_at = ?6 WHERE seq = ?7",
        )
        .and_then(|mut st| {
            st.execute(params![
                version.path,
                sha,
                text.len() as i64,
                written.seq,
                version.id.as_str(),
                written.at,
                memory
            ])
        })
        .map_err(backend)?;
        Ok(written)
    }

    async fn remove_memory(&self, store: i64, memory: i64, version: &NewVersion<'_>) -> Result<Written> {
        let written = insert_version(self, store, version)?;
        self.execute("DELETE FROM memories WHERE seq = ?1", [memory]).map_err(backend)?;
        self.execute("UPDATE memory_stores SET memory_count = memory_count - 1 WHERE seq = ?1", [store])
            .map_err(backend)?;
        Ok(written)
    }
}

/// Lists in byte order of path, as a [`RollupScan`] asks.
pub(crate) fn list(
    c: &Connection,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    q: &ListMemories,
) -> Result<Listing<MemoryListItem>> {
    let (_, store_seq) = stores::get_with_seq(c, ws, store)?;
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
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    chunk: u32,
    began: tokio::sync::oneshot::Sender<i64>,
    out: &tokio::sync::mpsc::Sender<Result<ExportPart>>,
) -> Result<()> {
    let (_, store_seq) = stores::get_with_seq(c, ws, store)?;
    let seq: i64 = c
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM memory_versions WHERE store_seq = ?1")
        .and_then(|mut s| s.query_row([store_seq], |r| r.get(0)))
        .map_err(backend)?;
    if began.send(seq).is_err() {
        return Ok(());
    }
    // One statement stepped to its end: each chunk taken by a new query (after the last path)
    // prepared it again (its range on `path` makes SQLite re-plan with every new bound value)
    // and sought its start again.
    let mut stmt = c
        .prepare_cached(&format!(
            "SELECT {COLUMNS}, v.content FROM memories m JOIN memory_versions v ON v.seq = m.version_seq \
             WHERE m.store_seq = ?1 ORDER BY m.path"
        ))
        .map_err(backend)?;
    let chunk = chunk.max(1) as usize;
    let mut rows = stmt.query(params![store_seq]).map_err(backend)?;
    let mut memories = Vec::with_capacity(chunk);
    while let Some(row) = rows.next().map_err(backend)? {
        memories.push(from_row(store, row, true).map(|(m, _)| m).map_err(backend)?);
        if memories.len() == chunk {
            let full = std::mem::replace(&mut memories, Vec::with_capacity(chunk));
            if out.blocking_send(Ok(ExportPart::Memories(full))).is_err() {
                return Ok(());
            }
        }
    }
    if !memories.is_empty() && out.blocking_send(Ok(ExportPart::Memories(memories))).is_err() {
        return Ok(());
    }
    let _ = out.blocking_send(Ok(ExportPart::Done));
    Ok(())
}

/// The stores a search looks in, as row numbers; a named store that is not the workspace's is
/// not found.
pub(crate) fn search_stores(c: &Connection, ws: &WorkspaceId, scope: &SearchScope) -> Result<Vec<i64>> {
    match scope {
        SearchScope::Store(id) => Ok(vec![stores::get_with_seq(c, ws, id)?.1]),
        SearchScope::Workspace(None) => {
            query_all(c, "SELECT seq FROM memory_stores WHERE workspace_id = ?1", [ws.as_str()], |r| r.get(0))
        }
        SearchScope::Workspace(Some(ids)) => {
            let ids =
                serde_json::to_string(&ids.iter().map(MemoryStoreId::as_str).collect::<Vec<_>>()).map_err(backend)?;
            query_all(
                c,
                "SELECT seq FROM memory_stores WHERE workspace_id = ?1 AND id IN (SELECT value FROM json_each(?2))",
                params![ws.as_str(), ids],
                |r| r.get(0),
            )
        }
    }
}

/// A LIKE pattern finding `text` anywhere.
fn like_anywhere(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    format!("%{escaped}%")
}

/// [`Store::search_memories`](mnemo_store::Store::search_memories): first the memories
/// waiting for the index (the rule judges them on their current content), then the index's
/// ranking ([`mnemo_search`], see `search_index.rs`: BM25 over words, a path hit weighing twice
/// a content hit), each hit read from the database and judged on its current content. When the
/// index cannot narrow the query (no term of a word character, or only terms as broad as `a`),
/// the stores' memories are scanned in path order.
pub(crate) fn search(
    c: &Connection,
    index: &SearchIndex,
    ws: &WorkspaceId,
    request: &SearchMemories,
) -> Result<Listing<MemorySearchResult>> {
    let seqs = search_stores(c, ws, &request.scope)?;
    let stores = serde_json::to_string(&seqs).map_err(backend)?;
    let store_seqs: Vec<u64> = seqs.iter().filter_map(|s| u64::try_from(*s).ok()).collect();
    let query = &request.query;
    let scope = Scope {
        stores: &store_seqs,
        paths: &query.paths,
        excluded_paths: &query.excluded_paths,
        path_prefix: request.path_prefix.as_deref(),
    };
    let prepared = index.prepare(&query.index_plan(), &scope);
    // What LIKE can leave out of the waiting memories or a scan, never dropping a match: an
    // excluded word or phrase of ASCII text (LIKE folds ASCII as the rule does; a phrase LIKE
    // misses because of a tab between its words is kept, and the rule drops it). A searched
    // term is not checked so: LIKE folds only ASCII, and the rule folds `K` (the Kelvin sign)
    // to `k`.
    let mut args: Vec<String> = vec![stores];
    let mut likes = String::new();
    for term in query.index_filter().excludes.iter().filter(|t| !t.contains('\0')) {
        args.push(like_anywhere(term));
        let n = args.len();
        likes.push_str(&format!(" AND NOT (m.path LIKE ?{n} ESCAPE '\\' OR v.content LIKE ?{n} ESCAPE '\\')"));
    }
    let (limit, offset) = (args.len() + 1, args.len() + 2);
    let mut scan = SearchScan::new(request)?;
    let Some(mut prepared) = prepared else {
        // The index cannot narrow it: every memory of the stores, in path order.
        let sql = format!(
            "SELECT {COLUMNS}, v.content, 0.0, st.id FROM memories m \
             JOIN memory_versions v ON v.seq = m.version_seq JOIN memory_stores st ON st.seq = m.store_seq \
             WHERE m.store_seq IN (SELECT value FROM json_each(?1)){likes} ORDER BY m.path, m.seq \
             LIMIT ?{limit} OFFSET ?{offset}"
        );
        while let Some(batch) = scan.next_batch() {
            if batch.source == CandidateSource::Waiting {
                scan.feed(&batch, Vec::new());
                continue;
            }
            let read = candidates(c, &sql, &args, &[batch.limit, batch.offset])?;
            scan.feed(&batch, read.into_iter().map(|r| r.candidate).collect());
        }
        return Ok(scan.finish());
    };
    let waiting = format!(
        "SELECT {COLUMNS}, v.content, 0.0, st.id FROM memory_search_waiting w \
         JOIN memories m ON m.seq = w.memory_seq JOIN memory_versions v ON v.seq = m.version_seq \
         JOIN memory_stores st ON st.seq = m.store_seq \
         WHERE m.store_seq IN (SELECT value FROM json_each(?1)){likes} ORDER BY m.seq \
         LIMIT ?{limit} OFFSET ?{offset}"
    );
    // The index's hits, as they are now (a waiting memory is read above, on its current
    // content, not here on what the index held of it).
    let hit_rows = format!(
        "SELECT {COLUMNS}, v.content, 0.0, st.id FROM memories m \
         JOIN memory_versions v ON v.seq = m.version_seq JOIN memory_stores st ON st.seq = m.store_seq \
         WHERE m.seq IN (SELECT value FROM json_each(?1)) \
         AND m.seq NOT IN (SELECT memory_seq FROM memory_search_waiting)"
    );
    while let Some(batch) = scan.next_batch() {
        match batch.source {
            CandidateSource::Waiting => {
                let read = candidates(c, &waiting, &args, &[batch.limit, batch.offset])?;
                scan.feed(&batch, read.into_iter().map(|r| r.candidate).collect());
            }
            CandidateSource::Indexed => {
                // A phrase of common words, ranked by its words alone, that has not filled the
                // page from its first candidates: the page again, from the exact ranking.
                let Some(hits) = prepared.batch(batch.offset, batch.limit).map_err(backend)? else {
                    scan.restart();
                    continue;
                };
                let named = serde_json::to_string(&hits.iter().map(|h| h.0).collect::<Vec<_>>()).map_err(backend)?;
                let found =
                    candidates(c, &hit_rows, &[named], &[])?.into_iter().map(|c| (c.seq, c.candidate)).collect();
                scan.feed_hits(&batch, &hits, found);
            }
        }
    }
    Ok(scan.finish())
}

/// A candidate row and its memory's row number.
struct Read {
    seq: i64,
    candidate: Candidate,
}

/// The candidates `sql` reads (columns: [`COLUMNS`], the content, a score, the store's id),
/// `args` then `numbers` bound in that order.
fn candidates(c: &Connection, sql: &str, args: &[String], numbers: &[u64]) -> Result<Vec<Read>> {
    let mut stmt = c.prepare_cached(sql).map_err(backend)?;
    let numbers: Vec<i64> = numbers.iter().map(|n| i64::try_from(*n).unwrap_or(i64::MAX)).collect();
    let bound: Vec<&dyn rusqlite::ToSql> = args
        .iter()
        .map(|a| a as &dyn rusqlite::ToSql)
        .chain(numbers.iter().map(|n| n as &dyn rusqlite::ToSql))
        .collect();
    stmt.query_map(bound.as_slice(), |r| {
        let bad = |e: StoreError| rusqlite::Error::InvalidColumnName(e.to_string());
        let store: MemoryStoreId = parse_id(&r.get::<_, String>(10)?).map_err(bad)?;
        let (memory, seq) = from_row(&store, r, true)?;
        Ok(Read { seq, candidate: Candidate { memory, score: r.get(9)? } })
    })
    .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
    .map_err(backend)
}
