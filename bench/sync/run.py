#!/usr/bin/env python3
"""Side-by-side benchmark, for profiling: mnemo's sync engine driven inside a bench binary vs
the official SDK's (`anthropic==2.10.0`). What users run — the `mnemo mount` process with its
change feed, watcher and timers — is measured by `mount.py`; this one isolates the engine (no
process start, no interval timer, no change feed) and breaks its time down.

    python3 bench/sync/run.py [--rounds 3] [--memories 2000] [--size 4096] [--edits 50]
                              [--reps 5] [--edit-pause-ms 0] [--no-build] [--no-breakdown]
                              [--out FILE] [--keep]

1. Builds `target/release/mnemo` and the `sync_engine` bench target (`cargo build --release`),
   and creates `target/compat-venv` with `anthropic==2.10.0` if it is missing.
2. Starts `mnemo serve` on 127.0.0.1 with a throw-away SQLite database and seeds one store with
   `--memories` memories of `--size` bytes at `/notes/dNN/mNNNN.md`.
3. Runs both engines `--rounds` times, alternating which goes first, each in a fresh process
   mounting into a fresh folder: download, no-op syncs, `--edits` edits + one sync (verified on
   the server, by the engine and again here), the CPU time of the engine and of the server
   around the no-op and edit syncs, peak RSS; then times the disk's floor (`cp -r` of the
   downloaded tree + one `syncfs`).
4. Runs the Rust side once more in `breakdown` mode (where mnemo's time goes).
5. Prints a Markdown table (medians and ranges over the rounds, per-round ratios, issue 16's
   goals) and the raw numbers.

Exit code 1 if an engine's edits did not all land on the server (the table still prints, with
the shortfall marked); 0 otherwise.

Standard library only; everything talks to 127.0.0.1 and nothing else.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from mnemo_bench import (  # noqa: E402
    REPO, Api, Server, edited_content, ensure_venv, fmt_mib, fmt_ms, fs_type, git_revision, log, machine, pick,
)

# metric -> (label, what the ratio is, goal or None); the goals are issue 16's.
METRICS = [
    ("on_disk_ms", "download until every file is on disk (each: its files written, then one `syncfs`; mnemo's "
                   "first journal in place too; the SDK flushes nothing itself, so the bench syncs for it)", "speed-up", 10.0),
    ("download_ms", "download until the files are written (mnemo: the mount is ready, its journal still "
                    "committing; the SDK: its last write returned)", "speed-up", None),
    ("noop_cpu_ms", "no-op sync, client + server CPU (mean over the settled syncs)", "speed-up", 100.0),
    ("noop_ms", "no-op sync, wall", "speed-up", None),
    ("edit_cpu_ms", "sync after the local edits, client + server CPU", "speed-up", 10.0),
    ("edit_sync_ms", "sync after the local edits, wall", "speed-up", None),
    ("peak_rss_kib", "peak RSS of the process (VmHWM)", "fraction", 0.125),
]
FLOOR_GOAL = 3.0  # mnemo's on-disk download within this factor of `cp -r` + one `syncfs`


# ---------------------------------------------------------------------------------------------
# Building.
# ---------------------------------------------------------------------------------------------


def cargo_build() -> Path:
    log("building target/release/mnemo ...")
    subprocess.run(["cargo", "build", "--release", "-p", "mnemo"], cwd=REPO, check=True)
    log("building the sync_engine bench target ...")
    proc = subprocess.run(
        ["cargo", "build", "--release", "-p", "mnemo-sync", "--benches", "--message-format=json"],
        cwd=REPO,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return bench_executable(proc.stdout)


def bench_executable(cargo_json: str) -> Path:
    found = None
    for line in cargo_json.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        target = msg.get("target") or {}
        if msg.get("reason") == "compiler-artifact" and target.get("name") == "sync_engine" and msg.get("executable"):
            found = Path(msg["executable"])
    if found is None:
        raise SystemExit("cargo did not report the sync_engine bench executable")
    return found


def find_bench_without_building() -> Path:
    proc = subprocess.run(
        ["cargo", "build", "--release", "-p", "mnemo-sync", "--benches", "--message-format=json", "--offline"],
        cwd=REPO,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return bench_executable(proc.stdout)


# ---------------------------------------------------------------------------------------------
# The server and a minimal HTTP client for seeding and checking.
# ---------------------------------------------------------------------------------------------


def store_hashes(api: Api, store: str) -> Dict[str, str]:
    """path -> content_sha256 of every memory (basic view)."""
    items = api.list_all(f"/v1/memory_stores/{store}/memories")
    return {m["path"]: m["content_sha256"] for m in items if m.get("type") == "memory"}


def seed_content(i: int, size: int) -> str:
    head = f"# memory {i}\n"
    line = f"note {i:04d}: " + hashlib.sha256(str(i).encode()).hexdigest() + "\n"
    s = head
    while len(s) < size:
        s += line
    return s[:size]


def seed(api: Api, memories: int, size: int) -> str:
    store = api.call("POST", "/v1/memory_stores", {"name": f"sync-bench-{secrets.token_hex(4)}"})["id"]

    def create(i: int) -> None:
        api.call("POST", f"/v1/memory_stores/{store}/memories",
                 {"path": f"/notes/d{i // 100:02d}/m{i:04d}.md", "content": seed_content(i, size)})

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(create, range(memories)))
    listed = store_hashes(api, store)
    if len(listed) != memories:
        raise SystemExit(f"seeding: the server lists {len(listed)} memories, expected {memories}")
    log(f"seeded {store}: {memories} x {size} B in {time.perf_counter() - t:.1f} s")
    return store


def check_edits(before: Dict[str, str], after: Dict[str, str], engine: str, tag: str, edits: int) -> int:
    chosen = pick(sorted(p.lstrip("/") for p in before), edits)
    ok = 0
    for i, rel in enumerate(chosen):
        want = hashlib.sha256(edited_content(engine, tag, i).encode()).hexdigest()
        ok += after.get("/" + rel) == want
    changed = sum(1 for p in after if after[p] != before.get(p))
    if changed != ok:
        log(f"warning: {changed} memories changed on the server, {ok} of them the expected edits")
    return ok


# ---------------------------------------------------------------------------------------------
# Running the engines.
# ---------------------------------------------------------------------------------------------


def run_engine(argv: List[str], env: Dict[str, str], log_path: Path) -> Dict[str, Any]:
    with open(log_path, "w", encoding="utf-8") as err:
        t = time.perf_counter()
        proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=err, text=True, timeout=1800)
        wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}); see {log_path}:\n{log_path.read_text()[-2000:]}")
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    result = json.loads(lines[-1])
    result["process_wall_ms"] = round(wall * 1000, 1)
    return result


def derive(r: Dict[str, Any]) -> None:
    """Adds the compared figures: time until on disk, and CPU as client + server."""
    r["on_disk_ms"] = r.get("download_durable_ms", r["download_ms"])
    for what in ("noop", "edit"):
        client, server = r.get(f"{what}_client_cpu_ms"), r.get(f"{what}_server_cpu_ms")
        if client is None or server is None:
            raise SystemExit(f"{r['engine']} reported no {what} CPU time (client {client}, server {server})")
        r[f"{what}_cpu_ms"] = client + server


def floor_ms(source: Path, dest: Path) -> float:
    """The disk's floor for a download: `cp -r` of the downloaded tree, then one `syncfs`."""
    os.sync()
    time.sleep(1)
    t = time.perf_counter()
    subprocess.run(["cp", "-r", str(source), str(dest)], check=True)
    subprocess.run(["sync", "-f", str(dest)], check=True)
    return (time.perf_counter() - t) * 1000


def spread(values: List[float], fmt) -> str:
    return f"{fmt(min(values))}–{fmt(max(values))}" if len(values) > 1 else fmt(values[0])


def table(results: Dict[str, List[Dict[str, Any]]], floors: List[float], memories: int, size: int, edits: int) -> str:
    """Medians over the rounds, each with its range; ratios per round (same round, same server)."""
    by_round = {e: {r["round"]: r for r in rs} for e, rs in results.items()}
    rounds = sorted(set(by_round["mnemo"]) & set(by_round["sdk"]))
    out = [
        f"{memories:,} memories × {size // 1024} KB, {edits} edits; median (range) over {len(rounds)} round(s).",
        "",
        "| measurement | mnemo | SDK 2.10.0 | ratio, median (range) | goal | met in every round |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for key, label, kind, goal in METRICS:
        fmt = fmt_mib if key == "peak_rss_kib" else fmt_ms
        m = [by_round["mnemo"][n][key] for n in rounds]
        s = [by_round["sdk"][n][key] for n in rounds]
        if kind == "fraction":
            ratios = [a / b for a, b in zip(m, s)]
            shown = f"mnemo/SDK **{statistics.median(ratios):.3f}** ({spread(ratios, lambda v: f'{v:.3f}')})"
            met = goal is not None and all(v <= goal for v in ratios)
            goal_text = f"≤ {goal:g}" if goal else "–"
        else:
            ratios = [b / a if a > 0 else float("inf") for a, b in zip(m, s)]
            shown = f"SDK/mnemo **{statistics.median(ratios):.1f}×** ({spread(ratios, lambda v: f'{v:.1f}')})"
            met = goal is not None and all(v >= goal for v in ratios)
            goal_text = f"≥ {goal:g}×" if goal else "–"
        verdict = ("yes" if met else "NO") if goal is not None else "–"
        if key.startswith("edit") and any(r["edits_verified_on_server"] != r["edits"] for rs in results.values() for r in rs):
            verdict = "invalid: edits missing"
        out.append(f"| {label} | {fmt(statistics.median(m))} ({spread(m, fmt)}) | {fmt(statistics.median(s))} "
                   f"({spread(s, fmt)}) | {shown} | {goal_text} | {verdict} |")
    on_disk = [by_round["mnemo"][n]["on_disk_ms"] for n in rounds]
    over = [a / f for a, f in zip(on_disk, floors)]
    out.append(f"| the disk's floor: `cp -r` of the downloaded tree + one `syncfs` | {fmt_ms(statistics.median(floors))} "
               f"({spread(floors, fmt_ms)}) | – | mnemo/floor **{statistics.median(over):.1f}×** "
               f"({spread(over, lambda v: f'{v:.1f}')}) | ≤ {FLOOR_GOAL:g}× | {'yes' if all(v <= FLOOR_GOAL for v in over) else 'NO'} |")
    # Checked by each engine right after its timed sync (before any diagnostic follow-up sync).
    landed = {e: (sum(r["edits_verified_on_server"] for r in rs), sum(r["edits"] for r in rs)) for e, rs in results.items()}
    out.append(f"| edits on the server right after the edit sync, all rounds | {landed['mnemo'][0]}/{landed['mnemo'][1]} | "
               f"{landed['sdk'][0]}/{landed['sdk'][1]} | – | all | {'yes' if all(a == b for a, b in landed.values()) else 'NO'} |")
    return "\n".join(out)


def raw_table(results: Dict[str, List[Dict[str, Any]]]) -> str:
    out = [
        "| round | engine | order | download (ready / on disk) | no-op fresh | no-op first settled | no-op settled | no-op CPU client + server | edit sync | edit CPU client + server | edits on server after it | peak RSS |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = sorted((r["round"], r["order"], e, r) for e, rs in results.items() for r in rs)
    for rnd, order, e, r in rows:
        out.append(
            f"| {rnd} | {e} | {order} | {fmt_ms(r['download_ms'])} / {fmt_ms(r['on_disk_ms'])} | {fmt_ms(r['noop_fresh_ms'])} | "
            f"{fmt_ms(r['noop_first_settled_ms'])} | {fmt_ms(r['noop_ms'])} | "
            f"{r['noop_client_cpu_ms']:.2f} + {r['noop_server_cpu_ms']:.2f} ms | {fmt_ms(r['edit_sync_ms'])} | "
            f"{r['edit_client_cpu_ms']:.1f} + {r['edit_server_cpu_ms']:.1f} ms | "
            f"{r['edits_verified_on_server']}/{r['edits']}{'' if r['edits_verified_on_server'] == r['edits'] else ' ⚠'} (at exit: {r['verified_by_runner']}) | {fmt_mib(r['peak_rss_kib'])} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--reps", type=int, default=5, help="no-op syncs per measurement (median)")
    ap.add_argument("--edit-pause-ms", type=int, default=0,
                    help="untimed wait between the last local edit and the sync that uploads the edits")
    ap.add_argument("--no-build", action="store_true", help="use the binaries already built")
    ap.add_argument("--no-breakdown", action="store_true")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="parent of the throw-away work folder (database, mount folders, logs); default: the system "
                         "temp dir. File creation costs depend heavily on where this is, so the report names it.")
    ap.add_argument("--out", type=Path, help="also write the Markdown report here")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (database, logs)")
    args = ap.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the `finally` below always stops the server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    bench = find_bench_without_building() if args.no_build else cargo_build()
    mnemo_bin = REPO / "target" / "release" / "mnemo"
    python = ensure_venv()
    log(f"bench target: {bench}")

    work = Path(tempfile.mkdtemp(prefix="mnemo-sync-bench-", dir=args.workdir))
    key = "sk-bench-" + secrets.token_hex(16)
    server = Server(mnemo_bin, work, key)
    results: Dict[str, List[Dict[str, Any]]] = {"mnemo": [], "sdk": []}
    breakdown: Optional[Dict[str, Any]] = None
    shortfalls: List[str] = []
    header = machine("at start")
    revision = git_revision(REPO)
    try:
        log(f"server at {server.base_url}; work folder {work}")
        api = Api(server.base_url, key)
        store = seed(api, args.memories, args.size)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        base_env.update({
            "MNEMO_BENCH_URL": server.base_url, "MNEMO_BENCH_KEY": key, "MNEMO_BENCH_STORE": store,
            "MNEMO_BENCH_EDITS": str(args.edits), "MNEMO_BENCH_REPS": str(args.reps),
            "MNEMO_BENCH_PAUSE_MS": str(args.edit_pause_ms),
            "MNEMO_BENCH_SERVER_PID": str(server.proc.pid),
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        })
        floors: List[float] = []
        commands = {"mnemo": [str(bench)], "sdk": [str(python), str(HERE / "sdk_engine.py")]}
        for rnd in range(1, args.rounds + 1):
            order = ["mnemo", "sdk"] if rnd % 2 else ["sdk", "mnemo"]
            for pos, engine in enumerate(order, 1):
                tag = f"r{rnd}"
                folder = work / f"r{rnd}-{engine}" / "store"
                folder.parent.mkdir()
                env = dict(base_env, MNEMO_BENCH_DIR=str(folder), MNEMO_BENCH_TAG=tag)
                before = store_hashes(api, store)
                log(f"round {rnd}: {engine} ...")
                # Untimed: the seeding's or the previous run's dirty pages are not this run's
                # flush (each download ends with a `syncfs` of the whole filesystem).
                os.sync()
                time.sleep(1)
                r = run_engine(commands[engine], env, work / f"r{rnd}-{engine}.stderr.log")
                r["verified_by_runner"] = check_edits(before, store_hashes(api, store), engine, tag, args.edits)
                r["round"], r["order"] = rnd, pos
                derive(r)
                if r["memories_downloaded"] != args.memories:
                    raise SystemExit(f"{engine} downloaded {r['memories_downloaded']} memories, expected {args.memories}")
                if r["verified_by_runner"] != r["edits"] or r["edits_verified_on_server"] != r["edits"]:
                    follow = r.get("followup_sync") or {}
                    later = (f"; a sync {follow['after_ms']} ms later uploaded {follow['report']['uploaded']}, "
                             f"{follow['still_missing']} still missing") if follow else ""
                    shortfalls.append(f"round {rnd}, {engine}: {r['edits_verified_on_server']}/{r['edits']} edits on the server "
                                      f"right after the sync{later}; {r['verified_by_runner']}/{r['edits']} when the process exited")
                    log("  WARNING: " + shortfalls[-1])
                log(f"  download {fmt_ms(r['download_ms'])}, no-op {fmt_ms(r['noop_ms'])}, "
                    f"edits {fmt_ms(r['edit_sync_ms'])}, peak RSS {fmt_mib(r['peak_rss_kib'])}")
                results[engine].append(r)
            floors.append(floor_ms(work / f"r{rnd}-mnemo" / "store", work / f"r{rnd}-floor"))
            log(f"  floor (cp -r + syncfs): {fmt_ms(floors[-1])}")
        if not args.no_breakdown:
            log("breakdown of mnemo's time ...")
            env = dict(base_env, MNEMO_BENCH_DIR=str(work / "breakdown"), MNEMO_BENCH_MODE="breakdown")
            breakdown = run_engine(commands["mnemo"], env, work / "breakdown.stderr.log")
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    cmd = "python3 bench/sync/run.py " + " ".join(sys.argv[1:])
    report = [
        f"Machine: {header}. Server, engines and anything else running share the cores.",
        f"Source: {revision}. Work folder (database and mount folders): {work.parent}, {fs_type(work.parent)}.",
        f"Command: `{cmd.strip()}`; {args.rounds} rounds, engines alternating first, then the floor; medians over rounds.",
        "CPU: the kernel's run time of each thread (`schedstat`) of the engine's process and of the server's, "
        "read by the engine around the measurement.",
        "",
        table(results, floors, args.memories, args.size, args.edits),
        "",
        "Per round:",
        "",
        raw_table(results),
    ]
    if shortfalls:
        report += ["", "**Edits that did not land with the sync that should have uploaded them:**", ""]
        report += [f"- {s}" for s in shortfalls]
    if breakdown:
        report += ["", "Breakdown of mnemo's time (one process, `MNEMO_BENCH_MODE=breakdown`):", "", "```json",
                   json.dumps(breakdown, indent=1), "```"]
    text = "\n".join(report) + "\n"
    print(text)
    raw = {"results": results, "floors_ms": floors, "breakdown": breakdown}
    print("<!-- raw: " + json.dumps(raw) + " -->")
    if args.out:
        args.out.write_text(text + "\n<!-- raw: " + json.dumps(raw) + " -->\n", encoding="utf-8")
    if shortfalls:
        sys.exit(1)


if __name__ == "__main__":
    main()
