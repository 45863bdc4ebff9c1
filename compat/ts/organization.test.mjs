// The Admin API through the TypeScript SDK's `client.organization.*`: the organization,
// workspaces, API keys and rate limits with the server's admin key (sent as the SDK's apiKey),
// and what a workspace's key sees.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as L from './lib.mjs';

let fx;
let admin;
before(async () => {
  fx = await L.serverFixture();
  admin = fx.server.client({ apiKey: fx.server.adminKey });
});
after(async () => {
  await fx?.server.stop();
});

const UNKNOWN_WORKSPACE = 'wrkspc_0000000000000000000000';
const forbidden = (call, what) =>
  L.expectError(call, { status: 403, cls: L.PermissionDeniedError, type: 'permission_error', what });
const unauthenticated = (call, what) =>
  L.expectError(call, { status: 401, cls: L.AuthenticationError, type: 'authentication_error', what });

/** Mints an API key of `workspaceId` (mnemo's extension; the SDK has no method for it). */
async function mintKey(workspaceId, name) {
  const res = await fetch(`${fx.baseURL}/v1/organizations/api_keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${fx.server.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name, workspace_id: workspaceId }),
  });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  return body;
}

test('organization: me with an admin key and an API key; each key reaches its own API only', async () => {
  const me = await admin.organization.retrieve();
  assert.equal(me.type, 'organization');
  assert.equal(me.name, 'mnemo');
  assert.equal((await fx.client.organization.retrieve()).id, me.id, 'an API key may ask which organization');
  await forbidden(() => fx.client.organization.workspaces.list(), 'workspaces.list with an API key');
  await forbidden(() => admin.beta.memoryStores.list(), 'memory stores with an admin key');
});

test('workspaces: create, retrieve, update, list page by page, archive', async () => {
  const name = L.unique('team');
  const ws = await admin.organization.workspaces.create({ name, tags: { team: 'ts' } });
  assert.equal(ws.type, 'workspace');
  assert.match(ws.id, /^wrkspc_/);
  assert.equal(ws.archived_at, null);
  assert.match(ws.created_at, L.RFC3339_UTC);
  assert.equal((await admin.organization.workspaces.retrieve(ws.id)).name, name);
  const renamed = await admin.organization.workspaces.update(ws.id, { name: `${name}-2` });
  assert.equal(renamed.name, `${name}-2`);
  const listed = (await L.collect(admin.organization.workspaces.list({ limit: 1 }))).map((w) => w.id);
  assert.ok(listed.includes(ws.id), `${ws.id} in ${listed}`);
  const archived = await admin.organization.workspaces.archive(ws.id);
  assert.ok(archived.archived_at, 'archived_at is set');
  const visible = (await L.collect(admin.organization.workspaces.list())).map((w) => w.id);
  assert.ok(!visible.includes(ws.id), 'archived workspaces are hidden unless asked for');
  await L.expectNotFound(() => admin.organization.workspaces.retrieve(UNKNOWN_WORKSPACE), 'an unknown workspace');
});

test('api keys: a minted key sees its workspace only; deactivated it stops working', async () => {
  const ws = await admin.organization.workspaces.create({ name: L.unique('isolated') });
  const minted = await mintKey(ws.id, 'ts key');
  const team = fx.server.client({ apiKey: minted.key });
  const theirs = await team.beta.memoryStores.create({ name: L.unique('theirs') });
  const ours = await fx.newStore();
  await L.expectNotFound(() => team.beta.memoryStores.retrieve(ours.id), "another workspace's store");
  await L.expectNotFound(() => fx.stores.retrieve(theirs.id), "another workspace's store, the other way");
  assert.deepEqual((await L.collect(team.beta.memoryStores.list())).map((s) => s.id), [theirs.id]);

  const key = await admin.organization.apiKeys.retrieve(minted.id);
  assert.deepEqual([key.type, key.status, key.workspace_id], ['api_key', 'active', ws.id]);
  assert.ok(!JSON.stringify(key).includes(minted.key), 'the secret is shown once');
  const listed = await L.collect(admin.organization.apiKeys.list({ workspace_id: ws.id }));
  assert.deepEqual(listed.map((k) => k.id), [minted.id]);
  const off = await admin.organization.apiKeys.update(minted.id, { status: 'inactive' });
  assert.equal(off.status, 'inactive');
  await unauthenticated(() => team.beta.memoryStores.list(), 'an inactive key');
  await admin.organization.apiKeys.update(minted.id, { status: 'active' });
  assert.equal((await L.collect(team.beta.memoryStores.list())).length, 1, 'active again');
});

test('rate limits: the organization entries and a workspace override', async () => {
  const entries = await L.collect(admin.organization.rateLimits.list());
  assert.ok(entries.some((e) => e.id === 'ratelimit_api'), JSON.stringify(entries.map((e) => e.id)));
  const ws = await admin.organization.workspaces.create({ name: L.unique('limited') });
  const set = await admin.organization.workspaces.rateLimits.update('ratelimit_api', {
    workspace_id: ws.id,
    limits: [{ type: 'requests_per_minute', value: 600 }],
  });
  assert.equal(set.type, 'workspace_rate_limit');
  assert.equal(set.rate_limit_id, 'ratelimit_api');
  assert.equal(set.limits.find((l) => l.type === 'requests_per_minute')?.value, 600);
  const own = await L.collect(admin.organization.workspaces.rateLimits.list(ws.id));
  assert.ok(own.some((e) => e.rate_limit_id === 'ratelimit_api'));
});
