// The TypeScript SDK's own worker pieces against mnemo, the way test_worker.py drives the Python
// ones: the WorkPoller (`drain: true, autoStop: false`) claims the item and
// `EnvironmentWorker.handleItem()` serves it with the item's secret; and `run()` starting on an
// empty queue. The worker's client has an API key the server does not know: every request must
// use the environment key or the sessions token. The server runs with `--memory-mount-root` in a
// temp area; the agent is played through the API key (plain HTTP, mnemo's agent-side events).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import * as L from './lib.mjs';

const MAX_IDLE_MS = 2000;
const README = '# Read me\nhello from the memory store\n';
const TODO = '- buy milk\n- call bob\n- water the plants\n';
const GUIDE = 'The guide is read-only.\n';
const IDEA = 'a fresh idea \u2713 written by the session\n';
const MARKER = '.anthropic-memory-store';

let fx;
let area;
let mountRoot;
before(async () => {
  area = fs.mkdtempSync(path.join(L.tmpRoot(), 'worker-'));
  mountRoot = path.join(area, 'mnt', 'memory');
  fs.mkdirSync(mountRoot, { recursive: true });
  fx = await L.serverFixture(null, { args: ['--memory-mount-root', mountRoot], tag: 'worker' });
});
after(async () => {
  await fx?.server.stop();
});

function workerClient(diag) {
  return L.newClient(fx.baseURL, 'sk-not-for-the-worker', { logger: diag.logger, logLevel: 'info', fetch: diag.fetch });
}

async function newSession(setup, stores) {
  const session = await fx.client.beta.sessions.create({
    agent: setup.agent,
    environment_id: setup.env,
    resources: stores.map(([store, access]) => ({ type: 'memory_store', memory_store_id: store.id, access })),
  });
  L.prefixed(session.id, 'sesn_', 'session id');
  const res = session.resources.filter((r) => r.type === 'memory_store');
  const mounts = stores.map(([store]) => path.join(mountRoot, L.slug(store.name)));
  assert.deepEqual(res.map((r) => [r.memory_store_id, r.access, r.name, r.mount_path]), stores.map(([s, a], i) => [s.id, a, s.name, mounts[i]]));
  for (const m of mounts) assert.ok(!fs.existsSync(m), `${m} must not exist before the worker mounts it`);
  return { session, mounts };
}

function decodedSecret(secret) {
  assert.ok(typeof secret === 'string' && secret, 'the polled item carries a secret');
  return JSON.parse(Buffer.from(secret, 'base64url').toString('utf8'));
}

async function sessionActorVersions(storeId, sid) {
  const vs = await fx.allVersions(storeId, { session_id: sid });
  for (const v of vs) assert.deepEqual(v.created_by, { type: 'session_actor', session_id: sid }, `created_by of ${v.id}`);
  return vs;
}

test('worker: WorkPoller claims the item, handleItem() serves read/write/edit/refused write/bash on two stores', { timeout: 180_000 }, async () => {
  const tag = L.unique('h');
  const rw = await fx.newStore({ name: `Worker Notes ${tag}` });
  const ro = await fx.newStore({ name: `Worker Reference ${tag}` });
  await fx.newMemory(rw.id, '/notes/readme.md', README);
  const todo = await fx.newMemory(rw.id, '/todo.md', TODO);
  await fx.newMemory(ro.id, '/guide.md', GUIDE);
  const setup = await L.workerSetup(fx.server, fx.client, tag);
  const { session, mounts: [rwMount, roMount] } = await newSession(setup, [[rw, 'read_write'], [ro, 'read_only']]);
  const driver = new L.Driver(fx.server, fx.client, session.id);

  // The agent's first call, before any worker runs; ending the turn is refused while it waits.
  const readId = await driver.toolUse('read', { file_path: `${rwMount}/notes/readme.md` });
  const refused = await driver.post([{ type: 'session.status_idle' }]);
  assert.equal(refused.status, 400, `ending the turn while ${readId} waits must be refused: ${JSON.stringify(refused.body)}`);

  const diag = L.diagnostics();
  const client = workerClient(diag);
  const poller = client.beta.environments.work.poller({ environmentId: setup.env, environmentKey: setup.key, drain: true, autoStop: false });
  let item = null;
  for await (const w of poller) {
    item = w;
    break;
  }
  assert.ok(item, 'the poller claimed the session\'s item');
  L.prefixed(item.id, 'work_', 'work item id');
  assert.deepEqual([item.environment_id, item.data.type, item.data.id], [setup.env, 'session', session.id]);
  assert.ok(decodedSecret(item.secret).sessions_token, 'the secret carries a sessions_token');

  const worker = client.beta.environments.work.worker({ environmentKey: setup.key, workdir: path.join(area, 'workdir-h'), maxIdleMs: MAX_IDLE_MS });
  fs.mkdirSync(path.join(area, 'workdir-h'));
  let ended = false;
  let failure = null;
  const served = worker
    .handleItem({ workId: item.id, environmentId: item.environment_id, sessionId: item.data.id, workSecret: item.secret })
    .then(
      () => (ended = true),
      (e) => {
        ended = true;
        failure = e;
      },
    );
  driver.alive = () => !ended;
  try {
    assert.deepEqual(await driver.waitResult(readId, 'read posted before the worker'), [false, README]);
    assert.equal(fs.readFileSync(path.join(rwMount, MARKER), 'utf8'), `version 1\n${rw.id}`, 'the marker file');
    assert.deepEqual(await driver.call('read', { file_path: `${roMount}/guide.md` }), [false, GUIDE]);
    const newPath = `${rwMount}/ideas/new.md`;
    assert.deepEqual(await driver.call('write', { file_path: newPath, content: IDEA }), [false, `wrote ${Buffer.byteLength(IDEA)} bytes to ${newPath}`]);
    assert.deepEqual(
      await driver.call('edit', { file_path: `${rwMount}/todo.md`, old_string: 'call bob', new_string: 'call alice' }),
      [false, `edited ${rwMount}/todo.md (1 replacement(s))`],
    );
    const [denied, deniedText] = await driver.call('write', { file_path: `${roMount}/denied.md`, content: 'must not land' });
    assert.ok(denied && /read-only/.test(deniedText), `a write into the read_only store fails as read-only: ${deniedText}`);
    const [lsErr, ls] = await driver.call('bash', { command: `ls -R ${rwMount} ${roMount}` });
    assert.equal(lsErr, false, ls);
    for (const name of ['notes', 'readme.md', 'todo.md', 'ideas', 'new.md', 'guide.md']) assert.ok(ls.split(/\s+/).includes(name), `ls names ${name}: ${ls}`);
    assert.ok(!ls.includes('denied.md'));

    const idle = await driver.post([{ type: 'session.status_idle' }]);
    assert.equal(idle.status, 200, `ending the turn: ${JSON.stringify(idle.body)}`);
    await L.waitFor(() => ended, 120_000, 'handleItem() to return after the turn');
  } catch (err) {
    err.message += `\n${diag.dump()}\n${fx.server.logTail()}`;
    throw err;
  }
  assert.equal(failure, null, `handleItem() failed: ${failure?.stack}`);
  assert.deepEqual(diag.records.filter((r) => r.level === 'error'), [], 'the worker logged no errors');
  await served;

  const work = await fx.client.beta.environments.work.retrieve(item.id, { environment_id: setup.env });
  assert.equal(work.state, 'stopped', 'work item state');
  assert.ok(work.stopped_at && work.acknowledged_at && work.latest_heartbeat_at, `work timestamps: ${JSON.stringify(work)}`);
  assert.equal(work.secret ?? null, null, 'no secret outside the poll response');
  for (const m of [rwMount, roMount]) assert.ok(!fs.existsSync(m), `the worker removed ${m}`);
  assert.ok(fs.existsSync(mountRoot), 'the mount root stays');

  const mems = Object.fromEntries((await fx.allMemories(rw.id, { view: 'full' })).map((m) => [m.path, m]));
  assert.deepEqual(Object.keys(mems).sort(), ['/ideas/new.md', '/notes/readme.md', '/todo.md']);
  assert.equal(mems['/ideas/new.md'].content, IDEA);
  assert.equal(mems['/todo.md'].content, TODO.replace('call bob', 'call alice'));
  assert.equal(mems['/todo.md'].id, todo.id, 'the edit updated the memory, not a new one');
  const vs = await sessionActorVersions(rw.id, session.id);
  assert.deepEqual(vs.map((v) => [v.operation, v.path]).sort(), [['created', '/ideas/new.md'], ['modified', '/todo.md']]);
  for (const p of ['/ideas/new.md', '/todo.md']) {
    const latest = await fx.versions.retrieve(mems[p].memory_version_id, { memory_store_id: rw.id });
    assert.deepEqual(latest.created_by, { type: 'session_actor', session_id: session.id }, `the latest version of ${p}`);
  }
  assert.deepEqual(Object.fromEntries((await fx.allMemories(ro.id, { view: 'full' })).map((m) => [m.path, m.content])), { '/guide.md': GUIDE });
  assert.deepEqual(await sessionActorVersions(ro.id, session.id), [], 'no versions by the session in the read_only store');

  const history = await driver.events();
  const calls = history.filter((e) => e.type === 'agent.tool_use').map((e) => e.id);
  assert.equal(calls.length, 6);
  const results = {};
  for (const e of history) if (e.type === 'user.tool_result') results[e.tool_use_id] = (results[e.tool_use_id] ?? 0) + 1;
  assert.deepEqual(calls.map((c) => results[c] ?? 0), calls.map(() => 1), 'exactly one result per call');
  const last = history.at(-1);
  assert.deepEqual([last.type, last.stop_reason?.type], ['session.status_idle', 'end_turn'], 'the last event');
  assert.equal((await fx.client.beta.sessions.retrieve(session.id)).status, 'idle');
});

test('worker: run() polls an empty queue, serves the session once queued, polls again, ends on abort', { timeout: 180_000 }, async () => {
  const tag = L.unique('r');
  const store = await fx.newStore({ name: `Run Loop ${tag}` });
  await fx.newMemory(store.id, '/seed.md', 'seeded before the session\n');
  const setup = await L.workerSetup(fx.server, fx.client, tag);
  const diag = L.diagnostics();
  const polled = () => diag.exchanges.filter((x) => x.includes(`<- 200 GET /v1/environments/${setup.env}/work/poll`)).length;
  const ctrl = new AbortController();
  const workdir = path.join(area, 'workdir-r');
  fs.mkdirSync(workdir);
  const worker = workerClient(diag).beta.environments.work.worker({ environmentId: setup.env, environmentKey: setup.key, workdir, maxIdleMs: MAX_IDLE_MS });
  let ended = false;
  let failure = null;
  const running = worker.run(ctrl.signal).then(
    () => (ended = true),
    (e) => {
      ended = true;
      failure = e;
    },
  );
  const alive = () => !ended;
  try {
    await L.waitFor(() => polled() >= 1, 30_000, 'an answered poll on the empty queue', alive);
    const { session, mounts: [mount] } = await newSession(setup, [[store, 'read_write']]);
    const driver = new L.Driver(fx.server, fx.client, session.id);
    driver.alive = alive;
    const note = `${mount}/from-run.md`;
    assert.deepEqual(await driver.call('write', { file_path: note, content: 'written while run() served\n' }), [false, `wrote 27 bytes to ${note}`]);
    const [bashErr, out] = await driver.call('bash', { command: `cat ${mount}/seed.md && ls ${mount}` });
    assert.ok(!bashErr && out.includes('seeded before the session') && out.split(/\s+/).includes('from-run.md'), out);
    assert.equal((await driver.post([{ type: 'session.status_idle' }])).status, 200);

    const envClient = L.newClient(fx.baseURL, setup.key);
    const items = await L.collect(envClient.beta.environments.work.list(setup.env));
    assert.deepEqual(items.map((w) => [w.data.type, w.data.id]), [['session', session.id]], 'items listed with the environment key');
    await L.waitFor(async () => (await fx.client.beta.environments.work.retrieve(items[0].id, { environment_id: setup.env })).state === 'stopped', 120_000, 'the item to stop', alive);
    assert.ok(!fs.existsSync(mount), `the worker removed ${mount}`);
    const after = polled();
    await L.waitFor(() => polled() > after, 30_000, 'the loop to poll again', alive);
    const mems = Object.fromEntries((await fx.allMemories(store.id, { view: 'full' })).map((m) => [m.path, m.content]));
    assert.deepEqual(Object.keys(mems).sort(), ['/from-run.md', '/seed.md']);
    const vs = await sessionActorVersions(store.id, session.id);
    assert.deepEqual(vs.map((v) => [v.operation, v.path]), [['created', '/from-run.md']]);
  } catch (err) {
    err.message += `\n${diag.dump()}\n${fx.server.logTail()}`;
    throw err;
  } finally {
    ctrl.abort();
  }
  await L.waitFor(() => ended, 45_000, 'run() to end after the abort');
  await running;
  assert.ok(failure === null || ctrl.signal.aborted, `run() failed: ${failure?.stack}`);
  assert.deepEqual(diag.records.filter((r) => r.level === 'error'), [], 'the worker logged no errors');
});

test('worker: always_ask calls wait for user.tool_confirmation (allow runs, deny never runs); a custom tool answers with user.custom_tool_result', { timeout: 180_000 }, async () => {
  const tag = L.unique('c');
  const agent = await fx.client.beta.agents.create({
    name: `compat-ts-confirm-${tag}`,
    model: 'claude-opus-4-6',
    tools: [
      { type: 'agent_toolset_20260401', configs: [{ name: 'bash', permission_policy: { type: 'always_ask' } }] },
      { type: 'custom', name: 'lookup', description: 'looks a word up', input_schema: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] } },
    ],
  });
  const setup = await L.workerSetup(fx.server, fx.client, tag);
  const session = await fx.client.beta.sessions.create({ agent: agent.id, environment_id: setup.env });
  const driver = new L.Driver(fx.server, fx.client, session.id);
  const workdir = path.join(area, 'workdir-c');
  fs.mkdirSync(workdir);
  const { betaAgentToolset20260401 } = await import(new URL(`file://${path.join(L.SDK_DIR, 'tools', 'agent-toolset', 'node.mjs')}`).href);
  const lookups = [];
  const lookup = {
    type: 'custom',
    name: 'lookup',
    description: 'looks a word up',
    input_schema: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
    parse: (input) => input,
    run: async ({ word }) => {
      lookups.push(word);
      return `definition of ${word}`;
    },
  };
  const diag = L.diagnostics();
  const ctrl = new AbortController();
  const worker = workerClient(diag).beta.environments.work.worker({
    environmentId: setup.env,
    environmentKey: setup.key,
    workdir,
    maxIdleMs: MAX_IDLE_MS,
    tools: (ctx) => [...betaAgentToolset20260401(ctx), lookup],
  });
  let ended = false;
  let failure = null;
  const running = worker.run(ctrl.signal).then(
    () => (ended = true),
    (e) => {
      ended = true;
      failure = e;
    },
  );
  driver.alive = () => !ended;
  try {
    // allow: held until the confirmation, then run.
    const asked = await driver.toolUse('bash', { command: `echo allowed > ${workdir}/allowed.txt && echo ran` });
    const askedEvent = (await driver.events()).find((e) => e.id === asked);
    assert.equal(askedEvent.evaluated_permission, 'ask', 'the server evaluates always_ask to ask');
    await L.sleep(1500);
    assert.ok(!fs.existsSync(path.join(workdir, 'allowed.txt')), 'an ask-gated call does not run before its confirmation');
    const ok = await driver.post([{ type: 'user.tool_confirmation', tool_use_id: asked, result: 'allow' }]);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.deepEqual(await driver.waitResult(asked, 'the allowed bash call'), [false, 'ran']);

    // deny: never runs, the worker posts nothing for it.
    const denied = await driver.toolUse('bash', { command: `echo denied > ${workdir}/denied.txt` });
    const no = await driver.post([{ type: 'user.tool_confirmation', tool_use_id: denied, result: 'deny', deny_message: 'not today' }]);
    assert.equal(no.status, 200, JSON.stringify(no.body));

    // A custom tool: the worker's own runnable tool answers with user.custom_tool_result.
    const custom = await driver.post([{ type: 'agent.custom_tool_use', name: 'lookup', input: { word: 'mnemo' } }]);
    assert.equal(custom.status, 200, JSON.stringify(custom.body));
    const customId = custom.body.data[0].id;
    await L.waitFor(async () => (await driver.events()).some((e) => e.type === 'user.custom_tool_result' && e.custom_tool_use_id === customId), 60_000, 'the custom tool result', driver.alive);
    const result = (await driver.events()).find((e) => e.type === 'user.custom_tool_result' && e.custom_tool_use_id === customId);
    assert.deepEqual([result.is_error, result.content.map((b) => b.text).join('')], [false, 'definition of mnemo']);
    assert.deepEqual(lookups, ['mnemo']);

    assert.equal((await driver.post([{ type: 'session.status_idle' }])).status, 200, 'ending the turn');
    const items = await L.collect(L.newClient(fx.baseURL, setup.key).beta.environments.work.list(setup.env));
    await L.waitFor(async () => (await fx.client.beta.environments.work.retrieve(items[0].id, { environment_id: setup.env })).state === 'stopped', 120_000, 'the item to stop', driver.alive);
    assert.ok(!fs.existsSync(path.join(workdir, 'denied.txt')), 'the denied call never ran');
    const history = await driver.events();
    assert.equal(history.filter((e) => e.type === 'user.tool_result' && e.tool_use_id === denied).length, 0, 'no result for the denied call');
    assert.equal(history.filter((e) => e.type === 'user.tool_result' && e.tool_use_id === asked).length, 1, 'one result for the allowed call');
  } catch (err) {
    err.message += `\n${diag.dump()}\n${fx.server.logTail()}`;
    throw err;
  } finally {
    ctrl.abort();
  }
  await L.waitFor(() => ended, 45_000, 'run() to end after the abort');
  await running;
  assert.ok(failure === null || ctrl.signal.aborted, `run() failed: ${failure?.stack}`);
  assert.deepEqual(diag.records.filter((r) => r.level === 'error'), [], 'the worker logged no errors');
});

test('worker: a store of 130 memories (full-view download pages of 20, basic sync pages of 100) with non-ASCII paths', { timeout: 180_000 }, async () => {
  const tag = L.unique('p');
  const store = await fx.newStore({ name: `Paged ${tag}` });
  const paths = [...Array(128).keys()].map((i) => `/bulk/${String(i).padStart(3, '0')}.md`).concat(['/ünïcode/naïve ✓.md', '/zz/last.md']);
  for (const p of paths) await fx.newMemory(store.id, p, `content of ${p}\n`);
  const setup = await L.workerSetup(fx.server, fx.client, tag);
  const { session, mounts: [mount] } = await newSession(setup, [[store, 'read_write']]);
  const driver = new L.Driver(fx.server, fx.client, session.id);
  const diag = L.diagnostics();
  const ctrl = new AbortController();
  const workdir = path.join(area, 'workdir-p');
  fs.mkdirSync(workdir);
  const worker = workerClient(diag).beta.environments.work.worker({ environmentId: setup.env, environmentKey: setup.key, workdir, maxIdleMs: MAX_IDLE_MS });
  let ended = false;
  const running = worker.run(ctrl.signal).finally(() => (ended = true)).catch(() => {});
  driver.alive = () => !ended;
  try {
    const [countErr, count] = await driver.call('bash', { command: `find ${mount} -name '*.md' | wc -l` });
    assert.deepEqual([countErr, count.trim()], [false, String(paths.length)], 'every memory was downloaded');
    assert.deepEqual(await driver.call('read', { file_path: `${mount}/ünïcode/naïve ✓.md` }), [false, 'content of /ünïcode/naïve ✓.md\n']);
    assert.deepEqual(await driver.call('edit', { file_path: `${mount}/zz/last.md`, old_string: 'content', new_string: 'edited' }), [false, `edited ${mount}/zz/last.md (1 replacement(s))`]);
    assert.equal((await driver.call('bash', { command: `rm ${mount}/bulk/007.md` }))[0], false);
    assert.equal((await driver.post([{ type: 'session.status_idle' }])).status, 200);
    const items = await L.collect(L.newClient(fx.baseURL, setup.key).beta.environments.work.list(setup.env));
    await L.waitFor(async () => (await fx.client.beta.environments.work.retrieve(items[0].id, { environment_id: setup.env })).state === 'stopped', 120_000, 'the item to stop', driver.alive);
    assert.ok(!fs.existsSync(mount), `the worker removed ${mount}`);
    const fullPages = diag.exchanges.filter((x) => x.includes(`-> GET`) && x.includes(`/v1/memory_stores/${store.id}/memories`) && x.includes('view=full'));
    assert.ok(fullPages.length >= 7, `the download paged through view=full (${fullPages.length} requests)`);
  } catch (err) {
    err.message += `\n${diag.dump()}\n${fx.server.logTail()}`;
    throw err;
  } finally {
    ctrl.abort();
  }
  await L.waitFor(() => ended, 45_000, 'run() to end after the abort');
  await running;
  assert.deepEqual(diag.records.filter((r) => r.level === 'error' || r.level === 'warn').map((r) => r.text), [], 'the worker logged no warnings or errors');
  const vs = await sessionActorVersions(store.id, session.id);
  assert.deepEqual(vs.map((v) => [v.operation, v.path]).reverse(), [['deleted', '/bulk/007.md'], ['modified', '/zz/last.md']]);
  const mems = await fx.allMemories(store.id, { view: 'full' });
  assert.equal(mems.length, paths.length - 1);
  assert.equal(mems.find((m) => m.path === '/zz/last.md').content, 'edited of /zz/last.md\n');
});

test('worker: a mid-session sync (memorySyncIntervalMs: 5000) pulls the operator\'s edits and pushes the session\'s writes', { timeout: 180_000 }, async () => {
  const tag = L.unique('s');
  const store = await fx.newStore({ name: `Synced ${tag}` });
  const a = await fx.newMemory(store.id, '/a.md', 'a, first\n');
  const setup = await L.workerSetup(fx.server, fx.client, tag);
  const { session, mounts: [mount] } = await newSession(setup, [[store, 'read_write']]);
  const driver = new L.Driver(fx.server, fx.client, session.id);
  const diag = L.diagnostics();
  const ctrl = new AbortController();
  const workdir = path.join(area, 'workdir-s');
  fs.mkdirSync(workdir);
  const worker = workerClient(diag).beta.environments.work.worker({
    environmentId: setup.env,
    environmentKey: setup.key,
    workdir,
    maxIdleMs: MAX_IDLE_MS,
    memorySyncIntervalMs: 5000,
  });
  let ended = false;
  const running = worker.run(ctrl.signal).finally(() => (ended = true)).catch(() => {});
  driver.alive = () => !ended;
  try {
    assert.deepEqual(await driver.call('read', { file_path: `${mount}/a.md` }), [false, 'a, first\n']);
    // The operator edits /a.md and adds /b.md through the API while the session runs.
    await fx.memories.update(a.id, { memory_store_id: store.id, content: 'a, edited by the operator\n', precondition: { type: 'content_sha256', content_sha256: L.sha256('a, first\n') } });
    await fx.newMemory(store.id, '/b.md', 'b, new from the operator\n');
    await L.sleep(5500);
    // This call's completion makes the sync due: it pulls a and b and uploads c.
    assert.equal((await driver.call('write', { file_path: `${mount}/c.md`, content: 'c, written by the session\n' }))[0], false);
    await L.waitFor(async () => (await fx.allMemories(store.id)).some((m) => m.path === '/c.md'), 30_000, 'the mid-session sync to upload /c.md', driver.alive);
    assert.deepEqual(await driver.call('read', { file_path: `${mount}/a.md` }), [false, 'a, edited by the operator\n'], 'the remote edit was pulled');
    assert.deepEqual(await driver.call('read', { file_path: `${mount}/b.md` }), [false, 'b, new from the operator\n'], 'the remote create was pulled');
    const c = (await fx.allMemories(store.id, { view: 'full' })).find((m) => m.path === '/c.md');
    assert.equal(c.content, 'c, written by the session\n');
    assert.equal((await driver.post([{ type: 'session.status_idle' }])).status, 200);
    const items = await L.collect(L.newClient(fx.baseURL, setup.key).beta.environments.work.list(setup.env));
    await L.waitFor(async () => (await fx.client.beta.environments.work.retrieve(items[0].id, { environment_id: setup.env })).state === 'stopped', 120_000, 'the item to stop', driver.alive);
    assert.ok(!fs.existsSync(mount), `the worker removed ${mount}`);
  } catch (err) {
    err.message += `\n${diag.dump()}\n${fx.server.logTail()}`;
    throw err;
  } finally {
    ctrl.abort();
  }
  await L.waitFor(() => ended, 45_000, 'run() to end after the abort');
  await running;
  assert.deepEqual(diag.records.filter((r) => r.level === 'error' || r.level === 'warn').map((r) => r.text), [], 'the worker logged no warnings or errors');
  const vs = await sessionActorVersions(store.id, session.id);
  assert.deepEqual(vs.map((v) => [v.operation, v.path]), [['created', '/c.md']], 'the session wrote /c.md only');
  const mems = Object.fromEntries((await fx.allMemories(store.id, { view: 'full' })).map((m) => [m.path, m.content]));
  assert.deepEqual(mems, { '/a.md': 'a, edited by the operator\n', '/b.md': 'b, new from the operator\n', '/c.md': 'c, written by the session\n' });
});
