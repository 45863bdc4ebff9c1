-- Tenancy (admin-api.md §8.1, §8.8): one organization per server, workspaces inside it, and
-- every Managed Agents resource in exactly one workspace, fixed at creation. An existing
-- database moves into the Default workspace here, in the migration's one transaction: every
-- memory store, environment, agent, session and webhook endpoint, and every API key (an
-- `active` Default key: same id and secret, `created_by` null). Children (memories, versions,
-- events, work items, environment keys) belong to their parent's workspace.
-- Ids made here are a prefix and 22 lower-case hex digits: valid base62 id bodies.

CREATE TABLE organization (
    id          TEXT    NOT NULL PRIMARY KEY,
    name        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
);
INSERT INTO organization (id, name, created_at)
SELECT lower(substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3) || '-' ||
             substr('89ab', 1 + (abs(random()) % 4), 1) || substr(h, 18, 3) || '-' || substr(h, 21, 12)),
       'mnemo',
       CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
FROM (SELECT hex(randomblob(16)) AS h);

CREATE TABLE workspaces (
    seq             INTEGER PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    name            TEXT    NOT NULL,
    display_color   TEXT    NOT NULL,
    tags            TEXT    NOT NULL,
    data_residency  TEXT    NOT NULL,
    is_default      INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1)),
    created_at      INTEGER NOT NULL,
    archived_at     INTEGER
);
-- At most one Default workspace.
CREATE UNIQUE INDEX workspaces_default ON workspaces (is_default) WHERE is_default = 1;
INSERT INTO workspaces (id, name, display_color, tags, data_residency, is_default, created_at)
SELECT 'wrkspc_' || lower(hex(randomblob(11))), 'Default', '#6C5BB9', '{}',
       '{"workspace_geo":"us","allowed_inference_geos":"unrestricted","default_inference_geo":"global"}',
       1, created_at
FROM organization;

ALTER TABLE memory_stores ADD COLUMN workspace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE environments ADD COLUMN workspace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN workspace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN workspace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_endpoints ADD COLUMN workspace_id TEXT NOT NULL DEFAULT '';
UPDATE memory_stores SET workspace_id = (SELECT id FROM workspaces WHERE is_default = 1);
UPDATE environments SET workspace_id = (SELECT id FROM workspaces WHERE is_default = 1);
UPDATE agents SET workspace_id = (SELECT id FROM workspaces WHERE is_default = 1);
UPDATE sessions SET workspace_id = (SELECT id FROM workspaces WHERE is_default = 1);
UPDATE webhook_endpoints SET workspace_id = (SELECT id FROM workspaces WHERE is_default = 1);
CREATE INDEX memory_stores_workspace ON memory_stores (workspace_id, seq);
CREATE INDEX environments_workspace ON environments (workspace_id, seq);
CREATE INDEX agents_workspace ON agents (workspace_id, seq);
CREATE INDEX sessions_workspace ON sessions (workspace_id, seq);
CREATE INDEX webhook_endpoints_workspace ON webhook_endpoints (workspace_id, seq);

-- API keys gain the §4.2 object's fields. A revoked key stays refused: it becomes `archived`.
ALTER TABLE api_keys ADD COLUMN workspace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN status TEXT NOT NULL DEFAULT 'active'
    CHECK (status IN ('active', 'inactive', 'archived', 'expired'));
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
ALTER TABLE api_keys ADD COLUMN created_by TEXT;
ALTER TABLE api_keys ADD COLUMN partial_key_hint TEXT;
UPDATE api_keys SET workspace_id = (SELECT id FROM workspaces WHERE is_default = 1);
UPDATE api_keys SET status = 'archived' WHERE revoked_at IS NOT NULL;
CREATE INDEX api_keys_workspace ON api_keys (workspace_id, seq);

-- Admin keys (§8.2): no workspace; reach the Admin API only.
CREATE TABLE admin_keys (
    seq          INTEGER PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    secret_hash  BLOB    NOT NULL UNIQUE,
    name         TEXT    NOT NULL,
    partial_key_hint TEXT,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);
