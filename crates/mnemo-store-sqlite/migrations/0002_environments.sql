-- Environments and their keys (the self-hosted work queue's credentials).

CREATE TABLE environments (
    seq          INTEGER PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    name         TEXT    NOT NULL,
    description  TEXT,
    metadata     TEXT    NOT NULL,            -- JSON object of strings
    config       TEXT    NOT NULL,            -- JSON object with a `type`
    scope        TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    archived_at  INTEGER
);

CREATE TABLE environment_keys (
    seq             INTEGER PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    environment_seq INTEGER NOT NULL REFERENCES environments (seq) ON DELETE CASCADE,
    secret_hash     BLOB    NOT NULL UNIQUE,
    created_at      INTEGER NOT NULL,
    revoked_at      INTEGER
);
CREATE INDEX environment_keys_environment ON environment_keys (environment_seq);
