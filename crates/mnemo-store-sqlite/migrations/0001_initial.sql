-- mnemo's first schema. Never edit a shipped migration; add a new file instead.
-- Timestamps are microseconds since the Unix epoch (UTC). `seq` columns give every table a
-- stable insertion order that keyset pagination can rely on.

CREATE TABLE api_keys (
    seq          INTEGER PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    secret_hash  BLOB    NOT NULL UNIQUE,
    label        TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);

CREATE TABLE memory_stores (
    seq          INTEGER PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    name         TEXT    NOT NULL,
    description  TEXT    NOT NULL,
    metadata     TEXT    NOT NULL,            -- JSON object of strings
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    archived_at  INTEGER,
    memory_count INTEGER NOT NULL DEFAULT 0   -- live memories, kept by every create/delete
);
CREATE INDEX memory_stores_created ON memory_stores (created_at);

-- Every change to a memory, immutable except for redaction. The current content of a memory
-- lives only here, in the version its `memories.version_seq` points at.
CREATE TABLE memory_versions (
    seq                INTEGER PRIMARY KEY,
    id                 TEXT    NOT NULL UNIQUE,
    store_seq          INTEGER NOT NULL REFERENCES memory_stores (seq) ON DELETE CASCADE,
    memory_id          TEXT    NOT NULL,
    operation          TEXT    NOT NULL CHECK (operation IN ('created', 'modified', 'deleted')),
    path               TEXT,
    content_sha256     TEXT,
    content_size_bytes INTEGER,
    created_at         INTEGER NOT NULL,
    actor_kind         TEXT,
    actor_id           TEXT,
    redacted_at        INTEGER,
    redactor_kind      TEXT,
    redactor_id        TEXT,
    content            TEXT                   -- last, so rows can be read without it
);
CREATE INDEX memory_versions_store ON memory_versions (store_seq, seq);
CREATE INDEX memory_versions_memory ON memory_versions (memory_id, seq);

CREATE TABLE memories (
    seq                INTEGER PRIMARY KEY,
    id                 TEXT    NOT NULL UNIQUE,
    store_seq          INTEGER NOT NULL REFERENCES memory_stores (seq) ON DELETE CASCADE,
    path               TEXT    NOT NULL,
    content_sha256     TEXT    NOT NULL,
    content_size_bytes INTEGER NOT NULL,
    version_seq        INTEGER NOT NULL,
    version_id         TEXT    NOT NULL,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    UNIQUE (store_seq, path)
);
