-- Embeddings of live memories for semantic search (issue 35): at most one row per memory,
-- naming the version it was made from and the model that made it; `vector` holds
-- little-endian f32s (a portable column: similarity is an exact scan in the server, so no
-- extension is needed), or NULL when the provider refused the memory's text. The server's
-- embedder writes rows after a write, off its transaction; a row counts only while its
-- version is the memory's current one. The triggers drop a memory's row in the transaction
-- that changes its path or content or deletes it (a store's deletion included, by cascade),
-- and empty the table with `TRUNCATE memories` (`mnemo db copy --replace`), so no vector of
-- text a memory no longer holds outlives the write. Derived data: `mnemo db copy` does not
-- copy it; the target's embedder computes it again.
CREATE TABLE memory_embeddings (
    memory_seq  BIGINT PRIMARY KEY,
    version_seq BIGINT NOT NULL,
    model       TEXT   NOT NULL,
    vector      BYTEA
);

CREATE FUNCTION memory_embeddings_drop() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_embeddings WHERE memory_seq = OLD.seq;
    RETURN NULL;
END $$;

CREATE FUNCTION memory_embeddings_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE memory_embeddings;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_embeddings_drop AFTER DELETE OR UPDATE OF path, version_seq ON memories
    FOR EACH ROW EXECUTE FUNCTION memory_embeddings_drop();
CREATE TRIGGER memory_embeddings_clear AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_embeddings_clear();
