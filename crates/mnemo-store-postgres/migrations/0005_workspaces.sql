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
    created_at  BIGINT  NOT NULL
);
INSERT INTO organization (id, name, created_at)
VALUES (gen_random_uuid()::text, 'mnemo', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);

CREATE TABLE workspaces (
    seq             BIGSERIAL PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    name            TEXT    NOT NULL,
    display_color   TEXT    NOT NULL,
    tags            TEXT    NOT NULL,
    data_residency  TEXT    NOT NULL,
    is_default      BOOLEAN NOT NULL DEFAULT FALSE,
    created_at      BIGINT  NOT NULL,
    archived_at     BIGINT
);
-- At most one Default workspace.
CREATE UNIQUE INDEX workspaces_default ON workspaces (is_default) WHERE is_default;
INSERT INTO workspaces (id, name, display_color, tags, data_residency, is_default, created_at)
SELECT 'wrkspc_' || substr(md5(random()::text || clock_timestamp()::text), 1, 22), 'Default', '#6C5BB9', '{}',
       '{"workspace_geo":"us","allowed_inference_geos":"unrestricted","default_inference_geo":"global"}',
       TRUE, created_at
FROM organization;

ALTER TABLE memory_stores ADD COLUMN workspace_id TEXT;
ALTER TABLE environments ADD COLUMN workspace_id TEXT;
ALTER TABLE agents ADD COLUMN workspace_id TEXT;
ALTER TABLE sessions ADD COLUMN workspace_id TEXT;
ALTER TABLE webhook_endpoints ADD COLUMN workspace_id TEXT;
UPDATE memory_stores SET workspace_id = (SELECT id FROM workspaces WHERE is_default);
UPDATE environments SET workspace_id = (SELECT id FROM workspaces WHERE is_default);
UPDATE agents SET workspace_id = (SELECT id FROM workspaces WHERE is_default);
UPDATE sessions SET workspace_id = (SELECT id FROM workspaces WHERE is_default);
UPDATE webhook_endpoints SET workspace_id = (SELECT id FROM workspaces WHERE is_default);
ALTER TABLE memory_stores ALTER COLUMN workspace_id SET NOT NULL;
ALTER TABLE environments ALTER COLUMN workspace_id SET NOT NULL;
ALTER TABLE agents ALTER COLUMN workspace_id SET NOT NULL;
ALTER TABLE sessions ALTER COLUMN workspace_id SET NOT NULL;
ALTER TABLE webhook_endpoints ALTER COLUMN workspace_id SET NOT NULL;
CREATE INDEX memory_stores_workspace ON memory_stores (workspace_id, seq);
CREATE INDEX environments_workspace ON environments (workspace_id, seq);
CREATE INDEX agents_workspace ON agents (workspace_id, seq);
CREATE INDEX sessions_workspace ON sessions (workspace_id, seq);
CREATE INDEX webhook_endpoints_workspace ON webhook_endpoints (workspace_id, seq);

-- API keys gain the §4.2 object's fields. A revoked key stays refused: it becomes `archived`.
ALTER TABLE api_keys ADD COLUMN workspace_id TEXT;
ALTER TABLE api_keys ADD COLUMN status TEXT NOT NULL DEFAULT 'active'
    CHECK (status IN ('active', 'inactive', 'archived', 'expired'));
ALTER TABLE api_keys ADD COLUMN expires_at BIGINT;
ALTER TABLE api_keys ADD COLUMN created_by TEXT;
ALTER TABLE api_keys ADD COLUMN partial_key_hint TEXT;
UPDATE api_keys SET workspace_id = (SELECT id FROM workspaces WHERE is_default);
UPDATE api_keys SET status = 'archived' WHERE revoked_at IS NOT NULL;
ALTER TABLE api_keys ALTER COLUMN workspace_id SET NOT NULL;
CREATE INDEX api_keys_workspace ON api_keys (workspace_id, seq);

-- Admin keys (§8.2): no workspace; reach the Admin API only.
CREATE TABLE admin_keys (
    seq          BIGSERIAL PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    secret_hash  BYTEA   NOT NULL UNIQUE,
    name         TEXT    NOT NULL,
    partial_key_hint TEXT,
    created_at   BIGINT  NOT NULL,
    revoked_at   BIGINT
);
