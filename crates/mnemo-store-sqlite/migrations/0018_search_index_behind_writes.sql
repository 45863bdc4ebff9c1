-- The search index moves off the write's transaction (issue 35: a write must cost what it cost
-- before the index). Tokenising a memory into trigrams cost more than the rest of its write,
-- and SQLite has one writer. Now a write only queues its memory in `memory_search_waiting`, in
-- the write's own transaction; the index lives in its own file beside this one (`PATH.search`,
-- an FTS5 trigram table kept by the store's indexer thread, see `search_index.rs`), and a
-- search reads the waiting memories first, so a memory is still found the moment its write is
-- acknowledged. Every memory is queued once here: the indexer builds the new file from them.
DROP TRIGGER memory_search_insert;
DROP TRIGGER memory_search_update;
DROP TRIGGER memory_search_delete;
DROP TABLE memory_search;

-- One row per memory whose index entry is missing or out of date: `tick` grows with every
-- queueing (never reused), so the indexer deletes exactly the rows it took in.
CREATE TABLE memory_search_waiting (
    tick       INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_seq INTEGER NOT NULL UNIQUE
);

CREATE TRIGGER memory_search_wait_insert AFTER INSERT ON memories BEGIN
    INSERT OR REPLACE INTO memory_search_waiting (memory_seq) VALUES (NEW.seq);
END;

CREATE TRIGGER memory_search_wait_update AFTER UPDATE OF path, version_seq ON memories BEGIN
    INSERT OR REPLACE INTO memory_search_waiting (memory_seq) VALUES (NEW.seq);
END;

CREATE TRIGGER memory_search_wait_delete AFTER DELETE ON memories BEGIN
    INSERT OR REPLACE INTO memory_search_waiting (memory_seq) VALUES (OLD.seq);
END;

-- Which index file belongs to this database: an index file naming another generation (this
-- database replaced by another, or restored) is rebuilt.
CREATE TABLE search_index (
    generation TEXT NOT NULL
);
INSERT INTO search_index (generation) VALUES (lower(hex(randomblob(16))));

INSERT INTO memory_search_waiting (memory_seq) SELECT seq FROM memories ORDER BY seq;
