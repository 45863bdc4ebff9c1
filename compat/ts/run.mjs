#!/usr/bin/env node
// mnemo <-> official TypeScript SDK (@anthropic-ai/sdk@1.14.0) compatibility suite runner.
//
// Usage:
//   MNEMO_BIN=$PWD/target/debug/mnemo node compat/ts/run.mjs [SUBSTRING ...]
//
// Runs every `compat/ts/*.test.mjs` file (or those whose name contains one of the substrings)
// with Node's built-in test runner, one file at a time (each file starts its own `mnemo serve`
// on 127.0.0.1:0), prints the spec reporter's output, then `# backend: ...` and the summary line
// `N passed, M failed` (skipped tests count as neither). Exit code 0 iff nothing failed.
//
// Environment:
//   MNEMO_BIN                the mnemo binary (required)
//   MNEMO_COMPAT_TS_MODULES  where `npm ci` installed the SDK (default: target/compat-ts)
//   MNEMO_COMPAT_DATABASE    sqlite (default) or postgres (a fresh schema per server of the
//                            database MNEMO_TEST_POSTGRES names; all dropped at the end)
//   MNEMO_COMPAT_PYTHON      a python with anthropic==2.10.0, for the differential worker test
//                            (default: target/compat-venv/bin/python if it exists)
//   MNEMO_COMPAT_TIMEOUT     per-request SDK timeout in seconds (default 60)

import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');

for (const name of Object.keys(process.env)) {
  if (name.startsWith('ANTHROPIC_')) delete process.env[name];
}
process.env.NO_PROXY = process.env.no_proxy = '127.0.0.1,localhost';

const backend = (process.env.MNEMO_COMPAT_DATABASE || '').trim().toLowerCase() || 'sqlite';
const started = Date.now();

function summary(passed, failed, skipped = 0) {
  const desc =
    backend === 'postgres'
      ? `postgres (${process.env.MNEMO_TEST_POSTGRES}, a fresh schema per server)`
      : 'sqlite (a fresh file per server)';
  console.log(`# ${passed + failed + skipped} test(s) in ${((Date.now() - started) / 1000).toFixed(1)}s` +
    (skipped ? `; ${skipped} skipped (marked ﹣ above, with the reason)` : ''));
  console.log(`# backend: ${desc}`);
  console.log(`${passed} passed, ${failed} failed`);
}

function fail(message) {
  console.log(`error: ${message}`);
  summary(0, 1);
  process.exit(2);
}

if (!(process.env.MNEMO_BIN || '').trim()) fail('set MNEMO_BIN to the mnemo binary, e.g. MNEMO_BIN=$PWD/target/debug/mnemo');
process.env.MNEMO_BIN = path.resolve(process.env.MNEMO_BIN.trim());
if (!['sqlite', 'postgres'].includes(backend)) fail(`MNEMO_COMPAT_DATABASE=${backend}: expected sqlite or postgres`);
if (!process.env.MNEMO_COMPAT_PYTHON) {
  const venv = path.join(REPO, 'target', 'compat-venv', 'bin', 'python');
  if (fs.existsSync(venv)) process.env.MNEMO_COMPAT_PYTHON = venv;
}

// Loads the SDK (and fails clearly if it is missing or another version).
let lib;
try {
  lib = await import('./lib.mjs');
} catch (err) {
  fail(err.message);
}

let prefix = null;
if (backend === 'postgres') {
  if (!lib.POSTGRES_URL) fail('MNEMO_COMPAT_DATABASE=postgres needs MNEMO_TEST_POSTGRES');
  try {
    lib.psql(lib.POSTGRES_URL, 'SELECT 1');
  } catch (err) {
    fail(`cannot reach MNEMO_TEST_POSTGRES: ${err.message}`);
  }
  prefix = `compat_ts_${randomBytes(5).toString('hex')}`;
  process.env.MNEMO_COMPAT_TS_SCHEMA_PREFIX = prefix;
}

function dropSchemas() {
  if (prefix === null) return;
  try {
    const names = lib
      .psql(lib.POSTGRES_URL, `SELECT nspname FROM pg_namespace WHERE nspname LIKE '${prefix}\\_%'`)
      .split('\n')
      .filter(Boolean);
    if (names.length === 0) return;
    if (process.env.MNEMO_COMPAT_KEEP_SCHEMAS === '1') {
      console.log(`# kept ${names.length} schema(s): ${names.join(', ')}`);
      return;
    }
    lib.psql(lib.POSTGRES_URL, names.map((n) => `DROP SCHEMA IF EXISTS "${n}" CASCADE`).join('; '));
  } catch (err) {
    console.log(`# could not drop the suite's schemas (${prefix}_*): ${err.message}`);
  }
}

const filters = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const files = fs
  .readdirSync(HERE)
  .filter((f) => f.endsWith('.test.mjs'))
  .sort()
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .map((f) => path.join(HERE, f));
if (files.length === 0) {
  console.log(`no test files match ${JSON.stringify(filters)}`);
  summary(0, 0);
  process.exit(0);
}
console.log(`# @anthropic-ai/sdk@${lib.SDK_VERSION} from ${lib.MODULES}; mnemo ${process.env.MNEMO_BIN}`);

let passed = 0;
let failed = 0;
let skipped = 0;
const stream = run({ files, concurrency: 1, timeout: 15 * 60_000 });
// Top-level tests only (nesting 0); a file that fails outside any test counts as one failure.
stream.on('test:pass', (data) => {
  if (data.nesting !== 0) return;
  if (data.skip || data.todo) skipped += 1;
  else passed += 1;
});
stream.on('test:fail', (data) => {
  if (data.nesting === 0 && !data.todo) failed += 1;
});
let interrupted = false;
const onSignal = () => {
  interrupted = true;
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

await new Promise((resolve, reject) => {
  const out = stream.compose(new spec());
  out.on('data', (chunk) => process.stdout.write(chunk));
  out.on('end', resolve);
  out.on('error', reject);
});
dropSchemas();
if (interrupted) console.log('# interrupted');
summary(passed, failed, skipped);
process.exitCode = failed === 0 && !interrupted ? 0 : 1;
