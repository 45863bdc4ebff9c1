// The TypeScript SDK's own EnvironmentWorker serving a scripted session (two memory stores, one
// read-only) driven by `mnemo session script`, compared with the Python SDK's worker on the same
// script.
//
// Each run gets a server of its own (`mnemo serve` on 127.0.0.1:0, a fresh database of this
// run's backend, its own `--memory-mount-root` in a temp area) and the same state built through
// the API: `Diff Notes` (read_write) and `Diff Reference` (read_only) with the seeds below, an
// agent with `agent_toolset_20260401`, a self-hosted environment and an environment key. The
// states are equal up to ids and timestamps, which none of the compared traces contain.
//
// * ts: `client.beta.environments.work.worker({environmentId, environmentKey, workdir,
//   maxIdleMs: 2000}).run(signal)` in this process, on a client whose API key the server does
//   not know (a request that used it instead of the environment key or the sessions token would
//   fail); the default memory sync interval (15 s).
// * py: `compat/ts/py_worker.py` with MNEMO_COMPAT_PYTHON (anthropic==2.10.0): the Python
//   suite's own WorkerThread in mode "run" (`max_idle=2`, the default sync interval).
//
// `mnemo session script` creates the session, posts the SCRIPT's calls one by one (each after
// the previous result), ends the turn and returns once the worker has stopped the work item.
// Then the worker is cancelled and each run must have: every call answered, no error logged by
// the worker, the item `stopped`, both mount folders removed, the read-only store equal to its
// seed and without session versions. Compared between the runs: each call's `is_error` and text
// (mount root → <MNT>, workdir → <WORK>; see `compare`), the final memories of both stores, and
// per store the sequence of (operation, path) of the versions whose `created_by` is the session's
// `session_actor` (also listed through the `session_id` filter). The script must finish within
// the 15 s sync interval, so only the final sync uploads.
//
// The first test checks the TypeScript run alone against fixed expectations (derived from the
// Python worker's run), so it runs without Python too; the second runs the Python side and
// compares (skipped, visibly, when no python with anthropic==2.10.0 is available).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import * as L from './lib.mjs';

const MAX_IDLE_MS = 2000;
const NATIVE_GLOB = typeof fs.promises.glob === 'function'; // Node 22+
const SCRIPT_BUDGET_S = 13;
const PY_WORKER = path.join(L.HERE, 'py_worker.py');

const RW_NAME = 'Diff Notes';
const RO_NAME = 'Diff Reference';
const RW_SEED = {
  '/notes/readme.md': '# Read me\nhello from the notes store\nhello again\n',
  '/todo.md': '- buy milk\n- call bob\n- water the plants\n',
  '/journal/2024-01.md': 'January: started the journal\n',
  '/journal/2024-02.md': 'February: nothing happened\n',
  '/scratch/old.md': 'an old scratch note, soon removed\n',
  '/projects/alpha/plan.md': 'alpha plan: ship it\nstatus: bob is on it\n',
};
const RO_SEED = {
  '/guide.md': 'The guide is read-only.\nDo not edit the guide.\n',
  '/policies/security.md': 'Rotate keys often.\nNever share secrets.\n',
};
const IDEA = 'a fresh idea \u2713 written by the session\n';

// [label, tool, input(rw, ro), compare]; compare: "exact" (is_error + text), "lines" (is_error +
// sorted lines: directory order), "none" (not compared: the SDKs' bash does not enforce
// read-only mounts, and what it prints is the shell's), and two differences of the SDKs
// themselves (compat/README.md): "count" (`wrote N bytes`: N is UTF-8 bytes in TypeScript,
// code points in Python; compared with the count of each) and "glob" (the TypeScript toolset's
// glob needs Node 22's `fs.glob`: on an older Node it fails, and that failure is what is checked;
// from Node 22 on, compared as "lines").
const SCRIPT = [
  ['read rw readme', 'read', (rw) => ({ file_path: `${rw}/notes/readme.md` })],
  ['read ro guide', 'read', (rw, ro) => ({ file_path: `${ro}/guide.md` })],
  ['write new rw file', 'write', (rw) => ({ file_path: `${rw}/ideas/new.md`, content: IDEA }), 'count'],
  ['edit rw todo', 'edit', (rw) => ({ file_path: `${rw}/todo.md`, old_string: 'call bob', new_string: 'call alice' })],
  ['bash append to rw journal', 'bash', (rw) => ({ command: `printf 'appended by bash\\n' >> ${rw}/journal/2024-02.md` })],
  [
    'bash create rw journal file',
    'bash',
    (rw) => ({ command: `printf 'created by bash\\n' > ${rw}/journal/2024-03.md && cat ${rw}/journal/2024-03.md` }),
  ],
  ['bash rm rw memory', 'bash', (rw) => ({ command: `rm ${rw}/scratch/old.md && ls ${rw}/scratch | wc -l` })],
  ['glob rw journal', 'glob', (rw) => ({ pattern: 'journal/*.md', path: rw }), 'glob'],
  ['glob rw **/*.md', 'glob', (rw) => ({ pattern: '**/*.md', path: rw }), 'glob'],
  ['grep rw (several files)', 'grep', (rw) => ({ pattern: 'bash|alice|bob', path: rw }), 'lines'],
  ['grep ro one file', 'grep', (rw, ro) => ({ pattern: 'read-?only', path: `${ro}/guide.md` })],
  ['write into ro (refused)', 'write', (rw, ro) => ({ file_path: `${ro}/denied.md`, content: 'must not land' })],
  ['edit in ro (refused)', 'edit', (rw, ro) => ({ file_path: `${ro}/guide.md`, old_string: 'read-only', new_string: 'writable' })],
  [
    'bash write into ro (not compared)',
    'bash',
    (rw, ro) => ({ command: `echo vandalised > ${ro}/guide.md; echo sneaky > ${ro}/bash-denied.md` }),
    'none',
  ],
  ['read ro policies', 'read', (rw, ro) => ({ file_path: `${ro}/policies/security.md` })],
  ['read removed rw file (error)', 'read', (rw) => ({ file_path: `${rw}/scratch/old.md` })],
  ['edit rw, old_string missing (error)', 'edit', (rw) => ({ file_path: `${rw}/notes/readme.md`, old_string: 'not there', new_string: 'x' })],
  ['edit rw, ambiguous (error)', 'edit', (rw) => ({ file_path: `${rw}/notes/readme.md`, old_string: 'hello', new_string: 'hi' })],
  [
    'edit rw replace_all',
    'edit',
    (rw) => ({ file_path: `${rw}/notes/readme.md`, old_string: 'hello', new_string: 'hi', replace_all: true }),
  ],
  ['read rw readme after edit', 'read', (rw) => ({ file_path: `${rw}/notes/readme.md` })],
].map(([label, tool, input, compare = 'exact']) => ({ label, tool, input, compare }));

// What the script leaves, as the Python SDK's worker leaves it.
const RW_FINAL = {
  '/ideas/new.md': IDEA,
  '/journal/2024-01.md': 'January: started the journal\n',
  '/journal/2024-02.md': 'February: nothing happened\nappended by bash\n',
  '/journal/2024-03.md': 'created by bash\n',
  '/notes/readme.md': '# Read me\nhi from the notes store\nhi again\n',
  '/projects/alpha/plan.md': 'alpha plan: ship it\nstatus: bob is on it\n',
  '/todo.md': '- buy milk\n- call alice\n- water the plants\n',
};
// The final sync reconciles paths one by one in sorted order, each delete in its place.
const RW_SESSION_VERSIONS = [
  ['created', '/ideas/new.md'],
  ['modified', '/journal/2024-02.md'],
  ['created', '/journal/2024-03.md'],
  ['modified', '/notes/readme.md'],
  ['deleted', '/scratch/old.md'],
  ['modified', '/todo.md'],
];

const servers = [];
after(async () => {
  for (const s of servers) await s.stop();
});

async function buildState(server) {
  const client = server.client();
  const rw = await client.beta.memoryStores.create({ name: RW_NAME, description: 'notes the session may change' });
  const ro = await client.beta.memoryStores.create({ name: RO_NAME, description: 'reference the session may only read' });
  for (const [p, content] of Object.entries(RW_SEED)) await client.beta.memoryStores.memories.create(rw.id, { path: p, content });
  for (const [p, content] of Object.entries(RO_SEED)) await client.beta.memoryStores.memories.create(ro.id, { path: p, content });
  const tag = L.unique('diff');
  const agent = await client.beta.agents.create({
    name: `compat-ts-agent-${tag}`,
    model: 'claude-opus-4-6',
    tools: [{ type: 'agent_toolset_20260401' }],
  });
  const env = await client.beta.environments.create({ name: `compat-ts-env-${tag}`, config: { type: 'self_hosted' } });
  assert.equal(env.config.type, 'self_hosted');
  const key = await L.apiRequest(server.baseURL, server.apiKey, 'POST', `/v1/environments/${env.id}/keys`, {});
  assert.equal(key.status, 200, `POST /v1/environments/{id}/keys: ${JSON.stringify(key.body).slice(0, 300)}`);
  L.prefixed(key.body.key, 'sk-mnemo-env-', 'environment key');
  return { client, rw: rw.id, ro: ro.id, agent: agent.id, env: env.id, key: key.body.key };
}

/** The TS SDK's worker: `run()` until `stop()`. */
function startTsWorker(server, state, workdir) {
  const diag = L.diagnostics();
  const client = L.newClient(server.baseURL, 'sk-not-for-the-worker', { logger: diag.logger, logLevel: 'info', fetch: diag.fetch });
  const worker = client.beta.environments.work.worker({
    environmentId: state.env,
    environmentKey: state.key,
    workdir,
    maxIdleMs: MAX_IDLE_MS,
  });
  const ctrl = new AbortController();
  const w = { diag, ended: false, error: null, cancelled: false };
  w.done = worker.run(ctrl.signal).then(
    () => {
      w.ended = true;
    },
    (err) => {
      w.ended = true;
      if (ctrl.signal.aborted) w.cancelled = true;
      else w.error = err;
    },
  );
  w.stop = async () => {
    ctrl.abort();
    let timer;
    await Promise.race([w.done, new Promise((resolve) => (timer = setTimeout(resolve, 45_000)))]);
    clearTimeout(timer);
    assert.ok(w.ended, 'ts: run() did not end within 45 s of the abort');
    assert.equal(w.error, null, `ts: run() failed: ${w.error?.stack ?? w.error}`);
    const errors = diag.records.filter((r) => r.level === 'error').map((r) => r.text);
    assert.deepEqual(errors, [], 'ts: the worker logged errors');
    if (process.env.MNEMO_COMPAT_WORKER_TRACE) console.log(diag.dump());
  };
  w.report = () => `${w.error ? `# ts worker error: ${w.error.stack ?? w.error}\n` : ''}${diag.dump()}`;
  return w;
}

function pythonCommand() {
  const py = process.env.MNEMO_COMPAT_PYTHON;
  return py && fs.existsSync(py) ? py : null;
}

/** The Python SDK's worker (py_worker.py): `run()` until SIGTERM. */
async function startPyWorker(server, state, workdir) {
  const proc = spawn(pythonCommand(), [PY_WORKER], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      MNEMO_PYW_BASE_URL: server.baseURL,
      MNEMO_PYW_ENVIRONMENT_ID: state.env,
      MNEMO_PYW_ENVIRONMENT_KEY: state.key,
      MNEMO_PYW_WORKDIR: workdir,
    },
  });
  const w = { proc, lines: [], stderr: '' };
  proc.stderr.on('data', (c) => {
    w.stderr = (w.stderr + c).slice(-20_000);
  });
  w.exited = new Promise((resolve) => proc.on('exit', (code) => resolve(code)));
  const rl = readline.createInterface({ input: proc.stdout });
  const ready = new Promise((resolve) => {
    rl.on('line', (line) => {
      w.lines.push(line);
      if (line === 'ready') resolve(true);
    });
    rl.on('close', () => resolve(false));
  });
  assert.ok(await ready, `py: the Python worker did not start:\n${w.stderr}`);
  w.stop = async () => {
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 60_000);
    const code = await w.exited;
    clearTimeout(timer);
    assert.equal(code, 0, `py: py_worker.py exited with ${code}:\n${w.stderr.slice(-3000)}`);
    const last = JSON.parse(w.lines.at(-1));
    w.result = last;
    assert.equal(last.error, null, `py: the worker raised:\n${last.error}`);
    assert.ok(last.cancelled && !last.alive, `py: run() did not end through the cancellation: ${JSON.stringify(last).slice(0, 300)}`);
    assert.deepEqual(last.errors, [], 'py: the worker logged errors');
  };
  w.report = () => {
    const last = w.result ?? (w.lines.length ? (() => { try { return JSON.parse(w.lines.at(-1)); } catch { return null; } })() : null);
    return `# --- python worker stderr (tail) ---\n${w.stderr.slice(-3000)}\n${(last?.exchanges ?? []).map((x) => `#   ${x}`).join('\n')}`;
  };
  return w;
}

/** `mnemo session script`: one JSON line per step; returns the results and the session id. */
async function sessionScript(server, scriptPath) {
  const proc = spawn(L.mnemoBinary(), ['session', 'script', scriptPath, '--base-url', server.baseURL, '--timeout', '120'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ANTHROPIC_API_KEY: server.apiKey },
  });
  let out = '';
  let err = '';
  proc.stdout.on('data', (c) => (out += c));
  proc.stderr.on('data', (c) => (err += c));
  const code = await new Promise((resolve) => proc.on('exit', resolve));
  assert.equal(code, 0, `mnemo session script exited with ${code}:\n${err.slice(-3000)}\nstdout:\n${out.slice(-3000)}`);
  const sid = /session (sesn_\S+)/.exec(err)?.[1];
  assert.ok(sid, `mnemo session script named no session on stderr: ${err.slice(0, 300)}`);
  return { sid, results: out.split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

async function sessionVersions(client, storeId, sid) {
  const listed = await L.collect(client.beta.memoryStores.memoryVersions.list(storeId));
  const mine = [];
  for (const v of listed.reverse()) {
    if (v.created_by?.type !== 'session_actor') continue;
    assert.deepEqual(v.created_by, { type: 'session_actor', session_id: sid }, `created_by of ${v.id}`);
    mine.push([v.operation, v.path ?? '']);
  }
  const filtered = await L.collect(client.beta.memoryStores.memoryVersions.list(storeId, { session_id: sid }));
  assert.deepEqual(filtered.map((v) => [v.operation, v.path ?? '']).reverse(), mine, 'versions listed with session_id=');
  return mine;
}

async function memoriesOf(client, storeId) {
  const out = {};
  for (const m of await L.collect(client.beta.memoryStores.memories.list(storeId, { view: 'full' }))) out[m.path] = m.content ?? '';
  return out;
}

/** One run: a server, the state, a worker of `kind`, the script; returns the traces. */
async function runSession(kind) {
  const area = fs.mkdtempSync(path.join(L.tmpRoot(), `diff-${kind}-`));
  const mountRoot = path.join(area, 'mnt', 'memory');
  const workdir = path.join(area, 'workdir');
  fs.mkdirSync(mountRoot, { recursive: true });
  fs.mkdirSync(workdir);
  const server = await new L.Server({ workdir: path.join(area, 'server'), tag: `diff_${kind}`, args: ['--memory-mount-root', mountRoot] }).start();
  servers.push(server);
  let worker = null;
  try {
    const state = await buildState(server);
    const rwMount = path.join(mountRoot, L.slug(RW_NAME));
    const roMount = path.join(mountRoot, L.slug(RO_NAME));
    const script = {
      agent: state.agent,
      environment_id: state.env,
      resources: [
        { type: 'memory_store', memory_store_id: state.rw, access: 'read_write' },
        { type: 'memory_store', memory_store_id: state.ro, access: 'read_only' },
      ],
      steps: SCRIPT.map((s) => ({ tool: s.tool, input: s.input(rwMount, roMount) })),
    };
    const scriptPath = path.join(area, 'script.json');
    fs.writeFileSync(scriptPath, JSON.stringify(script));

    worker = kind === 'ts' ? startTsWorker(server, state, workdir) : await startPyWorker(server, state, workdir);
    const started = Date.now();
    const { sid, results } = await sessionScript(server, scriptPath);
    const seconds = (Date.now() - started) / 1000;

    const session = await state.client.beta.sessions.retrieve(sid);
    assert.deepEqual(
      session.resources.filter((r) => r.type === 'memory_store').map((r) => [r.memory_store_id, r.access, r.mount_path]),
      [
        [state.rw, 'read_write', rwMount],
        [state.ro, 'read_only', roMount],
      ],
      `${kind}: the session's memory_store resources (mount_path = --memory-mount-root + slug of the name)`,
    );
    await worker.stop();

    const items = (await L.collect(state.client.beta.environments.work.list(state.env))).filter((w) => w.data.id === sid);
    assert.deepEqual(items.map((w) => w.state), ['stopped'], `${kind}: the session's work item`);
    assert.ok(items[0].acknowledged_at && items[0].stopped_at && items[0].latest_heartbeat_at, `${kind}: item timestamps ${JSON.stringify(items[0])}`);
    for (const m of [rwMount, roMount]) assert.ok(!fs.existsSync(m), `${kind}: the worker should have removed ${m}`);
    assert.ok(fs.existsSync(mountRoot), `${kind}: the mount root itself stays`);

    assert.equal(results.length, SCRIPT.length, `${kind}: one result per step`);
    const norm = (t) => t.split(mountRoot).join('<MNT>').split(workdir).join('<WORK>');
    return {
      kind,
      seconds,
      calls: results.map((r, i) => ({ label: SCRIPT[i].label, compare: SCRIPT[i].compare, is_error: r.is_error, text: norm(r.text) })),
      memories: { rw: await memoriesOf(state.client, state.rw), ro: await memoriesOf(state.client, state.ro) },
      versions: { rw: await sessionVersions(state.client, state.rw, sid), ro: await sessionVersions(state.client, state.ro, sid) },
    };
  } catch (err) {
    if (worker) {
      try {
        if (kind === 'py' && worker.result === undefined) await worker.stop().catch(() => {});
      } finally {
        err.message += `\n${worker.report()}\n# --- server log (tail) ---\n${server.logTail()}`;
      }
    }
    throw err;
  } finally {
    if (worker && kind === 'ts' && !worker.ended) await worker.stop().catch(() => {});
    await server.stop();
  }
}

/** The SDK difference in `wrote N bytes` (compare "count"): both sides as their own count. */
const writeCount = (kind) => (kind === 'ts' ? Buffer.byteLength(IDEA, 'utf8') : [...IDEA].length);

function render(run, full = false) {
  const calls = [];
  for (const c of run.calls) {
    if (c.compare === 'count') {
      const expected = `wrote ${writeCount(run.kind)} bytes to <MNT>/diff-notes/ideas/new.md`;
      calls.push(`## ${c.label}: is_error=${c.is_error}`, c.text === expected ? '   wrote <N> bytes to <MNT>/diff-notes/ideas/new.md' : `   ${c.text}`);
    } else if (c.compare === 'glob' && run.kind === 'ts' && !NATIVE_GLOB) {
      const known = c.is_error && c.text.startsWith('glob: fsGlob(...) is not a function');
      calls.push(`## ${c.label}: ${known ? '(not compared: Node < 22 has no fs.glob)' : `is_error=${c.is_error}`}`, ...(known ? [] : [`   ${c.text}`]));
    } else if (c.compare === 'glob' && !NATIVE_GLOB && !full) {
      calls.push(`## ${c.label}: (not compared: Node < 22 has no fs.glob)`);
    } else if (c.compare === 'none' && !full) calls.push(`## ${c.label}: (not compared)`);
    else if (c.compare === 'glob') calls.push(`## ${c.label}: is_error=${c.is_error} (lines sorted)`, ...c.text.split('\n').sort().map((l) => `   ${l}`));
    else if (c.compare === 'lines') calls.push(`## ${c.label}: is_error=${c.is_error} (lines sorted)`, ...c.text.split('\n').sort().map((l) => `   ${l}`));
    else calls.push(`## ${c.label}: is_error=${c.is_error}`, ...c.text.split('\n').map((l) => `   ${l}`));
  }
  const out = { 'tool results': calls };
  for (const role of ['rw', 'ro']) {
    out[`final memories of the ${role} store`] = Object.entries(run.memories[role]).sort().map(([p, c]) => `${p} = ${JSON.stringify(c)}`);
    out[`session versions of the ${role} store (creation order)`] = run.versions[role].map(([op, p]) => `${op} ${p}`);
  }
  return out;
}

const dump = (run) =>
  Object.entries(render(run, true))
    .map(([section, lines]) => `# --- ${run.kind}: ${section} ---\n${lines.map((l) => `#   ${l}`).join('\n')}`)
    .join('\n');

let tsRun = null;

test('worker: the TS SDK EnvironmentWorker serves a scripted session with two memory stores (one read-only)', { timeout: 240_000 }, async () => {
  tsRun = await runSession('ts');
  const r = tsRun;
  try {
    assert.deepEqual(r.memories.rw, RW_FINAL, 'the read_write store after the session');
    assert.deepEqual(r.memories.ro, RO_SEED, 'the read_only store is unchanged');
    assert.deepEqual(r.versions.ro, [], 'no session versions in the read_only store');
    if (r.seconds <= SCRIPT_BUDGET_S) assert.deepEqual(r.versions.rw, RW_SESSION_VERSIONS, 'session versions of the read_write store');
    else assert.deepEqual([...r.versions.rw].sort(), [...RW_SESSION_VERSIONS].sort(), 'session versions (script slower than the sync interval: any order)');
    const byLabel = Object.fromEntries(r.calls.map((c) => [c.label, c]));
    const ok = (label, text) => assert.deepEqual([byLabel[label].is_error, byLabel[label].text], [false, text], label);
    ok('read rw readme', RW_SEED['/notes/readme.md']);
    ok('read ro guide', RO_SEED['/guide.md']);
    ok('write new rw file', `wrote ${writeCount('ts')} bytes to <MNT>/diff-notes/ideas/new.md`);
    if (NATIVE_GLOB) {
      const globbed = byLabel['glob rw journal'];
      assert.deepEqual(
        [globbed.is_error, globbed.text.split('\n').sort()],
        [false, ['01', '02', '03'].map((m) => `<MNT>/diff-notes/journal/2024-${m}.md`)],
        'glob rw journal',
      );
    } else {
      for (const label of ['glob rw journal', 'glob rw **/*.md']) {
        assert.equal(byLabel[label].is_error, true, `${label}: the TS toolset's glob fails on Node < 22`);
        assert.match(byLabel[label].text, /^glob: fsGlob\(\.\.\.\) is not a function/, `${label}: the known Node < 22 failure`);
      }
    }
    ok('edit rw todo', 'edited <MNT>/diff-notes/todo.md (1 replacement(s))');
    ok('read rw readme after edit', RW_FINAL['/notes/readme.md']);
    for (const label of ['write into ro (refused)', 'edit in ro (refused)', 'read removed rw file (error)', 'edit rw, old_string missing (error)', 'edit rw, ambiguous (error)']) {
      assert.equal(byLabel[label].is_error, true, `${label}: is_error`);
    }
    assert.match(byLabel['write into ro (refused)'].text, /read-only/, 'the refused write says read-only');
  } catch (err) {
    err.message += `\n${dump(r)}`;
    throw err;
  }
});

test('worker: the TS and Python SDK workers leave the same traces for the same script', { timeout: 300_000 }, async (t) => {
  if (!pythonCommand()) {
    t.skip('no MNEMO_COMPAT_PYTHON (a python with anthropic==2.10.0; scripts/test sets target/compat-venv)');
    return;
  }
  const ts = tsRun ?? (await runSession('ts'));
  const py = await runSession('py');
  const a = render(py);
  const b = render(ts);
  const problems = Object.keys(a).filter((s) => JSON.stringify(a[s]) !== JSON.stringify(b[s]));
  if (problems.length) {
    const slow = [py, ts].filter((r) => r.seconds > SCRIPT_BUDGET_S).map((r) => `${r.kind} ${r.seconds.toFixed(1)}s`);
    const note = slow.length ? `\n# note: the script took longer than ${SCRIPT_BUDGET_S}s (${slow.join(', ')}); an intermediate sync may explain version-order differences` : '';
    const diffs = problems.map((s) => {
      const only = (x, y) => x.filter((l) => !y.includes(l));
      return `# --- ${s}: only py (-) / only ts (+) ---\n${only(a[s], b[s]).map((l) => `#   - ${l}`).join('\n')}\n${only(b[s], a[s]).map((l) => `#   + ${l}`).join('\n')}`;
    });
    assert.fail(`the Python and TS workers differ in: ${problems.join('; ')}${note}\n${diffs.join('\n')}\n${dump(py)}\n${dump(ts)}`);
  }
});
