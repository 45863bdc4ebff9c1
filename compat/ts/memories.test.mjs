// Memories through the TypeScript SDK: create, retrieve, update (content_sha256
// preconditions), rename, conflicts as the SDK's typed errors, delete, list views, paging.

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

const pre = (text) => ({ type: 'content_sha256', content_sha256: L.sha256(text) });
const seed = async (storeId, paths) => {
  for (const p of paths) await fx.newMemory(storeId, p, `content of ${p}`);
};
const byteOrder = (paths) => [...paths].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));

test('memories: create answers the basic view by default, full on request', async () => {
  const store = await fx.newStore();
  const mem = await fx.newMemory(store.id, '/notes/todo.md', '- buy milk\n');
  L.checkMemoryShape(mem, '- buy milk\n', false);
  assert.equal(mem.path, '/notes/todo.md');
  assert.equal(mem.memory_store_id, store.id);
  const full = await fx.newMemory(store.id, '/notes/full.md', 'héllo ✓', { view: 'full' });
  L.checkMemoryShape(full, 'héllo ✓', true);
  const empty = await fx.newMemory(store.id, '/empty.md', '', { view: 'full' });
  L.checkMemoryShape(empty, '', true);
  assert.equal(empty.content_sha256, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
});

test('memories: retrieve is full by default, basic on request', async () => {
  const store = await fx.newStore();
  const mem = await fx.newMemory(store.id, '/r.md', 'read me');
  const got = await fx.memories.retrieve(mem.id, { memory_store_id: store.id });
  L.checkMemoryShape(got, 'read me', true);
  assert.deepEqual({ ...got, content: null }, mem, 'retrieve equals the create response apart from content');
  L.checkMemoryShape(await fx.memories.retrieve(mem.id, { memory_store_id: store.id, view: 'basic' }), 'read me', false);
  L.checkMemoryShape(await fx.memories.retrieve(mem.id, { memory_store_id: store.id, view: 'full' }), 'read me', true);
  await L.expectNotFound(() => fx.memories.retrieve('mem_0000000000000000000000', { memory_store_id: store.id }), 'unknown memory');
  await L.expectInvalid(() => fx.memories.retrieve(mem.id, { memory_store_id: store.id, view: 'everything' }), 'view=everything');
});

test('memories: invalid paths and an oversized content are refused', async () => {
  const store = await fx.newStore();
  for (const bad of ['no-slash.md', '/a//b.md', '/a/../b.md', '/trailing/', '/ctl\u0001.md', `/${'s/'.repeat(20)}x.md`]) {
    await L.expectInvalid(() => fx.newMemory(store.id, bad, 'x'), `create at ${JSON.stringify(bad)}`);
  }
  const big = 'x'.repeat(102_401);
  await L.expectError(() => fx.newMemory(store.id, '/big.md', big), {
    status: 413,
    cls: L.ContentTooLargeError,
    type: 'request_too_large',
    what: 'content of 102,401 bytes',
  });
  L.checkMemoryShape(await fx.newMemory(store.id, '/max.md', 'x'.repeat(102_400)), 'x'.repeat(102_400), false);
});

test('memories: path conflicts are ConflictError memory_path_conflict_error naming the memory in the way', async () => {
  const store = await fx.newStore();
  const a = await fx.newMemory(store.id, '/a.md', 'a');
  const d = await fx.newMemory(store.id, '/dir/file.md', 'd');
  await L.expectPathConflict(() => fx.newMemory(store.id, '/a.md', 'again'), 'create on a taken path', a);
  await L.expectPathConflict(() => fx.newMemory(store.id, '/dir', 'x'), 'create an ancestor of a memory', d);
  await L.expectPathConflict(() => fx.newMemory(store.id, '/a.md/child.md', 'x'), 'create below a memory', a);
  await L.expectPathConflict(() => fx.memories.update(d.id, { memory_store_id: store.id, path: '/a.md' }), 'rename onto a taken path', a);
  assert.deepEqual((await fx.allMemories(store.id)).map((m) => m.path), ['/a.md', '/dir/file.md']);
});

test('memories: update content unconditionally, and with a matching content_sha256 precondition', async () => {
  const store = await fx.newStore();
  const mem = await fx.newMemory(store.id, '/u.md', 'one');
  await L.tick();
  const upd = await fx.memories.update(mem.id, { memory_store_id: store.id, content: 'two' });
  L.checkMemoryShape(upd, 'two', false);
  assert.equal(upd.id, mem.id);
  assert.notEqual(upd.memory_version_id, mem.memory_version_id, 'a new version');
  assert.ok(upd.updated_at > mem.updated_at, 'updated_at advances');
  const cas = await fx.memories.update(mem.id, { memory_store_id: store.id, content: 'three', precondition: pre('two'), view: 'full' });
  L.checkMemoryShape(cas, 'three', true);
  assert.equal((await fx.memories.retrieve(mem.id, { memory_store_id: store.id })).content, 'three');
});

test('memories: a stale precondition is ConflictError memory_precondition_failed_error and changes nothing', async () => {
  const store = await fx.newStore();
  const mem = await fx.newMemory(store.id, '/p.md', 'current');
  const err = await L.expectPreconditionFailed(
    () => fx.memories.update(mem.id, { memory_store_id: store.id, content: 'mine', precondition: pre('stale') }),
    'update with a stale precondition',
  );
  assert.equal(err.headers.get('x-should-retry'), 'false', 'x-should-retry');
  await L.expectPreconditionFailed(
    () => fx.memories.update(mem.id, { memory_store_id: store.id, path: '/moved.md', precondition: pre('stale') }),
    'rename with a stale precondition',
  );
  const got = await fx.memories.retrieve(mem.id, { memory_store_id: store.id });
  assert.deepEqual([got.content, got.path, got.memory_version_id], ['current', '/p.md', mem.memory_version_id], 'nothing changed');
  assert.equal((await fx.allVersions(store.id, { memory_id: mem.id })).length, 1, 'no version written');
  await L.expectInvalid(
    () => fx.memories.update(mem.id, { memory_store_id: store.id, content: 'x', precondition: { type: 'content_sha256', content_sha256: 'XYZ' } }),
    'a malformed content_sha256',
  );
});

test('memories: a retried update already applied succeeds without a new version', async () => {
  const store = await fx.newStore();
  const mem = await fx.newMemory(store.id, '/retry.md', 'old');
  const first = await fx.memories.update(mem.id, { memory_store_id: store.id, content: 'new', precondition: pre('old') });
  const again = await fx.memories.update(mem.id, { memory_store_id: store.id, content: 'new', precondition: pre('old') });
  assert.equal(again.memory_version_id, first.memory_version_id);
  await L.expectPreconditionFailed(
    () => fx.memories.update(mem.id, { memory_store_id: store.id, content: 'other', precondition: pre('old') }),
    'the stale precondition with another content',
  );
  const noop = await fx.memories.update(mem.id, { memory_store_id: store.id });
  assert.equal(noop.memory_version_id, first.memory_version_id, 'an empty update writes no version');
  assert.equal((await fx.allVersions(store.id, { memory_id: mem.id })).length, 2);
});

test('memories: rename keeps the id; rename + content + precondition in one call', async () => {
  const store = await fx.newStore();
  const mem = await fx.newMemory(store.id, '/old/name.md', 'keep me');
  const ren = await fx.memories.update(mem.id, { memory_store_id: store.id, path: '/new/place/name.md' });
  L.checkMemoryShape(ren, 'keep me', false);
  assert.equal(ren.id, mem.id);
  assert.equal(ren.path, '/new/place/name.md');
  assert.equal((await fx.newMemory(store.id, '/old/name.md', 'reuse')).path, '/old/name.md', 'the old path is free');
  const both = await fx.memories.update(mem.id, {
    memory_store_id: store.id,
    path: '/final.md',
    content: 'changed',
    precondition: pre('keep me'),
    view: 'full',
  });
  L.checkMemoryShape(both, 'changed', true);
  assert.equal(both.path, '/final.md');
});

test('memories: delete, and delete with expected_content_sha256', async () => {
  const store = await fx.newStore();
  const mem = await fx.newMemory(store.id, '/d.md', 'v1');
  const err = await L.expectPreconditionFailed(
    () => fx.memories.delete(mem.id, { memory_store_id: store.id, expected_content_sha256: L.sha256('not v1') }),
    'delete with a mismatching sha',
  );
  assert.equal(err.headers.get('x-should-retry'), 'false');
  assert.equal((await fx.memories.retrieve(mem.id, { memory_store_id: store.id })).content, 'v1', 'still there');
  const res = await fx.memories.delete(mem.id, { memory_store_id: store.id, expected_content_sha256: L.sha256('v1') });
  assert.deepEqual(res, { id: mem.id, type: 'memory_deleted' });
  await L.expectNotFound(() => fx.memories.retrieve(mem.id, { memory_store_id: store.id }), 'retrieve a deleted memory');
  await L.expectNotFound(() => fx.memories.delete(mem.id, { memory_store_id: store.id }), 'delete twice');
  const other = await fx.newMemory(store.id, '/e.md', 'e');
  assert.deepEqual(await fx.memories.delete(other.id, { memory_store_id: store.id }), { id: other.id, type: 'memory_deleted' });
  assert.deepEqual(await fx.allMemories(store.id), []);
});

test('memories: list views (basic, full) in byte order of path', async () => {
  const store = await fx.newStore();
  const paths = ['/b.md', '/a/z.md', '/a/b/c.md', '/A.md', '/a-b.md', '/a.b', '/aa/x.md', '/~tilde', '/0.md', '/é.md'];
  await seed(store.id, paths);
  const expected = byteOrder(paths);
  const basic = await fx.allMemories(store.id);
  assert.deepEqual(basic.map((m) => m.path), expected, 'default listing order');
  for (const m of basic) L.checkMemoryShape(m, `content of ${m.path}`, false, `basic item ${m.path}`);
  const basic3 = await fx.allMemories(store.id, { view: 'basic', limit: 3 });
  assert.deepEqual(basic3.map((m) => m.path), expected, 'view=basic limit=3 auto-pagination');
  for (const m of basic3) assert.equal(m.content, null);
  const full = await fx.allMemories(store.id, { view: 'full', limit: 4 });
  assert.deepEqual(full.map((m) => m.path), expected, 'view=full limit=4 auto-pagination');
  for (const m of full) L.checkMemoryShape(m, `content of ${m.path}`, true, `full item ${m.path}`);
  const page = await fx.memories.list(store.id);
  assert.equal(page.data.length, paths.length, 'everything on the default first page');
  assert.equal(page.next_page, null);
  assert.equal(page.hasNextPage(), false);
});

test('memories: paging with view=full (at most 20 a page) and view=basic, auto and by hand', async () => {
  const store = await fx.newStore();
  const paths = [...Array(45).keys()].map((i) => `/cap/${String(i).padStart(3, '0')}.md`);
  await seed(store.id, paths);

  const fullPages = await L.allPages(fx.memories.list(store.id, { view: 'full', limit: 100 }));
  assert.ok(fullPages.length >= 3, `view=full over 45 memories needs >= 3 pages, got ${fullPages.length}`);
  for (const p of fullPages) {
    assert.ok(p.data.length > 0 && p.data.length <= 20, `a view=full page holds ${p.data.length} items`);
    for (const m of p.data) assert.equal(m.content, `content of ${m.path}`);
  }
  assert.deepEqual(fullPages.flatMap((p) => p.data.map((m) => m.path)), paths, 'view=full pages');
  assert.deepEqual((await fx.allMemories(store.id, { view: 'full' })).map((m) => m.path), paths, 'view=full for await');

  const basic = await fx.memories.list(store.id, { view: 'basic', limit: 100 });
  assert.equal(basic.data.length, 45, 'view=basic limit=100: one page');
  assert.equal(basic.next_page, null);

  const basicPages = await L.allPages(fx.memories.list(store.id, { view: 'basic', limit: 7 }));
  assert.equal(basicPages.length, 7, 'ceil(45 / 7) pages');
  for (const p of basicPages.slice(0, -1)) assert.equal(p.data.length, 7);
  assert.deepEqual(basicPages.flatMap((p) => p.data.map((m) => m.path)), paths, 'view=basic limit=7 pages');

  const hand = await L.pagesByHand((page) => fx.memories.list(store.id, { view: 'full', limit: 10, ...(page ? { page } : {}) }));
  assert.deepEqual(hand.flatMap((p) => p.data.map((m) => m.path)), paths, 'view=full limit=10 by hand');
  for (const p of hand) for (const m of p.data) assert.equal(m.content, `content of ${m.path}`);

  for (const limit of [0, 101]) await L.expectInvalid(() => fx.memories.list(store.id, { limit }), `limit=${limit}`);
});

test('memories: path_prefix and depth=1 (memory_prefix items)', async () => {
  const store = await fx.newStore();
  await seed(store.id, ['/a.md', '/b/c.md', '/b/d/e.md', '/b/f.md', '/c/x/y/z.md', '/d.md', '/b.md', '/bb/x.md']);
  const items = async (params) => (await L.collect(fx.memories.list(store.id, { depth: 1, ...params }))).map((i) => [i.type, i.path]);
  const root = [
    ['memory', '/a.md'],
    ['memory', '/b.md'],
    ['memory_prefix', '/b/'],
    ['memory_prefix', '/bb/'],
    ['memory_prefix', '/c/'],
    ['memory', '/d.md'],
  ];
  assert.deepEqual(await items({}), root, 'depth=1 at the root');
  assert.deepEqual(await items({ view: 'full' }), root, 'depth=1, view=full');
  assert.deepEqual(await items({ limit: 1 }), root, 'depth=1, limit=1 auto-pagination');
  assert.deepEqual(await items({ path_prefix: '/b/' }), [['memory', '/b/c.md'], ['memory_prefix', '/b/d/'], ['memory', '/b/f.md']]);
  assert.deepEqual(
    (await fx.allMemories(store.id, { path_prefix: '/b/' })).map((m) => m.path),
    ['/b/c.md', '/b/d/e.md', '/b/f.md'],
    'path_prefix matches whole segments',
  );
  await L.expectInvalid(() => fx.memories.list(store.id, { path_prefix: '/b' }), 'path_prefix without a trailing /');
  await L.expectInvalid(() => fx.memories.list(store.id, { depth: 2 }), 'depth=2');
});

test('memories: concurrent conditional updates — exactly one wins', async () => {
  const store = await fx.newStore();
  const mem = await fx.newMemory(store.id, '/race.md', 'base');
  const results = await Promise.allSettled(
    [...Array(6).keys()].map((i) => fx.memories.update(mem.id, { memory_store_id: store.id, content: `writer ${i}`, precondition: pre('base') })),
  );
  const won = results.filter((r) => r.status === 'fulfilled');
  assert.equal(won.length, 1, `exactly one conditional update wins, got ${won.length}`);
  for (const r of results.filter((r) => r.status === 'rejected')) {
    assert.ok(r.reason instanceof L.ConflictError, `the losers get ConflictError, got ${r.reason}`);
    assert.equal(r.reason.type, 'memory_precondition_failed_error');
  }
  const got = await fx.memories.retrieve(mem.id, { memory_store_id: store.id });
  assert.equal(got.content_sha256, won[0].value.content_sha256, 'the stored content is the winner\'s');
  assert.equal((await fx.allVersions(store.id, { memory_id: mem.id })).length, 2, 'created + the one winning update');
});
