-- mnemo's PostgreSQL schema, the same shape as the SQLite one (so `mnemo db copy` moves rows
-- column for column). Never edit a shipped migration; add a new file instead.
-- Timestamps are microseconds since the Unix epoch (UTC), taken from the database's clock.
-- `seq` columns give every table a stable insertion order for keyset pagination; writers that
-- must be ordered (a store's versions, a session's events) hold the parent row's lock, so
-- within one parent `seq` grows in commit order.

CREATE TABLE api_keys (
    seq          BIGSERIAL PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    secret_hash  BYTEA   NOT NULL UNIQUE,
    label        TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    revoked_at   BIGINT
);

CREATE TABLE memory_stores (
    seq          BIGSERIAL PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    name         TEXT    NOT NULL,
    description  TEXT    NOT NULL,
    metadata     TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    updated_at   BIGINT  NOT NULL,
    archived_at  BIGINT,
    memory_count BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX memory_stores_created ON memory_stores (created_at);

CREATE TABLE memory_versions (
    seq                BIGSERIAL PRIMARY KEY,
    id                 TEXT    NOT NULL UNIQUE,
    store_seq          BIGINT  NOT NULL REFERENCES memory_stores (seq) ON DELETE CASCADE,
    memory_id          TEXT    NOT NULL,
    operation          TEXT    NOT NULL CHECK (operation IN ('created', 'modified', 'deleted')),
    path               TEXT,
    content_sha256     TEXT,
    content_size_bytes BIGINT,
    created_at         BIGINT  NOT NULL,
    actor_kind         TEXT,
    actor_id           TEXT,
    redacted_at        BIGINT,
    redactor_kind      TEXT,
    redactor_id        TEXT,
    -- UTF-8 bytes: TEXT cannot hold U+0000, which memory content may (as on SQLite).
    content            BYTEA
);
CREATE INDEX memory_versions_store ON memory_versions (store_seq, seq);
CREATE INDEX memory_versions_memory ON memory_versions (memory_id, seq);

CREATE TABLE memories (
    seq                BIGSERIAL PRIMARY KEY,
    id                 TEXT    NOT NULL UNIQUE,
    store_seq          BIGINT  NOT NULL REFERENCES memory_stores (seq) ON DELETE CASCADE,
    path               TEXT    COLLATE "C" NOT NULL,
    content_sha256     TEXT    NOT NULL,
    content_size_bytes BIGINT  NOT NULL,
    version_seq        BIGINT  NOT NULL,
    version_id         TEXT    NOT NULL,
    created_at         BIGINT  NOT NULL,
    updated_at         BIGINT  NOT NULL,
    UNIQUE (store_seq, path)
);

CREATE TABLE environments (
    seq          BIGSERIAL PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    name         TEXT    NOT NULL,
    description  TEXT,
    metadata     TEXT    NOT NULL,
    config       TEXT    NOT NULL,
    scope        TEXT,
    created_at   BIGINT  NOT NULL,
    updated_at   BIGINT  NOT NULL,
    archived_at  BIGINT
);

CREATE TABLE environment_keys (
    seq             BIGSERIAL PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    environment_seq BIGINT  NOT NULL REFERENCES environments (seq) ON DELETE CASCADE,
    secret_hash     BYTEA   NOT NULL UNIQUE,
    created_at      BIGINT  NOT NULL,
    revoked_at      BIGINT
);
CREATE INDEX environment_keys_environment ON environment_keys (environment_seq);

CREATE TABLE agents (
    seq            BIGSERIAL PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    latest_version BIGINT  NOT NULL,
    created_at     BIGINT  NOT NULL,
    updated_at     BIGINT  NOT NULL,
    archived_at    BIGINT
);

CREATE TABLE agent_versions (
    agent_seq  BIGINT  NOT NULL REFERENCES agents (seq) ON DELETE CASCADE,
    version    BIGINT  NOT NULL,
    spec       TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    PRIMARY KEY (agent_seq, version)
);

CREATE TABLE sessions (
    seq            BIGSERIAL PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    environment_id TEXT    NOT NULL,
    agent_id       TEXT    NOT NULL,
    body           TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    created_at     BIGINT  NOT NULL,
    updated_at     BIGINT  NOT NULL,
    archived_at    BIGINT
);
CREATE INDEX sessions_environment ON sessions (environment_id);

CREATE TABLE session_memory_stores (
    session_seq     BIGINT  NOT NULL REFERENCES sessions (seq) ON DELETE CASCADE,
    memory_store_id TEXT    NOT NULL,
    read_only       BOOLEAN NOT NULL,
    PRIMARY KEY (session_seq, memory_store_id)
);
CREATE INDEX session_memory_stores_store ON session_memory_stores (memory_store_id);

CREATE TABLE session_events (
    seq          BIGSERIAL PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    session_seq  BIGINT  NOT NULL REFERENCES sessions (seq) ON DELETE CASCADE,
    type         TEXT    NOT NULL,
    body         TEXT    NOT NULL,
    processed_at BIGINT,
    answered     BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX session_events_session ON session_events (session_seq, seq);

CREATE TABLE work_items (
    seq                 BIGSERIAL PRIMARY KEY,
    id                  TEXT    NOT NULL UNIQUE,
    environment_seq     BIGINT  NOT NULL REFERENCES environments (seq) ON DELETE CASCADE,
    session_id          TEXT,
    data                TEXT    NOT NULL,
    state               TEXT    NOT NULL,
    metadata            TEXT    NOT NULL,
    created_at          BIGINT  NOT NULL,
    acknowledged_at     BIGINT,
    started_at          BIGINT,
    latest_heartbeat_at BIGINT,
    stop_requested_at   BIGINT,
    stopped_at          BIGINT,
    pending_until       BIGINT,
    lease_expires_at    BIGINT,
    last_heartbeat      TEXT,
    ttl_seconds         BIGINT  NOT NULL
);
CREATE INDEX work_items_queue ON work_items (environment_seq, state, seq);
CREATE INDEX work_items_session ON work_items (session_id);

CREATE TABLE session_tokens (
    seq         BIGSERIAL PRIMARY KEY,
    secret_hash BYTEA   NOT NULL UNIQUE,
    work_seq    BIGINT  NOT NULL REFERENCES work_items (seq) ON DELETE CASCADE,
    session_id  TEXT    NOT NULL,
    created_at  BIGINT  NOT NULL,
    revoked_at  BIGINT
);
CREATE INDEX session_tokens_work ON session_tokens (work_seq);

CREATE TABLE worker_polls (
    environment_seq BIGINT  NOT NULL REFERENCES environments (seq) ON DELETE CASCADE,
    worker_id       TEXT    NOT NULL,
    last_poll_at    BIGINT  NOT NULL,
    PRIMARY KEY (environment_seq, worker_id)
);
