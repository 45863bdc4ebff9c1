// Memory versions through the TypeScript SDK: one per mutation, list (views, filters, paging),
// retrieve, redaction.

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

/** A store with one memory taken through create -> modify -> rename -> delete. */
async function history() {
  const store = await fx.newStore();
  const mem = await fx.newMemory(store.id, '/h/one.md', 'one');
  const mod = await fx.memories.update(mem.id, { memory_store_id: store.id, content: 'one, edited' });
  const ren = await fx.memories.update(mem.id, { memory_store_id: store.id, path: '/h/renamed.md' });
  await fx.memories.delete(mem.id, { memory_store_id: store.id });
  return { store, mem, mod, ren };
}

test('versions: every mutation writes one version, newest first, by the API key', async () => {
  const { store, mem, mod, ren } = await history();
  const versions = await fx.allVersions(store.id, { view: 'full' });
  assert.deepEqual(versions.map((v) => v.operation), ['deleted', 'modified', 'modified', 'created']);
  for (const v of versions) {
    L.checkVersionShape(v, `version ${v.operation}`);
    assert.equal(v.memory_id, mem.id);
    assert.equal(v.memory_store_id, store.id);
    assert.equal(v.redacted_at ?? null, null, 'redacted_at');
    assert.equal(v.redacted_by ?? null, null, 'redacted_by');
  }
  const [deleted, renamed, modified, created] = versions;
  assert.equal(created.id, mem.memory_version_id);
  assert.equal(modified.id, mod.memory_version_id);
  assert.equal(renamed.id, ren.memory_version_id);
  assert.deepEqual(
    [created.path, created.content, created.content_sha256, created.content_size_bytes],
    ['/h/one.md', 'one', L.sha256('one'), 3],
  );
  assert.deepEqual([modified.path, modified.content], ['/h/one.md', 'one, edited']);
  assert.deepEqual([renamed.path, renamed.content], ['/h/renamed.md', 'one, edited'], 'a rename version carries the new path');
  assert.equal(deleted.path, '/h/renamed.md');
  assert.deepEqual([deleted.content ?? null, deleted.content_sha256 ?? null, deleted.content_size_bytes ?? null], [null, null, null]);
  const keys = new Set(versions.map((v) => L.checkApiActor(v.created_by, `${v.operation} created_by`)));
  assert.equal(keys.size, 1, 'one api_key_id for everything written with one key');
});

test('versions: list basic (no content) and full; retrieve', async () => {
  const store = await fx.newStore();
  const mem = await fx.newMemory(store.id, '/v.md', 'first');
  const upd = await fx.memories.update(mem.id, { memory_store_id: store.id, content: 'second' });
  const basic = await fx.allVersions(store.id);
  assert.deepEqual(basic.map((v) => v.operation), ['modified', 'created']);
  for (const v of basic) assert.equal(v.content ?? null, null, `basic ${v.operation} has no content`);
  assert.deepEqual(basic.map((v) => v.content_sha256), [L.sha256('second'), L.sha256('first')]);
  assert.deepEqual(basic.map((v) => v.content_size_bytes), [6, 5]);
  const full = await fx.allVersions(store.id, { view: 'full' });
  assert.deepEqual(full.map((v) => v.content), ['second', 'first']);

  const got = await fx.versions.retrieve(upd.memory_version_id, { memory_store_id: store.id });
  L.checkVersionShape(got);
  assert.deepEqual([got.id, got.operation, got.content, got.path], [upd.memory_version_id, 'modified', 'second', '/v.md'], 'retrieve is full by default');
  const gotBasic = await fx.versions.retrieve(upd.memory_version_id, { memory_store_id: store.id, view: 'basic' });
  assert.equal(gotBasic.content ?? null, null, 'retrieve view=basic');
  assert.deepEqual({ ...got, content: null }, { ...gotBasic, content: null });
  await L.expectNotFound(() => fx.versions.retrieve('memver_0000000000000000000000', { memory_store_id: store.id }), 'unknown version');
});

test('versions: filters (memory_id survives the delete, operation, api_key_id) and paging', async () => {
  const { store, mem } = await history();
  const other = await fx.newMemory(store.id, '/other.md', 'o');
  const ofMem = await fx.allVersions(store.id, { memory_id: mem.id });
  assert.deepEqual(ofMem.map((v) => v.operation), ['deleted', 'modified', 'modified', 'created'], 'memory_id after delete');
  assert.deepEqual((await fx.allVersions(store.id, { operation: 'created' })).map((v) => v.memory_id), [other.id, mem.id]);
  assert.deepEqual((await fx.allVersions(store.id, { operation: 'deleted' })).map((v) => v.memory_id), [mem.id]);
  const keyId = ofMem[0].created_by.api_key_id;
  assert.equal((await fx.allVersions(store.id, { api_key_id: keyId })).length, 5, 'api_key_id filter');
  assert.equal((await fx.allVersions(store.id, { api_key_id: 'apikey_0000000000000000000000' })).length, 0);

  const all = (await fx.allVersions(store.id)).map((v) => v.id);
  const pages = await L.allPages(fx.versions.list(store.id, { limit: 2 }));
  assert.equal(pages.length, 3, '5 versions, limit 2: 3 pages');
  assert.deepEqual(pages.flatMap((p) => p.data.map((v) => v.id)), all, 'getNextPage traversal');
  const hand = await L.pagesByHand((page) => fx.versions.list(store.id, { limit: 1, view: 'full', ...(page ? { page } : {}) }));
  assert.deepEqual(hand.flatMap((p) => p.data.map((v) => v.id)), all, 'next_page traversal, limit 1, view=full');
  await L.expectInvalid(() => fx.versions.list(store.id, { operation: 'renamed' }), 'operation=renamed');
});

test('versions: redact an old version; idempotent; the current one is refused', async () => {
  const store = await fx.newStore();
  const mem = await fx.newMemory(store.id, '/secret.md', 'password=hunter2');
  const upd = await fx.memories.update(mem.id, { memory_store_id: store.id, content: 'password=<removed>' });
  const before = await fx.versions.retrieve(mem.memory_version_id, { memory_store_id: store.id });

  const red = await fx.versions.redact(mem.memory_version_id, { memory_store_id: store.id });
  L.checkVersionShape(red, 'redacted');
  assert.deepEqual([red.id, red.operation, red.memory_id], [mem.memory_version_id, 'created', mem.id]);
  assert.deepEqual(
    [red.content ?? null, red.path ?? null, red.content_sha256 ?? null, red.content_size_bytes ?? null],
    [null, null, null, null],
    'redacted fields are null',
  );
  L.rfc3339(red.redacted_at, 'redacted_at');
  L.checkApiActor(red.redacted_by, 'redacted_by');
  assert.deepEqual(red.created_by, before.created_by, 'created_by unchanged');
  assert.equal(red.created_at, before.created_at, 'created_at unchanged');

  const got = await fx.versions.retrieve(mem.memory_version_id, { memory_store_id: store.id });
  assert.deepEqual(got, red, 'retrieve after redaction');
  const listed = (await fx.allVersions(store.id, { view: 'full' })).find((v) => v.id === red.id);
  assert.equal(listed.content ?? null, null);
  assert.equal(listed.redacted_at, red.redacted_at);

  await L.tick();
  assert.deepEqual(await fx.versions.redact(mem.memory_version_id, { memory_store_id: store.id }), red, 'redacting again changes nothing');
  assert.equal((await fx.memories.retrieve(mem.id, { memory_store_id: store.id })).content, 'password=<removed>', 'the memory is untouched');

  const err = await L.expectInvalid(() => fx.versions.redact(upd.memory_version_id, { memory_store_id: store.id }), 'redact the current version');
  assert.ok(err.apiMessage, 'the refusal says why');
  assert.equal((await fx.versions.retrieve(upd.memory_version_id, { memory_store_id: store.id })).content, 'password=<removed>');
  await L.expectNotFound(() => fx.versions.redact('memver_0000000000000000000000', { memory_store_id: store.id }), 'redact an unknown version');

  // After the delete, the last version before it is no longer current.
  await fx.memories.delete(mem.id, { memory_store_id: store.id });
  const after = await fx.versions.redact(upd.memory_version_id, { memory_store_id: store.id });
  L.rfc3339(after.redacted_at, 'redacted_at after delete');
});
