//! Embeddings as SQL primitives ([`ops::EmbeddingSql`]; what they mean is
//! [`ops::embeddings`]'s).

use mnemo_api::{Memory, MemoryStoreId, WorkspaceId};
use mnemo_store::ops::embeddings::{EmbeddingRow, PendingEmbedding};
use mnemo_store::search::SearchScope;
use mnemo_store::{Result, StoreError, ops};
use rusqlite::params;

use crate::engine::{Lite, backend, query_all};
use crate::memories::{COLUMNS, from_row, search_stores};
use crate::parse_id;

/// Row numbers as the JSON array `json_each` reads.
fn json(seqs: &[i64]) -> Result<String> {
    serde_json::to_string(seqs).map_err(backend)
}

impl ops::EmbeddingSql for Lite<'_> {
    async fn unembedded(&self, model: &str, after: i64, limit: u32) -> Result<Vec<PendingEmbedding>> {
        query_all(
            self,
            "SELECT m.seq, m.version_seq, m.path, v.content FROM memories m \
             JOIN memory_versions v ON v.seq = m.version_seq \
             LEFT JOIN memory_embeddings e ON e.memory_seq = m.seq AND e.version_seq = m.version_seq AND e.model = ?1 \
             WHERE m.seq > ?2 AND e.memory_seq IS NULL ORDER BY m.seq LIMIT ?3",
            params![model, after, limit],
            |r| Ok(PendingEmbedding { memory: r.get(0)?, version: r.get(1)?, path: r.get(2)?, content: r.get(3)? }),
        )
    }

    async fn put_embedding(&self, memory: i64, version: i64, model: &str, vector: Option<&[u8]>) -> Result<bool> {
        self.prepare_cached(
            "INSERT INTO memory_embeddings (memory_seq, version_seq, model, vector) \
             SELECT seq, version_seq, ?3, ?4 FROM memories WHERE seq = ?1 AND version_seq = ?2 \
             ON CONFLICT (memory_seq) DO UPDATE SET version_seq = excluded.version_seq, model = excluded.model, \
             vector = excluded.vector",
        )
        .and_then(|mut s| s.execute(params![memory, version, model, vector]))
        .map(|n| n > 0)
        .map_err(backend)
    }

    async fn scope_stores(&self, ws: &WorkspaceId, scope: &SearchScope) -> Result<Vec<i64>> {
        search_stores(self, ws, scope)
    }

    async fn embedding_rows(&self, stores: &[i64], model: &str) -> Result<Vec<EmbeddingRow>> {
        query_all(
            self,
            "SELECT m.seq, m.id, m.path, e.vector FROM memories m \
             LEFT JOIN memory_embeddings e ON e.memory_seq = m.seq AND e.version_seq = m.version_seq AND e.model = ?2 \
             WHERE m.store_seq IN (SELECT value FROM json_each(?1))",
            params![json(stores)?, model],
            |r| {
                let bad = |e: StoreError| rusqlite::Error::InvalidColumnName(e.to_string());
                Ok(EmbeddingRow {
                    memory: r.get(0)?,
                    id: parse_id(&r.get::<_, String>(1)?).map_err(bad)?,
                    path: r.get(2)?,
                    vector: r.get(3)?,
                })
            },
        )
    }

    async fn memories_by_seq(&self, seqs: &[i64]) -> Result<Vec<(i64, Memory)>> {
        query_all(
            self,
            &format!(
                "SELECT {COLUMNS}, v.content, st.id FROM memories m \
                 JOIN memory_versions v ON v.seq = m.version_seq JOIN memory_stores st ON st.seq = m.store_seq \
                 WHERE m.seq IN (SELECT value FROM json_each(?1))"
            ),
            [json(seqs)?],
            |r| {
                let bad = |e: StoreError| rusqlite::Error::InvalidColumnName(e.to_string());
                let store: MemoryStoreId = parse_id(&r.get::<_, String>(9)?).map_err(bad)?;
                let (memory, seq) = from_row(&store, r, true)?;
                Ok((seq, memory))
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use mnemo_api::{Actor, MemoryPath};
    use mnemo_store::Operations;
    use mnemo_store::{MemoryChange, NewMemoryStore, Store};

    use crate::engine::backend;
    use crate::{Durability, SqliteSettings, SqliteStore};

    /// How many embedding rows the database holds, of any version or model.
    async fn rows(s: &SqliteStore) -> i64 {
        s.engine
            .read(|c| c.query_row("SELECT count(*) FROM memory_embeddings", [], |r| r.get(0)).map_err(backend))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn no_vector_of_text_a_memory_left_outlives_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = SqliteSettings::from_url(&format!("sqlite://{}/db.sqlite", dir.path().display())).unwrap();
        settings.durability = Durability::Normal;
        let s = SqliteStore::open(&settings).unwrap();
        let ws = s.default_workspace().await.unwrap();
        let new = NewMemoryStore { name: "n".into(), description: String::new(), metadata: [].into() };
        let store = s.create_memory_store(&ws, new).await.unwrap().id;
        let actor = Actor::ApiActor { api_key_id: "apikey_embed".parse().unwrap() };
        let mut ids = Vec::new();
        for p in ["/a", "/b", "/c"] {
            let m = s.create_memory(&ws, &store, MemoryPath::parse(p).unwrap(), "text".into(), actor.clone());
            ids.push(m.await.unwrap().id);
        }
        let embed = || async {
            let made = s.pending_embeddings("m", 0, 10).await.unwrap();
            let made = made.into_iter().map(|p| (p.memory, p.version, Some(vec![0, 0, 128, 63]))).collect();
            s.put_embeddings("m", made).await.unwrap()
        };
        assert_eq!(embed().await, 3);
        assert_eq!(rows(&s).await, 3);
        let change = MemoryChange { content: Some("new".into()), path: None, expected_sha256: None };
        s.update_memory(&ws, &store, &ids[0], change, actor.clone()).await.unwrap();
        assert_eq!(rows(&s).await, 2, "a content change drops the old text's vector in its transaction");
        s.delete_memory(&ws, &store, &ids[1], None, actor.clone()).await.unwrap();
        assert_eq!(rows(&s).await, 1, "a deletion drops it");
        s.delete_memory_store(&ws, &store).await.unwrap();
        assert_eq!(rows(&s).await, 0, "a store's deletion drops its memories'");
    }
}
