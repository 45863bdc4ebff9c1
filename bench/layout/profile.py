#!/usr/bin/env python3
"""Records which functions a sandbox-side `mnemo` process runs, for the sandbox build's code
layout (`scripts/build-sandbox`, `packaging/sandbox-layout.txt`).

    python3 bench/layout/profile.py --binary SANDBOX_MNEMO [--server MNEMO] [--out FILE]
                                    [--also CALLGRIND_OUT ...]

A process's resident memory counts every page of code it maps, and the kernel maps code 64 KiB
around each page it faults in, so a mount that runs 2 MB of functions scattered over a 13 MB
`.text` maps most of it. Linked with the functions it runs side by side, it maps about what it
runs. This script finds them: it runs the sandbox build's `mnemo mount` (live, then `--no-live`)
under valgrind's callgrind against a release `mnemo serve` on
127.0.0.1 — download of 2,000 memories, edits both ways, the change feed, the final sync, the
flush and the teardown — and writes every function callgrind saw run, by its symbol, one per line, sorted. A Rust
symbol's hash comes from its crate's name, version and features and the function's path and
types, not from its code: the list holds across edits, and what it misses (functions added or
renamed since, crates upgraded) is merely placed after it.

`--also` adds the functions of other callgrind runs of the same binary: the worker's, recorded by
the worker bench with its wrapper variable —

    MNEMO_BENCH_WRAP="valgrind --tool=callgrind --demangle=no --trace-children=yes --callgrind-out-file=/tmp/cg-worker.%p" \
      python3 bench/worker/run.py --no-build --worker-binary target/sandbox/release/mnemo \
        --only mnemo --quick --scenarios first_call,many_calls

(claim, the download of the session's stores, the tools — bash included —, the final sync, flush
and teardown; `--trace-children` follows the worker's re-execution of itself, which seals its
credentials, and its shells, whose functions are not the binary's and are left out).

Needs valgrind. Standard library only.
"""

from __future__ import annotations

import argparse
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Set

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from mnemo_bench import REPO, Api, Server, edited_content, log, pick  # noqa: E402

def function_names(out: Path) -> Set[str]:
    """The functions a callgrind output file names, by their symbols (mangled: one name per
    instantiation of a generic function, as the linker knows it)."""
    names = set()
    for line in out.read_text(errors="replace").splitlines():
        # `fn=(id) name` names a function the first time; `fn=(id)` alone refers back to it.
        m = re.match(r"^c?fn=\(\d+\) (.+)$", line)
        if m and not m.group(1).startswith("0x"):
            names.add(m.group(1))
    return names


def mount_run(binary: Path, base_url: str, key: str, store: str, folder: Path, live: bool, api: Api,
              work: Path, tag: str) -> Path:
    out = work / f"callgrind.{tag}"
    argv = ["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}",
            str(binary), "mount", store, str(folder), "--base-url", base_url, "--interval", "5"]
    if not live:
        argv.append("--no-live")
    env = {"ANTHROPIC_API_KEY": key, "PATH": "/usr/bin:/bin", "NO_PROXY": "127.0.0.1", "HOME": str(work)}
    log_path = work / f"{tag}.log"
    with open(log_path, "w", encoding="utf-8") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env)
    deadline = time.monotonic() + 600
    while "mounted memory store" not in log_path.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the mount under valgrind did not come up; see {log_path}")
        time.sleep(0.5)
    time.sleep(12)  # intervals' syncs, the feed's keep-alive
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.md"))
    for i, rel in enumerate(pick(files, 20)):  # edits here, uploaded by live or interval sync
        (folder / rel).write_text(edited_content("layout", tag, i), encoding="utf-8")
    (folder / "new" / "deep").mkdir(parents=True, exist_ok=True)
    (folder / "new" / "deep" / "made-here.md").write_text("made in the folder\n", encoding="utf-8")
    (folder / files[-1]).unlink()  # a deletion, corroborated by a later sync
    time.sleep(12)
    # Changes of the store: pulled through the feed (live) or the next sync.
    for i, item in enumerate(api.call("GET", f"/v1/memory_stores/{store}/memories", query={"limit": 5})["data"]):
        if item.get("type") == "memory":
            api.call("POST", f"/v1/memory_stores/{store}/memories/{item['id']}",
                     {"content": edited_content("server", tag, i)})
    api.call("POST", f"/v1/memory_stores/{store}/memories", {"path": f"/from-server-{tag}.md", "content": "hi\n"})
    time.sleep(15)
    proc.send_signal(signal.SIGTERM)  # the final sync, the flush, the teardown
    try:
        proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise SystemExit("the mount under valgrind did not stop")
    if proc.returncode != 0:
        raise SystemExit(f"the mount under valgrind exited {proc.returncode}; see {log_path}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", type=Path, required=True, help="the sandbox build's `mnemo`")
    ap.add_argument("--server", type=Path, default=REPO / "target" / "release" / "mnemo", help="the server's `mnemo`")
    ap.add_argument("--out", type=Path, default=REPO / "packaging" / "sandbox-layout.txt")
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--also", type=Path, nargs="*", default=[], help="other callgrind outputs of the same binary")
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("needs valgrind")
    work = Path(tempfile.mkdtemp(prefix="mnemo-layout-"))
    key = "sk-layout-" + secrets.token_hex(16)
    server = Server(args.server, work, key)
    names: Set[str] = set()
    try:
        api = Api(server.base_url, key)
        store = api.call("POST", "/v1/memory_stores", {"name": "layout"})["id"]
        for i in range(args.memories):
            api.call("POST", f"/v1/memory_stores/{store}/memories",
                     {"path": f"/notes/{i % 20:02d}/note-{i:04d}.md", "content": f"note {i}\n" + "x" * 4000})
        log(f"seeded {args.memories} memories")
        runs: List[Path] = []
        for live in (True, False):
            tag = "live" if live else "nolive"
            log(f"mount ({tag}) under callgrind ...")
            runs.append(mount_run(args.binary, server.base_url, key, store, work / tag / "store", live, api, work, tag))
        for run in runs + args.also:
            names |= function_names(run)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    # Only the binary's own functions (not libc's, nor valgrind's pseudo-names).
    defined = set(subprocess.run(["nm", "-p", "--defined-only", str(args.binary)], capture_output=True, text=True,
                                 check=True).stdout.split())
    names &= defined
    args.out.write_text("".join(f"{n}\n" for n in sorted(names)), encoding="utf-8")
    log(f"{len(names)} functions -> {args.out}")


if __name__ == "__main__":
    main()
