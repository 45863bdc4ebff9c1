-- People who sign in through the identity provider (issue 33 item 3; the same shape as
-- SQLite's): the provider's subject at its issuer, linked to the person it signs in as. The link
-- is by subject, never by email. A row of a removed person is replaced when that subject signs
-- in again.
CREATE TABLE sso_identities (
    seq        BIGSERIAL PRIMARY KEY,
    issuer     TEXT    NOT NULL,
    subject    TEXT    NOT NULL,
    user_id    TEXT    NOT NULL,
    linked_at  BIGINT  NOT NULL,
    UNIQUE (issuer, subject)
);
