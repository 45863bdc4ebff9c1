-- People signed in to the web console as themselves (issue 33 part 2): each session is known by
-- the hash of its cookie's secret and acts as the person `user_id`, with whatever org role and
-- memberships they hold when it is used. Signing out everywhere revokes them all; removing the
-- person deletes them. Ended rows stay until the person's next sign-in clears those older than
-- a day, like API-key console sessions.
CREATE TABLE person_sessions (
    seq          INTEGER PRIMARY KEY,
    secret_hash  BLOB    NOT NULL UNIQUE,
    user_id      TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);
CREATE INDEX person_sessions_user ON person_sessions (user_id, expires_at);
