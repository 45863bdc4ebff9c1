#!/usr/bin/env python3
"""What users run: the `mnemo mount` process (live sync on, the default, and `--no-live`) beside
the official SDK's engine (`anthropic==2.10.0`, `SessionMemoryStores`), on one `mnemo serve`.

    python3 bench/sync/mount.py [--rounds 3] [--memories 2000] [--size 4096] [--edits 50]
                                [--interval 5] [--rest-seconds 100] [--idle-seconds 20]
                                [--no-build] [--binary PATH] [--mount-binary PATH]
                                [--workdir DIR] [--out FILE] [--keep]

Per round, in rotating order: the SDK's engine (`sdk_engine.py`, the same script as
`run.py`), `mnemo mount` (live) and `mnemo mount --no-live`, each a fresh process mounting the
same store into a fresh folder; and before them, the server alone with no client.

Measured for each `mnemo mount` process (release build, `--interval`):

- download until on disk: from starting the process until its first journal is in place (the
  journal is renamed into place after the `syncfs` that flushes the downloaded files);
- at rest: client + server CPU per interval over `--rest-seconds` (after two intervals of
  settling), whatever runs: the interval syncs, the change feed and its keep-alives, the watcher,
  timers. The default of 100 s holds 20 intervals, so the full walk the engine makes every 20
  syncs is in it, amortised as it is in real use;
- a burst of `--edits` edits (plain writes of 4 KB into the folder, back to back): client +
  server CPU and wall time from the first write until the mount's log has reported every edit
  uploaded (the log, not the server, is watched, so checking costs the server nothing; the
  server is asked once afterwards, outside the measurement);
- the server's search indexer over the whole variant, until it has been idle for 0.5 s: the
  variant's only writes are its burst's, so this is what taking those edits into the index costs
  (after the burst's window, which ends when the server holds them; the same for every client,
  the SDK's included), and the burst with it added (a row with no goal);
- peak RSS of the process (`VmHWM`), read just before it is stopped;
- the disk's floor, once per round after the variants: `cp -r` of the same 2,000 files (written
  by the bench itself, so read from the page cache) into the same work folder, then one `syncfs`;
  each download's time on disk is given against the floor of its round.

The SDK has no process of its own to watch between syncs (it syncs when its host calls
`sync_if_due()`): its "per interval at rest" is one no-op sync's client + server CPU (the mean
of `--reps` syncs, as `run.py` measures it) plus what the idle server burns in the rest of the
interval, measured in the same round; its burst is one sync after the edits.

CPU: the kernel's run time of every thread (`/proc/PID/task/*/schedstat`, nanoseconds) of the
mount and of the server, sampled every 200 ms so a thread that exits keeps its last figure;
`/proc/PID/stat` (utime + stime, clock ticks) is reported beside it as a cross-check.

The in-process engine bench, `run.py` (the engine driven inside a bench binary, no process start,
no timers), stays for profiling; this one measures what a user gets.

Standard library only; everything talks to 127.0.0.1 and nothing else.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from mnemo_bench import (  # noqa: E402
    REPO, Api, Server, edited_content, ensure_release_binary, ensure_venv, fmt_mib, fmt_ms, fs_type, git_revision,
    log, machine, pick,
)
from run import derive, floor_ms, run_engine, seed, seed_content, spread, store_hashes  # noqa: E402

TICK_S = os.sysconf("SC_CLK_TCK")
VARIANTS = ["sdk", "live", "nolive"]
LABELS = {"sdk": "SDK 2.10.0", "live": "`mnemo mount` (live, default)", "nolive": "`mnemo mount --no-live`"}
UPLOADED = re.compile(r"(?:live sync|synced): pulled \d+, uploaded (\d+)")
# metric -> (label, kind, goal); the goals are issue 37's, for `mnemo mount` with live on.
METRICS = [
    ("on_disk_ms", "download until on disk (process start → first journal in place; the SDK: download + `syncfs`)",
     "speed-up", None),
    ("rest_cpu_ms", "at rest, client + server CPU per interval", "speed-up", 100.0),
    ("rest_server_cpu_ms", "…of which the server", "speed-up", None),
    ("burst_cpu_ms", "burst of edits until the server holds them all, client + server CPU", "speed-up", 10.0),
    ("burst_server_cpu_ms", "…of which the server", "speed-up", None),
    ("burst_indexer_cpu_ms", "…of which the server's search indexer (derived work after the server holds the edits, "
     "the same for every client; in a window only if it ends after the indexer ran)", "share", None),
    ("index_cpu_ms", "the server's search indexer over the variant's whole run, until idle: taking the burst's "
     "edits into the index after the window above (derived work, the same for every client)", "share", None),
    ("burst_indexed_cpu_ms", "burst of edits, client + server CPU with that indexing added (no goal: the issue's "
     "window ends when the server holds the edits)", "speed-up", None),
    ("burst_ms", "burst of edits until the server holds them all, wall", "speed-up", None),
    ("peak_rss_kib", "peak RSS of the process (VmHWM)", "fraction", 0.125),
]
# A live mount's download until on disk, against `cp -r` of the same files into the same folder.
FLOOR_GOAL = 1.2


# ---------------------------------------------------------------------------------------------
# CPU of a process, every thread included.
# ---------------------------------------------------------------------------------------------


# The server's search indexer thread (`comm` keeps 15 bytes of its name): its work is derived
# (the index, after the server holds a write) and the same whatever client wrote, so it is
# reported on its own beside the totals.
INDEXER_COMM = "mnemo-sqlite-indexer"[:15]


class CpuMeter:
    """Run time of every thread a process has had, from `schedstat`; `sample()` keeps each
    thread's newest figure, so a thread that exits still counts what it ran until last seen."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: Dict[str, int] = {}
        self.indexer: set = set()
        self.lock = threading.Lock()

    def sample(self) -> None:
        try:
            tasks = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return
        for tid in tasks:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/schedstat", encoding="ascii") as f:
                    ns = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            with self.lock:
                if tid not in self.seen:
                    try:
                        comm = Path(f"/proc/{self.pid}/task/{tid}/comm").read_text(encoding="utf-8").strip()
                    except OSError:
                        comm = ""
                    if comm == INDEXER_COMM:
                        self.indexer.add(tid)
                if ns > self.seen.get(tid, 0):
                    self.seen[tid] = ns

    def total_ns(self) -> int:
        self.sample()
        with self.lock:
            return sum(self.seen.values())

    def indexer_ns(self) -> int:
        """What the search indexer's thread ran, of `total_ns()` (as of the last sample)."""
        with self.lock:
            return sum(ns for tid, ns in self.seen.items() if tid in self.indexer)

    def ticks(self) -> int:
        """utime + stime of the whole process (exited threads included), in clock ticks."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            return 0


class Sampler:
    """Samples some meters every 200 ms on a thread of its own."""

    def __init__(self, meters: List[CpuMeter]) -> None:
        self.meters = meters
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for m in self.meters:
                m.sample()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def indexer_until_idle(meter: CpuMeter, since_ns: int, quiet_s: float = 0.5, limit_s: float = 15.0) -> float:
    """The search indexer's CPU since `since_ns` (an `indexer_ns()` reading), once it has run
    nothing for `quiet_s` (or after `limit_s`), in ms."""
    deadline = time.monotonic() + limit_s
    meter.sample()
    last, still = meter.indexer_ns(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        meter.sample()
        now = meter.indexer_ns()
        if now != last:
            last, still = now, time.monotonic()
        elif time.monotonic() - still >= quiet_s:
            break
    return (last - since_ns) / 1e6


class Window:
    """CPU of some meters between `Window(...)` and `end()`, in ms (schedstat, and ticks)."""

    def __init__(self, meters: Dict[str, CpuMeter]) -> None:
        self.meters = meters
        self.ns = {k: m.total_ns() for k, m in meters.items()}
        self.ix = {k: m.indexer_ns() for k, m in meters.items()}
        self.tk = {k: m.ticks() for k, m in meters.items()}
        self.t = time.perf_counter()

    def end(self) -> Dict[str, float]:
        out: Dict[str, float] = {"wall_ms": (time.perf_counter() - self.t) * 1000}
        for k, m in self.meters.items():
            out[f"{k}_cpu_ms"] = (m.total_ns() - self.ns[k]) / 1e6
            out[f"{k}_indexer_cpu_ms"] = (m.indexer_ns() - self.ix[k]) / 1e6
            out[f"{k}_ticks_ms"] = (m.ticks() - self.tk[k]) * 1000 / TICK_S
        return out


def vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


# ---------------------------------------------------------------------------------------------
# One `mnemo mount` process.
# ---------------------------------------------------------------------------------------------


class LogTail:
    """Reads a growing log file line by line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = 0
        self.partial = ""

    def lines(self) -> List[str]:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                f.seek(self.pos)
                data = f.read()
                self.pos = f.tell()
        except OSError:
            return []
        data = self.partial + data
        *done, self.partial = data.split("\n")
        return done


def wait_for(what: str, cond: Callable[[], bool], timeout: float, proc: "subprocess.Popen[str]", poll: float = 0.002) -> None:
    deadline = time.perf_counter() + timeout
    while not cond():
        if proc.poll() is not None:
            raise SystemExit(f"mnemo mount exited ({proc.returncode}) while waiting for {what}")
        if time.perf_counter() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(poll)


def run_mount(
    args: argparse.Namespace, mnemo: Path, url: str, key: str, store: str, folder: Path, live: bool, tag: str,
    server: CpuMeter, log_path: Path,
) -> Dict[str, Any]:
    argv = [str(mnemo), "mount", store, str(folder), "--base-url", url, "--interval", str(args.interval)]
    if not live:
        argv.append("--no-live")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MNEMO_", "RUST_LOG"))}
    env.update({"ANTHROPIC_API_KEY": key, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    journal = folder.with_name(f".{folder.name}.mnemo-journal")
    tail = LogTail(log_path)
    with open(log_path, "w", encoding="utf-8") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    client = CpuMeter(proc.pid)
    sampler = Sampler([client, server])
    r: Dict[str, Any] = {"engine": "live" if live else "nolive"}
    try:
        ready = False

        def mounted() -> bool:
            nonlocal ready
            ready = ready or any("mounted memory store" in line for line in tail.lines())
            return ready

        wait_for("the download", mounted, 600, proc)
        r["download_ms"] = (time.perf_counter() - t0) * 1000
        wait_for("the first journal", journal.exists, 600, proc)
        r["on_disk_ms"] = (time.perf_counter() - t0) * 1000
        r["peak_rss_after_download_kib"] = vm_hwm_kib(proc.pid)
        r["memories_downloaded"] = sum(1 for p in folder.rglob("*") if p.is_file() and p.name != ".anthropic-memory-store")

        # At rest: two intervals to settle, then the window.
        time.sleep(2 * args.interval + 1)
        tail.lines()
        w = Window({"client": client, "server": server})
        time.sleep(args.rest_seconds)
        rest = w.end()
        intervals = rest["wall_ms"] / 1000 / args.interval
        r["rest_intervals"] = round(intervals, 2)
        for k in ("client_cpu_ms", "server_cpu_ms", "client_ticks_ms", "server_ticks_ms"):
            r[f"rest_{k}"] = rest[k] / intervals
        r["rest_cpu_ms"] = r["rest_client_cpu_ms"] + r["rest_server_cpu_ms"]
        r["rest_log_lines"] = len(tail.lines())

        # A burst of edits, until the mount's log says every one went up.
        paths = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.md") if p.is_file())
        chosen = pick(paths, args.edits)
        engine = "mnemo-live" if live else "mnemo-nolive"
        uploaded = 0

        def all_up() -> bool:
            nonlocal uploaded
            for line in tail.lines():
                m = UPLOADED.search(line)
                if m:
                    uploaded += int(m.group(1))
            return uploaded >= len(chosen)

        w = Window({"client": client, "server": server})
        for i, rel in enumerate(chosen):
            (folder / rel).write_text(edited_content(engine, tag, i), encoding="utf-8")
        wait_for("the edits' uploads", all_up, 120, proc, poll=0.001)
        burst = w.end()
        r["burst_ms"] = burst["wall_ms"]
        r["burst_client_cpu_ms"], r["burst_server_cpu_ms"] = burst["client_cpu_ms"], burst["server_cpu_ms"]
        r["burst_cpu_ms"] = burst["client_cpu_ms"] + burst["server_cpu_ms"]
        r["burst_indexer_cpu_ms"] = burst["server_indexer_cpu_ms"]
        r["burst_ticks_ms"] = burst["client_ticks_ms"] + burst["server_ticks_ms"]
        r["uploads_logged"] = uploaded
        r["edits"] = len(chosen)
        r["chosen"] = chosen
        r["engine_tag"] = engine
        r["peak_rss_kib"] = vm_hwm_kib(proc.pid)
        r["threads"] = len(os.listdir(f"/proc/{proc.pid}/task"))
    finally:
        sampler.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    r["exit_code"] = proc.returncode
    return r


def check_mount_edits(api: Api, store: str, r: Dict[str, Any], tag: str) -> int:
    after = store_hashes(api, store)
    ok = 0
    for i, rel in enumerate(r["chosen"]):
        want = hashlib.sha256(edited_content(r["engine_tag"], tag, i).encode()).hexdigest()
        ok += after.get("/" + rel) == want
    return ok


# ---------------------------------------------------------------------------------------------
# The report.
# ---------------------------------------------------------------------------------------------


def table(results: Dict[str, List[Dict[str, Any]]], rounds: List[int], memories: int, size: int, edits: int,
          interval: float, floors: Dict[int, float]) -> str:
    by = {e: {r["round"]: r for r in rs} for e, rs in results.items()}
    out = [
        f"{memories:,} memories × {size // 1024} KB, {edits} edits, `--interval {interval:g}`; median (range) over "
        f"{len(rounds)} round(s); ratios are the SDK's figure over mnemo's (RSS: mnemo's over the SDK's), per round.",
        "",
        "| measurement | " + " | ".join(LABELS[v] for v in VARIANTS) + " | live vs SDK | `--no-live` vs SDK | goal (live) | met in every round |",
        "|---|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for key, label, kind, goal in METRICS:
        fmt = fmt_mib if key == "peak_rss_kib" else (lambda v: f"{v:,.2f} ms" if abs(v) < 10 else fmt_ms(v))
        cells = []
        for v in VARIANTS:
            vals = [by[v][n][key] for n in rounds]
            cells.append(f"{fmt(statistics.median(vals))} ({spread(vals, fmt)})")
        ratio_cells = []
        met = True
        for v in ("live", "nolive"):
            if kind == "share":  # a part of the row above, not a result of its own
                ratio_cells.append("–")
            elif kind == "fraction":
                ratios = [by[v][n][key] / by["sdk"][n][key] for n in rounds]
                ratio_cells.append(f"**{statistics.median(ratios):.3f}** ({spread(ratios, lambda x: f'{x:.3f}')})")
                if v == "live" and goal is not None:
                    met = all(x <= goal for x in ratios)
            else:
                ratios = [by["sdk"][n][key] / by[v][n][key] if by[v][n][key] > 0 else float("inf") for n in rounds]
                ratio_cells.append(f"**{statistics.median(ratios):.1f}×** ({spread(ratios, lambda x: f'{x:.1f}')})")
                if v == "live" and goal is not None:
                    met = all(x >= goal for x in ratios)
        goal_text = "–" if goal is None else (f"≤ {goal:g}" if kind == "fraction" else f"≥ {goal:g}×")
        verdict = "–" if goal is None else ("yes" if met else "**no**")
        out.append(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratio_cells) + f" | {goal_text} | {verdict} |")
    if all(n in floors for n in rounds):
        # Each download against the floor of its own round (lower is better; goal ≤ 1.2× for live).
        fl = [floors[n] for n in rounds]
        cells, verdict = [], "yes"
        for v in VARIANTS:
            over = [by[v][n]["on_disk_ms"] / floors[n] for n in rounds]
            cells.append(f"**{statistics.median(over):.2f}×** ({spread(over, lambda x: f'{x:.2f}')})")
            if v == "live" and not all(x <= FLOOR_GOAL for x in over):
                verdict = "**no**"
        out.append(f"| download until on disk, against the disk's floor of its round (`cp -r` of the same files + one "
                   f"`syncfs`: {fmt_ms(statistics.median(fl))}, {spread(fl, fmt_ms)}) | " + " | ".join(cells)
                   + f" | – | – | ≤ {FLOOR_GOAL:g}× | {verdict} |")
    landed = {v: (sum(r["edits_on_server"] for r in results[v]), sum(r["edits"] for r in results[v])) for v in VARIANTS}
    out.append("| edits on the server afterwards, all rounds | " + " | ".join(f"{a}/{b}" for a, b in landed.values())
               + " | – | – | all | " + ("yes" if all(a == b for a, b in landed.values()) else "**no**") + " |")
    return "\n".join(out)


def raw_table(results: Dict[str, List[Dict[str, Any]]], idle: Dict[int, float]) -> str:
    out = [
        "| round | variant | order | ready / on disk | at rest per interval: client + server (ticks) | burst: client + server, wall | peak RSS | threads | server idle |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = sorted((r["round"], r["order"], e, r) for e, rs in results.items() for r in rs)
    for rnd, order, e, r in rows:
        if e == "sdk":
            rest = f"{r['rest_client_cpu_ms']:.2f} + {r['rest_server_cpu_ms']:.2f} ms (one sync + idle server)"
            burst = f"{r['burst_client_cpu_ms']:.1f} + {r['burst_server_cpu_ms']:.1f} ms, {fmt_ms(r['burst_ms'])}"
            threads = "–"
        else:
            rest = (f"{r['rest_client_cpu_ms']:.2f} + {r['rest_server_cpu_ms']:.2f} ms "
                    f"({r['rest_client_ticks_ms']:.1f} + {r['rest_server_ticks_ms']:.1f})")
            burst = f"{r['burst_client_cpu_ms']:.1f} + {r['burst_server_cpu_ms']:.1f} ms, {fmt_ms(r['burst_ms'])}"
            threads = str(r["threads"])
        out.append(f"| {rnd} | {e} | {order} | {fmt_ms(r['download_ms'])} / {fmt_ms(r['on_disk_ms'])} | {rest} | {burst} | "
                   f"{fmt_mib(r['peak_rss_kib'])} | {threads} | {idle[rnd]:.3f} ms/s |")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--reps", type=int, default=5, help="the SDK's no-op syncs (mean)")
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--rest-seconds", type=float, default=100.0)
    ap.add_argument("--idle-seconds", type=float, default=20.0, help="the server alone, before each round")
    ap.add_argument("--only", choices=VARIANTS, action="append", help="run only these variants (repeatable)")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--binary", type=Path, help="the `mnemo` binary to run (default: target/release/mnemo, built if stale)")
    ap.add_argument("--mount-binary", type=Path,
                    help="the `mnemo` binary the mounts run (default: --binary's), e.g. the sandbox build "
                         "(`cargo build --release -p mnemo --no-default-features`)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    variants = args.only or VARIANTS

    mnemo = args.binary or ensure_release_binary(args.no_build)
    mount_bin = args.mount_binary or mnemo
    python = ensure_venv() if "sdk" in variants else None
    work = Path(tempfile.mkdtemp(prefix="mnemo-mount-bench-", dir=args.workdir))
    key = "sk-bench-" + secrets.token_hex(16)
    server = Server(mnemo, work, key)
    assert server.proc is not None
    server_meter = CpuMeter(server.proc.pid)
    results: Dict[str, List[Dict[str, Any]]] = {v: [] for v in VARIANTS}
    idle: Dict[int, float] = {}
    header = machine("at start")
    revision = git_revision(REPO)
    try:
        log(f"server at {server.base_url}; work folder {work}")
        api = Api(server.base_url, key)
        store = seed(api, args.memories, args.size)
        # The floor's source: the seeded files, written here (so in the page cache).
        source = work / "floor-source"
        for i in range(args.memories):
            f = source / "notes" / f"d{i // 100:02d}" / f"m{i:04d}.md"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(seed_content(i, args.size), encoding="utf-8")
        floors: Dict[int, float] = {}
        sdk_env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        sdk_env.update({
            "MNEMO_BENCH_URL": server.base_url, "MNEMO_BENCH_KEY": key, "MNEMO_BENCH_STORE": store,
            "MNEMO_BENCH_EDITS": str(args.edits), "MNEMO_BENCH_REPS": str(args.reps),
            "MNEMO_BENCH_SERVER_PID": str(server.proc.pid),
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        })
        for rnd in range(1, args.rounds + 1):
            # The server alone: what it burns with no client at all.
            time.sleep(2)
            sampler = Sampler([server_meter])
            w = Window({"server": server_meter})
            time.sleep(args.idle_seconds)
            s = w.end()
            sampler.close()
            idle[rnd] = s["server_cpu_ms"] / (s["wall_ms"] / 1000)
            log(f"round {rnd}: idle server {idle[rnd]:.3f} ms CPU per second ({s['server_ticks_ms'] / (s['wall_ms'] / 1000):.2f} by ticks)")
            order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
            for pos, v in enumerate(order, 1):
                tag = f"r{rnd}"
                folder = work / f"r{rnd}-{v}" / "store"
                folder.parent.mkdir()
                os.sync()
                time.sleep(1)
                log(f"round {rnd}: {v} ...")
                server_meter.sample()
                indexed_before = server_meter.indexer_ns()
                if v == "sdk":
                    env = dict(sdk_env, MNEMO_BENCH_DIR=str(folder), MNEMO_BENCH_TAG=tag)
                    r = run_engine([str(python), str(HERE / "sdk_engine.py")], env, work / f"r{rnd}-sdk.stderr.log")
                    derive(r)
                    r["rest_client_cpu_ms"] = r["noop_client_cpu_ms"]
                    # One sync per interval; the server idles through the rest of it.
                    r["rest_server_cpu_ms"] = r["noop_server_cpu_ms"] + idle[rnd] * max(0.0, args.interval - r["noop_ms"] / 1000)
                    r["rest_cpu_ms"] = r["rest_client_cpu_ms"] + r["rest_server_cpu_ms"]
                    r["burst_client_cpu_ms"], r["burst_server_cpu_ms"] = r["edit_client_cpu_ms"], r["edit_server_cpu_ms"]
                    r["burst_cpu_ms"], r["burst_ms"] = r["edit_cpu_ms"], r["edit_sync_ms"]
                    r["burst_indexer_cpu_ms"] = r.get("edit_server_indexer_cpu_ms") or 0.0
                    r["edits_on_server"] = r["edits_verified_on_server"]
                else:
                    r = run_mount(args, mount_bin, server.base_url, key, store, folder, v == "live", tag, server_meter,
                                  work / f"r{rnd}-{v}.stderr.log")
                    r["edits_on_server"] = check_mount_edits(api, store, r, tag)
                    if r["memories_downloaded"] != args.memories:
                        raise SystemExit(f"{v} downloaded {r['memories_downloaded']} memories, expected {args.memories}")
                # The variant's only writes are its burst's: what the indexer ran over the whole run
                # (its idle sweeps included, a few tenths of a millisecond) is taking them in.
                r["index_cpu_ms"] = indexer_until_idle(server_meter, indexed_before)
                r["burst_indexed_cpu_ms"] = r["burst_cpu_ms"] + r["index_cpu_ms"]
                r["round"], r["order"] = rnd, pos
                log(f"  on disk {fmt_ms(r['on_disk_ms'])}, at rest {r['rest_cpu_ms']:.2f} ms/interval "
                    f"(server {r['rest_server_cpu_ms']:.2f}), burst {r['burst_cpu_ms']:.1f} ms CPU "
                    f"(server {r['burst_server_cpu_ms']:.1f}; indexing after it {r['index_cpu_ms']:.1f}) in {fmt_ms(r['burst_ms'])}, peak RSS {fmt_mib(r['peak_rss_kib'])}, "
                    f"edits on server {r['edits_on_server']}/{r['edits']}")
                results[v].append(r)
            dest = work / f"r{rnd}-floor"
            floors[rnd] = floor_ms(source, dest)
            shutil.rmtree(dest, ignore_errors=True)
            log(f"round {rnd}: the floor (cp -r + syncfs) {fmt_ms(floors[rnd])}")
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    rounds = sorted(idle)
    cmd = "python3 bench/sync/mount.py " + " ".join(sys.argv[1:])
    report = [
        f"Machine: {header}. Server, mounts and anything else running share the cores.",
        f"Source: {revision}. Work folder: {work.parent}, {fs_type(work.parent)}.",
        f"Mounts run `{mount_bin}` ({mount_bin.stat().st_size / 1e6:.1f} MB); the server `{mnemo}` "
        f"({mnemo.stat().st_size / 1e6:.1f} MB).",
        f"Command: `{cmd.strip()}`; variants in rotating order; the idle server measured alone before each round "
        f"({', '.join(f'{idle[n]:.3f}' for n in rounds)} ms CPU per second).",
        "",
    ]
    if all(results[v] for v in VARIANTS):
        report += [table(results, rounds, args.memories, args.size, args.edits, args.interval, floors), ""]
    report += ["Per round:", "", raw_table({v: rs for v, rs in results.items() if rs}, idle)]
    text = "\n".join(report) + "\n"
    print(text)
    raw = {"results": results, "idle_server_ms_per_s": idle, "floors_ms": floors}
    if args.out:
        args.out.write_text(text + "\n<!-- raw: " + json.dumps(raw) + " -->\n", encoding="utf-8")
    if any(r["edits_on_server"] != r["edits"] for rs in results.values() for r in rs):
        sys.exit(1)


if __name__ == "__main__":
    main()
