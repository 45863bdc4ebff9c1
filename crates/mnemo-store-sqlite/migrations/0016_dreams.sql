-- Dreams (issue 34): a model curates a memory store. `body` is the dream object as the API shows
-- it; the columns beside it are what lists, the scheduler and the store guards query. The lease
-- (`lease_holder`, `lease_expires_at`) is the runner's, as a session's turn lease.
CREATE TABLE dreams (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT    NOT NULL UNIQUE,
    workspace_id     TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    input_store_id   TEXT    NOT NULL,
    update_existing  INTEGER NOT NULL,
    output_store_id  TEXT,
    session_id       TEXT,
    created_at       INTEGER NOT NULL,
    archived_at      INTEGER,
    lease_holder     TEXT,
    lease_expires_at INTEGER,
    idempotency_key  TEXT,
    request_sha256   TEXT,
    body             TEXT    NOT NULL
);
CREATE INDEX dreams_workspace ON dreams (workspace_id, seq);
CREATE INDEX dreams_status ON dreams (status, seq);
CREATE UNIQUE INDEX dreams_idempotency ON dreams (workspace_id, idempotency_key);
