-- The search index moves off the write's transaction (issue 35: a write must cost what it cost
-- before the index). Building the tsvector and the trigram GIN entries of a memory cost more
-- than the rest of its write. Now a write only queues its memory in `memory_search_waiting`, in
-- the write's own transaction; the store's indexer (one replica at a time) takes waiting
-- memories into `memory_search` in batches behind the writes, and a search reads the waiting
-- memories first, so a memory is still found the moment its write is acknowledged. What is
-- already indexed stays; nothing waits at first.
CREATE SEQUENCE memory_search_tick;

-- One row per memory whose index row is missing or out of date; `tick` changes with every
-- queueing, so the indexer deletes exactly the rows it took in. No index but the key: the
-- indexer takes any rows (the table stays small), and a write updates one index, not two.
CREATE TABLE memory_search_waiting (
    memory_seq BIGINT PRIMARY KEY,
    tick       BIGINT NOT NULL
);

CREATE OR REPLACE FUNCTION memory_search_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_search_waiting (memory_seq, tick)
        VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.seq ELSE NEW.seq END, nextval('memory_search_tick'))
    ON CONFLICT (memory_seq) DO UPDATE SET tick = EXCLUDED.tick;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_search_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE memory_search, memory_search_waiting;
    RETURN NULL;
END $$;
