-- The audit log (admin-api.md, issue 32): who did what, when, from where, and how it ended.
-- Append-only through the API; entries older than `--audit-retention-days` are deleted. It never
-- holds a secret or memory content (`details` is checked before it is written).
CREATE TABLE audit_events (
    seq            INTEGER PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    created_at     INTEGER NOT NULL,
    workspace_id   TEXT,
    actor_type     TEXT    NOT NULL,
    actor_id       TEXT    NOT NULL,
    action         TEXT    NOT NULL,
    resource_type  TEXT,
    resource_id    TEXT,
    client_ip      TEXT,
    outcome        TEXT    NOT NULL,
    details        TEXT    NOT NULL
);
CREATE INDEX audit_events_created ON audit_events (created_at);
CREATE INDEX audit_events_workspace ON audit_events (workspace_id, seq);
