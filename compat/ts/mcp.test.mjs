// `/mcp` on `mnemo serve` (streamable HTTP), driven by the official TypeScript MCP SDK
// (`@modelcontextprotocol/sdk`) as the client: initialize, every tool, resources, a change made
// elsewhere since the model viewed a file, a bad key, and the versions the tools write.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as L from './lib.mjs';

const MCP = path.join(L.MODULES, 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm', 'client');
const { Client } = await import(pathToFileURL(path.join(MCP, 'index.js')).href);
const { StreamableHTTPClientTransport } = await import(pathToFileURL(path.join(MCP, 'streamableHttp.js')).href);
const { ResourceUpdatedNotificationSchema } = await import(
  pathToFileURL(path.join(MCP, '..', 'types.js')).href
);

let fx;
before(async () => {
  fx = await L.serverFixture();
});
after(async () => {
  await fx?.server.stop();
});

/** A connected MCP client of `/mcp` holding `apiKey`. */
async function connect(apiKey = fx.apiKey) {
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', fx.baseURL), {
    requestInit: { headers: { Authorization: `Bearer ${apiKey}` } },
  });
  const client = new Client({ name: 'mnemo-compat-ts', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

const text = (result) => result.content.map((c) => c.text ?? '').join('');

async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  assert.ok(!result.isError, `${name} ${JSON.stringify(args)} failed: ${text(result)}`);
  return text(result);
}

async function refused(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  assert.ok(result.isError, `${name} ${JSON.stringify(args)} should be refused, answered: ${text(result)}`);
  return text(result);
}

test('mcp over http: every tool, resources, and the versions they write', async () => {
  const store = await fx.newStore({ name: L.unique('ts-mcp') });
  const folder = `/memories/${store.name}`;
  await fx.newMemory(store.id, '/notes.md', 'alpha\nbeta\n');
  const client = await connect();
  try {
    const tools = (await client.listTools()).tools.map((t) => t.name);
    for (const name of ['view', 'create', 'str_replace', 'insert', 'delete', 'rename', 'history', 'search']) {
      assert.ok(tools.includes(name), `tool ${name} is listed: ${tools}`);
    }
    assert.match(await call(client, 'view', { path: '/memories' }), new RegExp(`${folder}\t`));
    assert.equal(await call(client, 'view', { path: `${folder}/notes.md` }), '     1\talpha\n     2\tbeta\n');
    await call(client, 'str_replace', { path: `${folder}/notes.md`, old_str: 'beta', new_str: 'gamma' });
    await call(client, 'insert', { path: `${folder}/notes.md`, insert_line: 2, insert_text: 'delta' });
    await call(client, 'create', { path: `${folder}/todo.md`, file_text: 'ship\n' });
    await call(client, 'rename', { old_path: `${folder}/todo.md`, new_path: `${folder}/done/todo.md` });
    assert.match(await call(client, 'history', { path: `${folder}/notes.md` }), /^3 version\(s\)/);
    const found = await call(client, 'search', { query: 'gamma', path: folder });
    assert.match(found, /^1 match\(es\)/);
    assert.ok(found.includes(`${folder}/notes.md\n`) && found.includes('«gamma»'), found);
    await call(client, 'create', { path: `${folder}/scratch/tmp.md`, file_text: 'x\n' });
    assert.match(await call(client, 'delete', { path: `${folder}/scratch` }), /^deleted 1 file/);

    // A change made through the API after the model's view: the edit is refused, nothing lost.
    const [notes] = (await fx.allMemories(store.id)).filter((m) => m.path === '/notes.md');
    await fx.memories.update(notes.id, { memory_store_id: store.id, content: 'changed elsewhere\n' });
    const e = await refused(client, 'str_replace', { path: `${folder}/notes.md`, old_str: 'alpha', new_str: 'x' });
    assert.match(e, /changed since you last viewed it/);
    assert.match(await refused(client, 'view', { path: '/etc/passwd' }), /outside \/memories/);
    assert.match(await refused(client, 'create', { path: `${folder}/../x.md`, file_text: 'x' }), /`\.\.`/);

    const uris = (await client.listResources()).resources.map((r) => r.uri).filter((u) => u.includes(store.id));
    assert.deepEqual(uris.sort(), [`mnemo://${store.id}/done/todo.md`, `mnemo://${store.id}/notes.md`]);
    const read = await client.readResource({ uri: `mnemo://${store.id}/done/todo.md` });
    assert.equal(read.contents[0].text, 'ship\n');
  } finally {
    await client.close();
  }
  const byPath = Object.fromEntries((await fx.allMemories(store.id, { view: 'full' })).map((m) => [m.path, m]));
  assert.deepEqual(Object.keys(byPath).sort(), ['/done/todo.md', '/notes.md']);
  assert.equal(byPath['/notes.md'].content, 'changed elsewhere\n', 'the refused edit changed nothing');
  for (const v of await fx.allVersions(store.id)) {
    L.checkApiActor(v.created_by, `version ${v.id}`);
  }
});

test('mcp over http: a bad key starts nothing', async () => {
  await assert.rejects(connect('sk-mnemo-nobody-0123456789abcdef0123456789'), (err) => {
    assert.match(String(err), /401|authentication|Unauthorized/i);
    assert.doesNotMatch(String(err), /sk-mnemo-nobody/, 'the key is not repeated');
    return true;
  });
});

test('mcp over http: a subscriber hears of a change made through the API', async () => {
  const store = await fx.newStore({ name: L.unique('ts-subs') });
  const watched = await fx.newMemory(store.id, '/watched.md', 'v1\n');
  const uri = `mnemo://${store.id}/watched.md`;
  const client = await connect();
  try {
    const heard = new Promise((resolve) => {
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (note) => resolve(note.params.uri));
    });
    await client.subscribeResource({ uri });
    await fx.memories.update(watched.id, { memory_store_id: store.id, content: 'v2\n' });
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('no notification in 15 s')), 15000));
    assert.equal(await Promise.race([heard, timeout]), uri);
  } finally {
    await client.close();
  }
});
