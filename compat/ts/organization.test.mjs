// The Admin API through the TypeScript SDK's `client.organization.*`: the organization, people,
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

/** What an invited person does: opens `acceptURL` in the console and chooses a name and password. */
async function joinThroughTheConsole(acceptURL, name, password) {
  const page = await fetch(acceptURL);
  const html = await page.text();
  assert.equal(page.status, 200, html.slice(0, 300));
  const token = /name="token" value="([^"]+)"/.exec(html)?.[1];
  assert.ok(token, 'the invite page carries its form token');
  const cookie = (page.headers.get('set-cookie') ?? '').split(';')[0];
  const joined = await fetch(acceptURL, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    body: new URLSearchParams({ token, name, password, password_again: password }).toString(),
  });
  assert.equal(joined.status, 200, (await joined.text()).slice(0, 300));
}

test('people: an invite is accepted in the console; the person is listed, changed, added to a workspace, removed', async () => {
  const invalid = L.expectInvalid;
  const email = `${L.unique('ts-person')}@example.com`;
  const invite = await admin.organization.invites.create({ email, role: 'developer' });
  assert.equal(invite.type, 'invite');
  assert.match(invite.id, /^invite_/);
  assert.equal(invite.status, 'pending');
  assert.deepEqual(invite.rbac_group_ids, []);
  assert.match(invite.accept_url, /\/console\/invite\//, 'accept_url (extension)');
  await invalid(() => admin.organization.invites.create({ email, role: 'user' }), 'a second pending invite');
  await invalid(() => admin.organization.invites.create({ email: `x-${email}`, role: 'admin' }), 'admin via the API');
  const pending = (await L.collect(admin.organization.invites.list({ statuses: ['pending'] }))).map((i) => i.id);
  assert.ok(pending.includes(invite.id), 'invites.list(statuses)');

  await joinThroughTheConsole(invite.accept_url, 'Ada', 'a long enough password');
  assert.equal((await admin.organization.invites.retrieve(invite.id)).status, 'accepted');
  const [user] = await L.collect(admin.organization.users.list({ email: email.toUpperCase() }));
  assert.equal(user.type, 'user');
  assert.equal(user.email, email);
  assert.equal(user.role, 'developer');
  assert.equal((await admin.organization.users.update(user.id, { role: 'user' })).role, 'user');
  await invalid(() => admin.organization.users.update(user.id, { role: 'admin' }), 'admin via the API');

  const ws = await admin.organization.workspaces.create({ name: L.unique('ts-people') });
  const member = await admin.organization.workspaces.members.add(ws.id, {
    user_id: user.id,
    workspace_role: 'workspace_developer',
  });
  assert.deepEqual(
    [member.type, member.user_id, member.workspace_id, member.workspace_role],
    ['workspace_member', user.id, ws.id, 'workspace_developer'],
  );
  const updated = await admin.organization.workspaces.members.update(user.id, {
    workspace_id: ws.id,
    workspace_role: 'workspace_admin',
  });
  assert.equal(updated.workspace_role, 'workspace_admin');
  const listed = (await L.collect(admin.organization.workspaces.members.list(ws.id))).map((m) => m.user_id);
  assert.ok(listed.includes(user.id), 'members.list');
  const removed = await admin.organization.workspaces.members.remove(user.id, { workspace_id: ws.id });
  assert.equal(removed.type, 'workspace_member_deleted');
  const gone = await admin.organization.users.remove(user.id);
  assert.deepEqual([gone.type, gone.id], ['user_deleted', user.id]);
  await L.expectNotFound(() => admin.organization.users.retrieve(user.id), 'a removed person');
  await forbidden(() => fx.client.organization.users.list(), 'users.list with an API key');

  const other = await admin.organization.invites.create({ email: `${L.unique('ts-gone')}@example.com`, role: 'user' });
  assert.equal((await admin.organization.invites.delete(other.id)).type, 'invite_deleted');
  await invalid(() => admin.organization.invites.delete(other.id), 'only a pending invite is deleted');
});
