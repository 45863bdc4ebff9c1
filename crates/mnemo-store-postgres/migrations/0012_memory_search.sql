-- Full-text search over live memories (issue 35). One row per live memory: its path, its
-- current content as text (U+0000 read as a space: TEXT cannot hold it), and a `simple`
-- tsvector of both for ranking (`ts_rank_cd`). Candidates are found by substring (`ILIKE`),
-- through trigram GIN indexes when the `pg_trgm` extension can be had (installed in `public`,
-- so every schema of the database shares it); without it the search still works, scanning the
-- store's rows. The triggers keep the table in the transaction of every write to `memories` —
-- create, update (content or path), delete, a store's deletion (its memories go by cascade)
-- and `TRUNCATE` (`mnemo db copy --replace`) — so a memory is findable the moment its write
-- commits and never after its deletion. The current version of a memory cannot be redacted,
-- so redaction never touches it. Derived data: `mnemo db copy` does not copy it; the target's
-- triggers rebuild it as the memories are written.
CREATE TABLE memory_search (
    memory_seq BIGINT   PRIMARY KEY,
    store_seq  BIGINT   NOT NULL,
    path       TEXT     NOT NULL,
    body       TEXT     NOT NULL,
    words      tsvector NOT NULL
);
-- No index on `store_seq`: the trigram indexes find candidates, the store is checked on them
-- (an index on the store would tempt the planner to read a big store's every row instead).

CREATE FUNCTION memory_search_text(content bytea) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    at integer;
BEGIN
    LOOP
        at := position('\x00'::bytea IN content);
        EXIT WHEN at = 0;
        content := overlay(content PLACING '\x20'::bytea FROM at FOR 1);
    END LOOP;
    RETURN convert_from(content, 'UTF8');
END $$;

CREATE FUNCTION memory_search_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM memory_search WHERE memory_seq = OLD.seq;
        RETURN NULL;
    END IF;
    INSERT INTO memory_search (memory_seq, store_seq, path, body, words)
        SELECT NEW.seq, NEW.store_seq, NEW.path, t.body, to_tsvector('simple', NEW.path || ' ' || t.body)
        FROM memory_versions v, LATERAL (SELECT memory_search_text(v.content) AS body) t
        WHERE v.seq = NEW.version_seq
    ON CONFLICT (memory_seq) DO UPDATE SET store_seq = EXCLUDED.store_seq, path = EXCLUDED.path,
        body = EXCLUDED.body, words = EXCLUDED.words;
    RETURN NULL;
END $$;

CREATE FUNCTION memory_search_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE memory_search;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_search_keep AFTER INSERT OR DELETE OR UPDATE OF path, version_seq ON memories
    FOR EACH ROW EXECUTE FUNCTION memory_search_keep();
CREATE TRIGGER memory_search_clear AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_search_clear();

INSERT INTO memory_search (memory_seq, store_seq, path, body, words)
    SELECT m.seq, m.store_seq, m.path, t.body, to_tsvector('simple', m.path || ' ' || t.body)
    FROM memories m JOIN memory_versions v ON v.seq = m.version_seq,
         LATERAL (SELECT memory_search_text(v.content) AS body) t;

-- Trigram indexes where pg_trgm is available; a database without it searches by scanning.
DO $$
DECLARE
    trgm text;
BEGIN
    BEGIN
        IF to_regnamespace('public') IS NOT NULL THEN
            CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public;
        ELSE
            CREATE EXTENSION IF NOT EXISTS pg_trgm;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'pg_trgm is not available (%); memory search will scan instead of using an index', SQLERRM;
    END;
    SELECT extnamespace::regnamespace::text INTO trgm FROM pg_extension WHERE extname = 'pg_trgm';
    IF trgm IS NOT NULL THEN
        EXECUTE format('CREATE INDEX memory_search_body_trgm ON memory_search USING gin (body %s.gin_trgm_ops)', trgm);
        EXECUTE format('CREATE INDEX memory_search_path_trgm ON memory_search USING gin (path %s.gin_trgm_ops)', trgm);
    END IF;
END $$;
