-- The search log keeps one row per memory that ever was; a deleted memory's row is only needed
-- until every replica has taken the deletion in. Replicas do not say how far they are, so the
-- log is pruned by age: about once an hour a replica notes the first transaction not yet started
-- (every transaction below it had started) and when, and a deleted memory's row whose transaction
-- is below a mark a week old goes. A replica away for longer (or a deleting transaction open for
-- a week) leaves the deleted memory in that replica's index, where it is harmless: every hit is
-- read from `memories` before it is shown.
-- `done`: the log was pruned below this mark's `xid` (the next pass starts there).
CREATE TABLE memory_search_log_marks (
    at   TIMESTAMPTZ PRIMARY KEY,
    xid  xid8        NOT NULL,
    done BOOLEAN     NOT NULL DEFAULT false
);
