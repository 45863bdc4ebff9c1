// Shared helpers of the TypeScript SDK compatibility suite (Node's standard library and
// `@anthropic-ai/sdk` only).
//
// The SDK is not installed in the source tree: `scripts/test` runs `npm ci` on a copy of this
// folder's package.json and package-lock.json in `target/compat-ts/` (or wherever
// MNEMO_COMPAT_TS_MODULES points). An ES module resolves bare specifiers relative to its own
// file (NODE_PATH does not apply to `import`), so the package is loaded from there by file URL:
// its `exports` map sends an ESM `import` of the package to `index.mjs`, which is what is
// imported here — the same module a bare `import Anthropic from '@anthropic-ai/sdk'` would get.

import { spawn, execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import assert from 'node:assert/strict';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..');
export const SDK_VERSION = '1.14.0';
export const MODULES = path.resolve(process.env.MNEMO_COMPAT_TS_MODULES || path.join(REPO, 'target', 'compat-ts'));
export const SDK_DIR = path.join(MODULES, 'node_modules', '@anthropic-ai', 'sdk');

// The SDK reads credentials, base URL, custom headers and log level from ANTHROPIC_*; none of
// that may leak into the suite (the runner already cleans the environment of its children; this
// covers a test file run on its own).
for (const name of Object.keys(process.env)) {
  if (name.startsWith('ANTHROPIC_')) delete process.env[name];
}
process.env.NO_PROXY = process.env.no_proxy = '127.0.0.1,localhost';

export function installedSdkVersion() {
  try {
    return JSON.parse(fs.readFileSync(path.join(SDK_DIR, 'package.json'), 'utf8')).version;
  } catch {
    return null;
  }
}

const installed = installedSdkVersion();
if (installed !== SDK_VERSION) {
  throw new Error(
    `@anthropic-ai/sdk@${SDK_VERSION} is not installed in ${MODULES} (found ${installed ?? 'nothing'}); ` +
      'run scripts/test, or: mkdir -p target/compat-ts && cp compat/ts/package*.json target/compat-ts/ && ' +
      'npm ci --prefix target/compat-ts',
  );
}

const sdk = await import(pathToFileURL(path.join(SDK_DIR, 'index.mjs')).href);
export const Anthropic = sdk.default;
export const {
  APIError,
  BadRequestError,
  AuthenticationError,
  NotFoundError,
  ConflictError,
  PermissionDeniedError,
  ContentTooLargeError,
} = sdk;

// --------------------------------------------------------------------------------------
// Constants from the contract.
// --------------------------------------------------------------------------------------

export const ANTHROPIC_VERSION = '2026-10-21';
export const MEMORY_BETA = 'agent-memory-2026-07-22';
export const AGENTS_BETA = 'managed-agents-2026-04-01';
export const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
export const UNKNOWN_STORE = 'memstore_0000000000000000000000';

export const REQUEST_TIMEOUT_MS = Number(process.env.MNEMO_COMPAT_TIMEOUT || '60') * 1000;
const START_TIMEOUT_MS = Number(process.env.MNEMO_COMPAT_START_TIMEOUT || '30') * 1000;

export function sha256(text) {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

export function unique(prefix = 't') {
  return `${prefix}-${randomBytes(6).toString('hex')}`;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Long enough that the next write gets a strictly later timestamp even at 1 s precision. */
export const tick = () => sleep(1100);

// --------------------------------------------------------------------------------------
// The backend every server of this run stores its data in (MNEMO_COMPAT_DATABASE).
// sqlite (default): a fresh file per server. postgres: a fresh schema per server of the database
// MNEMO_TEST_POSTGRES names, through the URL's `options=-csearch_path%3D<schema>` (mnemo
// creates it); the schema names start with MNEMO_COMPAT_TS_SCHEMA_PREFIX, which the runner sets
// and drops everything under when it ends.
// --------------------------------------------------------------------------------------

export const BACKEND = (process.env.MNEMO_COMPAT_DATABASE || '').trim().toLowerCase() || 'sqlite';
export const POSTGRES_URL = (process.env.MNEMO_TEST_POSTGRES || '').trim();

export function databaseUrl(workdir, tag = '') {
  if (BACKEND === 'postgres') {
    const prefix = process.env.MNEMO_COMPAT_TS_SCHEMA_PREFIX || `compat_ts_${randomBytes(4).toString('hex')}`;
    const clean = tag.toLowerCase().replace(/[^a-z0-9_]/g, '').slice(0, 16);
    const schema = `${prefix}_${randomBytes(4).toString('hex')}${clean ? `_${clean}` : ''}`;
    const sep = POSTGRES_URL.includes('?') ? '&' : '?';
    return `${POSTGRES_URL}${sep}options=-csearch_path%3D${schema}`;
  }
  return `sqlite://${path.join(workdir, 'mnemo.sqlite')}`;
}

export function psqlBinary() {
  try {
    return execFileSync('sh', ['-c', 'command -v psql'], { encoding: 'utf8' }).trim() || null;
  } catch {
    const root = '/usr/lib/postgresql';
    const versions = fs.existsSync(root) ? fs.readdirSync(root).sort().reverse() : [];
    for (const v of versions) {
      const p = path.join(root, v, 'bin', 'psql');
      if (fs.existsSync(p)) return p;
    }
    return null;
  }
}

/** Runs `sql` with psql (the suite's own housekeeping only); its output as text. */
export function psql(url, sql) {
  const bin = psqlBinary();
  if (!bin) throw new Error('psql is not installed (it comes with PostgreSQL)');
  try {
    return execFileSync(bin, ['--no-psqlrc', '-v', 'ON_ERROR_STOP=1', '-Atq', '-d', url, '-c', sql], {
      encoding: 'utf8',
      timeout: 30_000,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    const text = String(err.stderr || err.message || err).split(url).join('<url>');
    throw new Error(`psql failed: ${text.trim()}`);
  }
}

// --------------------------------------------------------------------------------------
// `mnemo serve` on 127.0.0.1:0.
// --------------------------------------------------------------------------------------

export function mnemoBinary() {
  const bin = (process.env.MNEMO_BIN || '').trim();
  if (!bin) throw new Error('set MNEMO_BIN to the mnemo binary, e.g. MNEMO_BIN=$PWD/target/debug/mnemo');
  const resolved = path.resolve(bin);
  fs.accessSync(resolved, fs.constants.X_OK);
  return resolved;
}

const LISTEN_LINE = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/;
const live = new Set();

process.on('exit', () => {
  // A test file that crashes still takes its servers along.
  for (const srv of live) srv.kill('SIGKILL');
});

export class Server {
  /**
   * `opts.args`: extra flags; `opts.database`: the --database URL (default: a fresh one of this
   * run's backend); `opts.workdir`: where its log (and SQLite file) go.
   */
  constructor(opts = {}) {
    this.workdir = opts.workdir ?? fs.mkdtempSync(path.join(tmpRoot(), 'server-'));
    fs.mkdirSync(this.workdir, { recursive: true });
    this.apiKey = opts.apiKey ?? `sk-compat-ts-${randomBytes(16).toString('hex')}`;
    // The server's admin key (the Admin API's credential; given, the server prints none of its own).
    this.adminKey = `sk-mnemo-admin-compat-ts-${randomBytes(16).toString('hex')}`;
    this.database = opts.database ?? databaseUrl(this.workdir, opts.tag ?? '');
    this.args = opts.args ?? [];
    this.logPath = path.join(this.workdir, 'server.stderr.log');
    this.proc = null;
    this.baseURL = '';
    this.exit = null;
  }

  argv() {
    return [
      'serve', '--listen', '127.0.0.1:0', '--database', this.database, '--api-key', this.apiKey,
      '--admin-key', this.adminKey, ...this.args,
    ];
  }

  async start() {
    const log = fs.openSync(this.logPath, 'w');
    const proc = spawn(mnemoBinary(), this.argv(), {
      stdio: ['ignore', 'pipe', log],
      detached: true, // its own process group: stop() signals the group
      env: { ...process.env, NO_PROXY: '127.0.0.1,localhost' },
    });
    fs.closeSync(log);
    this.proc = proc;
    live.add(this);
    this.exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve((this.exit = { code, signal }))));
    const first = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no \`listening on\` line within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
      const rl = readline.createInterface({ input: proc.stdout });
      let got = false;
      rl.on('line', (line) => {
        if (!got) {
          got = true;
          clearTimeout(timer);
          resolve(line);
        }
      });
      rl.on('close', () => {
        if (!got) {
          clearTimeout(timer);
          reject(new Error('the server exited before printing `listening on`'));
        }
      });
      proc.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    }).catch((err) => {
      this.kill('SIGKILL');
      const shown = this.argv().map((a) => (a === this.apiKey ? '<api key>' : a === this.adminKey ? '<admin key>' : a));
      throw new Error(`${err.message}\n  command: mnemo ${shown.join(' ')}\n${this.logTail()}`);
    });
    const m = LISTEN_LINE.exec(first.trimEnd());
    if (!m) {
      this.kill('SIGKILL');
      throw new Error(`first stdout line must be \`listening on http://127.0.0.1:PORT\`, got ${JSON.stringify(first)}`);
    }
    this.baseURL = m[1];
    return this;
  }

  alive() {
    return this.proc !== null && this.exit === null;
  }

  kill(signal) {
    if (this.proc && this.exit === null) {
      try {
        process.kill(-this.proc.pid, signal);
      } catch {
        /* already gone */
      }
    }
  }

  /** SIGTERM, then SIGKILL after 10 s; resolves to the exit status. */
  async stop() {
    if (this.proc === null) return null;
    if (this.exit === null) {
      this.kill('SIGTERM');
      const timer = setTimeout(() => this.kill('SIGKILL'), 10_000);
      await this.exited;
      clearTimeout(timer);
    }
    live.delete(this);
    return this.exit;
  }

  logTail(lines = 40) {
    try {
      const text = fs.readFileSync(this.logPath, 'utf8').split('\n').filter(Boolean).slice(-lines);
      return text.map((l) => `    | ${l}`).join('\n') || '    | (server log is empty)';
    } catch {
      return '    | (no server log)';
    }
  }

  client(opts = {}) {
    return newClient(this.baseURL, opts.apiKey ?? this.apiKey, opts);
  }
}

/** An SDK client: only baseURL and apiKey (plus a request timeout) differ from the defaults. */
export function newClient(baseURL, apiKey, opts = {}) {
  const { apiKey: _ignored, ...rest } = opts;
  return new Anthropic({ baseURL, apiKey, timeout: REQUEST_TIMEOUT_MS, ...rest });
}

let tmp = null;
/** This test file's temp area (removed when the process exits). */
export function tmpRoot() {
  if (tmp === null) {
    tmp = fs.mkdtempSync(path.join(fs.realpathSync(process.env.TMPDIR || '/tmp'), 'mnemo-compat-ts-'));
    process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));
  }
  return tmp;
}

/**
 * Starts one server for this test file and stops it when the file's tests are done; returns a
 * fixture `{ server, client, stores, memories, versions, newStore, newMemory, ... }`.
 */
export async function serverFixture(t, opts = {}) {
  const server = await new Server(opts).start();
  const client = server.client();
  const fx = {
    server,
    client,
    baseURL: server.baseURL,
    apiKey: server.apiKey,
    stores: client.beta.memoryStores,
    memories: client.beta.memoryStores.memories,
    versions: client.beta.memoryStores.memoryVersions,
    newStore: (params = {}) => client.beta.memoryStores.create({ name: unique('compat-ts'), ...params }),
    newMemory: (storeId, p, content = 'x', params = {}) =>
      client.beta.memoryStores.memories.create(storeId, { path: p, content, ...params }),
    allMemories: (storeId, params = {}) => collect(client.beta.memoryStores.memories.list(storeId, params)),
    allVersions: (storeId, params = {}) => collect(client.beta.memoryStores.memoryVersions.list(storeId, params)),
  };
  return fx;
}

// --------------------------------------------------------------------------------------
// Listing helpers: the SDK's own auto-pagination and page walking.
// --------------------------------------------------------------------------------------

/** Every item, through the SDK's auto-pagination (`for await` over the PagePromise). */
export async function collect(pagePromise) {
  const out = [];
  for await (const item of pagePromise) out.push(item);
  return out;
}

/** Every page, through `hasNextPage()` / `getNextPage()`. */
export async function allPages(pagePromise) {
  let page = await pagePromise;
  const out = [page];
  while (page.hasNextPage()) {
    page = await page.getNextPage();
    out.push(page);
    assert.ok(out.length < 10_000, 'more than 10,000 pages; pagination does not terminate');
  }
  return out;
}

/** Every page, passing each `next_page` back explicitly as `page`. */
export async function pagesByHand(fetchPage) {
  const out = [];
  let cursor = null;
  for (;;) {
    const page = await fetchPage(cursor);
    out.push(page);
    if (!page.next_page) return out;
    assert.notEqual(page.next_page, cursor, `next_page did not advance (stuck at ${cursor})`);
    cursor = page.next_page;
    assert.ok(out.length < 10_000, 'more than 10,000 pages');
  }
}

// --------------------------------------------------------------------------------------
// Assertions.
// --------------------------------------------------------------------------------------

export function rfc3339(value, what) {
  assert.ok(typeof value === 'string' && RFC3339_UTC.test(value), `${what}: expected an RFC 3339 UTC timestamp ending in Z, got ${JSON.stringify(value)}`);
}

export function prefixed(value, prefix, what) {
  assert.ok(typeof value === 'string' && value.startsWith(prefix), `${what}: expected a string starting with ${prefix}, got ${JSON.stringify(value)}`);
}

export function checkStoreShape(store, what = 'store') {
  assert.equal(store.type, 'memory_store', `${what}.type`);
  prefixed(store.id, 'memstore_', `${what}.id`);
  assert.equal(typeof store.name, 'string', `${what}.name`);
  assert.equal(typeof store.description, 'string', `${what}.description`);
  assert.ok(store.metadata !== null && typeof store.metadata === 'object', `${what}.metadata must be an object`);
  rfc3339(store.created_at, `${what}.created_at`);
  rfc3339(store.updated_at, `${what}.updated_at`);
  if (store.archived_at !== null) rfc3339(store.archived_at, `${what}.archived_at`);
}

export function checkMemoryShape(mem, content, full, what = 'memory') {
  assert.equal(mem.type, 'memory', `${what}.type`);
  prefixed(mem.id, 'mem_', `${what}.id`);
  prefixed(mem.memory_store_id, 'memstore_', `${what}.memory_store_id`);
  prefixed(mem.memory_version_id, 'memver_', `${what}.memory_version_id`);
  rfc3339(mem.created_at, `${what}.created_at`);
  rfc3339(mem.updated_at, `${what}.updated_at`);
  if (content !== undefined) {
    assert.equal(mem.content_sha256, sha256(content), `${what}.content_sha256`);
    assert.equal(mem.content_size_bytes, Buffer.byteLength(content, 'utf8'), `${what}.content_size_bytes`);
    assert.equal(mem.content, full ? content : null, `${what}.content (${full ? 'full' : 'basic'} view)`);
  }
}

export function checkVersionShape(ver, what = 'version') {
  assert.equal(ver.type, 'memory_version', `${what}.type`);
  prefixed(ver.id, 'memver_', `${what}.id`);
  prefixed(ver.memory_id, 'mem_', `${what}.memory_id`);
  prefixed(ver.memory_store_id, 'memstore_', `${what}.memory_store_id`);
  assert.ok(['created', 'modified', 'deleted'].includes(ver.operation), `${what}.operation: ${ver.operation}`);
  rfc3339(ver.created_at, `${what}.created_at`);
}

export function checkApiActor(actor, what) {
  assert.ok(actor, `${what}: expected an api_actor`);
  assert.equal(actor.type, 'api_actor', `${what}.type`);
  prefixed(actor.api_key_id, 'apikey_', `${what}.api_key_id`);
  return actor.api_key_id;
}

/**
 * Awaits `call()`, which must reject with the SDK's `APIError` subclass `cls` for HTTP `status`
 * and error type `type`; checks the error envelope, the request id (header, body, `requestID`)
 * and the SDK's parsed fields (`type`, `apiMessage`). Returns the error.
 */
export async function expectError(call, { status, cls = APIError, type, what = 'call' }) {
  let result;
  try {
    result = await call();
  } catch (err) {
    if (!(err instanceof APIError)) throw err;
    assert.equal(err.status, status, `${what}: HTTP status (body ${JSON.stringify(err.error)?.slice(0, 300)})`);
    assert.ok(err instanceof cls, `${what}: expected ${cls.name}, got ${err.constructor.name}`);
    const body = err.error;
    assert.ok(body && typeof body === 'object', `${what}: the error body must be a JSON object`);
    assert.equal(body.type, 'error', `${what}: body.type`);
    assert.ok(body.error && typeof body.error === 'object', `${what}: body.error must be an object`);
    assert.ok(typeof body.error.message === 'string' && body.error.message, `${what}: body.error.message`);
    if (type !== undefined) {
      assert.equal(body.error.type, type, `${what}: body.error.type`);
      assert.equal(err.type, type, `${what}: the SDK error's .type`);
    }
    assert.equal(err.apiMessage, body.error.message, `${what}: the SDK error's .apiMessage`);
    const header = err.headers?.get('request-id');
    prefixed(header, 'req_', `${what}: request-id header`);
    assert.equal(body.request_id, header, `${what}: body.request_id vs the request-id header`);
    assert.equal(err.requestID, header, `${what}: the SDK error's .requestID`);
    return err;
  }
  assert.fail(`${what}: expected HTTP ${status}, but the call succeeded with ${JSON.stringify(result)?.slice(0, 200)}`);
}

export const expectInvalid = (call, what) =>
  expectError(call, { status: 400, cls: BadRequestError, type: 'invalid_request_error', what });
export const expectNotFound = (call, what) =>
  expectError(call, { status: 404, cls: NotFoundError, type: 'not_found_error', what });
export const expectPreconditionFailed = (call, what) =>
  expectError(call, { status: 409, cls: ConflictError, type: 'memory_precondition_failed_error', what });

/** A 409 `memory_path_conflict_error` naming `blocking` (if given), with `x-should-retry: false`. */
export async function expectPathConflict(call, what, blocking) {
  const err = await expectError(call, { status: 409, cls: ConflictError, type: 'memory_path_conflict_error', what });
  if (blocking) {
    assert.equal(err.error.error.conflicting_memory_id, blocking.id, `${what}: error.conflicting_memory_id`);
    assert.equal(err.error.error.conflicting_path, blocking.path, `${what}: error.conflicting_path`);
    assert.equal(err.headers.get('x-should-retry'), 'false', `${what}: x-should-retry`);
  }
  return err;
}

// --------------------------------------------------------------------------------------
// Plain HTTP, for what the SDK has no method for (mnemo's environment keys, the agent's events).
// --------------------------------------------------------------------------------------

export async function apiRequest(baseURL, apiKey, method, urlPath, body, beta = AGENTS_BETA) {
  const res = await fetch(`${baseURL}${urlPath}`, {
    method,
    headers: {
      authorization: `Bearer ${apiKey}`,
      'anthropic-version': ANTHROPIC_VERSION,
      'anthropic-beta': beta,
      'content-type': 'application/json',
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = text.slice(0, 300);
  }
  return { status: res.status, body: json };
}

// --------------------------------------------------------------------------------------
// Workers.
// --------------------------------------------------------------------------------------

/** The folder name mnemo derives from a store's name under `--memory-mount-root`. */
export const slug = (name) =>
  name
    .split('')
    .map((c) => (/^[A-Za-z0-9]$/.test(c) ? c.toLowerCase() : ' '))
    .join('')
    .split(/\s+/)
    .filter(Boolean)
    .join('-');

/** Collects a worker client's log records and HTTP exchanges. */
export function diagnostics() {
  const t0 = Date.now();
  const stamp = () => `${((Date.now() - t0) / 1000).toFixed(2).padStart(7)}s`;
  const d = { records: [], exchanges: [] };
  const rec = (level) => (msg, ...args) => d.records.push({ level, text: [msg, ...args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a)))].join(' ') });
  d.logger = { debug: () => {}, info: rec('info'), warn: rec('warn'), error: rec('error') };
  d.fetch = async (url, init = {}) => {
    const method = init.method ?? 'GET';
    const body = method !== 'GET' && typeof init.body === 'string' ? ` ${init.body.slice(0, 400)}` : '';
    d.exchanges.push(`${stamp()} -> ${method} ${url}${body}`);
    const res = await fetch(url, init);
    let detail = '';
    if (res.status >= 300) detail = ` ${(await res.clone().text()).slice(0, 600)}`;
    else if ((res.headers.get('content-type') || '').includes('text/event-stream')) detail = ' (event stream opened)';
    d.exchanges.push(`${stamp()} <- ${res.status} ${method} ${new URL(url).pathname}${detail}`);
    return res;
  };
  d.dump = () => {
    const lines = ['# --- worker log records (info and above) ---'];
    for (const r of d.records) lines.push(`#   ${r.level.toUpperCase()} ${r.text}`);
    lines.push("# --- the worker's HTTP exchanges ---");
    for (const x of d.exchanges.slice(-150)) lines.push(`#   ${x}`);
    return lines.join('\n');
  };
  return d;
}

/** The operator's objects for a worker test: an agent with the built-in toolset, a self-hosted
 * environment, and an environment key minted through mnemo's `POST /v1/environments/{id}/keys`. */
export async function workerSetup(server, client, tag = unique('w')) {
  const agent = await client.beta.agents.create({
    name: `compat-ts-agent-${tag}`,
    model: 'claude-opus-4-6',
    tools: [{ type: 'agent_toolset_20260401' }],
  });
  const env = await client.beta.environments.create({ name: `compat-ts-env-${tag}`, config: { type: 'self_hosted' } });
  assert.equal(env.config.type, 'self_hosted', 'environment config.type');
  const key = await apiRequest(server.baseURL, server.apiKey, 'POST', `/v1/environments/${env.id}/keys`, {});
  assert.equal(key.status, 200, `POST /v1/environments/{id}/keys: ${JSON.stringify(key.body).slice(0, 300)}`);
  assert.equal(key.body.type, 'environment_key');
  prefixed(key.body.key, 'sk-mnemo-env-', 'environment key');
  return { agent: agent.id, env: env.id, key: key.body.key };
}

/** The external agent driver: the agent's events with the API key (plain HTTP), results read
 * back through the SDK. */
export class Driver {
  constructor(server, client, sessionId) {
    this.server = server;
    this.client = client;
    this.sessionId = sessionId;
    this.alive = () => true;
  }

  post(events) {
    return apiRequest(this.server.baseURL, this.server.apiKey, 'POST', `/v1/sessions/${this.sessionId}/events`, { events });
  }

  async toolUse(name, input) {
    const { status, body } = await this.post([{ type: 'agent.tool_use', name, input }]);
    assert.equal(status, 200, `agent.tool_use ${name}: ${JSON.stringify(body).slice(0, 400)}`);
    assert.equal(body.data?.length, 1, 'the answer holds the one recorded event');
    prefixed(body.data[0].id, 'sevt_', 'tool use id');
    return body.data[0].id;
  }

  events() {
    return collect(this.client.beta.sessions.events.list(this.sessionId, { limit: 1000 }));
  }

  async waitResult(toolUseId, what, timeoutMs = 60_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const ev = (await this.events()).find((e) => e.type === 'user.tool_result' && e.tool_use_id === toolUseId);
      if (ev) {
        const blocks = ev.content ?? [];
        for (const b of blocks) assert.equal(b.type, 'text', `${what}: text blocks only`);
        return [Boolean(ev.is_error), blocks.map((b) => b.text).join('')];
      }
      assert.ok(this.alive(), `${what}: the worker ended before posting the result of ${toolUseId}`);
      assert.ok(Date.now() < deadline, `${what}: no user.tool_result for ${toolUseId} within ${timeoutMs} ms`);
      await sleep(200);
    }
  }

  async call(name, input) {
    const id = await this.toolUse(name, input);
    return this.waitResult(id, `${name} ${JSON.stringify(input).slice(0, 120)}`);
  }
}

export async function waitFor(cond, timeoutMs, what, alive = () => true) {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    assert.ok(alive(), `the worker ended while waiting for ${what}`);
    assert.ok(Date.now() < deadline, `timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}
