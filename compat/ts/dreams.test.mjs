// Dreams through the TypeScript SDK's `client.beta.dreams` (which appends `?beta=true` to every
// dream path and sends the dreaming beta) against `mnemo serve --models FILE`, the dream's model
// mapped to the scripted fake `compat/fake_model.py`: a create_new dream merges two notes and
// completes, the input untouched; lists filter and page; cancel and archive follow the
// lifecycle; the create's 400s and 404s arrive as the SDK's error classes.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import * as L from './lib.mjs';

const OUT = '/mnt/memory/output';
const python = process.env.MNEMO_COMPAT_PYTHON || (fs.existsSync(path.join(L.REPO, 'target/compat-venv/bin/python'))
  ? path.join(L.REPO, 'target/compat-venv/bin/python') : 'python3');

let fake;
let fakeURL;
let fx;

async function startFake() {
  const proc = spawn(python, [path.join(L.REPO, 'compat', 'fake_model.py')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise((resolve) => readline.createInterface({ input: proc.stdout }).once('line', resolve));
  assert.match(line, /^listening on http:\/\/127\.0\.0\.1:\d+$/);
  return [proc, line.replace('listening on ', '').trim()];
}

async function fakeCall(method, p, body) {
  const res = await fetch(fakeURL + p, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return res.json();
}

before(async () => {
  [fake, fakeURL] = await startFake();
  const models = path.join(L.tmpRoot(), 'models.toml');
  fs.writeFileSync(models, `[providers.fake]\nkind = "anthropic"\nbase_url = "${fakeURL}"\napi_key = "fake-key"\n[models]\n"dreamer" = "fake/claude-fake-1"\n`);
  fx = await L.serverFixture(undefined, { args: ['--models', models] });
});
after(async () => {
  await fx?.server.stop();
  fake?.kill();
});

async function usedSession(words) {
  const c = fx.client.beta;
  const agent = await c.agents.create({ name: L.unique('user'), model: 'claude-outside' });
  const env = await c.environments.create({ name: L.unique('env'), config: { type: 'cloud' } });
  const session = await c.sessions.create({ agent: agent.id, environment_id: env.id });
  await c.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: words }] }] });
  return session;
}

async function until(id, statuses) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const d = await fx.client.beta.dreams.retrieve(id);
    if (statuses.includes(d.status)) return d;
    assert.ok(Date.now() < deadline, `dream ${id} still ${d.status}`);
    await L.sleep(50);
  }
}

test('dreams: a create_new dream merges into a new store; lists, cancel and archive', async () => {
  const store = await fx.newStore({ name: 'TS notes' });
  await fx.newMemory(store.id, '/db.md', 'port 5432\n');
  await fx.newMemory(store.id, '/db-copy.md', 'port 5432\n');
  const before = (await fx.allMemories(store.id, { view: 'full' })).map((m) => [m.path, m.content_sha256]);
  const used = await usedSession('the port is 5433 now');
  await fakeCall('POST', '/_script', [
    { tool_calls: [{ name: 'read', input: { file_path: `${OUT}/db.md` } }, { name: 'read', input: { file_path: `${OUT}/db-copy.md` } }] },
    { tool_calls: [
      { name: 'write', input: { file_path: `${OUT}/db.md`, content: 'port 5433\n' } },
      { name: 'delete', input: { file_path: `${OUT}/db-copy.md` } },
    ] },
    { text: 'Merged.' },
  ]);
  const inputs = [{ type: 'memory_store', memory_store_id: store.id }, { type: 'sessions', session_ids: [used.id] }];
  const dream = await fx.client.beta.dreams.create({ inputs, model: 'dreamer' });
  L.prefixed(dream.id, 'drm_', 'dream id');
  assert.equal(dream.type, 'dream');
  assert.equal(dream.status, 'pending');
  assert.deepEqual(dream.model, { id: 'dreamer', speed: 'standard' });
  assert.equal(dream.instructions, null);
  L.rfc3339(dream.created_at, 'created_at');
  const done = await until(dream.id, ['completed', 'failed', 'canceled']);
  assert.equal(done.status, 'completed', JSON.stringify(done.error));
  const output = done.outputs[0].memory_store_id;
  assert.notEqual(output, store.id);
  const out = await fx.allMemories(output, { view: 'full' });
  assert.deepEqual(out.map((m) => [m.path, m.content]), [['/db.md', 'port 5433\n']]);
  assert.deepEqual((await fx.allMemories(store.id, { view: 'full' })).map((m) => [m.path, m.content_sha256]), before, 'input untouched');
  assert.ok(done.usage.output_tokens > 0, 'usage counted');

  const second = await fx.client.beta.dreams.create({ inputs, model: { id: 'dreamer', speed: 'standard' }, instructions: 'focus' });
  const canceled = await fx.client.beta.dreams.cancel(second.id);
  assert.equal(canceled.status, 'canceled');
  assert.deepEqual((await fx.client.beta.dreams.cancel(second.id)).status, 'canceled', 'cancel twice');
  await L.expectInvalid(() => fx.client.beta.dreams.cancel(dream.id), 'cancel a completed dream');
  const listed = await L.collect(fx.client.beta.dreams.list({ limit: 1 }));
  assert.deepEqual(listed.map((d) => d.id), [second.id, dream.id], 'newest first, auto-pagination');
  assert.deepEqual((await L.collect(fx.client.beta.dreams.list({ statuses: ['canceled'] }))).map((d) => d.id), [second.id]);
  const archived = await fx.client.beta.dreams.archive(second.id);
  L.rfc3339(archived.archived_at, 'archived_at');
  assert.deepEqual((await L.collect(fx.client.beta.dreams.list())).map((d) => d.id), [dream.id], 'archived hidden');
  assert.equal((await L.collect(fx.client.beta.dreams.list({ include_archived: true }))).length, 2);
});

test('dreams: bad requests are refused in the API\'s words', async () => {
  const store = await fx.newStore();
  const used = await usedSession('hi');
  const ok = [{ type: 'memory_store', memory_store_id: store.id }, { type: 'sessions', session_ids: [used.id] }];
  const many = Array.from({ length: 101 }, (_, i) => `sesn_${String(i).padStart(24, '0')}`);
  for (const [body, words] of [
    [{ inputs: [ok[0], { type: 'sessions', session_ids: [] }], model: 'dreamer' }, 'at least 1'],
    [{ inputs: [ok[0], { type: 'sessions', session_ids: many }], model: 'dreamer' }, 'at most 100'],
    [{ inputs: ok, model: 'dreamer', instructions: '' }, 'instructions'],
    [{ inputs: ok, model: 'unmapped' }, 'maps to no configured model provider'],
  ]) {
    const err = await L.expectInvalid(() => fx.client.beta.dreams.create(body), words);
    assert.ok(err.apiMessage.includes(words), err.apiMessage);
  }
  await L.expectNotFound(() => fx.client.beta.dreams.create({ inputs: [{ type: 'memory_store', memory_store_id: L.UNKNOWN_STORE }, ok[1]], model: 'dreamer' }), 'an unknown store');
  await L.expectNotFound(() => fx.client.beta.dreams.retrieve('drm_0000000000000000000000'), 'an unknown dream');
});
