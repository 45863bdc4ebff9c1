// Memory stores through the TypeScript SDK: create, retrieve, update, list, archive, delete.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as L from './lib.mjs';

let fx;
before(async () => {
  fx = await L.serverFixture();
});
after(async () => {
  await fx?.server.stop();
});

const mine = async (marker, params = {}) =>
  (await L.collect(fx.stores.list(params))).filter((s) => s.metadata.marker === marker);

test('stores: create with defaults, retrieve', async () => {
  const name = L.unique('defaults');
  const store = await fx.stores.create({ name });
  L.checkStoreShape(store);
  assert.equal(store.name, name);
  assert.equal(store.description, '', 'description defaults to ""');
  assert.deepEqual(store.metadata, {}, 'metadata defaults to {}');
  assert.equal(store.archived_at, null);
  assert.ok(store.updated_at >= store.created_at);
  assert.deepEqual(await fx.stores.retrieve(store.id), store, 'retrieve returns the created store');
});

test('stores: create with description and metadata; names are not unique', async () => {
  const metadata = { end_user: 'u-42', ['k'.repeat(64)]: 'v'.repeat(512), unicode: 'héllo ✓' };
  const store = await fx.newStore({ name: 'Ünïcode name ✓', description: 'remember things', metadata });
  assert.equal(store.name, 'Ünïcode name ✓');
  assert.equal(store.description, 'remember things');
  assert.deepEqual(store.metadata, metadata);
  assert.deepEqual((await fx.stores.retrieve(store.id)).metadata, metadata);
  const twin = await fx.newStore({ name: 'Ünïcode name ✓' });
  assert.notEqual(twin.id, store.id);
});

test('stores: create validation is a BadRequestError', async () => {
  const cases = [
    ['an empty name', { name: '' }],
    ['a name of 256 chars', { name: 'n'.repeat(256) }],
    ['a control character in the name', { name: 'bad\u0007name' }],
    ['a description of 1025 chars', { name: 'ok', description: 'd'.repeat(1025) }],
    ['17 metadata pairs', { name: 'ok', metadata: Object.fromEntries([...Array(17).keys()].map((i) => [`k${i}`, 'v'])) }],
    ['a metadata value of 513 chars', { name: 'ok', metadata: { k: 'v'.repeat(513) } }],
  ];
  for (const [what, params] of cases) await L.expectInvalid(() => fx.stores.create(params), `create a store with ${what}`);
  const ok = await fx.newStore({ name: 'n'.repeat(255), description: 'd'.repeat(1024) });
  assert.equal(ok.name.length, 255);
});

test('stores: retrieve, update, archive and delete of an unknown store are NotFoundError', async () => {
  await L.expectNotFound(() => fx.stores.retrieve(L.UNKNOWN_STORE), 'retrieve');
  await L.expectNotFound(() => fx.stores.update(L.UNKNOWN_STORE, { name: 'x' }), 'update');
  await L.expectNotFound(() => fx.stores.archive(L.UNKNOWN_STORE), 'archive');
  await L.expectNotFound(() => fx.stores.delete(L.UNKNOWN_STORE), 'delete');
});

test('stores: update name, description and a metadata patch', async () => {
  const store = await fx.newStore({ name: 'before', description: 'desc', metadata: { a: '1', b: '2', c: '3' } });
  await L.tick();
  let upd = await fx.stores.update(store.id, { name: 'after' });
  L.checkStoreShape(upd);
  assert.equal(upd.name, 'after');
  assert.equal(upd.description, 'desc', 'description untouched by a name-only update');
  assert.deepEqual(upd.metadata, { a: '1', b: '2', c: '3' });
  assert.equal(upd.created_at, store.created_at);
  assert.ok(upd.updated_at > store.updated_at, `updated_at advances (${store.updated_at} -> ${upd.updated_at})`);

  upd = await fx.stores.update(store.id, { description: '' });
  assert.equal(upd.description, '');
  // The SDK sends a null value as JSON null: it removes that key.
  upd = await fx.stores.update(store.id, { metadata: { a: 'one', b: null, d: '4', zz: null } });
  assert.deepEqual(upd.metadata, { a: 'one', c: '3', d: '4' }, 'upsert a, remove b, keep c, add d');
  const got = await fx.stores.retrieve(store.id);
  assert.deepEqual([got.name, got.description, got.metadata], ['after', '', { a: 'one', c: '3', d: '4' }]);
});

test('stores: list: newest first, auto-pagination, getNextPage and explicit page cursors', async () => {
  const marker = L.unique('page');
  const created = [];
  for (let i = 0; i < 7; i++) {
    created.push(await fx.newStore({ name: `list-${i}`, metadata: { marker } }));
    if (i === 2 || i === 5) await L.tick();
  }
  const first = created[0];
  const everything = await L.collect(fx.stores.list({ limit: 100 }));
  for (const s of everything) L.checkStoreShape(s, `listed store ${s.id}`);
  for (let i = 1; i < everything.length; i++) assert.ok(everything[i - 1].created_at >= everything[i].created_at, 'newest first');

  const params = { limit: 2, 'created_at[gte]': first.created_at };
  const pages = await L.allPages(fx.stores.list(params));
  assert.ok(pages.length >= 4, `limit=2 over >= 7 stores needs >= 4 pages, got ${pages.length}`);
  for (const p of pages) assert.ok(p.data.length <= 2, `a page holds ${p.data.length} > 2`);
  const ids = pages.flatMap((p) => p.data.map((s) => s.id));
  assert.equal(new Set(ids).size, ids.length, 'no store twice');
  const ours = ids.filter((id) => created.some((s) => s.id === id));
  const groups = [created.slice(6), created.slice(3, 6), created.slice(0, 3)].map((g) => new Set(g.map((s) => s.id)));
  assert.deepEqual([new Set(ours.slice(0, 1)), new Set(ours.slice(1, 4)), new Set(ours.slice(4, 7))], groups, 'newest-first groups');

  const auto = (await L.collect(fx.stores.list(params))).map((s) => s.id);
  assert.deepEqual(auto, ids, 'for await over the list yields the same sequence');
  const hand = await L.pagesByHand((page) =>
    fx.stores.list({ limit: 3, 'created_at[gte]': first.created_at, ...(page ? { page } : {}) }),
  );
  assert.deepEqual(hand.flatMap((p) => p.data.map((s) => s.id)), ids, 'explicit next_page traversal (limit 3)');
  assert.ok((await fx.stores.list()).data.length <= 20, 'default page size <= 20');
  await L.expectInvalid(() => fx.stores.list({ limit: 0 }), 'limit=0');
  await L.expectInvalid(() => fx.stores.list({ limit: 101 }), 'limit=101');
});

test('stores: list created_at filters', async () => {
  const marker = L.unique('time');
  const a = await fx.newStore({ metadata: { marker } });
  await L.tick();
  const b = await fx.newStore({ metadata: { marker } });
  await L.tick();
  const c = await fx.newStore({ metadata: { marker } });
  const ids = async (params) => (await mine(marker, { limit: 100, ...params })).map((s) => s.id);
  assert.deepEqual(await ids({}), [c.id, b.id, a.id]);
  assert.deepEqual(await ids({ 'created_at[gte]': b.created_at }), [c.id, b.id], 'gte is inclusive');
  assert.deepEqual(await ids({ 'created_at[lte]': b.created_at }), [b.id, a.id], 'lte is inclusive');
  assert.deepEqual(await ids({ 'created_at[gte]': c.created_at, 'created_at[lte]': a.created_at }), [], 'empty range');
});

test('stores: archive; include_archived', async () => {
  const marker = L.unique('arch');
  const live = await fx.newStore({ metadata: { marker } });
  const store = await fx.newStore({ name: 'to-archive', metadata: { marker } });
  await L.tick();
  const arch = await fx.stores.archive(store.id);
  L.checkStoreShape(arch);
  assert.equal(arch.id, store.id);
  L.rfc3339(arch.archived_at, 'archived_at');
  assert.ok(arch.updated_at > store.updated_at, 'archive advances updated_at');
  assert.deepEqual([arch.name, arch.metadata, arch.description], ['to-archive', { marker }, '']);
  assert.equal((await fx.stores.retrieve(store.id)).archived_at, arch.archived_at);
  await L.tick();
  assert.deepEqual(await fx.stores.archive(store.id), arch, 'archiving again returns it unchanged');

  assert.deepEqual((await mine(marker, { limit: 100 })).map((s) => s.id), [live.id], 'the default listing excludes archived stores');
  assert.deepEqual((await mine(marker, { limit: 100, include_archived: false })).map((s) => s.id), [live.id]);
  assert.deepEqual(
    new Set((await mine(marker, { limit: 100, include_archived: true })).map((s) => s.id)),
    new Set([live.id, store.id]),
    'include_archived=true',
  );

  await L.expectInvalid(() => fx.memories.create(store.id, { path: '/new.md', content: 'x' }), 'create a memory in an archived store');
  await L.expectInvalid(() => fx.stores.update(store.id, { name: 'x' }), 'update an archived store');
});

test('stores: delete', async () => {
  const store = await fx.newStore();
  const mem = await fx.newMemory(store.id, '/a.md', 'a');
  const res = await fx.stores.delete(store.id);
  assert.deepEqual(res, { id: store.id, type: 'memory_store_deleted' });
  await L.expectNotFound(() => fx.stores.retrieve(store.id), 'retrieve a deleted store');
  await L.expectNotFound(() => fx.memories.list(store.id), 'list memories of a deleted store');
  await L.expectNotFound(() => fx.memories.retrieve(mem.id, { memory_store_id: store.id }), 'retrieve a memory of a deleted store');
  await L.expectNotFound(() => fx.versions.list(store.id), 'list versions of a deleted store');
  await L.expectNotFound(() => fx.stores.delete(store.id), 'delete twice');
  const ids = (await L.collect(fx.stores.list({ limit: 100, include_archived: true }))).map((s) => s.id);
  assert.ok(!ids.includes(store.id), 'a deleted store is not listed');
});

test('stores: credentials: a wrong API key is an AuthenticationError', async () => {
  const bad = L.newClient(fx.baseURL, 'sk-not-a-key');
  await L.expectError(() => bad.beta.memoryStores.list(), {
    status: 401,
    cls: L.AuthenticationError,
    type: 'authentication_error',
    what: 'list with a wrong key',
  });
});

test('stores: `betas: ["managed-agents-2026-04-01"]` makes the SDK send both betas; memory endpoints refuse that (as with the Python SDK)', async () => {
  const sent = [];
  const client = L.newClient(fx.baseURL, fx.apiKey, {
    fetch: (url, init) => {
      sent.push(new Headers(init.headers).get('anthropic-beta'));
      return fetch(url, init);
    },
  });
  const store = await fx.newStore();
  const betas = [L.AGENTS_BETA];
  for (const [what, call] of [
    ['list stores', () => client.beta.memoryStores.list({ betas })],
    ['retrieve store', () => client.beta.memoryStores.retrieve(store.id, { betas })],
    ['create memory', () => client.beta.memoryStores.memories.create(store.id, { path: '/b.md', content: 'b', betas })],
    ['list versions', () => client.beta.memoryStores.memoryVersions.list(store.id, { betas })],
  ]) {
    sent.length = 0;
    await L.expectInvalid(call, `${what} with both betas`);
    assert.deepEqual(sent.map((h) => h.split(',').map((b) => b.trim()).sort()), [[L.MEMORY_BETA, L.AGENTS_BETA].sort()], `${what}: the beta header the SDK sent`);
  }
  // Either value alone is accepted: the default (agent-memory) on every call above, and managed-agents alone.
  const alone = L.newClient(fx.baseURL, fx.apiKey, { defaultHeaders: { 'anthropic-beta': L.AGENTS_BETA } });
  const res = await alone.get(`/v1/memory_stores/${store.id}`, { headers: { 'anthropic-beta': L.AGENTS_BETA } });
  assert.equal(res.id, store.id, 'anthropic-beta: managed-agents-2026-04-01 alone');
});
