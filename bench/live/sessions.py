#!/usr/bin/env python3
"""Live memory between two worker-served sessions: session A's agent writes a file, how long
until session B's agent reads those bytes — mnemo's worker with live sync, mnemo's worker on
the interval, and the official SDK's `EnvironmentWorker` at its default (15 s) and minimum (5 s)
intervals, measured the same way in one run against one `mnemo serve`.

    python3 bench/live/sessions.py [--live-writes 50] [--interval-writes 10] [--no-build] [--keep]

Set-up: `mnemo serve` (SQLite, throw-away) with `--memory-mount-root <work>/mnt`, one memory
store, one self-hosted environment. For each configuration two workers of that kind poll the
environment, each in its own mount namespace with a private tmpfs on `<work>/mnt` (`unshare -m`,
so needs root): both sessions mount the store at the same path, as two sandboxes would, without
seeing each other's folder. Two sessions are created; each worker claims one.

One measurement (interval configurations start each at a random moment of the interval): A's agent calls `write` (even writes create a file, odd ones rewrite one of
five); from just before that call is posted, B's agent calls `read` on the path again and again
until the result holds exactly the new bytes. Between B's reads A's agent makes a cheap call too
(`read` of a small file), because the SDK worker syncs only after a tool call once its interval
has passed: without calls its edits would never leave. mnemo's live worker needs neither.

Standard library only (the SDK worker runs in `target/compat-venv`); everything talks to
127.0.0.1. Prints a Markdown table; exit code 1 if any write never arrived.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import random
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from mnemo_bench import REPO, Api, Server, ensure_release_binary, ensure_venv, fmt_ms, git_revision, log, machine  # noqa: E402

_spec = importlib.util.spec_from_file_location("worker_bench", HERE.parent / "worker" / "run.py")
assert _spec and _spec.loader
worker_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker_bench)
Session = worker_bench.Session
SDK_WORKER = worker_bench.SDK_WORKER

BINARY = REPO / "target" / "release" / "mnemo"
MAX_IDLE_S = 600  # the sessions stay served for the whole measurement
TIMEOUT_S = {"live": 30.0, "interval": 60.0}


class Worker:
    """One worker process in its own mount namespace, with a private tmpfs on the mount root."""

    def __init__(self, kind: str, name: str, mnt: Path, env_id: str, key: str, base_url: str, interval: int,
                 live: bool, area: Path, python: Path) -> None:
        self.kind, self.name = kind, name
        (area / "workdir").mkdir(parents=True)
        self.log_path = area / "worker.log"
        self._log = open(self.log_path, "w", encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MNEMO_", "RUST_LOG"))}
        env.update({"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
                    "ANTHROPIC_ENVIRONMENT_KEY": key, "NO_COLOR": "1"})
        if kind == "sdk":
            env["MNEMO_BENCH_WORKER"] = json.dumps({
                "base_url": base_url, "environment_id": env_id, "workdir": str(area / "workdir"),
                "max_idle": MAX_IDLE_S, "memory_sync_interval": interval,
            })
            argv = [str(python), "-c", SDK_WORKER]
        else:
            argv = [str(BINARY), "worker", "poll", "--environment-id", env_id, "--base-url", base_url,
                    "--workdir", str(area / "workdir"), "--state-dir", str(area / "state"),
                    "--max-idle", f"{MAX_IDLE_S}s", "--memory-sync-interval", str(interval),
                    "--memory-mount-root", str(mnt)]
            if not live:
                argv.append("--no-live")
        # The tmpfs exists only in the worker's namespace: its folders are its own.
        wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                'mount -t tmpfs -o size=64m,mode=0755 mnemo-bench "$0" && exec "$@"', str(mnt)]
        self.proc = subprocess.Popen(wrap + argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                                     env=env, start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> Optional[int]:
        """Waits for a worker already sent SIGTERM (a second signal would abort its teardown)."""
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def data(tag: str, i: int) -> str:
    head = f"# {tag} write {i}\nnonce {secrets.token_hex(8)} at {time.time_ns()}\n"
    s = head
    while len(s) < 300 + (i % 7) * 20:
        s += "one session writes this line, another one reads it. "
    return s + "\n"


def measure(api: Api, agent: str, store: str, env_id: str, key: str, base_url: str, work: Path, python: Path,
            kind: str, interval: int, live: bool, writes: int, label: str, problems: List[str]) -> List[float]:
    mnt = work / "mnt"
    workers = [Worker(kind, f"{label}-{n}", mnt, env_id, key, base_url, interval, live, work / f"{label}-{n}", python)
               for n in ("A", "B")]
    sessions: List[Session] = []
    times: List[float] = []
    try:
        for _ in workers:
            sessions.append(Session(api, agent, env_id, [store]))
        a, b = sessions
        alive = lambda: all(w.alive() for w in workers)  # noqa: E731
        folder = a.mounts[0]
        assert folder == b.mounts[0], "both sessions mount the store at the same path"
        # Warm-up: both sessions are claimed and mounted, and A's small file exists.
        for s in sessions:
            r = s.call("read", {"file_path": f"{folder}/README.md"}, alive)
            if r["is_error"]:
                raise SystemExit(f"{label}: the warm-up read failed: {r['text'][:200]}")
        timeout = TIMEOUT_S["live" if live else "interval"]
        for i in range(writes):
            if not live:
                # Interval syncs run on their own clock: start each write at a random phase of it.
                time.sleep(random.uniform(0, interval))
            rel = f"sessions/{label}/new/n{i:03d}.md" if i % 2 == 0 else f"sessions/{label}/hot/h{(i // 2) % 5}.md"
            text = data(label, i)
            t0 = time.monotonic()
            w = a.call("write", {"file_path": f"{folder}/{rel}", "content": text}, alive)
            if w["is_error"]:
                raise SystemExit(f"{label}: A's write failed: {w['text'][:200]}")
            while True:
                r = b.call("read", {"file_path": f"{folder}/{rel}"}, alive)
                if not r["is_error"] and r["text"] == text:
                    times.append(r["seen"] - t0)
                    break
                if time.monotonic() - t0 > timeout:
                    problems.append(f"{label}: write {i} ({rel}) never reached session B within {timeout:.0f} s")
                    log("  MISSED: " + problems[-1])
                    break
                a.call("read", {"file_path": f"{folder}/README.md"}, alive)  # lets the SDK's A sync
            if (i + 1) % 10 == 0 or not live:
                log(f"  {label}: {i + 1}/{writes}, last {fmt_ms(times[-1] * 1000) if times else '–'}")
            time.sleep(0.2)
    finally:
        for s in sessions:
            try:
                s.end_turn()
            except Exception:  # noqa: BLE001 — the workers are stopped anyway
                pass
        for w in workers:
            if w.alive():
                w.proc.terminate()  # side by side: their final syncs run together (one signal each)
        for w in workers:
            code = w.stop()
            if code not in (0, -signal.SIGTERM):
                problems.append(f"{w.name} worker exited with {code}: {w.tail(5)}")
        for s in sessions:
            s.close()
    return times


def pct(xs: List[float], q: float) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--live-writes", type=int, default=50)
    ap.add_argument("--interval-writes", type=int, default=10)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        raise SystemExit("needs root (each worker gets its own mount namespace and tmpfs)")
    ensure_release_binary(args.no_build)
    python = ensure_venv()
    header = machine("at start")
    work = Path(tempfile.mkdtemp(prefix="mnemo-live-sessions-"))
    (work / "mnt").mkdir()
    key = "sk-bench-" + secrets.token_hex(16)
    problems: List[str] = []
    results: List[Tuple[str, int, List[float]]] = []
    server: Optional[Server] = None
    try:
        server = Server(BINARY, work, key, ["--memory-mount-root", str(work / "mnt")])
        api = Api(server.base_url, key)
        agent = api.call("POST", "/v1/agents", {"name": "bench", "model": "m",
                                                 "tools": [{"type": "agent_toolset_20260401"}]})["id"]
        store = api.call("POST", "/v1/memory_stores", {"name": "shared"})["id"]
        api.call("POST", f"/v1/memory_stores/{store}/memories", {"path": "/README.md", "content": "shared\n"})
        env_id = api.call("POST", "/v1/environments", {"name": "bench", "config": {"type": "self_hosted"}})["id"]
        env_key = api.call("POST", f"/v1/environments/{env_id}/keys", {})["key"]
        plan = [
            ("mnemo worker, live (default)", "mnemo", 15, True, args.live_writes, "mnemo-live"),
            ("mnemo worker, `--no-live`, interval 5 s", "mnemo", 5, False, args.interval_writes, "mnemo-5s"),
            ("SDK 2.10.0 `EnvironmentWorker`, interval 5 s (its minimum)", "sdk", 5, False, args.interval_writes,
             "sdk-5s"),
            ("SDK 2.10.0 `EnvironmentWorker`, interval 15 s (its default)", "sdk", 15, False, args.interval_writes,
             "sdk-15s"),
        ]
        for title, kind, interval, live, n, label in plan:
            log(f"{title}: {n} writes ...")
            times = measure(api, agent, store, env_id, env_key, server.base_url, work, python, kind, interval, live,
                            n, label, problems)
            results.append((title, n, times))
    finally:
        if server is not None:
            server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    lines = [
        f"Machine: {header}. Server, four worker processes at a time (two) and this runner share the cores.",
        f"Source: {git_revision(REPO)}. Command: `python3 bench/live/sessions.py {' '.join(sys.argv[1:])}`.",
        "",
        "| session A writes → session B reads the bytes | arrived | p50 | p99 | max | min |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for title, n, xs in results:
        if xs:
            lines.append(f"| {title} | {len(xs)}/{n} | {fmt_ms(pct(xs, 50))} | {fmt_ms(pct(xs, 99))} | "
                         f"{fmt_ms(max(xs) * 1000)} | {fmt_ms(min(xs) * 1000)} |")
        else:
            lines.append(f"| {title} | 0/{n} | – | – | – | – |")
    if problems:
        lines += ["", "**Problems:**", ""] + [f"- {p}" for p in problems]
    print("\n".join(lines))
    print(f"<!-- raw ms: { {t: [round(x * 1000, 1) for x in xs] for t, _, xs in results} } -->")
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
