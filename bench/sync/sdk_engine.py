#!/usr/bin/env python3
"""The official SDK's sync engine (`anthropic==2.10.0`, `SessionMemoryStores`), measured the
same way as mnemo's (`crates/mnemo-sync/benches/sync_engine.rs`). Prints one JSON line.

Configuration, from `--name=value` arguments or the environment (arguments win), as for the
Rust side: `--url`/MNEMO_BENCH_URL, `--key`/MNEMO_BENCH_KEY, `--store`/MNEMO_BENCH_STORE,
`--dir`/MNEMO_BENCH_DIR (must not exist), `--edits`/MNEMO_BENCH_EDITS (50),
`--reps`/MNEMO_BENCH_REPS (5), `--tag`/MNEMO_BENCH_TAG, `--pause-ms`/MNEMO_BENCH_PAUSE_MS (wait
between the last edit and the sync, untimed; 0).

How the SDK is driven:
- `SessionMemoryStores(client, workdir=..., sync_interval=MIN_MEMORY_SYNC_INTERVAL)`, then
  `download(session)` with a session stand-in whose only attribute the SDK reads is
  `resources`: one `BetaManagedAgentsMemoryStoreResource` (type `memory_store`, the store id,
  `mount_path` = the folder, `access="read_write"`, a name).
- A sync "now" is `_sync_all(final=False)`: exactly what `sync_if_due()` runs once its interval
  (at least 5 s) has elapsed, without waiting for it.
- No `dispose()`: see the end of `main`; run.py removes the folders at the end.

Syncs never raise in the SDK (a failed store is logged), so warnings from its logger are
counted and reported, and the edits are verified against the server.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import json
import logging
import os
import resource
import sys
import time
import types
from pathlib import Path
from typing import Dict, List, Optional, Tuple

for _name in list(os.environ):
    if _name.startswith("ANTHROPIC_"):
        del os.environ[_name]
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

import anthropic  # noqa: E402
from anthropic.lib.tools import _memories  # noqa: E402
from anthropic.types.beta.sessions import BetaManagedAgentsMemoryStoreResource  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mnemo_bench import edited_content, pick  # noqa: E402

MARKER = _memories.MARKER_PATH
SETTLE_S = 2.5  # the SDK, like mnemo, re-hashes files younger than 2 s on every scan


def setting(name: str, env: str, default: Optional[str] = None) -> Optional[str]:
    prefix = f"--{name}="
    for arg in reversed(sys.argv[1:]):
        if arg.startswith(prefix):
            return arg[len(prefix):]
    value = os.environ.get(env)
    return value if value else default


def required(name: str, env: str) -> str:
    value = setting(name, env)
    if not value:
        sys.exit(f"sdk_engine: --{name} (or {env}) is required")
    return value


def median(values: List[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def rss_kib() -> Dict[str, int]:
    out = {"peak_rss_kib": 0, "rss_kib": 0}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                out["peak_rss_kib"] = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                out["rss_kib"] = int(line.split()[1])
    except OSError:
        out["peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return out


INDEXER_COMM = "mnemo-sqlite-indexer"[:15]  # the server's search indexer thread (`comm`: 15 bytes)


def cpu_ns(pid: str) -> Optional[Tuple[int, int]]:
    """Nanoseconds the live threads of a process have run on a CPU, and of those its search
    indexer thread (None: no such process)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total = indexer = 0
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat", encoding="utf-8") as f:
                ns = int(f.read().split()[0])
            with open(f"/proc/{pid}/task/{t}/comm", encoding="utf-8") as f:
                comm = f.read().strip()
        except (OSError, ValueError, IndexError):
            continue
        total += ns
        if comm == INDEXER_COMM:
            indexer += ns
    return total, indexer


class Cpu:
    """CPU time of this process and of the server (MNEMO_BENCH_SERVER_PID), around a measurement."""

    def __init__(self, server_pid: Optional[str]) -> None:
        self.server_pid = server_pid
        self.own = time.process_time_ns()
        self.server = cpu_ns(server_pid) if server_pid else None

    def since(self, per: int = 1) -> Dict[str, Optional[float]]:
        own = time.process_time_ns()
        server = cpu_ns(self.server_pid) if self.server_pid else None
        each = lambda a, b: round((b - a) / max(per, 1) / 1e6, 3)  # noqa: E731
        both = self.server is not None and server is not None
        return {
            "client_cpu_ms": each(self.own, own),
            "server_cpu_ms": each(self.server[0], server[0]) if both else None,
            "server_indexer_cpu_ms": each(self.server[1], server[1]) if both else None,
        }


def syncfs(folder: Path) -> None:
    """Flushes the filesystem holding `folder` (`syncfs(2)`), as mnemo does after a download."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if libc.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs: {os.strerror(err)}")
    finally:
        os.close(fd)


def local_paths(root: Path) -> List[str]:
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            rel = (Path(dirpath) / name).relative_to(root).as_posix()
            if rel != MARKER:
                out.append(rel)
    return sorted(out)


class Counter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def main() -> dict:
    url = required("url", "MNEMO_BENCH_URL")
    key = required("key", "MNEMO_BENCH_KEY")
    store_id = required("store", "MNEMO_BENCH_STORE")
    folder = Path(required("dir", "MNEMO_BENCH_DIR"))
    edits = int(setting("edits", "MNEMO_BENCH_EDITS", "50"))
    reps = max(1, int(setting("reps", "MNEMO_BENCH_REPS", "5")))
    tag = setting("tag", "MNEMO_BENCH_TAG", "0")
    pause = int(setting("pause-ms", "MNEMO_BENCH_PAUSE_MS", "0")) / 1000
    server_pid = setting("server-pid", "MNEMO_BENCH_SERVER_PID")

    warnings = Counter()
    logging.getLogger("anthropic").addHandler(warnings)
    logging.getLogger("anthropic").setLevel(logging.WARNING)

    started = time.perf_counter()
    client = anthropic.AsyncAnthropic(base_url=url, api_key=key)
    # The SDK would put a store without mount_path below workdir; ours has one.
    stores = _memories.SessionMemoryStores(
        client,
        workdir=str(folder.parent),
        sync_interval=_memories.MIN_MEMORY_SYNC_INTERVAL,
    )
    session = types.SimpleNamespace(
        resources=[
            BetaManagedAgentsMemoryStoreResource(
                type="memory_store",
                memory_store_id=store_id,
                mount_path=str(folder),
                access="read_write",
                name="bench",
            )
        ]
    )

    async def sync_now() -> float:
        t = time.perf_counter()
        await stores._sync_all(final=False)  # what sync_if_due() runs once due
        return ms(time.perf_counter() - t)

    async def noop_syncs(n: int) -> List[float]:
        times = []
        for _ in range(n):
            before = len(warnings.messages)
            times.append(await sync_now())
            if len(warnings.messages) != before:
                raise RuntimeError(f"a no-op sync logged warnings: {warnings.messages[before:]}")
        return times

    # 1. The download.
    t = time.perf_counter()
    await stores.download(session)  # type: ignore[arg-type]
    download = ms(time.perf_counter() - t)
    # The SDK writes without flushing; its files are on disk once the filesystem is synced,
    # which the bench does for it (mnemo's figure includes its own `syncfs`).
    syncfs(folder)
    download_durable = ms(time.perf_counter() - t)
    mounted_at = time.perf_counter()
    downloaded = len(stores._stores[0].baseline)

    # 2. No-op syncs: right after the download, then with the files settled and the cache warm.
    noop_fresh = await noop_syncs(3)
    await asyncio.sleep(max(0.0, SETTLE_S - (time.perf_counter() - mounted_at)))
    noop_first_settled = await noop_syncs(1)
    cpu = Cpu(server_pid)
    noop_warm = await noop_syncs(reps)
    noop_cpu = cpu.since(reps)

    # 3. Edits, one sync, then check the server holds every edited file's bytes.
    chosen = pick(local_paths(folder), edits)
    expected = {}
    for i, rel in enumerate(chosen):
        content = edited_content("sdk", tag, i)
        (folder / rel).write_text(content, encoding="utf-8")
        expected["/" + rel] = hashlib.sha256(content.encode("utf-8")).hexdigest()
    if pause:
        await asyncio.sleep(pause)
    before = len(warnings.messages)
    cpu = Cpu(server_pid)
    edit_sync = await sync_now()
    edit_cpu = cpu.since()
    edit_warnings = warnings.messages[before:]
    on_server = {}
    async for item in client.beta.memory_stores.memories.list(store_id, limit=100):
        if item.type == "memory":
            on_server[item.path] = item.content_sha256
    missing = sorted(p for p, sha in expected.items() if on_server.get(p) != sha)
    verified = len(expected) - len(missing)

    mem = rss_kib()
    total = ms(time.perf_counter() - started)
    # No dispose(): deleting 2,000 files would slow the next run's file creation (ext4 skips
    # recently freed inodes). run.py removes the folders once every run is over.
    await client.close()
    return {
        "engine": "sdk",
        "sdk_version": anthropic.__version__,
        "memories_downloaded": downloaded,
        "download_ms": download,
        "download_durable_ms": download_durable,
        "noop_fresh_ms": median(noop_fresh),
        "noop_fresh_all_ms": noop_fresh,
        "noop_first_settled_ms": noop_first_settled[0],
        "noop_ms": median(noop_warm),
        "noop_all_ms": noop_warm,
        "noop_client_cpu_ms": noop_cpu["client_cpu_ms"],
        "noop_server_cpu_ms": noop_cpu["server_cpu_ms"],
        "edits": len(chosen),
        "edit_sync_ms": edit_sync,
        "edit_client_cpu_ms": edit_cpu["client_cpu_ms"],
        "edit_server_cpu_ms": edit_cpu["server_cpu_ms"],
        "edit_server_indexer_cpu_ms": edit_cpu["server_indexer_cpu_ms"],
        "edit_warnings": edit_warnings,
        "edits_verified_on_server": verified,
        "edits_missing_on_server": missing,
        "warnings": len(warnings.messages),
        **mem,
        "total_ms": total,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())), flush=True)
