"""Differential test: the SDK's `EnvironmentWorker` and `mnemo worker poll` serve the same
scripted session on two identical copies of one server state, and must leave the same traces.

The runner's shared servers cannot be copied, so this test starts its own `mnemo serve`
processes (`$MNEMO_BIN`, 127.0.0.1, ephemeral ports, a temp dir it removes):

1. A *builder* server gets the state: two memory stores (`Diff Notes`, attached `read_write`;
   `Diff Reference`, attached `read_only`) with a handful of memories, an agent with
   `agent_toolset_20260401`, a self-hosted environment and an environment key.  It is stopped
   with SIGTERM and its database copied (SQLite backup API, so any WAL content is included)
   into two directories.
2. Each copy (three) gets its own server with its own `--memory-mount-root`.  On each, the test creates
   a session with both stores attached, starts one worker, and plays the agent: it posts the
   calls of `SCRIPT` one at a time, waiting for each result (20 calls: reads, a write, edits,
   bash that appends/creates/removes files in the read-write store, globs, greps, refused writes
   into the read-only store, a bash write into it, reads of deleted files, failing edits), then
   ends the turn and waits until the work item is `stopped`.
   * copy A: the SDK's worker (`anthropic==2.10.0`), in a thread of this process: the SDK poller
     claims the item and `EnvironmentWorker.handle_item` serves it with `max_idle=2` and the
     default `memory_sync_interval` (15 s) — the same driving as `test_worker.py`;
   * copy B: `$MNEMO_BIN worker poll --max-idle 2s --no-live` (default sync interval) in a
     subprocess; SIGTERM once the item is stopped; it must exit 0;
   * copy C: the same with live sync on (the default): it uploads each file as the agent writes
     it, so its versions come in the order of the writes (and a file written twice may get an
     intermediate version). It must match copy A in every result and final memory, and hold
     every version copy A made; the exact sequences are compared between A and B only.
3. Compared between the runs (differences printed as a unified diff, mount roots normalised to
   `<MNT>` and workdirs to `<WORK>`):
   * per call: `is_error`, and the result text (except the bash write into the read-only store,
     which the SDK lets through and mnemo's sandbox refuses; multi-file grep output and the
     `**` glob are compared as sorted lines because their order depends on directory order and
     on files downloaded within the same clock tick);
   * the final memories of both stores (path -> content); the read-only store must also equal
     its seed in both runs;
   * per store, the sequence of `(operation, path)` of the memory versions made by a
     `session_actor` during the session, in creation order (the listing is newest first).
   Each run must also remove its mount folders, and the whole script must finish within the
   15 s sync interval so only the final sync uploads (else the sequences could differ for
   timing reasons alone; the test says so if it happens).

With `MNEMO_COMPAT_DATABASE=postgres` a database cannot be copied file by file, so step 1
differs: each run gets a server on a fresh schema of its own, and the builder's work (the same
`build_state` calls, in the same order) is replayed on it before the session.  The two states
are then equal up to ids and timestamps, which none of the compared traces contain (mount paths
come from the stores' names, results from the memories' paths and contents).

`MNEMO_COMPAT_WORKER_TRACE=1` prints both runs' results even on success.

What it caught when it was written: the same versions in a different order — mnemo's sync sent
a store's uploads concurrently (completion order) and its deletes after all uploads, where the
SDK reconciles paths one by one in sorted order, each delete in its place (fixed in c43931c).
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import compat_lib
from compat_lib import OWN, POSTGRES, check, eq, short
from run import Server as _RunnerServer  # the runner's own server lifecycle (start, log tail, stop)
from test_worker import Diagnostics, Driver, Setup, WorkerThread, dump_failed_worker, slug

SERVER = OWN  # starts its own servers

MAX_IDLE = 2.0
SYNC_INTERVAL = 15.0  # both workers' default; the scripted calls must finish well within it
SCRIPT_BUDGET = 13.0  # seconds from the first call to the last result before an intermediate sync may interfere
ITEM_STOP_WAIT = 120.0
MNEMO_EXIT_WAIT = 60.0

RW_NAME = "Diff Notes"
RO_NAME = "Diff Reference"

RW_SEED: Dict[str, str] = {
    "/notes/readme.md": "# Read me\nhello from the notes store\nhello again\n",
    "/todo.md": "- buy milk\n- call bob\n- water the plants\n",
    "/journal/2024-01.md": "January: started the journal\n",
    "/journal/2024-02.md": "February: nothing happened\n",
    "/scratch/old.md": "an old scratch note, soon removed\n",
    "/projects/alpha/plan.md": "alpha plan: ship it\nstatus: bob is on it\n",
}
RO_SEED: Dict[str, str] = {
    "/guide.md": "The guide is read-only.\nDo not edit the guide.\n",
    "/policies/security.md": "Rotate keys often.\nNever share secrets.\n",
}
IDEA = "a fresh idea \u2713 written by the session\n"  # non-ASCII: `wrote N bytes` counts code points


class Call:
    """One scripted tool call.  `compare`: "exact" (is_error + text), "lines" (is_error + the
    text's sorted lines), "status" (is_error only) or "none" (not compared)."""

    def __init__(self, label: str, tool: str, make_input: Callable[[str, str], Dict[str, Any]], compare: str = "exact"):
        self.label = label
        self.tool = tool
        self.make_input = make_input
        self.compare = compare


def edit(label: str, file_path: str, old: str, new: str, **extra: Any) -> Call:
    """An `edit` call; `file_path` names the mount as `{rw}` or `{ro}`."""
    return Call(
        label,
        "edit",
        lambda rw, ro: {"file_path": file_path.format(rw=rw, ro=ro), "old_string": old, "new_string": new, **extra},
    )


SCRIPT: List[Call] = [
    Call("read rw readme", "read", lambda rw, ro: {"file_path": f"{rw}/notes/readme.md"}),
    Call("read ro guide", "read", lambda rw, ro: {"file_path": f"{ro}/guide.md"}),
    Call("write new rw file", "write", lambda rw, ro: {"file_path": f"{rw}/ideas/new.md", "content": IDEA}),
    edit("edit rw todo", "{rw}/todo.md", "call bob", "call alice"),
    Call(
        "bash append to rw journal",
        "bash",
        lambda rw, ro: {"command": f"printf 'appended by bash\\n' >> {rw}/journal/2024-02.md"},
    ),
    Call(
        "bash create rw journal file",
        "bash",
        lambda rw, ro: {"command": f"printf 'created by bash\\n' > {rw}/journal/2024-03.md && cat {rw}/journal/2024-03.md"},
    ),
    Call("bash rm rw memory", "bash", lambda rw, ro: {"command": f"rm {rw}/scratch/old.md && ls {rw}/scratch | wc -l"}),
    Call("glob rw journal (distinct mtimes)", "glob", lambda rw, ro: {"pattern": "journal/*.md", "path": rw}),
    Call("glob rw **/*.md", "glob", lambda rw, ro: {"pattern": "**/*.md", "path": rw}, compare="lines"),
    Call("grep rw (several files)", "grep", lambda rw, ro: {"pattern": "bash|alice|bob", "path": rw}, compare="lines"),
    Call("grep ro one file", "grep", lambda rw, ro: {"pattern": "read-?only", "path": f"{ro}/guide.md"}),
    Call("write into ro (refused)", "write", lambda rw, ro: {"file_path": f"{ro}/denied.md", "content": "must not land"}),
    edit("edit in ro (refused)", "{ro}/guide.md", "read-only", "writable"),
    Call(
        "bash write into ro (result not compared)",
        "bash",
        lambda rw, ro: {"command": f"echo vandalised > {ro}/guide.md; echo sneaky > {ro}/bash-denied.md"},
        compare="none",
    ),
    Call("read ro policies", "read", lambda rw, ro: {"file_path": f"{ro}/policies/security.md"}),
    Call("read removed rw file (error)", "read", lambda rw, ro: {"file_path": f"{rw}/scratch/old.md"}),
    edit("edit rw, old_string missing (error)", "{rw}/notes/readme.md", "not there", "x"),
    edit("edit rw, ambiguous (error)", "{rw}/notes/readme.md", "hello", "hi"),
    edit("edit rw replace_all", "{rw}/notes/readme.md", "hello", "hi", replace_all=True),
    Call("read rw readme after edit", "read", lambda rw, ro: {"file_path": f"{rw}/notes/readme.md"}),
]


# --------------------------------------------------------------------------------------
# Servers of our own (the runner's shared server cannot be copied).
# --------------------------------------------------------------------------------------


class OwnServer(_RunnerServer):
    """`$MNEMO_BIN serve` on 127.0.0.1:0 over a given database (an SQLite file, or with
    `db=None` a fresh database of the suite's backend) and mount root."""

    def __init__(
        self, binary: str, name: str, workdir: Path, api_key: str, db: Optional[Path], mount_root: Path
    ) -> None:
        super().__init__(binary, name, workdir, api_key)
        if db is not None:
            self.db = db
            self._database = f"sqlite://{db}"
        self.mount_root = mount_root

    def extra_args(self) -> List[str]:
        return ["--memory-mount-root", str(self.mount_root)]


def mnemo_binary() -> str:
    binary = os.environ.get("MNEMO_BIN", "").strip()
    check(binary, "MNEMO_BIN must name the mnemo binary")
    path = Path(binary)
    if not path.is_file():
        found = shutil.which(binary)
        check(found is not None, f"MNEMO_BIN={binary!r} is not an executable file")
        path = Path(found)  # type: ignore[arg-type]
    return str(path.resolve())


def copy_database(src: Path, dst: Path) -> None:
    """A consistent single-file copy (includes anything still in a -wal file)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    target = sqlite3.connect(str(dst))
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


# --------------------------------------------------------------------------------------
# The mnemo worker as a subprocess, duck-typed like WorkerThread for Driver.wait_result.
# --------------------------------------------------------------------------------------


class MnemoWorker:
    def __init__(self, binary: str, base_url: str, env_id: str, env_key: str, workdir: Path, state: Path, log: Path,
                 live: bool, mount_root: Path):
        self.log_path = log
        self._log = open(log, "w", encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env["ANTHROPIC_ENVIRONMENT_KEY"] = env_key  # never on the command line
        env["MNEMO_MEMORY_MOUNT_ROOT"] = str(mount_root)  # the server's: mounts land nowhere else
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        self.proc = subprocess.Popen(
            [
                binary,
                "worker",
                "poll",
                "--environment-id",
                env_id,
                "--base-url",
                base_url,
                "--workdir",
                str(workdir),
                "--state-dir",
                str(state),
                "--max-idle",
                f"{MAX_IDLE:g}s",
                *([] if live else ["--no-live"]),
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            env=env,
            start_new_session=True,
        )
        self.returned = False
        self.error: Optional[str] = None

    def is_alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = MNEMO_EXIT_WAIT) -> Optional[int]:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.error = f"did not exit within {timeout:.0f}s of SIGTERM"
        self._log.close()
        self.returned = self.proc.returncode == 0
        return self.proc.returncode

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "    | (no worker log)"
        return "\n".join("    | " + line for line in text.splitlines()[-lines:]) or "    | (empty)"


# --------------------------------------------------------------------------------------
# One run: a session on one server copy, served by one worker.
# --------------------------------------------------------------------------------------


class RunResult:
    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: List[Tuple[str, bool, str]] = []  # (label, is_error, normalised text)
        self.memories: Dict[str, Dict[str, str]] = {}  # store role -> path -> content
        self.versions: Dict[str, List[Tuple[str, str]]] = {}  # store role -> [(operation, path)]
        self.script_seconds = 0.0
        self.item_state = ""


def normalise(text: str, mount_root: Path, workdir: Path) -> str:
    return text.replace(str(mount_root), "<MNT>").replace(str(workdir), "<WORK>")


def memories_of(fx: compat_lib.Fixture, store_id: str) -> Dict[str, str]:
    return {m.path: (m.content or "") for m in fx.list_all_memories(store_id, view="full")}


def session_versions(fx: compat_lib.Fixture, store_id: str, session_id: str) -> List[Tuple[str, str]]:
    out = []
    for v in reversed(fx.list_all_versions(store_id)):  # the listing is newest first
        actor = v.created_by.to_dict() if v.created_by is not None else {}
        if actor.get("type") != "session_actor":
            continue
        eq(actor.get("session_id"), session_id, f"session_id of session_actor version {v.id}")
        out.append((v.operation, v.path or ""))
    return out


def work_items(fx: compat_lib.Fixture, env_id: str, session_id: str) -> List[Any]:
    return [w for w in fx.client.beta.environments.work.list(environment_id=env_id) if w.data.id == session_id]


def run_session(
    kind: str,
    server: OwnServer,
    state: Dict[str, str],
    area: Path,
    binary: str,
    timeout: float,
) -> RunResult:
    fx = compat_lib.Fixture(server.base_url, server.api_key, timeout)
    result = RunResult(kind)
    workdir = area / "workdir"
    workdir.mkdir(parents=True)
    server.mount_root.mkdir(parents=True, exist_ok=True)
    diag = Diagnostics()
    sdk_log = logging.getLogger("anthropic")
    old_level = sdk_log.level
    worker: Any = None
    try:
        session = fx.client.beta.sessions.create(
            agent=state["agent"],
            environment_id=state["env"],
            resources=[
                {"type": "memory_store", "memory_store_id": state["rw"], "access": "read_write"},
                {"type": "memory_store", "memory_store_id": state["ro"], "access": "read_only"},
            ],
        )
        mounts = [r.mount_path for r in session.resources if r.type == "memory_store"]
        rw_mount, ro_mount = str(server.mount_root / slug(RW_NAME)), str(server.mount_root / slug(RO_NAME))
        eq(mounts, [rw_mount, ro_mount], f"{kind}: mount paths of the session's stores")

        if kind == "sdk":
            sdk_log.addHandler(diag)
            sdk_log.setLevel(logging.DEBUG)
            worker = WorkerThread("item", server.base_url, timeout, state["env"], state["key"], workdir, diag)
            worker.start()
            check(worker.claimed.wait(60), "sdk: the SDK poller claimed nothing within 60s")
            check(worker.item is not None, f"sdk: the SDK poller found no work item (error: {worker.error!r})")
        else:
            worker = MnemoWorker(
                binary, server.base_url, state["env"], state["key"], workdir, area / "state", area / "worker.log",
                live=kind == "mnemo-live", mount_root=server.mount_root,
            )

        driver = Driver(fx, session.id, worker)
        started = time.monotonic()
        for call in SCRIPT:
            _, is_error, text = driver.call(call.tool, call.make_input(rw_mount, ro_mount))
            result.calls.append((call.label, is_error, normalise(text, server.mount_root, workdir)))
        result.script_seconds = time.monotonic() - started

        status, body = driver.post_events([{"type": "session.status_idle"}])
        check(status == 200, f"{kind}: ending the turn answered {status}: {short(body, 300)}")

        deadline = time.monotonic() + ITEM_STOP_WAIT
        while True:
            items = work_items(fx, state["env"], session.id)
            if items and all(w.state == "stopped" for w in items):
                break
            check(
                time.monotonic() < deadline,
                f"{kind}: work item(s) not stopped within {ITEM_STOP_WAIT:.0f}s: {[w.state for w in items]}",
            )
            if kind.startswith("mnemo"):
                check(worker.is_alive(), f"{kind}: the worker exited early (status {worker.proc.returncode})")
            time.sleep(0.2)
        result.item_state = "stopped"
        eq(len(items), 1, f"{kind}: work items of the session")

        if kind == "sdk":
            worker.join(60)
            check(not worker.is_alive(), "sdk: handle_item did not return within 60s of the item stopping")
            check(worker.error is None, f"sdk: the worker raised: {worker.error!r}")
            check(worker.returned, "sdk: handle_item did not return normally")
            errors = diag.worker_records(logging.ERROR)
            check(not errors, f"sdk: the worker logged errors: {[r.getMessage() for r in errors]}")
        else:
            code = worker.stop()
            check(worker.error is None, f"mnemo: the worker {worker.error}")
            eq(code, 0, "mnemo: exit status of `mnemo worker poll` after SIGTERM")

        for path in (rw_mount, ro_mount):
            check(not Path(path).exists(), f"{kind}: the worker should have removed {path} at teardown")

        result.memories = {"rw": memories_of(fx, state["rw"]), "ro": memories_of(fx, state["ro"])}
        result.versions = {
            "rw": session_versions(fx, state["rw"], session.id),
            "ro": session_versions(fx, state["ro"], session.id),
        }
        return result
    except BaseException:
        dump_failed_worker(kind, worker, diag, server, f"server `{server.config}`")
        raise
    finally:
        if kind == "sdk":
            if worker is not None and worker.is_alive():
                worker.cancel()
                worker.join(45)
            sdk_log.removeHandler(diag)
            sdk_log.setLevel(old_level)
        elif worker is not None and worker.is_alive():
            worker.stop(10)
        try:
            fx.client.close()
        except Exception:  # noqa: BLE001
            pass


# --------------------------------------------------------------------------------------
# Comparison.
# --------------------------------------------------------------------------------------


def call_view(label: str, is_error: bool, text: str, compare: str, full: bool = False) -> List[str]:
    if compare == "none":
        if full:
            return [f"## {label}: is_error={is_error} (not compared)"] + ["   " + line for line in (text.splitlines() or [""])]
        return [f"## {label}: (not compared)"]
    head = f"## {label}: is_error={is_error}"
    if compare == "status":
        return [head]
    if compare == "lines":
        return [head + " (lines sorted)"] + ["   " + line for line in sorted(text.splitlines())]
    return [head] + ["   " + line for line in (text.splitlines() or [""])]


def render(run: RunResult, full: bool = False) -> Dict[str, List[str]]:
    calls: List[str] = []
    for spec, (label, is_error, text) in zip(SCRIPT, run.calls):
        calls += call_view(label, is_error, text, spec.compare, full)
    out = {"tool results": calls}
    for role in ("rw", "ro"):
        out[f"final memories of the {role} store"] = [
            f"{path} = {json.dumps(content)}" for path, content in sorted(run.memories[role].items())
        ]
        out[f"session versions of the {role} store (creation order)"] = [f"{op} {p}" for op, p in run.versions[role]]
    return out


def diff_runs(a: RunResult, b: RunResult) -> List[str]:
    ra, rb = render(a), render(b)
    problems = []
    for section in ra:
        if ra[section] != rb[section]:
            problems.append(section)
            print(f"# --- {section}: {a.name} (-) vs {b.name} (+) ---", flush=True)
            for line in difflib.unified_diff(ra[section], rb[section], a.name, b.name, lineterm="", n=2):
                print(f"#   {line}", flush=True)
    return problems


def compact(versions: List[Tuple[str, str]]) -> str:
    return "[" + ", ".join(f"{op[0].upper()} {path}" for op, path in versions) + "]"


def dump(run: RunResult) -> None:
    print(f"# === {run.name}: script took {run.script_seconds:.1f}s ===", flush=True)
    for section, lines in render(run, full=True).items():
        print(f"# --- {section} ---", flush=True)
        for line in lines:
            print(f"#   {line}", flush=True)


# --------------------------------------------------------------------------------------
# The test.
# --------------------------------------------------------------------------------------


def build_state(fx: compat_lib.Fixture) -> Dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    rw = fx.new_store(name=RW_NAME, description="notes the session may change")
    ro = fx.new_store(name=RO_NAME, description="reference the session may only read")
    for path, content in RW_SEED.items():
        fx.new_memory(rw.id, path, content)
    for path, content in RO_SEED.items():
        fx.new_memory(ro.id, path, content)
    setup = Setup(fx, tag)
    return {"rw": rw.id, "ro": ro.id, "agent": setup.agent.id, "env": setup.env.id, "key": setup.key}


def build_on(server: OwnServer, timeout: float) -> Dict[str, str]:
    bfx = compat_lib.Fixture(server.base_url, server.api_key, timeout)
    try:
        return build_state(bfx)
    finally:
        bfx.client.close()


def test_sdk_and_mnemo_workers_leave_the_same_traces(fx):
    """The same scripted session, served by the SDK worker and by `mnemo worker poll` on two
    copies of one server state: same results, same memories, same version sequences."""
    binary = mnemo_binary()
    area = Path(tempfile.mkdtemp(prefix="mnemo-worker-diff-")).resolve()
    api_key = "sk-diff-" + secrets.token_hex(16)
    servers: List[OwnServer] = []
    postgres = compat_lib.BACKEND == POSTGRES
    try:
        state: Dict[str, str] = {}
        if not postgres:
            builder = OwnServer(binary, "diff-builder", area / "builder", api_key, area / "builder" / "mnemo.sqlite",
                                area / "builder" / "mnt")
            servers.append(builder)
            builder.start(30)
            state = build_on(builder, fx.timeout)
            builder.stop()
            eq(builder.proc.returncode if builder.proc else None, 0, "builder server exit status after SIGTERM")

        runs: Dict[str, RunResult] = {}
        for kind in ("sdk", "mnemo", "mnemo-live"):
            home = area / kind
            if postgres:
                # A fresh schema per run, with the builder's work replayed on it.
                srv = OwnServer(binary, f"diff-{kind}", home, api_key, None, home / "mnt" / "memory")
                servers.append(srv)
                srv.start(30)
                state = build_on(srv, fx.timeout)
            else:
                copy_database(builder.db, home / "mnemo.sqlite")
                srv = OwnServer(binary, f"diff-{kind}", home, api_key, home / "mnemo.sqlite", home / "mnt" / "memory")
                servers.append(srv)
                srv.start(30)
            runs[kind] = run_session(kind, srv, state, home / "area", binary, fx.timeout)
            srv.stop()

        sdk, mnemo, live = runs["sdk"], runs["mnemo"], runs["mnemo-live"]
        # Live sync uploads each file as the agent writes it, not at the end in path order: the
        # same results and final memories, and every version the SDK made (live may add the
        # intermediate versions of a file written twice), in the order the agent wrote them.
        live_problems = [p for p in diff_runs(sdk, live) if "creation order" not in p]
        for role in ("rw", "ro"):
            missing = [v for v in sdk.versions[role] if v not in live.versions[role]]
            check(not missing, f"mnemo-live: versions of the {role} store the SDK made are missing: {missing}")
        check(not live_problems, f"the SDK and the live mnemo worker differ in: {'; '.join(live_problems)}")
        if os.environ.get("MNEMO_COMPAT_WORKER_TRACE"):
            dump(sdk)
            dump(mnemo)

        # Sanity of each run on its own (so a shared mistake does not pass as "identical").
        for run in (sdk, mnemo, live):
            eq(run.memories["ro"], RO_SEED, f"{run.name}: the read_only store's memories must be unchanged")
            eq(run.versions["ro"], [], f"{run.name}: no session versions in the read_only store")
            check(
                "/ideas/new.md" in run.memories["rw"] and "/scratch/old.md" not in run.memories["rw"],
                f"{run.name}: the written memory must land and the removed one must be deleted: "
                f"{sorted(run.memories['rw'])}",
            )
        slow = [f"{r.name} {r.script_seconds:.1f}s" for r in (sdk, mnemo) if r.script_seconds > SCRIPT_BUDGET]

        problems = diff_runs(sdk, mnemo)
        if problems:
            if slow:
                print(
                    f"# note: the script took longer than {SCRIPT_BUDGET:.0f}s ({', '.join(slow)}); an intermediate "
                    f"sync (every {SYNC_INTERVAL:.0f}s) may explain differences in the version sequences",
                    flush=True,
                )
            if not os.environ.get("MNEMO_COMPAT_WORKER_TRACE"):
                dump(sdk)
                dump(mnemo)
            details = []
            for role in ("rw", "ro"):
                va, vb = sdk.versions[role], mnemo.versions[role]
                if va != vb:
                    same_set = sorted(va) == sorted(vb)
                    details.append(
                        f"{role} store versions{' (same versions, different order)' if same_set else ''}: "
                        f"sdk {compact(va)} vs mnemo {compact(vb)}"
                    )
            raise AssertionError(
                f"the SDK and mnemo workers differ in: {'; '.join(problems)} (diff printed above)"
                + (f"; {'; '.join(details)}" if details else "")
            )
    finally:
        for srv in servers:
            srv.stop()
        shutil.rmtree(area, ignore_errors=True)
