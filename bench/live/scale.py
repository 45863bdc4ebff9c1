#!/usr/bin/env python3
"""Live memory at scale (issue 37 item 6): what idle live subscribers cost one `mnemo serve`,
and how fast one write reaches all of them.

    python3 bench/live/scale.py [--mounts 1000] [--subscribers 10000] [--window 60] [--writes 20] [--no-build]
                                [--binary PATH]   (another build, for a before/after pair)

One `mnemo serve` (release build, SQLite, throw-away), limits raised for the run
(`--max-connections`, `--max-streams`, `--max-streams-per-credential`, no per-address cap).
Measured in turn, the idle server's own CPU subtracted each time:

1. **`--mounts` live mounts, one store each** (`mnemo mount --interval 3600`: an open change
   feed each, with the keep-alive interval the mount asks for): server CPU per idle mount per minute, server memory
   per mount (its RSS growth over the idle server's, divided by the mounts; and of its anonymous
   part, which leaves out the database pages SQLite's readers map), each mount process's RSS.
2. **`--mounts` live mounts of one store**: the same at rest, then `--writes` API writes (one at
   a time, 1 s apart), each timed from the write's answer until every mount's folder holds the
   new bytes (learnt from inotify, then read; a sweep each second as a safety net): the p50/p99 over every (write, mount) arrival,
   and per write the time until the last mount had it.
3. **`--subscribers` simulated subscribers** (no folders): an asyncio client holding that many
   SSE change feeds (`GET /v1/memory_stores/{id}/changes?ping=55`, the interval a mount asks for), one store each, at rest; then as
   many feeds of one store and `--writes` writes, each timed from its answer until every feed
   has read its entry. The client is one Python process on the same two cores: its own reading
   of 10,000 messages is part of the time measured.

The SDK's figure beside them is `bench/live/idle.py`'s: its engine's interval sync costs the
server 5.2 ms per store per minute at its 15 s default. Linux only (`/proc`); needs root to
raise `fs.inotify.max_user_instances` for more than ~120 mounts. Everything talks to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import resource
import secrets
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from idle import client_env, server_cpu_s  # noqa: E402
from mnemo_bench import API_VERSION, MEMORY_BETA, REPO, Api, Server, ensure_release_binary, git_revision, log, machine  # noqa: E402

BINARY = REPO / "target" / "release" / "mnemo"
SDK_MS_PER_STORE_MINUTE = 5.2  # bench/live/idle.py, the SDK engine at its 15 s default


def vs_sdk(per_min: float) -> str:
    return f"{SDK_MS_PER_STORE_MINUTE / per_min:.0f}×" if per_min > 0 else "(below the clock's resolution)"


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    return 0


class Memory(NamedTuple):
    """A process's resident memory (KiB): all of it, and its anonymous part — the server's own
    memory, without the pages of the database file its SQLite readers map (the kernel's page
    cache, counted once per connection that maps them)."""
    rss: int
    anon: int

    def per(self, base: "Memory", n: int) -> str:
        return f"{(self.rss - base.rss) / n:.1f} KiB (anonymous {(self.anon - base.anon) / n:.1f})"


def settle_then_measure(pid: int, seconds: float) -> Tuple[float, Memory]:
    """Server CPU seconds over the next `seconds`, and its memory at the end."""
    before = server_cpu_s(pid)
    time.sleep(seconds)
    return server_cpu_s(pid) - before, Memory(rss_kib(pid), rss_kib(pid, "RssAnon"))


def percentile(values: List[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def raise_limits(mounts: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    knob = Path("/proc/sys/fs/inotify/max_user_instances")
    try:
        if int(knob.read_text()) < mounts + 64:
            knob.write_text(str(mounts + 64))
            log(f"fs.inotify.max_user_instances raised to {mounts + 64}")
    except OSError as err:
        log(f"could not raise fs.inotify.max_user_instances ({err}); mounts past it will fail")


def start_mounts(stores: List[str], area: Path, url: str, key: str) -> List[subprocess.Popen]:
    area.mkdir(parents=True)
    procs = []
    for i, s in enumerate(stores):
        log_path = area / f"{i}.log"
        procs.append(subprocess.Popen(
            [str(BINARY), "mount", s, str(area / str(i)), "--interval", "3600"], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=open(log_path, "w", encoding="utf-8"), env=client_env(url, key),
            start_new_session=True))
        if i % 50 == 49:
            wait_mounted(area, procs)
    wait_mounted(area, procs)
    return procs


def wait_mounted(area: Path, procs: List[subprocess.Popen]) -> None:
    deadline = time.monotonic() + 300
    for i, p in enumerate(procs):
        log_path = area / f"{i}.log"
        while "mounted memory store" not in log_path.read_text(errors="replace"):
            if p.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"mount {i} did not come up:\n{log_path.read_text()[-1500:]}")
            time.sleep(0.02)


def stop_all(procs: List[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 120
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def mount_rss_mib(procs: List[subprocess.Popen]) -> float:
    values = [rss_kib(p.pid) for p in procs if p.poll() is None]
    return sum(values) / max(1, len(values)) / 1024


def procs_cpu_s(pids: List[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += server_cpu_s(pid)
        except OSError:
            pass
    return total


class Inotify:
    """The folders' renames and closed writes, from one inotify descriptor (libc through ctypes):
    the bench learns of an arrival from the kernel instead of re-reading a thousand files in a
    loop, which took a core of the two the mounts share."""

    MOVED_TO, CLOSE_WRITE = 0x80, 0x08

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.folders: Dict[int, int] = {}

    def watch(self, folder: Path, index: int) -> None:
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(folder), self.MOVED_TO | self.CLOSE_WRITE)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")
        self.folders[wd] = index

    def touched(self, name: str, timeout: float) -> List[int]:
        """The indexes of the folders in which `name` was written since the last call."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return []
        out = []
        try:
            buf = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return []
        off = 0
        while off + 16 <= len(buf):
            wd, _mask, _cookie, size = struct.unpack_from("iIII", buf, off)
            raw = buf[off + 16:off + 16 + size].split(b"\0", 1)[0]
            off += 16 + size
            if raw.decode(errors="replace") == name and wd in self.folders:
                out.append(self.folders[wd])
        return out

    def close(self) -> None:
        os.close(self.fd)


def write_reaches_folders(api: Api, store: str, memory: str, folders: List[Path], writes: int,
                          server: int, mounts: List[int]) -> Dict[str, float]:
    arrivals: List[float] = []
    last: List[float] = []
    events = Inotify()
    for i, folder in enumerate(folders):
        events.watch(folder, i)
    cpu0 = (server_cpu_s(server), procs_cpu_s(mounts))
    for w in range(writes):
        marker = f"write {w} {secrets.token_hex(8)}\n"

        def holds(i: int) -> bool:
            try:
                return (folders[i] / "shared.md").read_text() == marker
            except OSError:
                return False

        api.call("POST", f"/v1/memory_stores/{store}/memories/{memory}", {"content": marker})
        t0 = time.monotonic()
        pending = set(range(len(folders)))
        last_sweep = t0
        while pending and time.monotonic() - t0 < 30:
            for i in events.touched("shared.md", 0.05):
                if i in pending and holds(i):
                    arrivals.append(time.monotonic() - t0)
                    pending.discard(i)
            if time.monotonic() - last_sweep > 1:
                # A safety net for an event the queue dropped: look at the rest once a second.
                last_sweep = time.monotonic()
                for i in [i for i in pending if holds(i)]:
                    arrivals.append(time.monotonic() - t0)
                    pending.discard(i)
        if pending:
            raise SystemExit(f"write {w} did not reach {len(pending)} of {len(folders)} folders in 30 s")
        last.append(max(arrivals[-len(folders):]))
        time.sleep(1)
    cpu1 = (server_cpu_s(server), procs_cpu_s(mounts))
    events.close()
    log(f"  per write: server CPU {(cpu1[0] - cpu0[0]) * 1000 / writes:.0f} ms, the mounts' CPU together "
        f"{(cpu1[1] - cpu0[1]) * 1000 / writes:.0f} ms (idle included: {writes} s)")
    return {"p50": percentile(arrivals, 50), "p99": percentile(arrivals, 99), "last_p50": percentile(last, 50),
            "last_max": max(last)}


async def open_feed(host: str, port: int, key: str, store: str) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(host, port)
    # `ping=55`, as `mnemo mount` asks (mnemo_client::FEED_PING).
    writer.write((f"GET /v1/memory_stores/{store}/changes?ping=55 HTTP/1.1\r\nHost: {host}:{port}\r\n"
                  f"Authorization: Bearer {key}\r\nanthropic-version: {API_VERSION}\r\nanthropic-beta: {MEMORY_BETA}\r\n"
                  f"Accept: text/event-stream\r\n\r\n").encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"a change feed was refused: {head[:200]!r}")
    return reader, writer


async def simulated(url: str, key: str, api: Api, stores: List[str], one: str, memory: str, pid: int,
                    window: float, writes: int, base_cpu: float, base_rss: Memory) -> Dict[str, Any]:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    out: Dict[str, float] = {}
    # At rest: one feed per store.
    feeds = []
    for i in range(0, len(stores), 500):
        feeds += await asyncio.gather(*(open_feed(host, int(port), key, s) for s in stores[i:i + 500]))
    drains = [asyncio.create_task(drain(r)) for r, _ in feeds]
    await asyncio.sleep(5)
    cpu, rss = await asyncio.to_thread(settle_then_measure, pid, window)
    n = len(feeds)
    out["rest_cpu_ms_per_min"] = (cpu - base_cpu) * 1000 / n * 60 / window
    out["rest_memory_per_sub"] = rss.per(base_rss, n)
    for t in drains:
        t.cancel()
    for _, w in feeds:
        w.close()
    await asyncio.sleep(3)
    # One store: every feed waits for each write's entry.
    feeds = []
    for i in range(0, len(stores), 500):
        feeds += await asyncio.gather(*(open_feed(host, int(port), key, one) for _ in range(min(500, len(stores) - i))))
    arrivals: List[float] = []
    last: List[float] = []
    for w in range(writes):
        marker = f"write {w} {secrets.token_hex(8)}\n"
        got: List[float] = []
        start = asyncio.get_running_loop().create_future()

        async def wait_entry(reader: asyncio.StreamReader) -> None:
            while True:
                line = await reader.readline()
                if line.startswith(b"data:") and b"memory_version_id" in line:
                    t0 = await start
                    got.append(time.monotonic() - t0)
                    return

        waiting = [asyncio.create_task(wait_entry(r)) for r, _ in feeds]
        await asyncio.sleep(0.2)
        await asyncio.to_thread(api.call, "POST", f"/v1/memory_stores/{one}/memories/{memory}", {"content": marker})
        start.set_result(time.monotonic())
        await asyncio.wait_for(asyncio.gather(*waiting), 60)
        arrivals += got
        last.append(max(got))
        await asyncio.sleep(1)
    out["p50"], out["p99"] = percentile(arrivals, 50), percentile(arrivals, 99)
    out["last_p50"], out["last_max"] = percentile(last, 50), max(last)
    for _, w in feeds:
        w.close()
    return out


async def drain(reader: asyncio.StreamReader) -> None:
    while await reader.read(4096):
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mounts", type=int, default=1000)
    ap.add_argument("--subscribers", type=int, default=10000)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--writes", type=int, default=20)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--binary", type=Path, help="another build of mnemo to measure (for a before/after pair); implies --no-build")
    args = ap.parse_args()
    global BINARY
    if args.binary:
        BINARY, args.no_build = args.binary.resolve(), True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ensure_release_binary(args.no_build)
    raise_limits(args.mounts)
    header = machine("at start")
    work = Path(tempfile.mkdtemp(prefix="mnemo-scale-bench-"))
    key = "sk-bench-" + secrets.token_hex(16)
    n = max(args.mounts, args.subscribers)
    limits = ["--max-connections", str(n + 2000), "--max-streams", str(n + 1000),
              "--max-streams-per-credential", str(n + 1000), "--max-connections-per-address", "0"]
    server: Optional[Server] = None
    procs: List[subprocess.Popen] = []
    rows: List[str] = []
    try:
        (work / "server").mkdir(parents=True)
        server = Server(BINARY, work / "server", key, extra=limits)
        api = Api(server.base_url, key)
        pid = server.proc.pid
        log(f"creating {n} stores ...")
        with ThreadPoolExecutor(4) as pool:
            stores = list(pool.map(lambda i: api.call("POST", "/v1/memory_stores", {"name": f"s{i}"})["id"], range(n)))
            list(pool.map(lambda s: api.call("POST", f"/v1/memory_stores/{s}/memories",
                                             {"path": "/note.md", "content": "an idle note\n"}), stores[:args.mounts]))
        one = stores[0]
        shared = api.call("POST", f"/v1/memory_stores/{one}/memories", {"path": "/shared.md", "content": "start\n"})["id"]
        time.sleep(3)
        log(f"idle server: {args.window:.0f} s ...")
        base_cpu, base_rss = settle_then_measure(pid, args.window)

        if args.mounts:
            log(f"{args.mounts} live mounts, one store each ...")
            procs = start_mounts(stores[:args.mounts], work / "each", server.base_url, key)
            time.sleep(5)
            cpu, rss = settle_then_measure(pid, args.window)
            per_min = (cpu - base_cpu) * 1000 / args.mounts * 60 / args.window
            rows.append(f"| {args.mounts} live mounts, one store each, at rest | {per_min:.3f} ms | "
                        f"{rss.per(base_rss, args.mounts)} | {mount_rss_mib(procs):.1f} MiB | "
                        f"{vs_sdk(per_min)} | – | – |")
            log(rows[-1])
            stop_all(procs)
            procs = []
            time.sleep(3)

            log(f"{args.mounts} live mounts of one store ...")
            procs = start_mounts([one] * args.mounts, work / "one", server.base_url, key)
            time.sleep(5)
            cpu, rss = settle_then_measure(pid, args.window)
            per_min = (cpu - base_cpu) * 1000 / args.mounts * 60 / args.window
            folders = [work / "one" / str(i) for i in range(args.mounts)]
            lat = write_reaches_folders(api, one, shared, folders, args.writes, pid, [p.pid for p in procs])
            rows.append(f"| {args.mounts} live mounts of one store | {per_min:.3f} ms | "
                        f"{rss.per(base_rss, args.mounts)} | {mount_rss_mib(procs):.1f} MiB | "
                        f"{vs_sdk(per_min)} | {lat['p50'] * 1000:.0f} / {lat['p99'] * 1000:.0f} ms | "
                        f"{lat['last_p50'] * 1000:.0f} / {lat['last_max'] * 1000:.0f} ms |")
            log(rows[-1])
            stop_all(procs)
            procs = []
            time.sleep(3)

        if args.subscribers:
            log(f"{args.subscribers} simulated subscribers ...")
            sim = asyncio.run(simulated(server.base_url, key, api, stores[:args.subscribers], one, shared, pid,
                                        args.window, args.writes, base_cpu, base_rss))
            rows.append(f"| {args.subscribers} simulated subscribers (no folders) | {sim['rest_cpu_ms_per_min']:.3f} ms | "
                        f"{sim['rest_memory_per_sub']} | – | {vs_sdk(sim['rest_cpu_ms_per_min'])} | "
                        f"{sim['p50'] * 1000:.0f} / {sim['p99'] * 1000:.0f} ms | "
                        f"{sim['last_p50'] * 1000:.0f} / {sim['last_max'] * 1000:.0f} ms |")
            log(rows[-1])
    finally:
        stop_all(procs)
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(header)
    print(f"source {git_revision(REPO)}; idle server: {base_cpu * 1000 / args.window:.3f} ms CPU per second, RSS {base_rss.rss / 1024:.1f} MiB "
          f"(anonymous {base_rss.anon / 1024:.1f})")
    print("| subscribers | server CPU per idle subscriber per minute | server memory per subscriber | "
          "each mount's RSS | idle subscribers per core vs the SDK's interval sync | one write → each subscriber p50 / p99 | "
          "→ all of them p50 / max |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
