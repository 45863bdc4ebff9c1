"""What the benchmarks share: a `mnemo serve` process and a minimal loopback HTTP client."""

from __future__ import annotations

import http.client
import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence
from urllib.parse import urlencode, urlparse

MEMORY_BETA = "agent-memory-2026-07-22"
AGENTS_BETA = "managed-agents-2026-04-01"
API_VERSION = "2026-10-21"


class Server:
    """`mnemo serve` on an ephemeral loopback port with a throw-away database in `workdir`."""

    def __init__(self, binary: Path, workdir: Path, api_key: str, extra: Sequence[str] = ()) -> None:
        self.stderr = open(workdir / "server.stderr.log", "w", encoding="utf-8")
        argv = [
            str(binary), "serve", "--listen", "127.0.0.1:0",
            "--database", f"sqlite://{workdir / 'db.sqlite'}", *extra,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MNEMO_"))}
        env["MNEMO_API_KEY"] = api_key  # not on the command line, where `ps` would show it
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.stderr,
            text=True, start_new_session=True, env=env,
        )
        lines: "queue.Queue[Optional[str]]" = queue.Queue()

        def pump() -> None:
            assert self.proc.stdout is not None
            first = True
            for line in self.proc.stdout:
                if first:
                    lines.put(line)
                    first = False
            if first:
                lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        try:
            line = lines.get(timeout=30)
        except queue.Empty:
            line = None
        prefix = "listening on "
        if not line or not line.startswith(prefix):
            self.stop()
            raise SystemExit(f"mnemo serve did not start (first line {line!r}); see {workdir}/server.stderr.log")
        self.base_url = line[len(prefix):].strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()


class Api:
    """One keep-alive connection per thread; API key auth."""

    def __init__(self, base_url: str, api_key: str) -> None:
        u = urlparse(base_url)
        assert u.hostname in ("127.0.0.1", "localhost"), "the benchmark only talks to loopback"
        self.host, self.port, self.key = u.hostname, u.port, api_key
        self.local = threading.local()

    def headers(self, path: str) -> Dict[str, str]:
        return {
            "authorization": f"Bearer {self.key}",
            "anthropic-version": API_VERSION,
            "anthropic-beta": MEMORY_BETA if path.startswith("/v1/memory_stores") else AGENTS_BETA,
        }

    def call(self, method: str, path: str, body: Any = None, query: Optional[dict] = None) -> Any:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        full = f"{path}?{urlencode(query, doseq=True)}" if query else path
        headers = self.headers(path)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        try:
            conn.request(method, full, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException):
            conn.close()
            self.local.conn = None
            raise
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: {resp.status} {raw[:300]!r}")
        return json.loads(raw)

    def list_all(self, path: str, query: Optional[dict] = None) -> List[Any]:
        out, page = [], None
        while True:
            q = dict(query or {}, limit=100)
            if page:
                q["page"] = page
            resp = self.call("GET", path, query=q)
            out += resp["data"]
            page = resp.get("next_page")
            if not page:
                return out
