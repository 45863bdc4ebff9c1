#!/usr/bin/env python3
"""Side-by-side benchmark: `mnemo worker poll` vs the official SDK's `EnvironmentWorker`
(`anthropic==2.10.0`), serving sessions of one `mnemo serve` (release build) on 127.0.0.1.

    python3 bench/worker/run.py [--stores 8] [--memories 2000] [--size 1024] [--reps 5]
                                [--calls 200] [--small-memories 100] [--rounds 1]
                                [--no-build] [--worker-binary PATH] [--workdir DIR]
                                [--out FILE] [--keep]
    python3 bench/worker/run.py --quick      # 2 stores x 300 memories, 3 reps, 40 calls
    python3 bench/worker/run.py --no-build --only mnemo --scenarios first_call   # profiling

Scenarios, each run once per worker (fresh worker process, fresh environment + key, fresh
session; the agent side is played here with the API key, as `docs/DRIVER.md` describes):

1. first-call: a session with `--stores` stores x `--memories` memories (~`--size` bytes) attached
   and one `read` call posted *before* the worker starts; sync interval 3600 s (no sync can run).
   Measured: server time from the work item's `acknowledged_at` to the `processed_at` of the
   call's `user.tool_result` (claim -> mount of every store -> first call answered), and wall time
   from starting the worker process to that `processed_at`.
2. noop-sync: the same stores, sync interval 5 s (the minimum). After a warm-up call (which waits
   for the download), each rep waits until > 5 s passed since the last sync, then times two
   *pairs* of cheap `read` calls; a pair = post call X, wait for its result, post call Y at once,
   wait for its result. In pair A a sync is due, so it runs right after X (both workers sync after
   a call's result is posted and before taking the next call) and delays Y; pair B follows at once,
   with no sync due. Sync cost seen by the agent = A - B (server clock: from X's `processed_at` to
   Y's result `processed_at`). Rep 1 is the first sync after the download (the SDK hashes every
   file then); the headline is the median of reps 2.. .
3. many-calls: one store of `--small-memories` memories, default sync interval (15 s). After a
   warm-up call, `--calls` calls alternating `read` of a memory and `bash echo`, posted one at a
   time, each waiting for its result: total from the first call's `processed_at` to the last
   result's `processed_at` (server clock) and per-call latency.
4. Peak RSS: `VmHWM` of the worker process in each scenario (read just before it is stopped) and,
   sampled every 100 ms, of its descendants (the bash shell).

Results are detected through the session's SSE stream (a list poll is the fallback). Every
result text is checked. Exit code 1 if a result was wrong or a worker failed.

Standard library only (the SDK worker runs in `target/compat-venv`); everything talks to
127.0.0.1 and nothing else; no key or token is printed.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from mnemo_bench import (  # noqa: E402
    REPO, Api, Server, ensure_venv, fmt_mib, fmt_ms, fs_type, git_revision, inode_reuse_wait, log, machine, stop_process,
)

MAX_IDLE = 2  # seconds a worker keeps serving a session after its turn ended
WAIT = 300.0  # seconds to wait for any one result / teardown before giving up

GOALS = {  # metric -> (kind, threshold)
    "claim_to_first_ms": ("speed-up", 10.0),
    "noop_sync_ms": ("speed-up", 20.0),
    "peak_rss_kib": ("fraction", 0.2),
}

# The SDK side: EnvironmentWorker.run() until SIGTERM (which cancels it, like the `ant` CLI).
# The only additions: `SessionMemoryStores._sync_all` (what `sync_if_due()` runs once due, and
# the final sync) and `SessionMemoryStores.download` are wrapped to print their wall time as one
# JSON line on stderr.
SDK_WORKER = r"""
import asyncio, json, os, signal, sys, time
import anthropic
from anthropic.lib.tools import _memories

_orig_sync_all = _memories.SessionMemoryStores._sync_all

async def _timed_sync_all(self, *, final):
    t = time.perf_counter()
    try:
        return await _orig_sync_all(self, final=final)
    finally:
        print("MNEMO_BENCH_SYNC " + json.dumps({"final": final, "ms": (time.perf_counter() - t) * 1000}),
              file=sys.stderr, flush=True)

_memories.SessionMemoryStores._sync_all = _timed_sync_all

_orig_download = _memories.SessionMemoryStores.download

async def _timed_download(self, session):
    t = time.perf_counter()
    try:
        return await _orig_download(self, session)
    finally:
        print("MNEMO_BENCH_DOWNLOAD " + json.dumps({"ms": (time.perf_counter() - t) * 1000}), file=sys.stderr, flush=True)

_memories.SessionMemoryStores.download = _timed_download

async def main():
    cfg = json.loads(os.environ.pop("MNEMO_BENCH_WORKER"))
    key = os.environ.pop("ANTHROPIC_ENVIRONMENT_KEY")
    client = anthropic.AsyncAnthropic(base_url=cfg["base_url"], api_key="sk-not-for-the-worker", timeout=60)
    worker = client.beta.environments.work.worker(
        environment_id=cfg["environment_id"], environment_key=key, workdir=cfg["workdir"],
        max_idle=cfg["max_idle"], memory_sync_interval=cfg["memory_sync_interval"],
    )
    task = asyncio.current_task()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        await worker.run()
    except asyncio.CancelledError:
        pass

asyncio.run(main())
"""


# ---------------------------------------------------------------------------------------------
# Building.
# ---------------------------------------------------------------------------------------------


def cargo_build() -> None:
    log("building target/release/mnemo ...")
    subprocess.run(["cargo", "build", "--release", "-p", "mnemo"], cwd=REPO, check=True)


# ---------------------------------------------------------------------------------------------
# The server and a minimal HTTP client.
# ---------------------------------------------------------------------------------------------


def go_build() -> Path:
    """The Go SDK's worker (compat/go/benchworker, the SDK version compat/go/go.mod pins), built
    with the module and build caches in target/go."""
    out = REPO / "target" / "go" / "bin" / "benchworker"
    env = dict(os.environ, GOMODCACHE=str(REPO / "target" / "go" / "mod"), GOCACHE=str(REPO / "target" / "go" / "cache"),
               GOPATH=str(REPO / "target" / "go" / "path"), GOFLAGS="-mod=readonly")
    subprocess.run(["go", "build", "-o", str(out), "./benchworker"], cwd=REPO / "compat" / "go", env=env, check=True)
    return out


def parse_ts(value: str) -> float:
    """RFC 3339 UTC (`…Z`, any number of fraction digits) -> Unix seconds."""
    head, _, frac = value.rstrip("Z").partition(".")
    dt = datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return dt.timestamp() + (float("0." + frac) if frac else 0.0)


def content(i: int, size: int, tag: str) -> str:
    head = f"# memory {tag}/{i}\n"
    line = f"note {i:05d}: " + hashlib.sha256(f"{tag}/{i}".encode()).hexdigest() + "\n"
    s = head
    while len(s) < size:
        s += line
    return s[:size]


def mem_path(i: int) -> str:
    return f"/notes/d{i // 100:02d}/m{i:05d}.md"


def seed_store(api: Api, name: str, memories: int, size: int, pool: ThreadPoolExecutor) -> str:
    store = api.call("POST", "/v1/memory_stores", {"name": name})["id"]

    def create(i: int) -> None:
        api.call("POST", f"/v1/memory_stores/{store}/memories", {"path": mem_path(i), "content": content(i, size, name)})

    list(pool.map(create, range(memories)))
    listed = api.list_all(f"/v1/memory_stores/{store}/memories")
    n = sum(1 for m in listed if m.get("type") == "memory")
    if n != memories:
        raise SystemExit(f"seeding {name}: the server lists {n} memories, expected {memories}")
    return store


def slug(name: str) -> str:
    return "-".join("".join(c.lower() if c.isascii() and c.isalnum() else " " for c in name).split())


# ---------------------------------------------------------------------------------------------
# The agent side: one session, its SSE stream, tool calls.
# ---------------------------------------------------------------------------------------------


class Session:
    def __init__(self, api: Api, agent: str, env: str, stores: List[str]) -> None:
        self.api = api
        s = api.call("POST", "/v1/sessions", {
            "agent": agent, "environment_id": env,
            "resources": [{"type": "memory_store", "memory_store_id": st} for st in stores],
        })
        self.id = s["id"]
        self.mounts = [r["mount_path"] for r in s["resources"] if r["type"] == "memory_store"]
        self.results: Dict[str, Tuple[float, Dict[str, Any]]] = {}  # tool_use_id -> (monotonic seen, event)
        self.cond = threading.Condition()
        self.stream_error: Optional[str] = None
        self.polled = 0  # results found by the fallback list poll rather than the stream
        self._closing = False
        self._conn = http.client.HTTPConnection(api.host, api.port, timeout=3600)
        self._conn.request("GET", f"/v1/sessions/{self.id}/events/stream",
                           headers=dict(api.headers("/v1/sessions"), accept="text/event-stream"))
        resp = self._conn.getresponse()
        if resp.status != 200:
            raise SystemExit(f"events stream answered {resp.status}")
        self._thread = threading.Thread(target=self._read, args=(resp,), daemon=True)
        self._thread.start()

    def _read(self, resp: Any) -> None:
        data: List[str] = []
        try:
            while True:
                raw = resp.readline()
                if not raw:
                    break
                line = raw.decode("utf-8").rstrip("\r\n")
                if line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                elif line == "" and data:
                    seen = time.monotonic()
                    try:
                        ev = json.loads("\n".join(data))
                    except ValueError:
                        ev = {}
                    data = []
                    if isinstance(ev, dict) and ev.get("type") == "user.tool_result":
                        with self.cond:
                            self.results.setdefault(ev["tool_use_id"], (seen, ev))
                            self.cond.notify_all()
        except Exception as err:  # noqa: BLE001 — the list poll takes over
            if not self._closing:
                self.stream_error = repr(err)

    def close(self) -> None:
        self._closing = True
        try:
            self._conn.sock and self._conn.sock.shutdown(2)  # type: ignore[union-attr]
        except OSError:
            pass
        self._conn.close()

    def post(self, events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        return self.api.call("POST", f"/v1/sessions/{self.id}/events", {"events": events})["data"]

    def tool_use(self, name: str, tool_input: Dict[str, Any]) -> Dict[str, Any]:
        return self.post([{"type": "agent.tool_use", "name": name, "input": tool_input}])[0]

    def wait(self, tool_use_id: str, alive: Any) -> Tuple[float, Dict[str, Any]]:
        deadline = time.monotonic() + WAIT
        last_poll = time.monotonic()
        with self.cond:
            while True:
                if tool_use_id in self.results:
                    return self.results[tool_use_id]
                self.cond.wait(0.25)
                if tool_use_id in self.results:
                    return self.results[tool_use_id]
                now = time.monotonic()
                if now - last_poll > 2.0:  # fallback, in case the stream missed something
                    last_poll = now
                    for ev in self.api.list_all(f"/v1/sessions/{self.id}/events", {"types[]": "user.tool_result"}):
                        if ev.get("tool_use_id") == tool_use_id:
                            self.polled += 1
                            self.results[tool_use_id] = (now, ev)
                            return self.results[tool_use_id]
                if not alive():
                    raise RuntimeError(f"the worker exited before answering {tool_use_id}")
                if now > deadline:
                    raise RuntimeError(f"no result for {tool_use_id} within {WAIT:.0f}s")

    def call(self, name: str, tool_input: Dict[str, Any], alive: Any) -> Dict[str, Any]:
        posted = time.monotonic()
        use = self.tool_use(name, tool_input)
        seen, ev = self.wait(use["id"], alive)
        return {
            "use": use, "result": ev, "posted": posted, "seen": seen,
            "text": "".join(b.get("text", "") for b in ev.get("content") or []),
            "is_error": bool(ev.get("is_error")),
        }

    def end_turn(self) -> None:
        self.post([{"type": "session.status_idle"}])


def work_item(api: Api, env: str, session: str) -> Dict[str, Any]:
    items = [w for w in api.list_all(f"/v1/environments/{env}/work") if w["data"]["id"] == session]
    if len(items) != 1:
        raise RuntimeError(f"expected one work item for the session, found {len(items)}")
    return items[0]


# ---------------------------------------------------------------------------------------------
# Worker processes and their memory.
# ---------------------------------------------------------------------------------------------


def read_status(pid: int) -> Tuple[str, int]:
    name, hwm = "?", 0
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("Name:"):
                name = line.split(None, 1)[1].strip()
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return name, hwm


def descendants(pid: int) -> List[int]:
    out: List[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children", encoding="utf-8") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                continue
            out += kids
            stack += kids
    return out


def cpu_ns(pid: int) -> Tuple[int, int]:
    """(sum of on-CPU ns over the process's live threads from schedstat, utime+stime of the whole
    process in ns from stat — 10 ms resolution, but it includes threads that already exited)."""
    total = 0
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{t}/schedstat", encoding="utf-8") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    except OSError:
        return 0, 0
    return total, ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


class Worker:
    """One worker process (SDK or mnemo) with a VmHWM sampler for it and its descendants."""

    def __init__(self, kind: str, argv: List[str], env: Dict[str, str], log_path: Path) -> None:
        self.kind = kind
        self.log_path = log_path
        self._log = open(log_path, "w", encoding="utf-8")
        self.started_wall = time.time()
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, env=env,
                                     start_new_session=True)
        self.peak_self_kib = 0
        self.children: Dict[int, Tuple[str, int]] = {}  # pid -> (name, VmHWM KiB)
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        self.exit_code: Optional[int] = None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _sample_once(self) -> None:
        try:
            self.peak_self_kib = max(self.peak_self_kib, read_status(self.proc.pid)[1])
        except OSError:
            return
        for kid in descendants(self.proc.pid):
            try:
                name, hwm = read_status(kid)
            except OSError:
                continue
            old = self.children.get(kid, (name, 0))
            self.children[kid] = (name, max(old[1], hwm))

    def _sample(self) -> None:
        while not self._stop.is_set() and self.alive():
            self._sample_once()
            self._stop.wait(0.1)

    def stop(self) -> int:
        self._sample_once()  # VmHWM is a peak: the last read before exit is the process's peak
        self._stop.set()
        stop_process(self.proc, grace=60)
        self._log.close()
        self.exit_code = self.proc.returncode
        return self.exit_code

    def peak_child_kib(self) -> int:
        return max((h for _, h in self.children.values()), default=0)

    def child_names(self) -> List[str]:
        return sorted({n for n, _ in self.children.values()})

    def hwm_now(self) -> int:
        try:
            return read_status(self.proc.pid)[1]
        except OSError:
            return 0

    def cpu(self) -> Tuple[int, int]:
        return cpu_ns(self.proc.pid)

    def sdk_syncs(self) -> List[Dict[str, Any]]:
        """The SDK worker's timed syncs, in order (see SDK_WORKER)."""
        out = []
        try:
            for line in self.log_path.read_text(errors="replace").splitlines():
                if line.startswith("MNEMO_BENCH_SYNC "):
                    out.append(json.loads(line.split(" ", 1)[1]))
        except (OSError, ValueError):
            pass
        return out

    def download_ms(self) -> float:
        """The download of every store, as the worker reports it (mnemo: its `memory ready …
        elapsed_ms=` log line; SDK: the timed `download`)."""
        try:
            for line in self.log_path.read_text(errors="replace").splitlines():
                if line.startswith("MNEMO_BENCH_DOWNLOAD "):
                    return float(json.loads(line.split(" ", 1)[1])["ms"])
                if "memory ready" in line and "elapsed_ms=" in line:
                    return float(line.split("elapsed_ms=", 1)[1].split()[0])
        except (OSError, ValueError, KeyError):
            pass
        return float("nan")

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


class Bench:
    def __init__(self, args: argparse.Namespace, api: Api, base_url: str, work: Path, mnemo_bin: Path,
                 python: Path, agent: str, go_bin: Optional[Path] = None) -> None:
        self.args, self.api, self.base_url, self.work = args, api, base_url, work
        self.mnemo_bin, self.python, self.agent, self.go_bin = mnemo_bin, python, agent, go_bin
        self.runs = 0
        self.problems: List[str] = []
        # When the last worker had removed its folders (monotonic); at first, now: an earlier run
        # on this filesystem may just have deleted its own.
        self.last_teardown = time.monotonic()

    def environment(self) -> Tuple[str, str]:
        env = self.api.call("POST", "/v1/environments", {"name": f"bench-{secrets.token_hex(4)}",
                                                         "config": {"type": "self_hosted"}})["id"]
        key = self.api.call("POST", f"/v1/environments/{env}/keys", {})["key"]
        return env, key

    def start(self, kind: str, env: str, key: str, sync_interval: int, label: str) -> Worker:
        self.runs += 1
        area = self.work / f"{self.runs:02d}-{label}-{kind}"
        (area / "workdir").mkdir(parents=True)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        base_env.update({"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
                         "ANTHROPIC_ENVIRONMENT_KEY": key, "MNEMO_MEMORY_MOUNT_ROOT": str(self.work / "mnt")})
        if kind in ("sdk", "go"):
            base_env["MNEMO_BENCH_WORKER"] = json.dumps({
                "base_url": self.base_url, "environment_id": env, "workdir": str(area / "workdir"),
                "max_idle": MAX_IDLE, "memory_sync_interval": sync_interval,
            })
            argv = [str(self.python), "-c", SDK_WORKER] if kind == "sdk" else [str(self.go_bin)]
        else:
            argv = [str(self.mnemo_bin), "worker", "poll", "--environment-id", env, "--base-url", self.base_url,
                    "--workdir", str(area / "workdir"), "--state-dir", str(area / "state"),
                    "--max-idle", f"{MAX_IDLE}s", "--memory-sync-interval", str(sync_interval)]
            # For profiling only (the RSS figures are then the wrapper's): e.g. `heaptrack -o DIR/w`.
            wrap = os.environ.get("MNEMO_BENCH_WRAP", "").split()
            argv = wrap + argv
        return Worker(kind, argv, base_env, area / "worker.log")

    def finish(self, worker: Worker, session: Session, env: str) -> Dict[str, Any]:
        """Ends the turn, waits for the item to stop and the folders to go, stops the worker."""
        session.end_turn()
        deadline = time.monotonic() + WAIT
        while work_item(self.api, env, session.id)["state"] != "stopped" or any(Path(m).exists() for m in session.mounts):
            if not worker.alive():
                raise RuntimeError(f"{worker.kind} worker exited during teardown:\n{worker.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{worker.kind}: the work item did not stop / folders not removed in {WAIT:.0f}s")
            time.sleep(0.1)
        code = worker.stop()
        self.last_teardown = time.monotonic()
        session.close()
        if code != 0:
            self.problems.append(f"{worker.kind} worker exited with status {code} after SIGTERM")
        if session.stream_error:
            log(f"  note: the event stream broke ({session.stream_error}); {session.polled} result(s) found by polling")
        return {"peak_rss_kib": worker.peak_self_kib, "child_peak_rss_kib": worker.peak_child_kib(),
                "children": worker.child_names(), "exit_code": code, "results_by_poll": session.polled}

    def expect(self, what: str, got: Dict[str, Any], text: str) -> None:
        if got["is_error"] or got["text"] != text:
            self.problems.append(f"{what}: expected {text[:60]!r}, got is_error={got['is_error']} {got['text'][:200]!r}")

    # -- scenario 1 ----------------------------------------------------------------------------
    def first_call(self, kind: str, big: List[Tuple[str, str]]) -> Dict[str, Any]:
        env, key = self.environment()
        session = Session(self.api, self.agent, env, [s for s, _ in big])
        target = f"{session.mounts[0]}/{mem_path(7).lstrip('/')}"
        use = session.tool_use("read", {"file_path": target})
        worker = self.start(kind, env, key, 3600, "first-call")
        try:
            seen, ev = session.wait(use["id"], worker.alive)
            hwm_mounted = worker.hwm_now()
            got = {"is_error": bool(ev.get("is_error")), "text": "".join(b.get("text", "") for b in ev.get("content") or [])}
            self.expect(f"{kind} first call", got, content(7, self.args.size, big[0][1]))
            item = work_item(self.api, env, session.id)
            ack = parse_ts(item["acknowledged_at"])
            done = parse_ts(ev["processed_at"])
            floor_ms = self.floor(session.mounts)
            out = {
                "floor_ms": floor_ms,
                "claim_to_first_ms": (done - ack) * 1000,
                "start_to_first_ms": (done - worker.started_wall) * 1000,
                "start_to_claim_ms": (ack - worker.started_wall) * 1000,
                "start_to_seen_ms": (seen - worker.started) * 1000,
                "peak_rss_at_first_result_kib": hwm_mounted,
            }
            out.update(self.finish(worker, session, env))
            out["download_ms"] = worker.download_ms()
            return out
        finally:
            if worker.alive():
                worker.stop()

    def floor(self, mounts: List[str]) -> float:
        """The disk's floor of a first call: `cp -r` of the folders the worker just wrote (the
        same files, from the page cache) into the same mount root, timed, then removed. Timed
        after a `sync` (untimed): the worker may still be flushing its download (mnemo commits
        its first journal after the first call), and `cp -r` must not share the disk with it."""
        root = Path(mounts[0]).parent
        dest = root / f"floor-{secrets.token_hex(4)}"
        dest.mkdir()
        os.sync()
        t0 = time.monotonic()
        subprocess.run(["cp", "-r", *mounts, str(dest)], check=True)
        took = (time.monotonic() - t0) * 1000
        shutil.rmtree(dest)
        return took

    # -- scenario 2 ----------------------------------------------------------------------------
    def noop_sync(self, kind: str, big: List[Tuple[str, str]]) -> Dict[str, Any]:
        env, key = self.environment()
        worker = self.start(kind, env, key, 5, "noop-sync")
        session = Session(self.api, self.agent, env, [s for s, _ in big])
        files = [(f"{session.mounts[i % len(big)]}/{mem_path(i).lstrip('/')}", content(i, self.args.size, big[i % len(big)][1]))
                 for i in range(1, 64)]
        n = 0

        def read() -> Dict[str, Any]:
            nonlocal n
            path, text = files[n % len(files)]
            n += 1
            got = session.call("read", {"file_path": path}, worker.alive)
            self.expect(f"{kind} noop-sync read", got, text)
            return got

        def pair(synced: int) -> Dict[str, float]:
            """X then Y; the CPU window closes once `synced` non-final syncs are logged (SDK: its
            sync runs beside the next calls, so it may still be busy when Y's result is in)."""
            cpu0 = worker.cpu()
            x = read()
            y = read()
            while kind == "sdk" and len([e for e in worker.sdk_syncs() if not e["final"]]) < synced:
                if time.monotonic() - x["posted"] > 60:
                    self.problems.append(f"sdk noop-sync: sync {synced} was never logged")
                    break
                time.sleep(0.01)
            time.sleep(0.05)
            if kind == "go":
                # The Go SDK runs a due sync beside the next calls too, and offers no hook to time it
                # (its syncAll is unexported): the window closes once the process has used no CPU
                # for 200 ms.
                quiet_since, last_cpu = time.monotonic(), worker.cpu()[0]
                while time.monotonic() - quiet_since < 0.2 and time.monotonic() - x["posted"] < 60:
                    time.sleep(0.02)
                    now_cpu = worker.cpu()[0]
                    if now_cpu != last_cpu:
                        quiet_since, last_cpu = time.monotonic(), now_cpu
            cpu1 = worker.cpu()
            server = parse_ts(y["result"]["processed_at"]) - parse_ts(x["use"]["processed_at"])
            return {"server_ms": server * 1000, "client_ms": (y["seen"] - x["posted"]) * 1000,
                    "cpu_ms": (cpu1[0] - cpu0[0]) / 1e6, "cpu_ticks_ms": (cpu1[1] - cpu0[1]) / 1e6,
                    "x_ms": (parse_ts(x["result"]["processed_at"]) - parse_ts(x["use"]["processed_at"])) * 1000,
                    "y_ms": (parse_ts(y["result"]["processed_at"]) - parse_ts(y["use"]["processed_at"])) * 1000}

        try:
            warm = read()  # waits for the claim and the download
            last = warm["seen"]
            reps = []
            for rep in range(self.args.reps):
                pause = last + 5.5 - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                a = pair(rep + 1)
                b = pair(rep + 1)
                last = time.monotonic()
                rec = {"a": a, "b": b, "delay_ms": a["server_ms"] - b["server_ms"],
                       "cpu_ms": a["cpu_ms"] - b["cpu_ms"], "cpu_ticks_ms": a["cpu_ticks_ms"] - b["cpu_ticks_ms"]}
                reps.append(rec)
            syncs = [x["ms"] for x in worker.sdk_syncs() if not x["final"]] if kind == "sdk" else []
            if kind == "sdk" and len(syncs) != len(reps):
                self.problems.append(f"sdk noop-sync: {len(syncs)} timed syncs for {len(reps)} reps")
            for i, rec in enumerate(reps):
                # mnemo syncs inline, between X's result and Y: the delay it adds is the sync's wall time.
                rec["sync_ms"] = syncs[i] if i < len(syncs) else (rec["delay_ms"] if kind == "mnemo" else float("nan"))
                log(f"    rep {i + 1}: sync {rec['sync_ms']:.1f} ms wall, {rec['cpu_ms']:.1f} ms CPU; pair with sync "
                    f"{rec['a']['server_ms']:.1f} ms, without {rec['b']['server_ms']:.1f} ms")
            later = reps[1:] or reps
            out = {
                "peak_rss_before_end_kib": worker.hwm_now(),
                "reps": reps,
                "first_sync_ms": reps[0]["sync_ms"],
                "first_sync_cpu_ms": reps[0]["cpu_ms"],
                "noop_sync_ms": statistics.median(r["sync_ms"] for r in later),
                "noop_sync_cpu_ms": statistics.median(r["cpu_ms"] for r in later),
                "noop_delay_ms": statistics.median(r["delay_ms"] for r in later),
                "pair_with_sync_ms": statistics.median(r["a"]["server_ms"] for r in later),
                "pair_without_sync_ms": statistics.median(r["b"]["server_ms"] for r in later),
                "cheap_call_ms": statistics.median(v for r in later for v in (r["b"]["x_ms"], r["b"]["y_ms"])),
            }
            out.update(self.finish(worker, session, env))
            if kind == "sdk":
                out["final_sync_ms"] = next((x["ms"] for x in worker.sdk_syncs() if x["final"]), float("nan"))
            return out
        finally:
            if worker.alive():
                worker.stop()

    # -- scenario 3 ----------------------------------------------------------------------------
    def many_calls(self, kind: str, small: Tuple[str, str]) -> Dict[str, Any]:
        env, key = self.environment()
        worker = self.start(kind, env, key, 15, "many-calls")
        session = Session(self.api, self.agent, env, [small[0]])
        mount = session.mounts[0]
        try:
            warm = session.call("bash", {"command": "echo warm"}, worker.alive)
            self.expect(f"{kind} warm-up", warm, "warm")
            calls = []
            t0 = time.monotonic()
            for i in range(self.args.calls):
                if i % 2 == 0:
                    j = (i // 2) % self.args.small_memories
                    got = session.call("read", {"file_path": f"{mount}/{mem_path(j).lstrip('/')}"}, worker.alive)
                    self.expect(f"{kind} call {i}", got, content(j, self.args.size, small[1]))
                else:
                    got = session.call("bash", {"command": f"echo call {i}"}, worker.alive)
                    self.expect(f"{kind} call {i}", got, f"call {i}")
                calls.append(got)
            wall = time.monotonic() - t0
            first, last = calls[0], calls[-1]
            per_call = sorted((parse_ts(c["result"]["processed_at"]) - parse_ts(c["use"]["processed_at"])) * 1000 for c in calls)
            out = {
                "total_ms": (parse_ts(last["result"]["processed_at"]) - parse_ts(first["use"]["processed_at"])) * 1000,
                "total_client_ms": wall * 1000,
                "per_call_median_ms": statistics.median(per_call),
                "per_call_p90_ms": per_call[int(0.9 * (len(per_call) - 1))],
                "per_call_max_ms": per_call[-1],
                "read_median_ms": statistics.median(per_call_of(calls, "read")),
                "bash_median_ms": statistics.median(per_call_of(calls, "bash")),
            }
            out.update(self.finish(worker, session, env))
            return out
        finally:
            if worker.alive():
                worker.stop()


def per_call_of(calls: List[Dict[str, Any]], tool: str) -> List[float]:
    return [(parse_ts(c["result"]["processed_at"]) - parse_ts(c["use"]["processed_at"])) * 1000
            for c in calls if c["use"]["name"] == tool]


# ---------------------------------------------------------------------------------------------
# Report.
# ---------------------------------------------------------------------------------------------


def med(results: Dict[str, List[Dict[str, Any]]], scenario: str, kind: str, key: str) -> float:
    return statistics.median(r[scenario][key] for r in results[kind])


def table(results: Dict[str, List[Dict[str, Any]]], args: argparse.Namespace) -> str:
    def m(s: str, k: str) -> float:
        return med(results, s, "mnemo", k)

    def s_(s: str, k: str) -> float:
        return med(results, s, "sdk", k)

    big = f"{args.stores} × {args.memories:,} × {args.size // 1024 or args.size} {'KB' if args.size >= 1024 else 'B'}"
    rounds = min(len(results["mnemo"]), len(results["sdk"]))
    out = [
        f"Medians over {rounds} round(s); in parentheses the range over the rounds, and for the ratio the range of "
        "each round's own ratio (both workers on the same server, one after the other).",
        "",
        "| measurement | mnemo | SDK 2.10.0 | ratio | goal | met in every round |",
        "|---|---:|---:|---:|---:|:---:|",
    ]

    def rng(values: List[float], fmt) -> str:
        return f" ({fmt(min(values))}–{fmt(max(values))})" if len(values) > 1 else ""

    present = [s for s in ("first_call", "noop_sync", "many_calls") if all(s in r for r in results["mnemo"] + results["sdk"])]

    def speed_row(label: str, scen: str, key: str, goal: Optional[float]) -> None:
        if scen not in present:
            return
        ms_ = [r[scen][key] for r in results["mnemo"][:rounds]]
        ss = [r[scen][key] for r in results["sdk"][:rounds]]
        ratios = [b / a if a > 0 else float("inf") for a, b in zip(ms_, ss)]
        ratio = statistics.median(ratios)
        cells = (f"{fmt_ms(statistics.median(ms_))}{rng(ms_, fmt_ms)} | {fmt_ms(statistics.median(ss))}{rng(ss, fmt_ms)}"
                 f" | SDK/mnemo {'**' if goal else ''}{ratio:.1f}×{'**' if goal else ''}{rng(ratios, lambda v: f'{v:.1f}')}")
        if goal is None:
            out.append(f"| {label} | {cells} | – | – |")
        else:
            out.append(f"| {label} | {cells} | ≥ {goal:g}× | {'yes' if all(r >= goal for r in ratios) else 'NO'} |")

    speed_row(f"1. claim → first tool result ({big} attached; server `acknowledged_at` → result `processed_at`)",
              "first_call", "claim_to_first_ms", GOALS["claim_to_first_ms"][1])
    for kind in ("mnemo", "sdk") if "first_call" in present else ():
        firsts = [r["first_call"] for r in results[kind][:rounds]]
        ratios = [f["claim_to_first_ms"] / f["floor_ms"] for f in firsts]
        floors = [f["floor_ms"] for f in firsts]
        goal = "≤ 1.3× | " + ("yes" if all(r <= 1.3 for r in ratios) else "NO") if kind == "mnemo" else "– | –"
        out.append(f"| 1. {kind}: claim → first tool result vs the disk's floor (`cp -r` of the same files into the "
                   f"same mount root, same round: {fmt_ms(statistics.median(floors))}{rng(floors, fmt_ms)}) | "
                   f"{statistics.median(ratios):.2f}× the floor{rng(ratios, lambda v: f'{v:.2f}')} | | | {goal} |")
    speed_row("1. of which: download of every store, as timed inside the worker (mnemo: its `memory ready` "
              "log line; SDK: `SessionMemoryStores.download`)", "first_call", "download_ms", None)
    speed_row("1. worker process start → first tool result (wall)", "first_call", "start_to_first_ms", None)
    speed_row("1. worker process start → claim (`acknowledged_at`)", "first_call", "start_to_claim_ms", None)
    speed_row(f"2. no-op sync after a call, {big}: wall time (median of reps 2..; SDK: `_sync_all` timed inside "
              "the worker; mnemo: the delay it adds to the next call, as it syncs inline)",
              "noop_sync", "noop_sync_ms", GOALS["noop_sync_ms"][1])
    speed_row("2. no-op sync: CPU time of the worker process (pair with sync − pair without; median of reps 2..)",
              "noop_sync", "noop_sync_cpu_ms", GOALS["noop_sync_ms"][1])
    speed_row("2. no-op sync: delay added to the agent's next call (pair with sync − pair without)",
              "noop_sync", "noop_delay_ms", None)
    speed_row("2. first sync after the download (rep 1): wall", "noop_sync", "first_sync_ms", None)
    speed_row("2. first sync after the download (rep 1): CPU", "noop_sync", "first_sync_cpu_ms", None)
    speed_row("2. pair of reads with a sync due (median)", "noop_sync", "pair_with_sync_ms", None)
    speed_row("2. pair of reads, no sync due (median)", "noop_sync", "pair_without_sync_ms", None)
    speed_row(f"3. {args.calls} calls (read / bash echo alternating), 1 × {args.small_memories} memories: total",
              "many_calls", "total_ms", None)
    speed_row("3. per call, median (tool_use `processed_at` → result `processed_at`)", "many_calls",
              "per_call_median_ms", None)
    speed_row("3. per call, p90", "many_calls", "per_call_p90_ms", None)
    speed_row("3. `read` median / `bash` median: read", "many_calls", "read_median_ms", None)
    speed_row("3. `read` median / `bash` median: bash", "many_calls", "bash_median_ms", None)

    def peak(kind: str, key: str) -> float:
        return max(r[s][key] for r in results[kind] for s in present)

    def round_peak(r: Dict[str, Any]) -> float:
        return max(r[s]["peak_rss_kib"] for s in present)

    pa = [round_peak(r) for r in results["mnemo"][:rounds]]
    pb = [round_peak(r) for r in results["sdk"][:rounds]]
    fractions = [a / b for a, b in zip(pa, pb)]
    goal = GOALS["peak_rss_kib"][1]
    out.append(f"| 4. peak RSS of the worker process (VmHWM, max over 1–3, whole sessions incl. teardown) | "
               f"{fmt_mib(statistics.median(pa))}{rng(pa, fmt_mib)} | {fmt_mib(statistics.median(pb))}{rng(pb, fmt_mib)} | "
               f"mnemo/SDK **{statistics.median(fractions):.3f}**{rng(fractions, lambda v: f'{v:.3f}')} | ≤ {goal:g} | "
               f"{'yes' if all(f <= goal for f in fractions) else 'NO'} |")
    def session_peak(r: Dict[str, Any], scen: str) -> float:
        return r[scen]["peak_rss_kib"] + r[scen]["child_peak_rss_kib"]

    wa = [session_peak(r, "first_call") for r in results["mnemo"][:rounds] if "first_call" in present]
    wb = [session_peak(r, "first_call") for r in results["sdk"][:rounds] if "first_call" in present]
    wf = [a / b for a, b in zip(wa, wb)]
    if wf:
        out.append(f"| 4. peak RSS of the whole session in scenario 1 (the worker and its bash child, each at its peak) | "
               f"{fmt_mib(statistics.median(wa))}{rng(wa, fmt_mib)} | {fmt_mib(statistics.median(wb))}{rng(wb, fmt_mib)} | "
               f"mnemo/SDK **{statistics.median(wf):.3f}**{rng(wf, lambda v: f'{v:.3f}')} | ≤ 0.2 | "
               f"{'yes' if all(f <= 0.2 for f in wf) else 'NO'} |")
    for scen, label in (("first_call", "1"), ("noop_sync", "2"), ("many_calls", "3")):
        if scen not in present:
            continue
        a, b = m(scen, "peak_rss_kib"), s_(scen, "peak_rss_kib")
        out.append(f"| 4. peak RSS of the worker process in scenario {label} | {fmt_mib(a)} | {fmt_mib(b)} | "
                   f"mnemo/SDK {a / b:.2f} | – | – |")
    for scen, key, label in (("first_call", "peak_rss_at_first_result_kib", "1, up to the first result (mount done)"),
                             ("noop_sync", "peak_rss_before_end_kib", "2, up to the end of the turn (before teardown)")):
        if scen not in present:
            continue
        a, b = m(scen, key), s_(scen, key)
        out.append(f"| 4. peak RSS of the worker process in scenario {label} | {fmt_mib(a)} | {fmt_mib(b)} | "
                   f"mnemo/SDK {a / b:.2f} | – | – |")
    a, b = peak("mnemo", "child_peak_rss_kib"), peak("sdk", "child_peak_rss_kib")
    names = {k: sorted({n for r in results[k] for s in present for n in r[s]["children"]})
             for k in ("mnemo", "sdk")}
    out.append(f"| 4. peak RSS of a child process (the bash shell; mnemo: {', '.join(names['mnemo']) or '–'}; "
               f"SDK: {', '.join(names['sdk']) or '–'}) | {fmt_mib(a)} | {fmt_mib(b)} | "
               f"mnemo/SDK {a / b if b else float('nan'):.2f} | – | – |")
    return "\n".join(out)


def reps_table(results: Dict[str, List[Dict[str, Any]]]) -> str:
    out = ["| round | worker | rep | sync wall | sync CPU (A − B) | pair A (sync due) | pair B | delay (A − B) |",
           "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for kind in ("mnemo", "sdk"):
        for rnd, r in enumerate(results[kind], 1):
            for i, rep in enumerate(r["noop_sync"]["reps"], 1):
                out.append(f"| {rnd} | {kind} | {i} | {fmt_ms(rep['sync_ms'])} | {fmt_ms(rep['cpu_ms'])} | "
                           f"{fmt_ms(rep['a']['server_ms'])} | {fmt_ms(rep['b']['server_ms'])} | {fmt_ms(rep['delay_ms'])} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", type=int, default=8, help="stores attached in scenarios 1 and 2 (at most 8)")
    ap.add_argument("--memories", type=int, default=2000, help="memories per store in scenarios 1 and 2")
    ap.add_argument("--size", type=int, default=1024, help="bytes per memory")
    ap.add_argument("--reps", type=int, default=5, help="sync reps in scenario 2 (each takes > 5 s)")
    ap.add_argument("--calls", type=int, default=200, help="calls in scenario 3")
    ap.add_argument("--small-memories", type=int, default=100, help="memories of the store in scenario 3")
    ap.add_argument("--rounds", type=int, default=1, help="rounds; workers alternate going first")
    ap.add_argument("--quick", action="store_true", help="2 stores x 300 memories, 3 reps, 40 calls")
    ap.add_argument("--no-build", action="store_true", help="use target/release/mnemo as it is")
    ap.add_argument("--workdir", type=Path, default=None, help="parent of the throw-away work folder")
    ap.add_argument("--out", type=Path, help="also write the Markdown report here")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (database, logs)")
    ap.add_argument("--worker-binary", type=Path,
                    help="the `mnemo` binary the worker runs (default: the server's, target/release/mnemo), e.g. the "
                         "sandbox build (`cargo build --release -p mnemo --no-default-features`)")
    ap.add_argument("--only", choices=["mnemo", "sdk", "go"],
                    help="profiling: run this worker alone (go: the Go SDK's, compat/go/benchworker); no table, only the log")
    ap.add_argument("--scenarios", default="first_call,noop_sync,many_calls",
                    help="the scenarios to run, comma-separated (the table shows the rows of those that ran)")
    args = ap.parse_args()
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if not set(scenarios) <= {"first_call", "noop_sync", "many_calls"} or not scenarios:
        raise SystemExit("--scenarios: a comma-separated subset of first_call,noop_sync,many_calls")
    if args.quick:
        args.stores, args.memories, args.reps, args.calls = 2, 300, 3, 40
    if not 1 <= args.stores <= 8:
        raise SystemExit("--stores must be 1..8 (a session attaches at most 8 stores)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    load_before = os.getloadavg()[0]
    if not args.no_build:
        cargo_build()
    mnemo_bin = REPO / "target" / "release" / "mnemo"
    python = ensure_venv()
    started = time.monotonic()
    header, revision = machine("when measuring began"), git_revision(REPO)
    header += f" (before building: {load_before:.2f})"

    work = Path(tempfile.mkdtemp(prefix="mnemo-worker-bench-", dir=args.workdir)).resolve()
    mount_root = work / "mnt"
    mount_root.mkdir()
    reuse_wait = inode_reuse_wait(mount_root)
    key = "sk-bench-" + secrets.token_hex(16)
    server = Server(mnemo_bin, work, key, ["--memory-mount-root", str(mount_root)])
    results: Dict[str, List[Dict[str, Any]]] = {"mnemo": [], "sdk": []}
    if args.only:
        results.setdefault(args.only, [])
    problems: List[str] = []
    try:
        log(f"server at {server.base_url}; work folder {work}")
        api = Api(server.base_url, key)
        t = time.perf_counter()
        with ThreadPoolExecutor(max_workers=8) as pool:
            big = [(seed_store(api, f"Bench Big {i}", args.memories, args.size, pool), f"Bench Big {i}")
                   for i in range(args.stores)]
            small = (seed_store(api, "Bench Small", args.small_memories, args.size, pool), "Bench Small")
        log(f"seeded {args.stores} x {args.memories} + {args.small_memories} memories of {args.size} B "
            f"in {time.perf_counter() - t:.1f} s")
        agent = api.call("POST", "/v1/agents", {"name": "bench-agent", "model": "claude-opus-4-6",
                                                "tools": [{"type": "agent_toolset_20260401"}]})["id"]
        go_bin = go_build() if args.only == "go" else None
        worker_bin = args.worker_binary or mnemo_bin
        bench = Bench(args, api, server.base_url, work, worker_bin, python, agent, go_bin)
        for rnd in range(1, args.rounds + 1):
            order = ["mnemo", "sdk"] if rnd % 2 else ["sdk", "mnemo"]
            if args.only:
                order = [args.only]
            row: Dict[str, Dict[str, Any]] = {k: {} for k in order}
            for scenario in scenarios:
                for kind in order:
                    log(f"round {rnd}: {scenario} / {kind} ...")
                    os.sync()  # untimed: the previous run's dirty pages are not this run's writeback
                    time.sleep(1)
                    if scenario == "first_call" and reuse_wait:
                        # The previous run's teardown freed 16,000 inodes: let the filesystem's
                        # reuse window pass, so neither worker's download pays for the other's.
                        left = bench.last_teardown + reuse_wait + 2 - time.monotonic()
                        if left > 0:
                            log(f"  waiting {left:.0f} s: ext4 without a journal skips inodes freed in the last "
                                f"{reuse_wait:.0f} s")
                            time.sleep(left)
                    t = time.perf_counter()
                    if scenario == "first_call":
                        r = bench.first_call(kind, big)
                        log(f"  claim -> first result {fmt_ms(r['claim_to_first_ms'])}, process start -> first result "
                            f"{fmt_ms(r['start_to_first_ms'])}, peak RSS {fmt_mib(r['peak_rss_kib'])}")
                    elif scenario == "noop_sync":
                        r = bench.noop_sync(kind, big)
                        log(f"  no-op sync {fmt_ms(r['noop_sync_ms'])} wall, {fmt_ms(r['noop_sync_cpu_ms'])} CPU "
                            f"(first {fmt_ms(r['first_sync_ms'])}), "
                            f"peak RSS {fmt_mib(r['peak_rss_kib'])}")
                    else:
                        r = bench.many_calls(kind, small)
                        log(f"  {args.calls} calls in {fmt_ms(r['total_ms'])} (median {fmt_ms(r['per_call_median_ms'])}), "
                            f"peak RSS {fmt_mib(r['peak_rss_kib'])}")
                    r["scenario_wall_s"] = round(time.perf_counter() - t, 1)
                    row[kind][scenario] = r
            for kind in order:
                results[kind].append(row[kind])
        problems = bench.problems
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    elapsed = time.monotonic() - started
    if args.only:
        log(f"{args.only} alone, {', '.join(scenarios)}: {elapsed:.0f} s; no table (it compares both workers)")
        for p in problems:
            log(f"problem: {p}")
        sys.exit(1 if problems else 0)
    cmd = "python3 bench/worker/run.py " + " ".join(sys.argv[1:])
    walls = {k: {s: results[k][0][s]["scenario_wall_s"] for s in scenarios} for k in results}
    worker_bin = args.worker_binary or mnemo_bin
    report = [
        f"Machine: {header}. Server, workers and the driver share the cores.",
        f"mnemo's worker runs `{worker_bin}` ({worker_bin.stat().st_size / 1e6:.1f} MB); the server "
        f"`{mnemo_bin}` ({mnemo_bin.stat().st_size / 1e6:.1f} MB).",
        f"Source: {revision}. Work folder (database, mount folders): {work.parent}, {fs_type(work.parent)}"
        + (f" without a journal: every first-call run started ≥ {reuse_wait + 2:.0f} s after the previous run's "
           "teardown, since such an ext4 skips inodes freed in the last 60 s, or 360 s once their block of the inode "
           "table is dirty again, which the next run's own files make it (creating 16,000 files right after "
           "16,000 were deleted took 7–10 s of kernel time instead of ~1.3 s, for either worker)." if reuse_wait else "."),
        f"Command: `{cmd.strip()}`; {args.rounds} round(s), workers alternating first; medians over rounds. "
        f"Whole run {elapsed:.0f} s; load average {os.getloadavg()[0]:.2f} at the end.",
        "Scenario wall times, round 1 (s): " + "; ".join(
            f"{k}: " + ", ".join(f"{s} {v}" for s, v in walls[k].items()) for k in ("mnemo", "sdk")),
        "",
        table(results, args),
    ]
    if "noop_sync" in scenarios:
        report += ["", "Scenario 2, per rep (server clock: X's tool_use `processed_at` → Y's result `processed_at`):", "",
                   reps_table(results)]
    if problems:
        report += ["", "**Problems:**", ""] + [f"- {p}" for p in problems]
    text = "\n".join(report) + "\n"
    print(text)
    raw = json.dumps({"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                      "results": results})
    print("<!-- raw: " + raw + " -->")
    if args.out:
        args.out.write_text(text + "\n<!-- raw: " + raw + " -->\n", encoding="utf-8")
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
