-- People signed in to the web console, each known by the hash of its cookie's secret and
-- acting as the API key it signed in with. Expired and revoked rows stay until a later sign-in
-- by the same key clears those older than a day.

CREATE TABLE console_sessions (
    seq          INTEGER PRIMARY KEY,
    secret_hash  BLOB    NOT NULL UNIQUE,
    api_key_seq  INTEGER NOT NULL REFERENCES api_keys (seq) ON DELETE CASCADE,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);
CREATE INDEX console_sessions_api_key ON console_sessions (api_key_seq, expires_at);
