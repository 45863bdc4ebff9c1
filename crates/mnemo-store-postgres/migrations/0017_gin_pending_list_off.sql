-- A GIN index gathers new entries in a pending list (`fastupdate`, up to 4 MB) and merges them
-- into its tree only at a vacuum or when the list is full; until then every search reads the
-- whole list. After a load of memories the trigram indexes held hundreds of pending pages, and
-- a search that finds one memory from `psql` in 10–25 ms took 100 ms and more. The list exists
-- to make inserts cheap for writers that wait; nothing waits on these inserts (the indexer
-- takes memories in behind the writes, in batches), so entries now go into the tree at once,
-- and what is pending is merged here.
DO $$
DECLARE
    idx text;
BEGIN
    FOREACH idx IN ARRAY ARRAY['memory_search_body_trgm', 'memory_search_path_trgm'] LOOP
        IF to_regclass(idx) IS NOT NULL THEN
            EXECUTE format('ALTER INDEX %I SET (fastupdate = off)', idx);
            PERFORM gin_clean_pending_list(to_regclass(idx));
        END IF;
    END LOOP;
END $$;
