#!/usr/bin/env python3
"""MCP: what an agent's memory calls cost through `mnemo mcp` (stdio) and `/mcp` on `mnemo serve`
(streamable HTTP), beside a plain filesystem MCP server over a `mnemo mount` of the same store
(issue 36's "Measured").

    target/compat-venv/bin/python bench/mcp/run.py [--files 1000] [--edits 50] [--rounds 3] [--no-build]

(the compat virtualenv holds the `mcp` client; `scripts/test` installs it).

1. Builds `target/release/mnemo` if it is missing or older than the sources, starts `mnemo
   serve` (SQLite) on 127.0.0.1 and fills one store with `--files` memories of ~1 KB in one
   folder (`/notes/`) plus the file the edits change.
2. Starts, side by side, `mnemo mcp --store ID` and `@modelcontextprotocol/server-filesystem`
   (npm, installed into target/bench-mcp) serving a `mnemo mount` of the same store (live
   sync), both over stdio, and connects to the server's `/mcp`; each driven by the official MCP
   Python SDK client (`mcp`, the compat virtualenv's).
3. In alternating rounds, times each client call to its answer: listing the 1,000-file folder
   (`view` / `list_directory`) and a one-line replacement (`str_replace` / `edit_file`) that
   lands as a new version (for the filesystem server: when the mount has uploaded it, so both
   sides end with the store holding the edit).
4. Prints a Markdown table: p50 and p99 per operation and server, and the ratio.

Everything talks to 127.0.0.1; every process is stopped at the end, even on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from mnemo_bench import REPO, Api, Server, ensure_release_binary, fmt_ms, log, machine, stop_process  # noqa: E402

FS_SERVER = "@modelcontextprotocol/server-filesystem"
FS_SERVER_VERSION = "2026.8.31"
NPM_DIR = REPO / "target" / "bench-mcp"


def percentile(values: List[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def ensure_fs_server() -> Path:
    entry = NPM_DIR / "node_modules" / FS_SERVER / "dist" / "index.js"
    if not entry.exists():
        log(f"installing {FS_SERVER}@{FS_SERVER_VERSION} into {NPM_DIR} ...")
        NPM_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(NPM_DIR),
                        f"{FS_SERVER}@{FS_SERVER_VERSION}"], check=True, stdin=subprocess.DEVNULL)
    return entry


@asynccontextmanager
async def client(command: str, args: List[str], env: Dict[str, str]) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command, args=args, env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def http_client(url: str, key: str) -> AsyncIterator[Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with streamable_http_client(url, http_client=http) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def timed(session: Any, tool: str, args: Dict[str, Any]) -> float:
    started = time.perf_counter()
    result = await session.call_tool(tool, args)
    elapsed = time.perf_counter() - started
    if result.is_error:
        raise SystemExit(f"{tool} {args} failed: {result.content}")
    return elapsed


async def wait_for(api: Api, store: str, path: str, content: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page = api.call("GET", f"/v1/memory_stores/{store}/memories", query={"path_prefix": "/", "view": "full",
                                                                          "depth": 1, "limit": 100})
        if any(m.get("path") == path and m.get("content") == content for m in page["data"]):
            return
        await asyncio.sleep(0.005)
    raise SystemExit(f"{path} never reached the store")


async def bench(args: argparse.Namespace, binary: Path, work: Path) -> str:
    key = "sk-bench-" + secrets.token_hex(16)
    (work / "serve").mkdir()
    server = Server(binary, work / "serve", key)
    mount_proc = None
    try:
        api = Api(server.base_url, key)
        store = api.call("POST", "/v1/memory_stores", {"name": "bench"})["id"]
        body = "x" * 1000 + "\n"
        for i in range(0, args.files, 100):
            writes = [{"type": "create", "path": f"/notes/n{j:05}.md", "content": body}
                      for j in range(i, min(i + 100, args.files))]
            api.call("POST", f"/v1/memory_stores/{store}/memories:batch", {"writes": writes})
        # One file per server: each edits only its own, so neither sees the other's changes.
        for name in ("edit-mcp.md", "edit-http.md", "edit-fs.md"):
            api.call("POST", f"/v1/memory_stores/{store}/memories", {"path": f"/{name}", "content": "line 0\n"})
        env = dict(os.environ, ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY=key)
        folder = work / "mount"
        mount_proc = subprocess.Popen([str(binary), "mount", store, str(folder), "--interval", "300"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=open(work / "mount.log", "w"))
        while not (folder / "edit-fs.md").exists():
            time.sleep(0.05)
        fs_entry = ensure_fs_server()
        times: Dict[str, Dict[str, List[float]]] = {"mnemo mcp (stdio)": {"list": [], "edit": []},
                                                     "/mcp (streamable HTTP)": {"list": [], "edit": []},
                                                     "filesystem server + mnemo mount": {"list": [], "edit": []}}
        async with client(str(binary), ["mcp", "--store", store], env) as mnemo, \
                http_client(server.base_url.rstrip("/") + "/mcp", key) as http, \
                client("node", [str(fs_entry), str(folder)], dict(os.environ)) as fs:
            await mnemo.call_tool("view", {"path": "/memories/bench/edit-mcp.md"})
            await http.call_tool("view", {"path": "/memories/bench/edit-http.md"})
            ours = {"mnemo mcp (stdio)": (mnemo, "edit-mcp.md"), "/mcp (streamable HTTP)": (http, "edit-http.md")}
            for _ in range(args.rounds):
                for _ in range(args.edits):
                    for name in times:
                        line = len(times[name]["edit"])
                        old, new = f"line {line}", f"line {line + 1}"
                        if name in ours:
                            session, edited = ours[name]
                            times[name]["list"].append(await timed(session, "view", {"path": "/memories/bench/notes"}))
                            started = time.perf_counter()
                            await timed(session, "str_replace", {"path": f"/memories/bench/{edited}", "old_str": old,
                                                                 "new_str": new})
                            times[name]["edit"].append(time.perf_counter() - started)
                        else:
                            times[name]["list"].append(await timed(fs, "list_directory",
                                                                   {"path": str(folder / "notes")}))
                            started = time.perf_counter()
                            await timed(fs, "edit_file", {"path": str(folder / "edit-fs.md"),
                                                          "edits": [{"oldText": old, "newText": new}]})
                            await wait_for(api, store, "/edit-fs.md", f"{new}\n")
                            times[name]["edit"].append(time.perf_counter() - started)
        rows = ["| operation | server | p50 | p99 |", "|---|---|---:|---:|"]
        for op, label in (("list", f"list a {args.files}-file folder"), ("edit", "one-line edit until stored")):
            for name, by_op in times.items():
                v = by_op[op]
                rows.append(f"| {label} | {name} | {fmt_ms(percentile(v, 50) * 1000)} | "
                            f"{fmt_ms(percentile(v, 99) * 1000)} |")
        return "\n".join(rows)
    finally:
        if mount_proc is not None:
            stop_process(mount_proc, 30)
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--edits", type=int, default=50, help="edits per round and server")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--binary", type=Path, help="this mnemo binary instead of target/release/mnemo (a trial run)")
    args = ap.parse_args()
    binary = args.binary or ensure_release_binary(args.no_build)
    work = Path(tempfile.mkdtemp(prefix="mnemo-bench-mcp-"))
    try:
        table = asyncio.run(bench(args, binary, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(machine(time.strftime("%Y-%m-%d")))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
