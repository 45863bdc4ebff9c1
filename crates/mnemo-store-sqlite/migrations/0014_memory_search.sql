-- Full-text search over live memories (issue 35). One row per live memory, its rowid the
-- memory's `seq`, holding the memory's path and current content. The trigram tokenizer makes
-- every term of three characters or more a substring query (`staging-db-02`, `snake_case`),
-- ranked by BM25. The triggers keep it in the transaction of every write to `memories` —
-- create, update (content or path), delete, and a store's deletion (its memories go by
-- cascade) — so a memory is findable the moment its write commits and never after its
-- deletion. The current version of a memory cannot be redacted, so redaction never touches
-- it. Derived data: `mnemo db copy` does not copy it; the target's triggers rebuild it as the
-- memories are written.
CREATE VIRTUAL TABLE memory_search USING fts5 (
    path,
    content,
    store_seq UNINDEXED,
    tokenize = 'trigram'
);

CREATE TRIGGER memory_search_insert AFTER INSERT ON memories BEGIN
    DELETE FROM memory_search WHERE rowid = NEW.seq;
    INSERT INTO memory_search (rowid, path, content, store_seq)
        SELECT NEW.seq, NEW.path, v.content, NEW.store_seq FROM memory_versions v WHERE v.seq = NEW.version_seq;
END;

CREATE TRIGGER memory_search_update AFTER UPDATE OF path, version_seq ON memories BEGIN
    DELETE FROM memory_search WHERE rowid = OLD.seq;
    INSERT INTO memory_search (rowid, path, content, store_seq)
        SELECT NEW.seq, NEW.path, v.content, NEW.store_seq FROM memory_versions v WHERE v.seq = NEW.version_seq;
END;

CREATE TRIGGER memory_search_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memory_search WHERE rowid = OLD.seq;
END;

INSERT INTO memory_search (rowid, path, content, store_seq)
    SELECT m.seq, m.path, v.content, m.store_seq FROM memories m JOIN memory_versions v ON v.seq = m.version_seq;
