"""What the benchmarks share: a `mnemo serve` process (compat/mnemo_serve.py), a minimal loopback HTTP client, the edits
the engines make, and the report's formatting and environment lines.

Standard library only: `sync/sdk_engine.py` imports it from the SDK's virtual environment too."""

from __future__ import annotations

import http.client
import json
import os
import platform
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence
from urllib.parse import urlencode, urlparse

MEMORY_BETA = "agent-memory-2026-07-22"
AGENTS_BETA = "managed-agents-2026-04-01"
API_VERSION = "2026-10-21"

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / "target" / "compat-venv"
SDK_VERSION = "2.10.0"  # the official SDK both benchmarks compare against

sys.path.append(str(REPO / "compat"))  # the `mnemo serve` launcher every Python suite shares
import mnemo_serve  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ensure_venv() -> Path:
    """`target/compat-venv` with `anthropic==SDK_VERSION` (created if missing); its python."""
    python = VENV / "bin" / "python"
    ok = python.exists() and subprocess.run(
        [str(python), "-c", f"import anthropic, sys; sys.exit(anthropic.__version__ != '{SDK_VERSION}')"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ).returncode == 0
    if not ok:
        log(f"creating {VENV} with anthropic=={SDK_VERSION} ...")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", f"anthropic=={SDK_VERSION}"], check=True)
    return python



def newest_source() -> float:
    """The newest modification time of the Rust sources and manifests."""
    newest = 0.0
    for top in [REPO / "crates", REPO / "Cargo.toml", REPO / "Cargo.lock"]:
        paths = [top] if top.is_file() else top.rglob("*")
        for p in paths:
            if p.is_file() and "target" not in p.parts:
                newest = max(newest, p.stat().st_mtime)
    return newest


def ensure_release_binary(no_build: bool) -> Path:
    """`target/release/mnemo`, built first if it is missing or older than the sources
    (`no_build`: never build, fail if it is missing)."""
    binary = REPO / "target" / "release" / "mnemo"
    if no_build:
        if not binary.exists():
            raise SystemExit(f"{binary} is missing (run without --no-build)")
        return binary
    if binary.exists() and binary.stat().st_mtime >= newest_source():
        return binary
    log("building target/release/mnemo (cargo build --release --bin mnemo) ...")
    subprocess.run(["cargo", "build", "--release", "--bin", "mnemo"], cwd=REPO, check=True)
    return binary


class Server(mnemo_serve.MnemoServe):
    """`mnemo serve` on an ephemeral loopback port with a throw-away database in `workdir`,
    started by the launcher every Python suite shares; the key travels in the environment."""

    def __init__(
        self, binary: Path, workdir: Path, api_key: str, extra: Sequence[str] = (), database: Optional[str] = None
    ) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MNEMO_"))}
        super().__init__(
            str(binary), workdir, api_key, database=database or f"sqlite://{workdir / 'db.sqlite'}", extra=extra,
            key_in_env=True, env=env, name="bench",
        )
        try:
            self.start(timeout=30)
        except mnemo_serve.StartError as err:
            self.stop()
            raise SystemExit(f"mnemo serve did not start ({err}); see {self.log_path}") from None


def stop_process(proc: "subprocess.Popen[str]", grace: float) -> None:
    """SIGTERM, then SIGKILL if `proc` has not exited within `grace` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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
        full = f"{path}?{urlencode(query, doseq=True)}" if query else path
        headers = self.headers(path)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        for attempt in (0, 1):
            conn = getattr(self.local, "conn", None)
            reused = conn is not None
            if conn is None:
                conn = self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            try:
                conn.request(method, full, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                self.local.conn = None
                # A kept-alive connection the server closed while it sat idle: the request
                # never reached it, so it is sent once more on a fresh connection.
                if not reused or attempt == 1:
                    raise
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


# ---------------------------------------------------------------------------------------------
# The edits an engine makes, rebuilt by the runner to check the server independently.
# ---------------------------------------------------------------------------------------------


def edited_content(engine: str, tag: str, i: int) -> str:
    """Exactly 4,096 bytes; the same construction as the Rust side."""
    s = f"edited by {engine} run {tag} file {i}\n"
    filler = "the quick brown fox jumps over the lazy dog 0123456789\n"
    while len(s) < 4096:
        s += filler
    return s[:4096]


def pick(paths: List[str], count: int) -> List[str]:
    """`count` of `paths` (sorted), spread evenly: the files an engine edits."""
    count = min(count, len(paths))
    return [paths[i * len(paths) // count] for i in range(count)]


# ---------------------------------------------------------------------------------------------
# The report.
# ---------------------------------------------------------------------------------------------


def fmt_ms(v: float) -> str:
    return f"{v:,.0f} ms" if abs(v) >= 100 else f"{v:,.1f} ms"


def fmt_mib(kib: float) -> str:
    return f"{kib / 1024:,.1f} MiB"


def machine(when: str) -> str:
    """Cores, CPU model, memory, kernel and the load average `when` (e.g. "at start")."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kib / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} cores ({model}){mem}, Linux {platform.release()}, load average {os.getloadavg()[0]:.2f} {when}"


def fs_type(path: Path) -> str:
    best, kind = "", "unknown filesystem"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            dev, mnt, fstype = line.split()[:3]
            if str(path.resolve()).startswith(mnt) and len(mnt) > len(best):
                best, kind = mnt, f"{fstype} on {dev}"
    except OSError:
        pass
    return kind


# ext4 without a journal does not reuse an inode within RECENTCY_MIN (60 s) of its deletion, or
# within 60 + 300 s while the inode's block of the inode table is dirty (`recently_deleted()` in
# fs/ext4/ialloc.c): every file created meanwhile first walks past the freed inodes, one
# inode-table lookup each. `os.sync()` before a run does not shorten that: the run's own first
# new inode in a block dirties it again, and the deleted inodes beside it count as recent for
# 360 s. Creating 16,000 files right after 16,000 were deleted took 7-10 s of kernel time here
# instead of 1.3 s, whichever program created them; mnemo's first call, 61 s after each previous
# teardown, took 545, 2,704 and 4,487 ms in three rounds in a row (2026-12-03).
EXT4_NO_JOURNAL_RECENCY_S = 360.0


def inode_reuse_wait(path: Path) -> float:
    """Seconds to wait after deleting many files on `path`'s filesystem before timing the
    creation of many: the recency window of ext4 without a journal, else 0."""
    best, dev, kind = "", "", ""
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            d, mnt, fstype = line.split()[:3]
            if str(path.resolve()).startswith(mnt) and len(mnt) > len(best):
                best, dev, kind = mnt, d, fstype
        if kind != "ext4":
            return 0.0
        task = Path("/sys/fs/ext4") / Path(dev).name / "journal_task"
        return EXT4_NO_JOURNAL_RECENCY_S if task.read_text().strip() == "<none>" else 0.0
    except OSError:
        return 0.0


def git_revision(repo: Path) -> str:
    """The commit measured, with any uncommitted changes to the code; `MNEMO_BENCH_SOURCE` names
    it instead (e.g. when run from an exported tree without .git)."""
    if os.environ.get("MNEMO_BENCH_SOURCE"):
        return os.environ["MNEMO_BENCH_SOURCE"]
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "crates", "Cargo.toml", "Cargo.lock"],
                               cwd=repo, capture_output=True, text=True, check=True).stdout.split("\n")
        dirty = [l.strip() for l in dirty if l.strip()]
        return f"git {rev}" + (f" with {len(dirty)} uncommitted change(s) under crates/ ({'; '.join(dirty[:8])})" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return f"{repo} (not a git checkout)"
