-- People (admin-api.md §4.3, §8.6, §8.7, issue 33): the organization's users, invites and
-- workspace memberships. An email is stored lower-cased, so one person is one address. A password
-- is kept only as its argon2id hash; an invite's link only as the SHA-256 of its secret.
-- Removing a person deletes their row and memberships; memory versions and the audit log keep
-- their id.
CREATE TABLE users (
    seq            BIGSERIAL PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    email          TEXT    NOT NULL UNIQUE,
    name           TEXT    NOT NULL,
    role           TEXT    NOT NULL,
    password_hash  TEXT,
    added_at       BIGINT NOT NULL
);

CREATE TABLE invites (
    seq          BIGSERIAL PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    email        TEXT    NOT NULL,
    role         TEXT    NOT NULL,
    secret_hash  BYTEA   NOT NULL UNIQUE,
    invited_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    accepted_at  BIGINT,
    deleted_at   BIGINT
);
CREATE INDEX invites_email ON invites (email, seq);

CREATE TABLE workspace_members (
    seq             BIGSERIAL PRIMARY KEY,
    workspace_id    TEXT    NOT NULL,
    user_id         TEXT    NOT NULL,
    workspace_role  TEXT    NOT NULL,
    added_at        BIGINT NOT NULL,
    UNIQUE (workspace_id, user_id)
);
CREATE INDEX workspace_members_user ON workspace_members (user_id);

-- One-time setup links (§8.3): made on the first start of an empty database and by
-- `mnemo admin bootstrap` while no admin is active; each makes one org admin, once, within 24 h.
CREATE TABLE setup_links (
    seq          BIGSERIAL PRIMARY KEY,
    secret_hash  BYTEA   NOT NULL UNIQUE,
    created_at   BIGINT  NOT NULL,
    expires_at   BIGINT  NOT NULL,
    used_at      BIGINT
);

