//! Embeddings as SQL primitives ([`ops::EmbeddingSql`]; what they mean is
//! [`ops::embeddings`]'s).

use mnemo_api::{Memory, MemoryStoreId, WorkspaceId};
use mnemo_store::ops::embeddings::{EmbeddingRow, PendingEmbedding};
use mnemo_store::search::SearchScope;
use mnemo_store::{Result, ops};

use crate::engine::{Pg, all, col, exec, text_bytes};
use crate::memories::{COLUMNS, from_row, search_stores};
use crate::parse_id;

impl ops::EmbeddingSql for Pg<'_, '_> {
    async fn unembedded(&self, model: &str, after: i64, limit: u32) -> Result<Vec<PendingEmbedding>> {
        let rows = all(
            self,
            "SELECT m.seq, m.version_seq, m.path, v.content FROM memories m \
             JOIN memory_versions v ON v.seq = m.version_seq \
             LEFT JOIN memory_embeddings e ON e.memory_seq = m.seq AND e.version_seq = m.version_seq AND e.model = $1 \
             WHERE m.seq > $2 AND e.memory_seq IS NULL ORDER BY m.seq LIMIT $3",
            &[&model, &after, &i64::from(limit)],
        )
        .await?;
        rows.iter()
            .map(|r| {
                Ok(PendingEmbedding {
                    memory: col(r, 0)?,
                    version: col(r, 1)?,
                    path: col(r, 2)?,
                    content: text_bytes(r, 3)?.unwrap_or_default(),
                })
            })
            .collect()
    }

    async fn put_embedding(&self, memory: i64, version: i64, model: &str, vector: Option<&[u8]>) -> Result<bool> {
        let n = exec(
            self,
            "INSERT INTO memory_embeddings (memory_seq, version_seq, model, vector) \
             SELECT seq, version_seq, $3, $4 FROM memories WHERE seq = $1 AND version_seq = $2 \
             ON CONFLICT (memory_seq) DO UPDATE SET version_seq = EXCLUDED.version_seq, model = EXCLUDED.model, \
             vector = EXCLUDED.vector",
            &[&memory, &version, &model, &vector],
        )
        .await?;
        Ok(n > 0)
    }

    async fn scope_stores(&self, ws: &WorkspaceId, scope: &SearchScope) -> Result<Vec<i64>> {
        search_stores(self, ws, scope).await
    }

    async fn embedding_rows(&self, stores: &[i64], model: &str) -> Result<Vec<EmbeddingRow>> {
        let rows = all(
            self,
            "SELECT m.seq, m.id, m.path, e.vector FROM memories m \
             LEFT JOIN memory_embeddings e ON e.memory_seq = m.seq AND e.version_seq = m.version_seq AND e.model = $2 \
             WHERE m.store_seq = ANY($1)",
            &[&stores, &model],
        )
        .await?;
        rows.iter()
            .map(|r| {
                Ok(EmbeddingRow {
                    memory: col(r, 0)?,
                    id: parse_id(&col::<String>(r, 1)?)?,
                    path: col(r, 2)?,
                    vector: col(r, 3)?,
                })
            })
            .collect()
    }

    async fn memories_by_seq(&self, seqs: &[i64]) -> Result<Vec<(i64, Memory)>> {
        let rows = all(
            self,
            &format!(
                "SELECT {COLUMNS}, v.content, st.id FROM memories m \
                 JOIN memory_versions v ON v.seq = m.version_seq JOIN memory_stores st ON st.seq = m.store_seq \
                 WHERE m.seq = ANY($1)"
            ),
            &[&seqs],
        )
        .await?;
        rows.iter()
            .map(|r| {
                let store: MemoryStoreId = parse_id(&col::<String>(r, 9)?)?;
                let (memory, seq) = from_row(&store, r, true)?;
                Ok((seq, memory))
            })
            .collect()
    }
}
