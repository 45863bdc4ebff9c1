-- Webhooks: the endpoints an operator registers, and the outbox. A write that yields webhook
-- events records each event and one delivery per subscribed endpoint in its own transaction,
-- so an event exists exactly when its change committed. A delivery is `pending` until an
-- attempt gets a 2xx (`delivered`) or the last attempt fails (`failed`); `next_attempt_at` is
-- when it is due, and a claim moves it past the attempt's lease (so an attempt whose sender
-- died is made again once the lease ends) and counts the attempt.

CREATE TABLE webhook_endpoints (
    seq          BIGSERIAL PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    url          TEXT    NOT NULL,
    -- The signing secret (`whsec_…`): kept as it is, since every attempt is signed with it.
    secret       TEXT    NOT NULL,
    -- JSON array of event type names; NULL: every type.
    event_types  TEXT,
    description  TEXT,
    -- The secret a rotation replaced, still signing beside the new one until it expires.
    previous_secret            TEXT,
    previous_secret_expires_at BIGINT,
    created_at   BIGINT  NOT NULL,
    updated_at   BIGINT  NOT NULL
);

CREATE TABLE webhook_events (
    seq          BIGSERIAL PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    type         TEXT    NOT NULL,
    resource_id  TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL
);

CREATE TABLE webhook_deliveries (
    seq              BIGSERIAL PRIMARY KEY,
    id               TEXT    NOT NULL UNIQUE,
    endpoint_seq     BIGINT  NOT NULL REFERENCES webhook_endpoints (seq) ON DELETE CASCADE,
    event_seq        BIGINT  NOT NULL REFERENCES webhook_events (seq) ON DELETE CASCADE,
    status           TEXT    NOT NULL,
    attempts         BIGINT  NOT NULL,
    next_attempt_at  BIGINT,
    last_attempt_at  BIGINT,
    last_status_code BIGINT,
    last_error       TEXT,
    created_at       BIGINT  NOT NULL,
    finished_at      BIGINT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_seq, seq);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_seq);
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_at) WHERE status <> 'pending';
