// Agents, environments, sessions, events (list filters, the SSE stream through the SDK's
// Stream) and the work queue's read side through the TypeScript SDK.

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

const message = (text) => ({ type: 'agent.message', content: [{ type: 'text', text }] });

test('sessions: environments create/retrieve/update (metadata patch)/list/archive/delete', async () => {
  const c = fx.client.beta.environments;
  const env = await c.create({ name: L.unique('env'), config: { type: 'self_hosted' }, metadata: { a: '1', b: '2' } });
  L.prefixed(env.id, 'env_', 'environment id');
  assert.equal(env.type, 'environment');
  assert.equal(env.config.type, 'self_hosted');
  assert.deepEqual(await c.retrieve(env.id), env);
  const upd = await c.update(env.id, { description: 'described', metadata: { a: 'one', b: null } });
  assert.equal(upd.description, 'described');
  assert.deepEqual(upd.metadata, { a: 'one' });
  const listed = await L.collect(c.list({ limit: 1 }));
  assert.ok(listed.some((e) => e.id === env.id), 'listed (limit 1, auto-pagination)');
  const arch = await c.archive(env.id);
  L.rfc3339(arch.archived_at, 'archived_at');
  const err = await L.expectInvalid(() => c.update(env.id, { name: 'x' }), 'update an archived environment');
  assert.equal(err.errorCode, 'environment_archived', "the SDK's errorCode (error.details.error_code)");
  assert.ok(!(await L.collect(c.list())).some((e) => e.id === env.id), 'archived: not listed by default');
  assert.ok((await L.collect(c.list({ include_archived: true }))).some((e) => e.id === env.id), 'include_archived');
  assert.deepEqual(await c.delete(env.id), { type: 'environment_deleted', id: env.id });
  await L.expectNotFound(() => c.retrieve(env.id), 'retrieve a deleted environment');
});

test('sessions: create/retrieve/list/update/archive; events send, list filters and order', async () => {
  const setup = await L.workerSetup(fx.server, fx.client);
  const agent = await fx.client.beta.agents.retrieve(setup.agent);
  assert.equal(agent.id, setup.agent);
  const s = fx.client.beta.sessions;
  const session = await s.create({ agent: setup.agent, environment_id: setup.env, title: 'ts compat' });
  L.prefixed(session.id, 'sesn_', 'session id');
  assert.equal(session.title, 'ts compat');
  assert.deepEqual((await s.retrieve(session.id)).id, session.id);
  assert.ok((await L.collect(s.list({ limit: 2 }))).some((x) => x.id === session.id), 'listed');
  const renamed = await s.update(session.id, { title: 'renamed' });
  assert.equal(renamed.title, 'renamed');

  // The agent's side needs an API key; the SDK's events.send carries it.
  const sent = await s.events.send(session.id, { events: [message('one'), message('two')] });
  assert.deepEqual(sent.data.map((e) => e.type), ['agent.message', 'agent.message']);
  for (const e of sent.data) L.prefixed(e.id, 'sevt_', 'event id');
  const all = await L.collect(s.events.list(session.id));
  assert.ok(all.length >= 2, 'events listed');
  const msgs = await L.collect(s.events.list(session.id, { types: ['agent.message'] }));
  assert.deepEqual(msgs.map((e) => e.id), sent.data.map((e) => e.id), 'types[] filter, oldest first');
  const desc = await L.collect(s.events.list(session.id, { types: ['agent.message'], order: 'desc' }));
  assert.deepEqual(desc.map((e) => e.id), sent.data.map((e) => e.id).reverse(), 'order=desc');
  const paged = await L.allPages(s.events.list(session.id, { types: ['agent.message'], limit: 1 }));
  assert.deepEqual(paged.flatMap((p) => p.data.map((e) => e.id)), sent.data.map((e) => e.id), 'limit=1 pages');

  const arch = await s.archive(session.id);
  L.rfc3339(arch.archived_at, 'archived_at');
  await L.expectInvalid(() => s.events.send(session.id, { events: [message('late')] }), 'send to an archived session');
});

test('sessions: events.stream() carries what is sent afterwards, in order', { timeout: 60_000 }, async () => {
  const setup = await L.workerSetup(fx.server, fx.client);
  const s = fx.client.beta.sessions;
  const session = await s.create({ agent: setup.agent, environment_id: setup.env });
  const stream = await s.events.stream(session.id);
  const got = [];
  const reading = (async () => {
    for await (const ev of stream) {
      if (ev.type === 'agent.message') got.push(ev.content[0].text);
      if (got.length === 5) break;
    }
  })();
  const texts = [];
  for (let i = 0; i < 5; i++) {
    texts.push(`m${i}`);
    await s.events.send(session.id, { events: [message(`m${i}`)] });
    await L.sleep(50);
  }
  let timer;
  await Promise.race([reading, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`stream carried only ${JSON.stringify(got)}`)), 20_000)))]);
  clearTimeout(timer);
  stream.controller.abort();
  assert.deepEqual(got, texts);
});

test('sessions: the work queue — poll (no item: null), list, retrieve, update metadata, stats', async () => {
  const setup = await L.workerSetup(fx.server, fx.client);
  const envClient = L.newClient(fx.baseURL, setup.key);
  const work = envClient.beta.environments.work;
  assert.equal(await work.poll(setup.env, { block_ms: 100 }), null, 'an empty poll answers JSON null');
  const session = await fx.client.beta.sessions.create({ agent: setup.agent, environment_id: setup.env });
  const items = await L.collect(work.list(setup.env));
  assert.deepEqual(items.map((w) => [w.data.type, w.data.id, w.state]), [['session', session.id, 'queued']]);
  const stats = await work.stats(setup.env);
  assert.equal(stats.type, 'work_queue_stats');
  assert.equal(stats.depth, 1, `stats.depth: ${JSON.stringify(stats)}`);
  const polled = await work.poll(setup.env, { block_ms: 500, 'Anthropic-Worker-ID': 'ts-compat-worker' });
  assert.equal(polled.id, items[0].id, 'the poll hands out the queued item');
  assert.ok(polled.secret, 'with its secret');
  const acked = await work.ack(polled.id, { environment_id: setup.env });
  assert.ok(acked.acknowledged_at);
  const upd = await fx.client.beta.environments.work.update(polled.id, { environment_id: setup.env, metadata: { k: 'v', gone: null } });
  assert.deepEqual(upd.metadata, { k: 'v' });
  const got = await fx.client.beta.environments.work.retrieve(polled.id, { environment_id: setup.env });
  assert.equal(got.secret ?? null, null, 'no secret outside the poll');
  assert.deepEqual(got.metadata, { k: 'v' });
  const after = await work.stats(setup.env);
  assert.equal(after.depth, 0, `stats after the claim: ${JSON.stringify(after)}`);
  const stopped = await work.stop(polled.id, { environment_id: setup.env, force: true });
  assert.ok(['stopping', 'stopped'].includes(stopped.state), `state after a forced stop: ${stopped.state}`);
});
