#!/usr/bin/env python3
"""Live memory: how long a change made in one place takes to show up in a mounted folder.

    python3 bench/live/run.py [--writes 100] [--api-writes 100] [--baseline-writes 15]
                              [--pause-ms 300] [--no-build] [--keep]

1. Builds `target/release/mnemo` if it is missing or older than the sources (`--no-build`
   skips that), starts `mnemo serve` on 127.0.0.1 with a throw-away SQLite database, creates one
   store and runs two `mnemo mount STORE A|B --interval 300` (live sync on; the key and URL come
   from ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL, never the command line).
2. Local → other folder: `--writes` writes into A (new files and rewrites of a few files, a few
   hundred bytes each), one at a time, `--pause-ms` apart; for each, the time from just before
   the write until B's file holds exactly those bytes (B polled every 5 ms).
3. API → both folders: `--api-writes` API writes (creates and updates), the time from just before
   the request until A *and* B hold the bytes.
4. Baseline: the live mounts are stopped and two `--no-live --interval 5` mounts (5 s is the
   shortest interval `mnemo mount` accepts) do the A → B measurement for `--baseline-writes`.
5. Prints a Markdown table. Exit code 1 if any change did not arrive within its timeout.

Every process is stopped at the end, even on failure: SIGTERM to the mounts first (they run
their final sync and remove their folders), then the server. Standard library only; everything
talks to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from mnemo_bench import REPO, Api, Server, ensure_release_binary, fmt_ms, fs_type, git_revision, log, machine, stop_process  # noqa: E402

BINARY = REPO / "target" / "release" / "mnemo"
POLL_S = 0.005
LIVE_TIMEOUT_S = 30.0
BASELINE_TIMEOUT_S = 40.0


# ---------------------------------------------------------------------------------------------
# Mounts.
# ---------------------------------------------------------------------------------------------


class Mount:
    """`mnemo mount STORE DIR` with the key and URL in its environment."""

    def __init__(self, name: str, store: str, folder: Path, base_url: str, key: str, work: Path,
                 extra: List[str]) -> None:
        self.name, self.folder = name, folder
        self.log_path = work / f"mount-{name}.stderr.log"
        self.stderr = open(self.log_path, "w", encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MNEMO_", "RUST_LOG"))}
        env.update({
            "ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": key,
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost", "NO_COLOR": "1",
        })
        argv = [str(BINARY), "mount", store, str(folder), *extra]
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr,
                                     text=True, start_new_session=True, env=env)

    def text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def wait_mounted(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "mounted memory store" in self.text():
                return
            if self.proc.poll() is not None:
                raise SystemExit(f"mount {self.name} exited ({self.proc.returncode}):\n{self.text()[-2000:]}")
            time.sleep(0.02)
        raise SystemExit(f"mount {self.name} did not report 'mounted memory store' in {timeout:.0f} s")

    def stop(self) -> Tuple[Optional[int], bool]:
        """SIGTERM (final sync, flush, folder removed); its exit code and whether the folder is gone."""
        stop_process(self.proc, grace=60)
        self.stderr.close()
        return self.proc.returncode, not self.folder.exists()

    def counts(self) -> Dict[str, int]:
        t = self.text()
        return {"live": t.count("live sync:"), "full": t.count("synced:"), "warn": t.count(" WARN ")}


def stop_mounts(mounts: List[Mount], problems: List[str]) -> None:
    for m in mounts:
        if m.proc.poll() is None:
            m.proc.terminate()  # all at once: their final syncs run side by side
    for m in mounts:
        code, gone = m.stop()
        if code != 0:
            problems.append(f"mount {m.name} exited with {code} on SIGTERM (see its log)")
        if not gone:
            problems.append(f"mount {m.name} left its folder {m.folder} behind")
    mounts.clear()


# ---------------------------------------------------------------------------------------------
# Measuring.
# ---------------------------------------------------------------------------------------------


def content(kind: str, i: int) -> bytes:
    """A few hundred bytes, different for every write."""
    head = f"# {kind} write {i}\nwritten at {time.time_ns()} nonce {secrets.token_hex(8)}\n"
    filler = "live sync carries this line from one place to another. "
    s = head
    while len(s) < 300 + (i % 7) * 20:
        s += filler
    return (s + "\n").encode()


def wait_bytes(path: Path, want: bytes, t0: float, timeout: float) -> Optional[float]:
    """Seconds since `t0` until `path` holds exactly `want`; None after `timeout`."""
    deadline = t0 + timeout
    while True:
        try:
            if path.read_bytes() == want:
                return time.perf_counter() - t0
        except OSError:
            pass
        if time.perf_counter() > deadline:
            return None
        time.sleep(POLL_S)


def wait_all(paths: List[Path], want: bytes, t0: float, timeout: float) -> List[Optional[float]]:
    """Like `wait_bytes` for several files polled together: each one's time, None if it never came."""
    got: List[Optional[float]] = [None] * len(paths)
    deadline = t0 + timeout
    while True:
        for k, path in enumerate(paths):
            if got[k] is None:
                try:
                    if path.read_bytes() == want:
                        got[k] = time.perf_counter() - t0
                except OSError:
                    pass
        if all(g is not None for g in got) or time.perf_counter() > deadline:
            return got
        time.sleep(POLL_S)


def local_rel(i: int) -> str:
    """Even writes create a new file; odd ones rewrite one of five files."""
    return f"local/new/n{i:03d}.md" if i % 2 == 0 else f"local/hot/h{(i // 2) % 5}.md"


def folder_writes(src: Path, dst: Path, count: int, pause: float, tag: str, timeout: float,
                  problems: List[str]) -> List[float]:
    """`count` writes into `src`, each timed until `dst` has the bytes (seconds; misses left out)."""
    times: List[float] = []
    for i in range(count):
        rel = f"{tag}/{local_rel(i)}"
        data = content(f"{tag} folder", i)
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        (src / rel).write_bytes(data)
        got = wait_bytes(dst / rel, data, t0, timeout)
        if got is None:
            problems.append(f"{tag}: write {i} to {rel} had not reached the other folder after {timeout:.0f} s")
            log("  MISSED: " + problems[-1])
        else:
            times.append(got)
        if (i + 1) % 10 == 0:
            log(f"  {tag}: {i + 1}/{count} writes, last {fmt_ms(times[-1] * 1000) if times else '–'}")
        time.sleep(pause)
    return times


def api_writes(api: Api, store: str, a: Path, b: Path, count: int, pause: float,
               problems: List[str]) -> Tuple[List[float], List[float], List[float]]:
    """Creates (even) and updates of five memories (odd); per write the time until A, B, both."""
    ids: Dict[str, str] = {}
    both, ta, tb = [], [], []
    for i in range(count):
        path = f"/api/new/n{i:03d}.md" if i % 2 == 0 else f"/api/hot/h{(i // 2) % 5}.md"
        data = content("api", i)
        t0 = time.perf_counter()
        if path in ids:
            api.call("POST", f"/v1/memory_stores/{store}/memories/{ids[path]}", {"content": data.decode()})
        else:
            ids[path] = api.call("POST", f"/v1/memory_stores/{store}/memories", {"path": path, "content": data.decode()})["id"]
        rel = path.lstrip("/")
        got_a, got_b = wait_all([a / rel, b / rel], data, t0, LIVE_TIMEOUT_S)
        if got_a is None or got_b is None:
            which = " and ".join(n for n, g in (("A", got_a), ("B", got_b)) if g is None)
            problems.append(f"api: write {i} to {path} had not reached {which} after {LIVE_TIMEOUT_S:.0f} s")
            log("  MISSED: " + problems[-1])
        else:
            ta.append(got_a)
            tb.append(got_b)
            both.append(max(got_a, got_b))
        if (i + 1) % 10 == 0:
            log(f"  api: {i + 1}/{count} writes, last {fmt_ms(both[-1] * 1000) if both else '–'}")
        time.sleep(pause)
    return both, ta, tb


def pct(xs: List[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100), in ms."""
    s = sorted(xs)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)] * 1000


def row(label: str, xs: List[float], n: int) -> str:
    if not xs:
        return f"| {label} | 0/{n} | – | – | – | – |"
    return (f"| {label} | {len(xs)}/{n} | {fmt_ms(pct(xs, 50))} | {fmt_ms(pct(xs, 99))} | "
            f"{fmt_ms(max(xs) * 1000)} | {fmt_ms(min(xs) * 1000)} |")


# ---------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writes", type=int, default=100)
    ap.add_argument("--api-writes", type=int, default=100)
    ap.add_argument("--baseline-writes", type=int, default=15)
    ap.add_argument("--pause-ms", type=int, default=300, help="pause after each change has arrived")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--workdir", type=Path, default=None, help="parent of the throw-away work folder")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (database, logs)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    ensure_release_binary(args.no_build)
    header = machine("at start")
    revision = git_revision(REPO)
    work = Path(tempfile.mkdtemp(prefix="mnemo-live-bench-", dir=args.workdir))
    key = "sk-bench-" + secrets.token_hex(16)
    pause = args.pause_ms / 1000
    problems: List[str] = []
    mounts: List[Mount] = []
    counts: Dict[str, Dict[str, int]] = {}
    server: Optional[Server] = None
    res: Dict[str, List[float]] = {}
    try:
        server = Server(BINARY, work, key)
        api = Api(server.base_url, key)
        log(f"server at {server.base_url}; work folder {work}")
        store = api.call("POST", "/v1/memory_stores", {"name": f"live-bench-{secrets.token_hex(4)}"})["id"]
        api.call("POST", f"/v1/memory_stores/{store}/memories", {"path": "/README.md", "content": "live bench\n"})

        # --- live mounts -----------------------------------------------------------------------
        a, b = work / "A", work / "B"
        for name, folder in (("A", a), ("B", b)):
            mounts.append(Mount(name, store, folder, server.base_url, key, work, ["--interval", "300"]))
        for m in mounts:
            m.wait_mounted()
        # Warm-up (not timed): one change each way, so both feeds are open before timing starts.
        warm = content("warm-up", 0)
        t0 = time.perf_counter()
        api.call("POST", f"/v1/memory_stores/{store}/memories", {"path": "/warmup/api.md", "content": warm.decode()})
        for d in (a, b):
            if wait_bytes(d / "warmup/api.md", warm, t0, LIVE_TIMEOUT_S) is None:
                raise SystemExit(f"warm-up: an API write never reached {d}")
        (a / "warmup").mkdir(exist_ok=True)
        t0 = time.perf_counter()
        (a / "warmup/local.md").write_bytes(warm)
        if wait_bytes(b / "warmup/local.md", warm, t0, LIVE_TIMEOUT_S) is None:
            raise SystemExit("warm-up: a write into A never reached B")
        time.sleep(1)

        log(f"A → B, live: {args.writes} writes ...")
        res["live_local"] = folder_writes(a, b, args.writes, pause, "live", LIVE_TIMEOUT_S, problems)
        log(f"API → A and B, live: {args.api_writes} writes ...")
        # The server closes a keep-alive connection left idle this long; start on a fresh one.
        if getattr(api.local, "conn", None) is not None:
            api.local.conn.close()
            api.local.conn = None
        res["api_both"], res["api_a"], res["api_b"] = api_writes(api, store, a, b, args.api_writes, pause, problems)
        for m in mounts:
            counts[m.name] = m.counts()
        stop_mounts(mounts, problems)

        # --- interval baseline -----------------------------------------------------------------
        a2, b2 = work / "A2", work / "B2"
        for name, folder in (("A2", a2), ("B2", b2)):
            mounts.append(Mount(name, store, folder, server.base_url, key, work, ["--no-live", "--interval", "5"]))
        for m in mounts:
            m.wait_mounted()
        log(f"A → B, --no-live --interval 5: {args.baseline_writes} writes ...")
        res["interval_local"] = folder_writes(a2, b2, args.baseline_writes, pause, "interval", BASELINE_TIMEOUT_S,
                                              problems)
        for m in mounts:
            counts[m.name] = m.counts()
        stop_mounts(mounts, problems)
    finally:
        leftover: List[str] = []
        stop_mounts(mounts, leftover)
        problems += leftover
        if server is not None:
            server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    cmd = ("python3 bench/live/run.py " + " ".join(sys.argv[1:])).strip()
    n_local, n_api, n_base = args.writes, args.api_writes, args.baseline_writes
    lines = [
        f"Machine: {header}. Server, both mounts and this runner share the cores.",
        f"Source: {revision}. Work folder: {work.parent}, {fs_type(work.parent)}.",
        f"Command: `{cmd}`; writes of 300–420 bytes, even ones create a file, odd ones rewrite one of 5; "
        f"{args.pause_ms} ms pause after each change arrived; destination polled every 5 ms; nearest-rank percentiles.",
        "",
        "| change → where it is seen | arrived | p50 | p99 | max | min |",
        "|---|---:|---:|---:|---:|---:|",
        row("write into folder A → B has the bytes (live, `--interval 300`)", res.get("live_local", []), n_local),
        row("API write → both A and B have the bytes (live)", res.get("api_both", []), n_api),
        row("  … A alone", res.get("api_a", []), n_api),
        row("  … B alone", res.get("api_b", []), n_api),
        row("write into A → B, `--no-live --interval 5` (no feed, no watcher upload)", res.get("interval_local", []),
            n_base),
        "",
        "Syncs logged by each mount (live = `sync_paths` that changed something, full = interval/feed-requested "
        "syncs that changed something): " + "; ".join(
            f"{n}: {c['live']} live, {c['full']} full, {c['warn']} warnings" for n, c in counts.items()),
    ]
    if problems:
        lines += ["", "**Problems:**", ""] + [f"- {p}" for p in problems]
    print("\n".join(lines))
    raw = {k: [round(x * 1000, 1) for x in v] for k, v in res.items()}
    print(f"<!-- raw ms: {raw} -->")
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
