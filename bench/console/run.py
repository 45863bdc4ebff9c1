#!/usr/bin/env python3
"""The console's page times on a 10,000-memory store (the issue's goal: the store page's first
screen in at most 100 ms of server time).

Usage:
    cargo build --release --bin mnemo
    python3 bench/console/run.py [--binary target/release/mnemo] [--rounds 30] [--postgres URL]

Starts `mnemo serve` on a throw-away SQLite database (or the empty database `--postgres URL`),
fills one store with 10,000 memories (100 folders of 99 files and 100 files at the top, 1 KiB
each), signs in to the console through its form like a browser, then requests each page
`--rounds` times after a warm-up. Server time is what the server itself logs for the request
(`answered elapsed_us`, debug level); the client time is the whole round trip over loopback.
Prints a Markdown table of p50 / p99.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import os
import re
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mnemo_bench import REPO, Api, Server, log, machine  # noqa: E402

FOLDERS = 100
PER_FOLDER = 99
TOP = 100
CONTENT = ("a line of memory text, 64 bytes long, give or take a few more.\n" * 16)[:1024]


def fill(api: Api, store: str) -> None:
    paths = [f"/top-{i:03}.md" for i in range(TOP)]
    paths += [f"/folder-{f:03}/note-{i:03}.md" for f in range(FOLDERS) for i in range(PER_FOLDER)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: api.call("POST", f"/v1/memory_stores/{store}/memories", {"path": p, "content": CONTENT}), paths))


class Browser:
    """A signed-in console client: the session cookie, one keep-alive connection."""

    def __init__(self, base_url: str, key: str) -> None:
        u = urlparse(base_url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        page, headers = self.get("/console/sign-in")
        token = re.search(r'name="token" value="([^"]+)"', page).group(1)
        body = urlencode({"api_key": key, "token": token, "next": "/console"})
        self.conn.request(
            "POST",
            "/console/sign-in",
            body=body,
            headers={"content-type": "application/x-www-form-urlencoded", "cookie": f"mnemo_console_sign_in={token}"},
        )
        resp = self.conn.getresponse()
        resp.read()
        cookie = next(v for k, v in resp.getheaders() if k.lower() == "set-cookie" and v.startswith("mnemo_console=mcs_"))
        self.cookie = cookie.split(";")[0]

    def get(self, path: str) -> tuple:
        self.conn.request("GET", path, headers={"cookie": getattr(self, "cookie", "")})
        resp = self.conn.getresponse()
        body = resp.read().decode()
        if resp.status != 200:
            raise SystemExit(f"GET {path}: {resp.status} {body[:300]}")
        return body, resp.getheaders()


def server_times(log_path: Path, request_ids: list) -> dict:
    wanted = set(request_ids)
    out = {}
    for line in log_path.read_text().splitlines():
        m = re.search(r"request_id=(req_\w+).*elapsed_us=(\d+)", line)
        if m and m.group(1) in wanted:
            out[m.group(1)] = int(m.group(2)) / 1000
    return out


def pct(values: list, p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p * (len(values) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=str(REPO / "target" / "release" / "mnemo"))
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--postgres", help="a PostgreSQL URL (an empty database) to run on instead of SQLite")
    args = ap.parse_args()
    key = "sk-bench-" + secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="mnemo-console-bench-") as tmp:
        work = Path(tmp)
        database = None
        backend = "SQLite"
        if args.postgres:
            database = args.postgres
            backend = "PostgreSQL"
        os.environ["RUST_LOG"] = "mnemo_server=debug,info"
        server = Server(Path(args.binary), work, key, database=database)
        try:
            api = Api(server.base_url, key)
            store = api.call("POST", "/v1/memory_stores", {"name": "ten thousand"})["id"]
            started = time.monotonic()
            fill(api, store)
            log(f"filled 10,000 memories in {time.monotonic() - started:.1f}s")
            api = Api(server.base_url, key)  # the first connection idled past the keep-alive timeout
            browser = Browser(server.base_url, key)
            memory = api.call("GET", f"/v1/memory_stores/{store}/memories", query={"path_prefix": "/folder-050/", "limit": 1})["data"][0]["id"]
            pages = [
                ("store list", "/console"),
                ("store page, top level (100 folders + 100 files)", f"/console/stores/{store}"),
                ("a folder (99 files)", f"/console/stores/{store}?prefix=/folder-050/"),
                ("path filter `/folder-05`", f"/console/stores/{store}?filter=/folder-05"),
                ("a memory", f"/console/stores/{store}/memories/{memory}"),
                ("the store's history (newest 50 of 10,000)", f"/console/stores/{store}/history"),
            ]
            rows = []
            for name, path in pages:
                for _ in range(3):
                    browser.get(path)
                ids, client = [], []
                for _ in range(args.rounds):
                    t = time.perf_counter()
                    _, headers = browser.get(path)
                    client.append((time.perf_counter() - t) * 1000)
                    ids.append(next(v for k, v in headers if k.lower() == "request-id"))
                time.sleep(0.3)
                server_ms = list(server_times(work / "server.stderr.log", ids).values())
                rows.append((name, server_ms, client))
        finally:
            server.stop()
    print(f"Console pages on a 10,000-memory store ({backend}, {args.rounds} requests each after 3 warm-ups; {machine('at the end')})\n")
    print("| page | server p50 | server p99 | round trip p50 |")
    print("|---|---:|---:|---:|")
    for name, server_ms, client in rows:
        s50 = f"{statistics.median(server_ms):.1f} ms" if server_ms else "n/a"
        s99 = f"{pct(server_ms, 0.99):.1f} ms" if server_ms else "n/a"
        print(f"| {name} | {s50} | {s99} | {statistics.median(client):.1f} ms |")


if __name__ == "__main__":
    main()
