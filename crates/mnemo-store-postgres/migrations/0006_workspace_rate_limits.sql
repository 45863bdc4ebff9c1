-- Workspace rate-limit overrides (admin-api.md §8.9, Admin API §5 rows 24–25): one row per
-- (workspace, entry, limiter) a workspace sets; a limiter without a row inherits the
-- organization's value (`mnemo serve --rate-limit`). The token buckets are not here.

CREATE TABLE workspace_rate_limits (
    workspace_id  TEXT    NOT NULL,
    entry_id      TEXT    NOT NULL,
    limiter       TEXT    NOT NULL,
    value         BIGINT  NOT NULL CHECK (value > 0),
    PRIMARY KEY (workspace_id, entry_id, limiter)
);
