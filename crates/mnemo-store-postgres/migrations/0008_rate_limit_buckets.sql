-- Rate-limit buckets (admin-api.md §8.9): one row per (workspace, entry, limiter), the tokens it
-- held (in millionths of a token) when it was last counted (microseconds since the epoch). Every
-- replica takes from the same row under its lock.
CREATE TABLE rate_limit_buckets (
    workspace_id  TEXT    NOT NULL,
    entry_id      TEXT    NOT NULL,
    limiter       TEXT    NOT NULL,
    tokens        BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL,
    PRIMARY KEY (workspace_id, entry_id, limiter)
);
