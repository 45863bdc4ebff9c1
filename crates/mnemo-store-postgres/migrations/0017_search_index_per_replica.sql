-- The search index leaves the database (issue 35: a search must rank the best page of 100,000
-- memories without reading every match, which `ts_rank_cd` over `pg_trgm` candidates cannot).
-- Each replica keeps its own word index (`mnemo-search`), following this log: one row per
-- memory that changed (created, rewritten, moved or deleted), naming the transaction that last
-- changed it. A replica takes in every row of a transaction that has ended (its `xid` below the
-- oldest still running) and remembers how far it got; a search reads the rows past that point
-- on their current content, so a memory is still found the moment its write is acknowledged,
-- on any replica. The rows stay (one per memory that ever was), so any replica, however far
-- behind, catches up from them.
DROP TRIGGER memory_search_keep ON memories;
DROP TRIGGER memory_search_clear ON memories;
DROP TABLE memory_search;
DROP TABLE memory_search_waiting;
DROP SEQUENCE memory_search_tick;
DROP FUNCTION memory_search_keep();
DROP FUNCTION memory_search_clear();
DROP FUNCTION memory_search_text(bytea);

CREATE TABLE memory_search_log (
    memory_seq BIGINT PRIMARY KEY,
    xid        xid8   NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX memory_search_log_xid ON memory_search_log (xid, memory_seq);

CREATE FUNCTION memory_search_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_search_log (memory_seq)
        VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.seq ELSE NEW.seq END)
    ON CONFLICT (memory_seq) DO UPDATE SET xid = pg_current_xact_id();
    RETURN NULL;
END $$;

CREATE TRIGGER memory_search_log AFTER INSERT OR DELETE OR UPDATE OF path, version_seq ON memories
    FOR EACH ROW EXECUTE FUNCTION memory_search_log();

-- `mnemo db copy --replace` empties `memories`: the log starts again, and so does every
-- replica's index (a new generation).
CREATE FUNCTION memory_search_restart() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE memory_search_log;
    UPDATE search_index SET generation = md5(random()::text || clock_timestamp()::text);
    RETURN NULL;
END $$;

CREATE TRIGGER memory_search_restart AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_search_restart();

-- Which indexes belong to this database: a replica's index naming another generation (the
-- database replaced, restored or emptied) is built again.
CREATE TABLE search_index (
    generation TEXT NOT NULL
);
INSERT INTO search_index (generation) VALUES (md5(random()::text || clock_timestamp()::text));

INSERT INTO memory_search_log (memory_seq) SELECT seq FROM memories;
