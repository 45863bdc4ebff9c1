-- Agents, sessions and their events, and the self-hosted work queue.

CREATE TABLE agents (
    seq            INTEGER PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    latest_version INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    archived_at    INTEGER
);

CREATE TABLE agent_versions (
    agent_seq  INTEGER NOT NULL REFERENCES agents (seq) ON DELETE CASCADE,
    version    INTEGER NOT NULL,
    spec       TEXT    NOT NULL,               -- JSON AgentSpec
    created_at INTEGER NOT NULL,
    PRIMARY KEY (agent_seq, version)
);

CREATE TABLE sessions (
    seq            INTEGER PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    environment_id TEXT    NOT NULL,
    agent_id       TEXT    NOT NULL,
    body           TEXT    NOT NULL,           -- JSON: agent snapshot, resources, title, metadata
    status         TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    archived_at    INTEGER
);
CREATE INDEX sessions_environment ON sessions (environment_id);

-- Which stores a session has attached, for filters and for scoping sessions tokens.
CREATE TABLE session_memory_stores (
    session_seq     INTEGER NOT NULL REFERENCES sessions (seq) ON DELETE CASCADE,
    memory_store_id TEXT    NOT NULL,
    read_only       INTEGER NOT NULL,
    PRIMARY KEY (session_seq, memory_store_id)
);
CREATE INDEX session_memory_stores_store ON session_memory_stores (memory_store_id);

CREATE TABLE session_events (
    seq          INTEGER PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    session_seq  INTEGER NOT NULL REFERENCES sessions (seq) ON DELETE CASCADE,
    type         TEXT    NOT NULL,
    body         TEXT    NOT NULL,             -- JSON event as listed
    processed_at INTEGER,
    -- For tool calls: whether a result (or a denial) has answered it.
    answered     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX session_events_session ON session_events (session_seq, seq);

CREATE TABLE work_items (
    seq                 INTEGER PRIMARY KEY,
    id                  TEXT    NOT NULL UNIQUE,
    environment_seq     INTEGER NOT NULL REFERENCES environments (seq) ON DELETE CASCADE,
    session_id          TEXT,
    data                TEXT    NOT NULL,      -- JSON {type, id}
    state               TEXT    NOT NULL,
    metadata            TEXT    NOT NULL,
    created_at          INTEGER NOT NULL,
    acknowledged_at     INTEGER,
    started_at          INTEGER,
    latest_heartbeat_at INTEGER,
    stop_requested_at   INTEGER,
    stopped_at          INTEGER,
    -- A polled item is hidden from other polls until acked or until this instant.
    pending_until       INTEGER,
    -- An acked item's lease: expires without heartbeats, returning the item to the queue.
    lease_expires_at    INTEGER,
    last_heartbeat      TEXT,
    ttl_seconds         INTEGER NOT NULL
);
CREATE INDEX work_items_queue ON work_items (environment_seq, state, seq);
CREATE INDEX work_items_session ON work_items (session_id);

CREATE TABLE session_tokens (
    seq         INTEGER PRIMARY KEY,
    secret_hash BLOB    NOT NULL UNIQUE,
    work_seq    INTEGER NOT NULL REFERENCES work_items (seq) ON DELETE CASCADE,
    session_id  TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
CREATE INDEX session_tokens_work ON session_tokens (work_seq);

CREATE TABLE worker_polls (
    environment_seq INTEGER NOT NULL REFERENCES environments (seq) ON DELETE CASCADE,
    worker_id       TEXT    NOT NULL,
    last_poll_at    INTEGER NOT NULL,
    PRIMARY KEY (environment_seq, worker_id)
);
