-- Embeddings of live memories for semantic search (issue 35): at most one row per memory,
-- naming the version it was made from and the model that made it; `vector` holds
-- little-endian f32s, or NULL when the provider refused the memory's text. The server's
-- embedder writes rows after a write, off its transaction; a row counts only while its
-- version is the memory's current one. The triggers drop a memory's row in the transaction
-- that changes its path or content or deletes it (a store's deletion included, by cascade),
-- so no vector of text a memory no longer holds outlives the write. Derived data: `mnemo db
-- copy` does not copy it; the target's embedder computes it again.
CREATE TABLE memory_embeddings (
    memory_seq  INTEGER PRIMARY KEY,
    version_seq INTEGER NOT NULL,
    model       TEXT    NOT NULL,
    vector      BLOB
);

CREATE TRIGGER memory_embeddings_update AFTER UPDATE OF path, version_seq ON memories BEGIN
    DELETE FROM memory_embeddings WHERE memory_seq = OLD.seq;
END;

CREATE TRIGGER memory_embeddings_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memory_embeddings WHERE memory_seq = OLD.seq;
END;
