#!/usr/bin/env python3
"""What idle mounted stores cost the server: CPU per mounted store per minute, and how many
idle mounted stores one server core sustains — mnemo's live sync (an open change feed per
store), mnemo's interval sync (a no-op sync every interval), and the official SDK engine's
interval sync (`SessionMemoryStores._sync_all`, what its worker runs after a tool call once the
interval has passed), measured in one run against one `mnemo serve`.

    python3 bench/live/idle.py [--stores 50] [--memories 100] [--window 60] [--no-build] [--keep]

Set-up: `mnemo serve` (SQLite, throw-away) with `--stores` stores of `--memories` memories
(~400 bytes each). The server's CPU is read from `/proc/<pid>/stat` (utime + stime) over a
`--window`-second window; an idle server's own rate over the same window is subtracted.

1. **mnemo live:** one `mnemo mount --interval 3600` per store (live sync on: an open SSE feed
   each, keep-alive pings); the window starts once every mount is up and the first syncs have
   settled. Nothing changes during it.
2. **mnemo interval:** one `mnemo mount --no-live --interval 15` per store (15 s, the
   reference worker's default cadence): four no-op syncs per store per minute.
3. **SDK interval:** one SDK `SessionMemoryStores` holding every store (as a session with many
   stores would), `_sync_all(final=False)` every 15 s, as a busy session's `sync_if_due()` does.
   (The SDK worker syncs only after tool calls: an SDK session making no calls costs nothing —
   and sees no remote change either.)

Standard library only (the SDK runs in `target/compat-venv`); everything talks to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from mnemo_bench import REPO, Api, Server, ensure_release_binary, ensure_venv, git_revision, log, machine, stop_process  # noqa: E402

BINARY = REPO / "target" / "release" / "mnemo"
INTERVAL_S = 15

# The SDK engine over many stores, synced every INTERVAL seconds until SIGTERM.
SDK_IDLE = r"""
import asyncio, json, os, signal, sys, types
import anthropic
from anthropic.lib.tools import _memories
from anthropic.types.beta.sessions import BetaManagedAgentsMemoryStoreResource

async def main():
    cfg = json.loads(os.environ.pop("MNEMO_BENCH_IDLE"))
    client = anthropic.AsyncAnthropic(base_url=cfg["url"], api_key=os.environ.pop("MNEMO_BENCH_KEY"))
    stores = _memories.SessionMemoryStores(client, workdir=cfg["dir"], sync_interval=cfg["interval"])
    session = types.SimpleNamespace(resources=[
        BetaManagedAgentsMemoryStoreResource(type="memory_store", memory_store_id=s, mount_path=f"{cfg['dir']}/{s}",
                                             access="read_write", name=s)
        for s in cfg["stores"]])
    await stores.download(session)
    print("downloaded", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), cfg["interval"])
        except asyncio.TimeoutError:
            await stores._sync_all(final=False)
            print("synced", flush=True)

asyncio.run(main())
"""


def server_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def window(pid: int, seconds: float) -> float:
    """Server CPU seconds spent over the next `seconds`."""
    before = server_cpu_s(pid)
    time.sleep(seconds)
    return server_cpu_s(pid) - before


def client_env(url: str, key: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MNEMO_", "RUST_LOG"))}
    env.update({"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": key, "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost", "NO_COLOR": "1"})
    return env


def mounts(stores: List[str], area: Path, url: str, key: str, extra: List[str]) -> List[subprocess.Popen]:
    area.mkdir()
    procs = []
    for s in stores:
        err = open(area / f"{s}.log", "w", encoding="utf-8")
        procs.append(subprocess.Popen([str(BINARY), "mount", s, str(area / s), *extra], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=err, env=client_env(url, key),
                                      start_new_session=True))
    deadline = time.monotonic() + 120
    for s, p in zip(stores, procs):
        while "mounted memory store" not in (area / f"{s}.log").read_text(errors="replace"):
            if p.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"mount of {s} did not come up:\n{(area / f'{s}.log').read_text()[-1500:]}")
            time.sleep(0.05)
    return procs


def stop_all(procs: List[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        stop_process(p, grace=60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", type=int, default=50)
    ap.add_argument("--memories", type=int, default=100)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ensure_release_binary(args.no_build)
    python = ensure_venv()
    header = machine("at start")
    work = Path(tempfile.mkdtemp(prefix="mnemo-idle-bench-"))
    key = "sk-bench-" + secrets.token_hex(16)
    cost: Dict[str, float] = {}
    server: Optional[Server] = None
    procs: List[subprocess.Popen] = []
    try:
        server = Server(BINARY, work, key)
        api = Api(server.base_url, key)
        pid = server.proc.pid
        log(f"seeding {args.stores} stores × {args.memories} memories ...")
        stores = [api.call("POST", "/v1/memory_stores", {"name": f"idle-{i}"})["id"] for i in range(args.stores)]
        body = "an idle memory, synced by nobody in particular. " * 8

        def seed(s: str) -> None:
            for j in range(args.memories):
                api.call("POST", f"/v1/memory_stores/{s}/memories", {"path": f"/d{j % 10}/m{j:04d}.md", "content": body})

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(seed, stores))
        if getattr(api.local, "conn", None) is not None:
            api.local.conn.close()
            api.local.conn = None
        time.sleep(3)
        log(f"idle server: {args.window:.0f} s ...")
        base = window(pid, args.window)

        log(f"mnemo live: {args.stores} mounts ...")
        procs = mounts(stores, work / "live", server.base_url, key, ["--interval", "3600"])
        time.sleep(5)  # the feeds' opening syncs settle
        cost["mnemo live (open change feed, no change)"] = window(pid, args.window) - base
        log(f"  server CPU {cost['mnemo live (open change feed, no change)'] * 1000:.0f} ms over the window")
        stop_all(procs)
        procs = []

        log(f"mnemo interval: {args.stores} mounts, --no-live --interval {INTERVAL_S} ...")
        procs = mounts(stores, work / "interval", server.base_url, key, ["--no-live", "--interval", str(INTERVAL_S)])
        time.sleep(2)
        cost[f"mnemo interval (`--no-live`, a no-op sync every {INTERVAL_S} s)"] = window(pid, args.window) - base
        stop_all(procs)
        procs = []

        log(f"SDK interval: one SessionMemoryStores over {args.stores} stores, _sync_all every {INTERVAL_S} s ...")
        env = client_env(server.base_url, key)
        env.pop("ANTHROPIC_API_KEY")
        env.pop("ANTHROPIC_BASE_URL")
        env["MNEMO_BENCH_KEY"] = key
        (work / "sdk").mkdir()
        env["MNEMO_BENCH_IDLE"] = json.dumps({"url": server.base_url, "stores": stores, "dir": str(work / "sdk"),
                                              "interval": INTERVAL_S})
        out = open(work / "sdk.log", "w", encoding="utf-8")
        sdk = subprocess.Popen([str(python), "-c", SDK_IDLE], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                               env=env, start_new_session=True)
        procs = [sdk]
        deadline = time.monotonic() + 300
        while "downloaded" not in (work / "sdk.log").read_text(errors="replace"):
            if sdk.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the SDK engine did not download:\n{(work / 'sdk.log').read_text()[-1500:]}")
            time.sleep(0.1)
        time.sleep(2)
        cost[f"SDK 2.10.0 engine (`_sync_all` every {INTERVAL_S} s)"] = window(pid, args.window) - base
        syncs = (work / "sdk.log").read_text(errors="replace").count("synced")
        stop_all(procs)
        procs = []
    finally:
        stop_all(procs)
        if server is not None:
            server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    per_min = 60.0 / args.window
    lines = [
        f"Machine: {header}. Source: {git_revision(REPO)}. "
        f"Command: `python3 bench/live/idle.py {' '.join(sys.argv[1:])}`.",
        f"{args.stores} stores × {args.memories} memories; server CPU (utime + stime, 10 ms ticks) over "
        f"{args.window:.0f} s windows, minus an idle server's {base * 1000:.0f} ms; SDK syncs in its window: {syncs}.",
        "",
        "| mounted, idle | server CPU per store per minute | idle mounted stores per server core |",
        "|---|---:|---:|",
    ]
    # One clock tick over the window, shared by every store: the finest cost this can see.
    floor = per_min / args.stores * 1000 / os.sysconf("SC_CLK_TCK")
    for label, cpu in cost.items():
        per_store = max(cpu, 0.0) * per_min / args.stores * 1000  # ms per store per minute
        if per_store < floor:
            shown, sustain = f"< {floor:.2f} ms (below one tick)", f"> {60_000 / floor:,.0f}"
        else:
            shown, sustain = f"{per_store:.2f} ms", f"{60_000 / per_store:,.0f}"
        lines.append(f"| {label} | {shown} | {sustain} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
