"""Shared helpers for the SDK compatibility suite (standard library + `anthropic` only).

Test modules import from here; `run.py` imports the server-configuration table and the
`Fixture` class.  Nothing in this module talks to the server by itself except through the
objects a test hands it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Type

import anthropic

# --------------------------------------------------------------------------------------
# Server configurations.  A test (or a whole module) names the configuration it needs; the
# runner starts at most one server per configuration, lazily.
# --------------------------------------------------------------------------------------

DEFAULT = "default"
CAPACITY5 = "capacity5"
WORKER = "worker"
# Quick webhook retries (first after 0.2 s) and a 50 ms look at the outbox.
WEBHOOKS = "webhooks"
# Tests that start their own `mnemo serve` processes (and need none of the runner's): the runner
# starts no server for them and hands them a `BareFixture` (only `timeout`).
OWN = "own"

# The `worker` configuration mounts sessions' memory stores under a directory the test process
# can also use as the SDK worker's area.  The path is fixed at import (one per runner process);
# the runner never creates it: `test_worker.py` creates `WORKER_MOUNT_ROOT` (but none of the
# per-store folders under it) and removes `WORKER_AREA` when it is done.
WORKER_AREA = Path(tempfile.gettempdir()).resolve() / f"mnemo-compat-worker-{os.getpid()}"
WORKER_MOUNT_ROOT = WORKER_AREA / "mnt" / "memory"

SERVER_CONFIGS: Dict[str, List[str]] = {
    DEFAULT: [],
    CAPACITY5: ["--max-memories-per-store", "5"],
    WORKER: ["--memory-mount-root", str(WORKER_MOUNT_ROOT)],
    # The receiver listens on 127.0.0.1, which only `--webhook-allow-private` lets endpoints use.
    WEBHOOKS: [
        "--webhook-allow-private",
        "--webhook-retry-delay", "0.2", "--webhook-poll-interval", "0.05", "--webhook-timeout", "5",
    ],
    OWN: [],
}


def server(config: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: run this test against the server started with configuration `config`."""
    if config not in SERVER_CONFIGS:
        raise ValueError(f"unknown server configuration {config!r}")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.mnemo_server = config  # type: ignore[attr-defined]
        return fn

    return wrap


# --------------------------------------------------------------------------------------
# The database backend every server of this run uses (`MNEMO_COMPAT_DATABASE`).
#
# sqlite (default): each server gets its own SQLite file in the runner's temp dir.
# postgres: each server gets a fresh schema (`compat_<random>`) of the database at
# `MNEMO_TEST_POSTGRES` (e.g. postgres://mnemo@127.0.0.1:55432/mnemo), selected through the
# URL's `options=-csearch_path=<schema>`; mnemo creates the schema.  The runner drops every
# schema handed out here when it ends (unless MNEMO_COMPAT_KEEP_SCHEMAS=1).
# --------------------------------------------------------------------------------------

SQLITE = "sqlite"
POSTGRES = "postgres"
BACKENDS = (SQLITE, POSTGRES)
BACKEND = (os.environ.get("MNEMO_COMPAT_DATABASE", "").strip().lower() or SQLITE)
POSTGRES_BASE_URL = os.environ.get("MNEMO_TEST_POSTGRES", "").strip()
SCHEMAS_CREATED: List[str] = []


class PsqlError(Exception):
    pass


def psql(url: str, sql: str, timeout: float = 10.0) -> str:
    """Runs `sql` with `psql` (installed with PostgreSQL) against `url`; its output as text.

    The suite's own housekeeping only (is the database up, drop the schemas it handed out):
    tests judge the server by its API, never by its tables.  Errors never repeat the URL.
    """
    binary = shutil.which("psql") or next(
        (str(p) for p in sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"), reverse=True)), None
    )
    if binary is None:
        raise PsqlError("psql is not installed (it comes with PostgreSQL's client package)")
    try:
        done = subprocess.run(
            [binary, "--no-psqlrc", "-v", "ON_ERROR_STOP=1", "-Atq", "-d", url, "-c", sql],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise PsqlError(f"psql took longer than {timeout:.0f} s") from None
    if done.returncode != 0:
        raise PsqlError(done.stderr.strip().replace(url, "<url>") or f"psql exited with {done.returncode}")
    return done.stdout


def with_schema(base_url: str, schema: str) -> str:
    """`base_url` with `options=-csearch_path=<schema>` added to its query."""
    sep = "&" if "?" in base_url else "?"
    return f"{base_url}{sep}options=-csearch_path%3D{schema}"


def new_schema_url(tag: str = "") -> str:
    """A PostgreSQL URL naming a fresh, not yet existing schema (postgres mode only)."""
    if BACKEND != POSTGRES:
        raise RuntimeError("new_schema_url() needs MNEMO_COMPAT_DATABASE=postgres")
    clean = "".join(c for c in tag.lower() if c.isascii() and (c.isalnum() or c == "_"))[:20]
    schema = f"compat_{uuid.uuid4().hex[:12]}" + (f"_{clean}" if clean else "")
    SCHEMAS_CREATED.append(schema)
    return with_schema(POSTGRES_BASE_URL, schema)


def new_database_url(workdir: Path, tag: str = "") -> str:
    """The `--database` URL for one new server: an SQLite file in `workdir`, or a fresh schema."""
    if BACKEND == POSTGRES:
        return new_schema_url(tag)
    return f"sqlite://{workdir / 'mnemo.sqlite'}"


def describe_backend() -> str:
    if BACKEND == POSTGRES:
        return f"postgres ({POSTGRES_BASE_URL}, a fresh schema per server)"
    return "sqlite (a fresh file per server)"


class Skip(Exception):
    """Raised by a test that cannot run in this mode; the runner prints `SKIP name: reason`
    and counts it neither as passed nor as failed."""


def only_backend(backend: str, reason: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the runner skips this test (with `reason`, visibly) unless the suite runs
    against `backend`.  A module may instead set `ONLY_BACKEND = (backend, reason)`."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.mnemo_only_backend = (backend, reason)  # type: ignore[attr-defined]
        return fn

    return wrap


# Clean-ups the runner calls when it ends (after each test, its own servers are stopped by the
# test; this is for module-level resources shared by several tests, e.g. test_replicas' pair).
END_HOOKS: List[Callable[[], Any]] = []


def at_end(fn: Callable[[], Any]) -> None:
    if fn not in END_HOOKS:
        END_HOOKS.append(fn)


# --------------------------------------------------------------------------------------
# Constants from the contract.
# --------------------------------------------------------------------------------------

MEMORY_BETA = "agent-memory-2026-07-22"
AGENTS_BETA = "managed-agents-2026-04-01"
ANTHROPIC_VERSION = "2026-10-21"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
MAX_CONTENT_BYTES = 102_400

RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# --------------------------------------------------------------------------------------
# Assertions.  Plain functions that raise AssertionError with a readable message, so the
# runner's one-line failure report says what was expected and what came back.
# --------------------------------------------------------------------------------------


def check(cond: Any, msg: str) -> None:
    if not cond:
        raise AssertionError(msg)


def eq(actual: Any, expected: Any, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


def ne(actual: Any, unexpected: Any, what: str) -> None:
    if actual == unexpected:
        raise AssertionError(f"{what}: expected something other than {unexpected!r}")


def has_prefix(value: Any, prefix: str, what: str) -> None:
    if not isinstance(value, str) or not value.startswith(prefix):
        raise AssertionError(f"{what}: expected a string starting with {prefix!r}, got {value!r}")


def is_utc(dt: Any, what: str) -> None:
    check(isinstance(dt, datetime), f"{what}: expected a datetime, got {dt!r}")
    check(dt.tzinfo is not None and dt.utcoffset() == timedelta(0), f"{what}: expected UTC, got {dt!r}")


def rfc3339(value: Any, what: str) -> None:
    check(
        isinstance(value, str) and RFC3339_UTC.match(value) is not None,
        f"{what}: expected an RFC 3339 UTC timestamp ending in Z, got {value!r}",
    )


def body_of(err: anthropic.APIStatusError) -> Dict[str, Any]:
    body = err.body
    if not isinstance(body, dict):
        try:
            body = err.response.json()
        except Exception:  # noqa: BLE001
            raise AssertionError(f"error body is not JSON: {err.response.text[:300]!r}") from None
    return body


def check_error_envelope(err: anthropic.APIStatusError, error_type: Optional[str] = None) -> Dict[str, Any]:
    """Checks `{"type":"error","error":{"type","message"},"request_id"}` and the request-id
    header; returns the `error` object."""
    status = err.status_code
    raw = err.response.json()  # must be JSON
    check(isinstance(raw, dict), f"{status} body must be a JSON object, got {raw!r}")
    eq(raw.get("type"), "error", f"{status} body.type")
    inner = raw.get("error")
    check(isinstance(inner, dict), f"{status} body.error must be an object, got {inner!r}")
    check(isinstance(inner.get("type"), str) and inner["type"], f"{status} body.error.type missing: {raw!r}")
    check(isinstance(inner.get("message"), str) and inner["message"], f"{status} body.error.message missing: {raw!r}")
    if error_type is not None:
        eq(inner["type"], error_type, f"{status} body.error.type")
        eq(err.type, error_type, f"{status} SDK exception .type")
    header_id = err.response.headers.get("request-id")
    has_prefix(header_id, "req_", f"{status} request-id header")
    eq(raw.get("request_id"), header_id, f"{status} body.request_id vs request-id header")
    eq(err.request_id, header_id, f"{status} SDK exception .request_id")
    return inner


def expect_error(
    call: Callable[[], Any],
    status: int,
    exc: Type[BaseException] = anthropic.APIStatusError,
    error_type: Optional[str] = None,
    what: str = "call",
) -> anthropic.APIStatusError:
    """Runs `call`, which must fail with an APIStatusError of `status` (and class `exc`)."""
    try:
        result = call()
    except anthropic.APIStatusError as err:
        if err.status_code != status:
            raise AssertionError(
                f"{what}: expected HTTP {status}, got {err.status_code}: {err.response.text[:300]}"
            ) from None
        check(isinstance(err, exc), f"{what}: expected {exc.__name__}, got {type(err).__name__}")
        check_error_envelope(err, error_type)
        return err
    raise AssertionError(f"{what}: expected HTTP {status}, but the call succeeded with {short(result)}")


# The status, SDK exception class and error type that go together in the contract, one
# helper each; every one returns the error for further checks.


def expect_invalid_request(call: Callable[[], Any], what: str) -> anthropic.APIStatusError:
    return expect_error(call, 400, anthropic.BadRequestError, "invalid_request_error", what)


def expect_unauthenticated(call: Callable[[], Any], what: str) -> anthropic.APIStatusError:
    return expect_error(call, 401, anthropic.AuthenticationError, "authentication_error", what)


def expect_not_found(call: Callable[[], Any], what: str) -> anthropic.APIStatusError:
    return expect_error(call, 404, anthropic.NotFoundError, "not_found_error", what)


def expect_path_conflict(call: Callable[[], Any], what: str, blocking: Any = None) -> anthropic.APIStatusError:
    """A 409 `memory_path_conflict_error`; with `blocking` (the memory in the way), the error
    object must name it, and the response must say not to retry."""
    err = expect_error(call, 409, anthropic.ConflictError, "memory_path_conflict_error", what)
    if blocking is not None:
        inner = check_error_envelope(err, "memory_path_conflict_error")
        eq(inner.get("conflicting_memory_id"), blocking.id, f"{what}: error.conflicting_memory_id (on the error object)")
        eq(inner.get("conflicting_path"), blocking.path, f"{what}: error.conflicting_path (on the error object)")
        no_retry_header(err, f"{what}: 409 memory_path_conflict_error")
    return err


def expect_precondition_failed(call: Callable[[], Any], what: str) -> anthropic.APIStatusError:
    return expect_error(call, 409, anthropic.ConflictError, "memory_precondition_failed_error", what)


def expect_too_large(call: Callable[[], Any], what: str) -> anthropic.APIStatusError:
    return expect_error(call, 413, anthropic.APIStatusError, "request_too_large", what)


def short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def no_retry_header(err: anthropic.APIStatusError, what: str) -> None:
    eq(err.response.headers.get("x-should-retry"), "false", f"{what}: x-should-retry header")


# --------------------------------------------------------------------------------------
# Shape checks for the three object kinds.
# --------------------------------------------------------------------------------------


def check_store_shape(store: Any, what: str = "store") -> None:
    eq(store.type, "memory_store", f"{what}.type")
    has_prefix(store.id, "memstore_", f"{what}.id")
    check(isinstance(store.description, str), f"{what}.description must be a string, got {store.description!r}")
    check(isinstance(store.metadata, dict), f"{what}.metadata must be an object, got {store.metadata!r}")
    is_utc(store.created_at, f"{what}.created_at")
    is_utc(store.updated_at, f"{what}.updated_at")
    if store.archived_at is not None:
        is_utc(store.archived_at, f"{what}.archived_at")


def check_memory_shape(mem: Any, content: Optional[str], full: bool, what: str = "memory") -> None:
    """`content` is the expected text (always known by the test); `full` says whether the
    response should include it."""
    eq(mem.type, "memory", f"{what}.type")
    has_prefix(mem.id, "mem_", f"{what}.id")
    check(not mem.id.startswith("memstore_") and not mem.id.startswith("memver_"), f"{what}.id prefix: {mem.id}")
    has_prefix(mem.memory_store_id, "memstore_", f"{what}.memory_store_id")
    has_prefix(mem.memory_version_id, "memver_", f"{what}.memory_version_id")
    is_utc(mem.created_at, f"{what}.created_at")
    is_utc(mem.updated_at, f"{what}.updated_at")
    if content is not None:
        eq(mem.content_sha256, sha256_hex(content), f"{what}.content_sha256")
        eq(mem.content_size_bytes, len(content.encode("utf-8")), f"{what}.content_size_bytes")
        eq(mem.content, content if full else None, f"{what}.content ({'full' if full else 'basic'} view)")


def check_version_shape(ver: Any, what: str = "version") -> None:
    eq(ver.type, "memory_version", f"{what}.type")
    has_prefix(ver.id, "memver_", f"{what}.id")
    has_prefix(ver.memory_id, "mem_", f"{what}.memory_id")
    has_prefix(ver.memory_store_id, "memstore_", f"{what}.memory_store_id")
    check(ver.operation in ("created", "modified", "deleted"), f"{what}.operation: {ver.operation!r}")
    is_utc(ver.created_at, f"{what}.created_at")


def check_api_actor(actor: Any, what: str) -> str:
    check(actor is not None, f"{what}: expected an api_actor, got None")
    eq(actor.type, "api_actor", f"{what}.type")
    has_prefix(actor.api_key_id, "apikey_", f"{what}.api_key_id")
    return actor.api_key_id


# --------------------------------------------------------------------------------------
# Plain HTTP (urllib), for what the SDK cannot express: other credential headers, health.
# --------------------------------------------------------------------------------------

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class HttpResult:
    def __init__(self, status: int, headers: Dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self) -> str:
        return f"HttpResult({self.status}, {self.body[:200]!r})"


def http(
    method: str,
    url: str,
    headers: Optional[Dict[str, str]] = None,
    body: Optional[bytes] = None,
    timeout: float = 30.0,
) -> HttpResult:
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return HttpResult(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read())
    except urllib.error.HTTPError as err:
        return HttpResult(err.code, {k.lower(): v for k, v in err.headers.items()}, err.read())


# --------------------------------------------------------------------------------------
# The fixture every test receives.
# --------------------------------------------------------------------------------------


class BareFixture:
    """What a test on the `own` configuration gets: no server, no client."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.client: Any = None


class Fixture:
    def __init__(self, base_url: str, api_key: str, timeout: float, admin_key: Optional[str] = None) -> None:
        self.base_url = base_url
        self.api_key = api_key
        # The server's admin key: `admin_client` reaches the Admin API with it.
        self.admin_key = admin_key
        self.timeout = timeout
        self.client = self.make_client()
        self.stores_created: List[str] = []

    def make_client(self, api_key: Optional[str] = None, **kwargs: Any) -> anthropic.Anthropic:
        """An SDK client for this server: only base_url and api_key differ from the defaults
        (plus a request timeout, so a hung server fails a test instead of the CI job)."""
        kwargs.setdefault("timeout", self.timeout)
        return anthropic.Anthropic(base_url=self.base_url, api_key=api_key or self.api_key, **kwargs)

    def admin_client(self) -> anthropic.Anthropic:
        """An SDK client holding the server's admin key (the SDK sends it as its `api_key`)."""
        if not self.admin_key:
            raise Skip("this server was started without an admin key")
        return self.make_client(api_key=self.admin_key)

    @property
    def stores(self) -> Any:
        return self.client.beta.memory_stores

    @property
    def memories(self) -> Any:
        return self.client.beta.memory_stores.memories

    @property
    def versions(self) -> Any:
        return self.client.beta.memory_stores.memory_versions

    def new_store(self, name: Optional[str] = None, **kwargs: Any) -> Any:
        store = self.stores.create(name=name or unique("compat"), **kwargs)
        self.stores_created.append(store.id)
        return store

    def new_memory(self, store_id: str, path: str, content: str = "x", **kwargs: Any) -> Any:
        return self.memories.create(store_id, path=path, content=content, **kwargs)

    def list_all_memories(self, store_id: str, **kwargs: Any) -> List[Any]:
        return list(self.memories.list(store_id, **kwargs))

    def list_all_versions(self, store_id: str, **kwargs: Any) -> List[Any]:
        return list(self.versions.list(memory_store_id=store_id, **kwargs))

    def auth_headers(self) -> Dict[str, str]:
        return {
            "Authorization": f"Bearer {self.api_key}",
            "anthropic-version": ANTHROPIC_VERSION,
            "anthropic-beta": MEMORY_BETA,
        }


def pages(first_page: Any) -> List[Any]:
    """All pages of a cursor listing, following the SDK's own iter_pages()."""
    return list(first_page.iter_pages())


def pages_by_hand(fetch: Callable[[Optional[str]], Any], max_pages: int = 10_000) -> List[Any]:
    """All pages, passing each `next_page` back explicitly as `page=`."""
    out = []
    cursor: Optional[str] = None
    while True:
        page = fetch(cursor)
        out.append(page)
        if not page.next_page:
            return out
        check(page.next_page != cursor, f"next_page did not advance (stuck at {cursor!r})")
        cursor = page.next_page
        check(len(out) < max_pages, f"more than {max_pages} pages; pagination does not terminate")


def tick() -> None:
    """Sleeps long enough that the next write gets a strictly later timestamp even if the
    server stores whole seconds."""
    time.sleep(1.1)


# --------------------------------------------------------------------------------------
# The scripted model fake (`compat/fake_model.py`) as a subprocess.
# --------------------------------------------------------------------------------------

FAKE_MODEL = Path(__file__).resolve().parent / "fake_model.py"


class FakeModel:
    """`compat/fake_model.py` on 127.0.0.1:0, stopped when the runner ends (or by `stop()`).
    `script()` appends replies; `requests()` is what it received, in order."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(FAKE_MODEL)], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        check(line.startswith("listening on http://127.0.0.1:"), f"fake_model printed {line!r}")
        self.url = line.split("listening on ", 1)[1].strip()
        at_end(self.stop)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={"content-type": "application/json"})
        with _OPENER.open(req, timeout=10) as r:
            return json.loads(r.read())

    def script(self, replies: List[Any]) -> None:
        self.call("POST", "/_script", replies)

    def requests(self) -> List[Any]:
        return self.call("GET", "/_requests")

    def client(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.url, api_key="fake-key", max_retries=0, timeout=20)

    def models_toml(self, mapping: Dict[str, str]) -> str:
        """A `mnemo serve --models` file: provider `fake` (Anthropic format) and `fake-openai`
        (OpenAI format) on this fake, `mapping` (agent model id -> "provider/model"), and no
        default (every other model is driven from outside)."""
        lines = [
            "[providers.fake]", 'kind = "anthropic"', f'base_url = "{self.url}"', 'api_key = "fake-key"',
            "[providers.fake-openai]", 'kind = "openai"', f'base_url = "{self.url}/v1"',
            "[models]", *(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in mapping.items()),
        ]
        return "\n".join(lines) + "\n"
