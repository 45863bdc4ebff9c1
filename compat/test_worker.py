"""The SDK's self-hosted `EnvironmentWorker` serving mnemo sessions with memory stores.

Against a server started with `--memory-mount-root <WORKER_AREA>/mnt/memory` (configuration
`worker`; `WORKER_AREA` is a per-runner temp dir the test creates and removes), each test plays
every part except the worker:

* the operator (API key): memory stores with memories, an agent, a self-hosted environment, an
  environment key (mnemo's `POST /v1/environments/{id}/keys`), and a session with the stores
  attached;
* the agent (mnemo's external agent driver, API key): `agent.tool_use` events, then
  `session.status_idle` to end the turn;
* the worker is the real `anthropic==2.10.0` one, in a thread with its own event loop, with
  `max_idle=2` and its workdir inside `WORKER_AREA`; it is given an API key the server does not
  know, so any request that used it instead of the environment key / sessions token would fail.

`test_worker_serves_session_with_memory_stores`: one store `read_write`, one `read_only`; the
SDK poller (`drain=True, auto_stop=False`) claims the work item and `EnvironmentWorker.handle_item`
serves it with the item's secret, so an exception from the per-item flow reaches the test.
Calls: `read` (posted before the worker starts, while ending the turn must be refused), `read`
of the read-only store, `write` of a new memory, `edit` of an existing one, a `write` the
read-only store must refuse, and `bash ls -R` of both mounts.  Checks: each result, the worker
returned without an exception or an ERROR log record, the work item is `stopped`, the mount
folders are gone, the store holds the new and edited memories whose latest versions have
`created_by` `{"type": "session_actor", "session_id": …}` (also listed with `session_id=`),
the read-only store is untouched, and the history holds one result per call.

`test_worker_run_loop_serves_a_session`: `EnvironmentWorker.run()` starts on an empty queue
(its poll must come back as JSON `null`), claims the session's item once it is created, serves a
`write` and a `bash` call, tears down after the turn (item `stopped`, folder gone, memory
written by the session), polls again, and ends only when cancelled.

On failure a test prints the worker's exception, its log records (WARNING and above) and every
HTTP exchange the worker made (method, URL, request body, status; bodies of error responses),
so a server deviation can be read off the output.  `MNEMO_COMPAT_WORKER_TRACE=1` prints the same
(INFO and above) on success.
"""


from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import shutil
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import anthropic

from compat_lib import (
    AGENTS_BETA,
    ANTHROPIC_VERSION,
    WORKER,
    WORKER_AREA,
    WORKER_MOUNT_ROOT,
    check,
    eq,
    has_prefix,
    http,
    sha256_hex,
    short,
)

SERVER = WORKER

MAX_IDLE = 2.0  # seconds the worker's runner stays after the turn ends
TOOL_RESULT_WAIT = 60.0  # seconds to wait for the worker to answer one tool call
WORKER_EXIT_WAIT = 120.0  # seconds to wait for the worker to tear down after the turn ended
MARKER = ".anthropic-memory-store"
WORKER_THREAD = "compat-sdk-worker"

README = "# Read me\nhello from the memory store\n"
TODO = "- buy milk\n- call bob\n- water the plants\n"
TODO_EDITED = TODO.replace("call bob", "call alice")
GUIDE = "The guide is read-only.\n"
SEED = "seeded before the session\n"
RUN_NOTE = "written while run() served the session\n"
IDEA = "a fresh idea \u2713 written by the session\n"  # a non-ASCII character: `wrote N bytes` counts code points


# --------------------------------------------------------------------------------------
# Diagnostics: the worker's HTTP exchanges and log records.
# --------------------------------------------------------------------------------------


class Diagnostics(logging.Handler):
    """Collects the worker's HTTP exchanges (httpx event hooks) and the SDK's log records."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self._mu = threading.Lock()
        self.exchanges: List[str] = []
        self.records: List[logging.LogRecord] = []
        self.started = time.monotonic()

    def _stamp(self) -> str:
        return f"{time.monotonic() - self.started:7.2f}s"

    # logging.Handler
    def emit(self, record: logging.LogRecord) -> None:
        with self._mu:
            self.records.append(record)

    # httpx event hooks (async client)
    async def on_request(self, request: Any) -> None:
        body = ""
        if request.method != "GET":
            try:
                raw = request.content
            except Exception:  # noqa: BLE001 — a streaming body has no content yet
                raw = b""
            if raw:
                body = " " + raw[:400].decode("utf-8", "replace")
        helper = request.headers.get("x-stainless-helper", "")
        with self._mu:
            self.exchanges.append(f"{self._stamp()} -> {request.method} {request.url}{body} [{helper}]")

    async def on_response(self, response: Any) -> None:
        request = response.request
        detail = ""
        if response.status_code >= 300:
            try:
                await response.aread()
                detail = " " + response.text[:600]
            except Exception as err:  # noqa: BLE001
                detail = f" (body unreadable: {err!r})"
        elif "text/event-stream" in response.headers.get("content-type", ""):
            detail = " (event stream opened)"
        with self._mu:
            self.exchanges.append(
                f"{self._stamp()} <- {response.status_code} {request.method} {request.url.path}{detail}"
            )

    def count(self, needle: str) -> int:
        """How many recorded exchange lines contain `needle`."""
        with self._mu:
            return sum(needle in line for line in self.exchanges)

    def worker_records(self, level: int) -> List[logging.LogRecord]:
        """The SDK's records from the worker's thread (not the test's own SDK client)."""
        with self._mu:
            return [r for r in self.records if r.levelno >= level and r.threadName == WORKER_THREAD]

    def dump(self, level: int = logging.WARNING) -> None:
        print(f"# --- worker log records ({logging.getLevelName(level)} and above) ---", flush=True)
        for r in self.worker_records(level):
            print(f"#   {r.levelname} {r.name}: {r.getMessage()}", flush=True)
            if r.exc_info and r.exc_info[1] is not None:
                for line in "".join(traceback.format_exception(*r.exc_info)).splitlines()[-8:]:
                    print(f"#     {line}", flush=True)
        print("# --- the worker's HTTP exchanges ---", flush=True)
        with self._mu:
            lines = list(self.exchanges)
        for line in lines[-150:]:
            print(f"#   {line}", flush=True)


# --------------------------------------------------------------------------------------
# The worker, in its own thread and event loop.
# --------------------------------------------------------------------------------------


class WorkerThread(threading.Thread):
    """Runs the SDK worker in its own event loop.

    mode "item": the SDK poller (`drain=True, auto_stop=False`) claims one work item, then
    `EnvironmentWorker.handle_item` serves it with the item's secret; `returned` says it
    returned normally.  mode "run": `EnvironmentWorker.run()` polls and serves until `cancel()`;
    `cancelled` says the loop ended through that cancellation.  Any other exception is kept in
    `error` / `error_text`.
    """

    def __init__(
        self,
        mode: str,
        base_url: str,
        timeout: float,
        environment_id: str,
        environment_key: str,
        workdir: Path,
        diag: Diagnostics,
    ) -> None:
        super().__init__(name=WORKER_THREAD, daemon=True)
        self.mode = mode
        self.base_url = base_url
        self.timeout = timeout
        self.environment_id = environment_id
        self.environment_key = environment_key
        self.workdir = workdir
        self.diag = diag
        self.item: Any = None
        self.claimed = threading.Event()
        self.error: Optional[BaseException] = None
        self.error_text = ""
        self.returned = False
        self.cancelled = False
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._task: Optional["asyncio.Task[None]"] = None

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as err:  # noqa: BLE001 — reported to the test
            self.error = err
            self.error_text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        finally:
            self.claimed.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        http_client = anthropic.DefaultAsyncHttpxClient(
            event_hooks={"request": [self.diag.on_request], "response": [self.diag.on_response]}
        )
        # The worker must never use an API key: give it one the server does not know, so a
        # request that leaked it would fail with 401.
        client = anthropic.AsyncAnthropic(
            base_url=self.base_url, api_key="sk-not-for-the-worker", timeout=self.timeout, http_client=http_client
        )
        async with client:
            if self.mode == "run":
                worker = client.beta.environments.work.worker(
                    environment_id=self.environment_id,
                    environment_key=self.environment_key,
                    workdir=str(self.workdir),
                    max_idle=MAX_IDLE,
                )
                try:
                    await worker.run()
                except asyncio.CancelledError:
                    self.cancelled = True
                return
            poller = client.beta.environments.work.poller(
                environment_id=self.environment_id,
                environment_key=self.environment_key,
                drain=True,
                auto_stop=False,
            )
            async for item in poller:
                self.item = item
                break
            await poller.aclose()  # type: ignore[attr-defined]
            self.claimed.set()
            if self.item is None:
                return
            worker = client.beta.environments.work.worker(
                environment_key=self.environment_key,
                workdir=str(self.workdir),
                max_idle=MAX_IDLE,
            )
            await worker.handle_item(
                work_id=self.item.id,
                environment_id=self.item.environment_id,
                session_id=self.item.data.id,
                work_secret=self.item.secret,
            )
            self.returned = True

    def cancel(self) -> None:
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass


# --------------------------------------------------------------------------------------
# The external agent driver (API key, plain HTTP: these are mnemo's agent-side events).
# --------------------------------------------------------------------------------------


class Driver:
    def __init__(self, fx: Any, session_id: str, worker: Optional[WorkerThread] = None) -> None:
        self.fx = fx
        self.session_id = session_id
        self.worker = worker

    def _headers(self) -> Dict[str, str]:
        return {
            "Authorization": f"Bearer {self.fx.api_key}",
            "anthropic-version": ANTHROPIC_VERSION,
            "anthropic-beta": AGENTS_BETA,
            "content-type": "application/json",
        }

    def post_events(self, events: List[Dict[str, Any]]) -> Tuple[int, Any]:
        url = f"{self.fx.base_url}/v1/sessions/{self.session_id}/events"
        res = http("POST", url, self._headers(), json.dumps({"events": events}).encode("utf-8"))
        try:
            body = res.json()
        except ValueError:
            body = res.body[:300]
        return res.status, body

    def tool_use(self, name: str, tool_input: Dict[str, Any]) -> str:
        status, body = self.post_events([{"type": "agent.tool_use", "name": name, "input": tool_input}])
        check(
            status == 200,
            f"agent.tool_use {name}: POST /v1/sessions/{{id}}/events answered {status}: {short(body, 400)}",
        )
        data = body.get("data") if isinstance(body, dict) else None
        check(
            isinstance(data, list) and len(data) == 1,
            f"agent.tool_use {name}: response data must hold the one event, got {short(body, 400)}",
        )
        event = data[0]
        eq(event.get("type"), "agent.tool_use", f"agent.tool_use {name}: recorded event type")
        has_prefix(event.get("id"), "sevt_", f"agent.tool_use {name}: recorded event id")
        return event["id"]

    def events(self) -> List[Any]:
        return list(self.fx.client.beta.sessions.events.list(self.session_id, limit=1000))

    def wait_result(self, tool_use_id: str, what: str) -> Tuple[bool, str]:
        """Waits for the worker's `user.tool_result`; returns (is_error, text of its content)."""
        deadline = time.monotonic() + TOOL_RESULT_WAIT
        while True:
            for ev in self.events():
                if getattr(ev, "type", None) == "user.tool_result" and getattr(ev, "tool_use_id", None) == tool_use_id:
                    blocks = getattr(ev, "content", None) or []
                    texts = []
                    for b in blocks:
                        check(getattr(b, "type", None) == "text", f"{what}: expected text blocks, got {short(b)}")
                        texts.append(b.text)
                    return bool(getattr(ev, "is_error", False)), "".join(texts)
            w = self.worker
            if w is not None and not w.is_alive():
                raise AssertionError(
                    f"{what}: the worker ended before posting the result of {tool_use_id} "
                    f"(returned={w.returned}, error={w.error!r})"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: no user.tool_result for {tool_use_id} within {TOOL_RESULT_WAIT:.0f}s")
            time.sleep(0.2)

    def call(self, name: str, tool_input: Dict[str, Any]) -> Tuple[str, bool, str]:
        tool_use_id = self.tool_use(name, tool_input)
        is_error, text = self.wait_result(tool_use_id, f"{name} {short(tool_input, 120)}")
        return tool_use_id, is_error, text


def api_post(fx: Any, path: str, body: Dict[str, Any]) -> Tuple[int, Any]:
    headers = {
        "Authorization": f"Bearer {fx.api_key}",
        "anthropic-version": ANTHROPIC_VERSION,
        "anthropic-beta": AGENTS_BETA,
        "content-type": "application/json",
    }
    res = http("POST", f"{fx.base_url}{path}", headers, json.dumps(body).encode("utf-8"))
    try:
        return res.status, res.json()
    except ValueError:
        return res.status, res.body[:300]


def decoded_secret(secret: Optional[str]) -> Dict[str, Any]:
    check(isinstance(secret, str) and secret, f"the polled work item must carry a secret, got {secret!r}")
    assert secret is not None
    try:
        payload = json.loads(base64.urlsafe_b64decode(secret + "=" * (-len(secret) % 4)))
    except ValueError as err:
        raise AssertionError(f"the work item's secret is not URL-safe base64 of JSON: {err}") from None
    check(isinstance(payload, dict), "the work item's secret must decode to a JSON object")
    return payload


# --------------------------------------------------------------------------------------
# The test.
# --------------------------------------------------------------------------------------


def with_worker_area(fx: Any, scenario: Any) -> None:
    """Runs `scenario(fx, workdir, diag, holder)` with a fresh worker area (the server's mount
    root exists, no store folder under it), the SDK's log captured, and — on failure — the
    worker's exception, log and HTTP exchanges printed.  Always stops the worker and removes
    the area."""
    diag = Diagnostics()
    sdk_log = logging.getLogger("anthropic")
    old_level = sdk_log.level
    sdk_log.addHandler(diag)
    sdk_log.setLevel(logging.DEBUG)
    shutil.rmtree(WORKER_AREA, ignore_errors=True)
    WORKER_MOUNT_ROOT.mkdir(parents=True)
    workdir = WORKER_AREA / "workdir"
    workdir.mkdir()
    holder: Dict[str, WorkerThread] = {}
    try:
        scenario(fx, workdir, diag, holder)
        if os.environ.get("MNEMO_COMPAT_WORKER_TRACE"):
            diag.dump(logging.INFO)
    except BaseException:
        w = holder.get("worker")
        if w is not None and w.error_text:
            print("# --- the worker's exception ---", flush=True)
            for line in w.error_text.splitlines()[-30:]:
                print(f"#   {line}", flush=True)
        diag.dump()
        raise
    finally:
        w = holder.get("worker")
        if w is not None and w.is_alive():
            w.cancel()
            w.join(45)
        sdk_log.removeHandler(diag)
        sdk_log.setLevel(old_level)
        shutil.rmtree(WORKER_AREA, ignore_errors=True)


class Setup:
    """The operator's objects: an agent with the built-in toolset, a self-hosted environment and
    an environment key minted through mnemo's `POST /v1/environments/{id}/keys`."""

    def __init__(self, fx: Any, tag: str) -> None:
        client = fx.client
        self.agent = client.beta.agents.create(
            name=f"compat-worker-agent-{tag}",
            model="claude-opus-4-6",
            tools=[{"type": "agent_toolset_20260401"}],
        )
        self.env = client.beta.environments.create(name=f"compat-worker-env-{tag}", config={"type": "self_hosted"})
        eq(self.env.config.type, "self_hosted", "environment config.type")
        status, key = api_post(fx, f"/v1/environments/{self.env.id}/keys", {})
        check(status == 200, f"POST /v1/environments/{{id}}/keys answered {status}: {short(key, 400)}")
        eq(key.get("type"), "environment_key", "environment key object type")
        has_prefix(key.get("key"), "sk-mnemo-env-", "environment key secret")
        self.key: str = key["key"]

    def session(self, fx: Any, stores: List[Tuple[Any, str]]) -> Tuple[Any, List[str]]:
        """A session with these (store, access) attached; returns it and the mount paths, which
        must be `--memory-mount-root` + the slug of each store's name, and must not exist yet."""
        session = fx.client.beta.sessions.create(
            agent=self.agent.id,
            environment_id=self.env.id,
            resources=[
                {"type": "memory_store", "memory_store_id": store.id, "access": access} for store, access in stores
            ],
        )
        has_prefix(session.id, "sesn_", "session id")
        res = [r for r in session.resources if r.type == "memory_store"]
        eq([r.memory_store_id for r in res], [st.id for st, _ in stores], "session memory_store resources, in order")
        eq([r.access for r in res], [a for _, a in stores], "resources' access")
        eq([r.name for r in res], [st.name for st, _ in stores], "resources' name snapshot")
        mounts = [f"{WORKER_MOUNT_ROOT}/{slug(st.name)}" for st, _ in stores]
        eq([r.mount_path for r in res], mounts, "resources' mount_path (--memory-mount-root + slug of the name)")
        for path in mounts:
            check(not Path(path).exists(), f"{path} must not exist before the worker mounts it")
        return session, mounts


def slug(name: str) -> str:
    return "-".join("".join(c.lower() if c.isascii() and c.isalnum() else " " for c in name).split())


def dump_failed_worker(kind: str, worker: Any, diag: Diagnostics, server: Any, server_name: str) -> None:
    """What a failed worker scenario prints: the SDK worker's exception and the SDK's log lines,
    or the tail of the mnemo worker's log (stopping it first); then the server's log."""
    if kind == "sdk":
        if worker is not None and worker.error_text:
            print("# --- the SDK worker's exception ---", flush=True)
            for line in worker.error_text.splitlines()[-30:]:
                print(f"#   {line}", flush=True)
        diag.dump()
    elif worker is not None:
        worker.stop(10)
        print("# --- mnemo worker log (tail) ---", flush=True)
        print(worker.log_tail(), flush=True)
    print(f"# --- {server_name} log (tail) ---", flush=True)
    print(server.stderr_tail(), flush=True)


def check_worker_clean(worker: WorkerThread, diag: Diagnostics) -> None:
    check(worker.error is None, f"the worker raised: {worker.error!r}")
    errors = diag.worker_records(logging.ERROR)
    check(not errors, f"the worker logged errors: {[r.getMessage() for r in errors]}")


def check_session_actor_versions(fx: Any, store_id: str, session_id: str, expected: Dict[str, Tuple[Any, str]]) -> None:
    """`expected`: path -> (memory, operation of its latest version).  Every version the
    `session_id` filter lists is the session's (`created_by` session_actor), the filter lists
    exactly the memories in `expected`, and each one's latest version is the session's."""
    actor = {"type": "session_actor", "session_id": session_id}
    by_session = fx.list_all_versions(store_id, session_id=session_id)
    by_memory: Dict[str, List[Any]] = {}
    for v in by_session:
        by_memory.setdefault(v.memory_id, []).append(v)
        check(v.created_by is not None, f"version {v.id} has no created_by")
        eq(v.created_by.to_dict(), actor, f"created_by of version {v.id} (listed with session_id=)")
    eq(sorted(by_memory), sorted(m.id for m, _ in expected.values()), "memories with versions written by the session")
    for path, (mem, operation) in expected.items():
        latest = fx.versions.retrieve(mem.memory_version_id, memory_store_id=store_id)
        eq(latest.operation, operation, f"latest version of {path}: operation")
        check(latest.created_by is not None, f"latest version of {path} has no created_by")
        eq(latest.created_by.to_dict(), actor, f"latest version of {path}: created_by")
        check(
            any(v.id == mem.memory_version_id for v in by_memory.get(mem.id, [])),
            f"the session_id-filtered listing must include {path}'s latest version {mem.memory_version_id}",
        )


def test_worker_serves_session_with_memory_stores(fx):
    """handle_item: read, write, edit, a refused write into the read-only store, bash ls."""
    with_worker_area(fx, _handle_item_scenario)


def _handle_item_scenario(fx: Any, workdir: Path, diag: Diagnostics, holder: Dict[str, WorkerThread]) -> None:
    client = fx.client
    tag = uuid.uuid4().hex[:8]

    # -- the operator: stores, agent, environment, key, session --------------------------
    rw = fx.new_store(name=f"Worker Notes {tag}", description="notes the session may change")
    ro = fx.new_store(name=f"Worker Reference {tag}")
    fx.new_memory(rw.id, "/notes/readme.md", README)
    todo = fx.new_memory(rw.id, "/todo.md", TODO)
    fx.new_memory(ro.id, "/guide.md", GUIDE)
    setup = Setup(fx, tag)
    env = setup.env
    session, (rw_mount, ro_mount) = setup.session(fx, [(rw, "read_write"), (ro, "read_only")])

    # -- the agent's first call, before any worker runs ----------------------------------
    driver = Driver(fx, session.id)
    read_id = driver.tool_use("read", {"file_path": f"{rw_mount}/notes/readme.md"})
    status, body = driver.post_events([{"type": "session.status_idle"}])
    eq(status, 400, f"ending the turn while {read_id} waits for its result must be refused; body {short(body, 300)}")
    idles = [
        e
        for e in driver.events()
        if e.type == "session.status_idle" and getattr(e.stop_reason, "type", None) == "requires_action"
    ]
    check(
        any(read_id in (getattr(e.stop_reason, "event_ids", None) or []) for e in idles),
        f"the history must hold a session.status_idle requires_action naming {read_id}; idles: {short(idles, 400)}",
    )

    # -- the worker -------------------------------------------------------------------
    worker = WorkerThread("item", fx.base_url, fx.timeout, env.id, setup.key, workdir, diag)
    holder["worker"] = worker
    driver.worker = worker
    worker.start()
    check(worker.claimed.wait(TOOL_RESULT_WAIT), f"the SDK poller claimed nothing within {TOOL_RESULT_WAIT:.0f}s")
    check(
        worker.item is not None,
        f"the SDK poller found no work item for the new session (worker error: {worker.error!r})",
    )
    item = worker.item
    has_prefix(item.id, "work_", "work item id")
    eq(item.environment_id, env.id, "work item environment_id")
    eq((item.data.type, item.data.id), ("session", session.id), "work item data")
    token = decoded_secret(item.secret).get("sessions_token")
    check(isinstance(token, str) and token, "the work item's secret must carry a sessions_token")

    # -- the tool calls ---------------------------------------------------------------
    is_error, text = driver.wait_result(read_id, "read (posted before the worker started)")
    eq((is_error, text), (False, README), "read result of /notes/readme.md")
    # The store is mounted exactly at mount_path, stamped with the worker's marker.
    marker = Path(rw_mount) / MARKER
    check(marker.is_file(), f"the worker should have mounted the store at {rw_mount} (no {MARKER} there)")
    eq(marker.read_text(), f"version 1\n{rw.id}", "marker file content")

    _, is_error, text = driver.call("read", {"file_path": f"{ro_mount}/guide.md"})
    eq((is_error, text), (False, GUIDE), "read result of the read-only store's /guide.md")

    new_path = f"{rw_mount}/ideas/new.md"
    _, is_error, text = driver.call("write", {"file_path": new_path, "content": IDEA})
    eq((is_error, text), (False, f"wrote {len(IDEA)} bytes to {new_path}"), "write result")

    todo_path = f"{rw_mount}/todo.md"
    edit = {"file_path": todo_path, "old_string": "call bob", "new_string": "call alice"}
    _, is_error, text = driver.call("edit", edit)
    eq((is_error, text), (False, f"edited {todo_path} (1 replacement(s))"), "edit result")

    denied_path = f"{ro_mount}/denied.md"
    _, is_error, text = driver.call("write", {"file_path": denied_path, "content": "must not land"})
    check(
        is_error and "read-only" in text,
        f"write into the read_only store must fail as read-only, got is_error={is_error} {text!r}",
    )

    _, is_error, text = driver.call("bash", {"command": f"ls -R {rw_mount} {ro_mount}"})
    check(not is_error, f"bash ls failed: {text!r}")
    for name in ("notes", "readme.md", "todo.md", "ideas", "new.md", "guide.md"):
        check(name in text.split(), f"bash ls listing should name {name!r}, got {text!r}")
    check("denied.md" not in text, f"the refused write must not have created denied.md: {text!r}")

    # -- end the turn; the worker stops after max_idle and tears down -------------------
    status, body = driver.post_events([{"type": "session.status_idle"}])
    check(status == 200, f"ending the turn: POST events session.status_idle answered {status}: {short(body, 400)}")
    worker.join(WORKER_EXIT_WAIT)
    if worker.is_alive():
        raise AssertionError(
            f"the worker did not exit within {WORKER_EXIT_WAIT:.0f}s after the turn ended (max_idle={MAX_IDLE}s)"
        )
    check_worker_clean(worker, diag)
    check(worker.returned, "handle_item did not return normally")

    # -- the work item ------------------------------------------------------------------
    work = client.beta.environments.work.retrieve(item.id, environment_id=env.id)
    eq(work.state, "stopped", "work item state after the worker's force-stop")
    check(work.stopped_at is not None, f"work item stopped_at must be set, got {work.stopped_at!r}")
    check(work.acknowledged_at is not None, "work item acknowledged_at must be set")
    check(work.latest_heartbeat_at is not None, "work item latest_heartbeat_at must be set (the worker heartbeats)")
    eq(work.secret, None, "work item secret outside the poll response")

    # -- the mount folders are gone -------------------------------------------------------
    for path in (rw_mount, ro_mount):
        check(not Path(path).exists(), f"the worker should have removed {path} at teardown")
    check(WORKER_MOUNT_ROOT.is_dir(), "the mount root itself stays")

    # -- the stores ---------------------------------------------------------------------
    mems = {m.path: m for m in fx.list_all_memories(rw.id, view="full")}
    eq(sorted(mems), ["/ideas/new.md", "/notes/readme.md", "/todo.md"], "paths in the read_write store")
    eq(mems["/ideas/new.md"].content, IDEA, "the written memory's content")
    eq(mems["/todo.md"].content, TODO_EDITED, "the edited memory's content")
    eq(mems["/todo.md"].id, todo.id, "the edit updated the existing memory, not a new one")
    eq(mems["/notes/readme.md"].content, README, "the memory that was only read")
    eq(mems["/ideas/new.md"].content_sha256, sha256_hex(IDEA), "written memory content_sha256")

    check_session_actor_versions(
        fx,
        rw.id,
        session.id,
        {"/ideas/new.md": (mems["/ideas/new.md"], "created"), "/todo.md": (mems["/todo.md"], "modified")},
    )

    ro_mems = {m.path: m.content for m in fx.list_all_memories(ro.id, view="full")}
    eq(ro_mems, {"/guide.md": GUIDE}, "the read_only store is unchanged")
    eq(fx.list_all_versions(ro.id, session_id=session.id), [], "no versions by the session in the read_only store")

    # -- the session's history ------------------------------------------------------------
    history = driver.events()
    results: Dict[str, int] = {}
    for e in history:
        if e.type == "user.tool_result":
            results[e.tool_use_id] = results.get(e.tool_use_id, 0) + 1
    calls = [e.id for e in history if e.type == "agent.tool_use"]
    eq(len(calls), 6, "agent.tool_use events in the history")
    eq({c: results.get(c, 0) for c in calls}, {c: 1 for c in calls}, "exactly one user.tool_result per call")
    last = history[-1]
    eq(
        (last.type, getattr(getattr(last, "stop_reason", None), "type", None)),
        ("session.status_idle", "end_turn"),
        "the history's last event",
    )
    eq(client.beta.sessions.retrieve(session.id).status, "idle", "session status after the worker left")


def test_worker_run_loop_serves_a_session(fx):
    """run(): the loop polls an empty queue (JSON `null`), claims the session's item once it is
    queued, serves a write and a bash call, tears down after the turn, polls again, and ends
    only through cancellation."""
    with_worker_area(fx, _run_loop_scenario)


def _run_loop_scenario(fx: Any, workdir: Path, diag: Diagnostics, holder: Dict[str, WorkerThread]) -> None:
    client = fx.client
    tag = uuid.uuid4().hex[:8]
    store = fx.new_store(name=f"Run Loop {tag}")
    fx.new_memory(store.id, "/seed.md", SEED)
    setup = Setup(fx, tag)
    env = setup.env
    poll_answered = f"<- 200 GET /v1/environments/{env.id}/work/poll"

    # The loop starts on an empty queue: its first poll must come back (as JSON null).
    worker = WorkerThread("run", fx.base_url, fx.timeout, env.id, setup.key, workdir, diag)
    holder["worker"] = worker
    worker.start()
    wait_for(lambda: diag.count(poll_answered) >= 1, 30.0, "an answered poll on the empty queue", worker)

    session, (mount,) = setup.session(fx, [(store, "read_write")])
    driver = Driver(fx, session.id, worker)
    note_path = f"{mount}/from-run.md"
    _, is_error, text = driver.call("write", {"file_path": note_path, "content": RUN_NOTE})
    eq((is_error, text), (False, f"wrote {len(RUN_NOTE)} bytes to {note_path}"), "write result")
    _, is_error, text = driver.call("bash", {"command": f"cat {mount}/seed.md && ls {mount}"})
    check(not is_error, f"bash failed: {text!r}")
    check(
        SEED.strip() in text and "from-run.md" in text.split(),
        f"bash output should show seed.md's text and from-run.md: {text!r}",
    )
    status, body = driver.post_events([{"type": "session.status_idle"}])
    check(status == 200, f"ending the turn: POST events session.status_idle answered {status}: {short(body, 400)}")

    # The environment key lists the queue's one item.
    env_client = fx.make_client(api_key=setup.key)
    try:
        items = list(env_client.beta.environments.work.list(environment_id=env.id))
    finally:
        env_client.close()
    eq(
        [(w.data.type, w.data.id) for w in items],
        [("session", session.id)],
        "work items listed with the environment key",
    )
    item = items[0]

    def stopped() -> bool:
        return client.beta.environments.work.retrieve(item.id, environment_id=env.id).state == "stopped"

    wait_for(stopped, WORKER_EXIT_WAIT, f"work item {item.id} to reach `stopped`", worker)
    check(not Path(mount).exists(), f"the worker should have removed {mount} at teardown")
    polls_after_stop = diag.count(poll_answered)
    wait_for(
        lambda: diag.count(poll_answered) > polls_after_stop, 30.0, "the loop to poll again after the item", worker
    )

    worker.cancel()
    worker.join(45)
    check(not worker.is_alive(), "run() did not end within 45s of being cancelled")
    check_worker_clean(worker, diag)
    check(worker.cancelled, "run() should have ended through the cancellation")

    mems = {m.path: m for m in fx.list_all_memories(store.id, view="full")}
    eq(sorted(mems), ["/from-run.md", "/seed.md"], "paths in the store")
    eq(mems["/from-run.md"].content, RUN_NOTE, "the written memory's content")
    check_session_actor_versions(fx, store.id, session.id, {"/from-run.md": (mems["/from-run.md"], "created")})


def wait_for(cond: Any, timeout: float, what: str, worker: WorkerThread) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if not worker.is_alive():
            raise AssertionError(f"the worker ended while waiting for {what} (error: {worker.error!r})")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)
