"""Starting and stopping `mnemo serve` for every Python suite: the SDK compatibility suite
(compat/run.py and the compat tests that run servers of their own), the benchmarks
(bench/mnemo_bench.py, bench/events/run.py) and the browser suite (browser/run.py).

One launcher, so that all of them agree on what a started server is: `mnemo serve` on
127.0.0.1:0 in a process group of its own (Ctrl-C reaches the runner only; the runner stops the
server), stdin closed, stderr in a log file, and started once the first stdout line reads
`listening on http://127.0.0.1:PORT`. Stopping sends SIGTERM to the group, then SIGKILL.

Standard library only. compat/ is on `sys.path` of the compat runner; the benchmarks and the
browser runner add it (`sys.path.insert(0, str(REPO / "compat"))`).
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

LISTEN_LINE = re.compile(r"^listening on (http://127\.0\.0\.1:(\d+))$")


class StartError(Exception):
    """The server did not start: it could not be executed, exited, printed something else
    first, or said nothing in time."""


class MnemoServe:
    """One `mnemo serve` subprocess on a free loopback port.

    `database`: the `--database` URL (default: `sqlite://WORKDIR/mnemo.sqlite`). `extra`: more
    flags. `key_in_env`: pass the API key as `MNEMO_API_KEY` rather than `--api-key`, where `ps`
    would show it. `env`: the server's whole environment (default: this process's).
    Subclasses may override `database()` and `extra_args()`.
    """

    def __init__(
        self,
        binary: str,
        workdir: Path,
        api_key: str,
        *,
        database: Optional[str] = None,
        extra: Sequence[str] = (),
        key_in_env: bool = False,
        env: Optional[Dict[str, str]] = None,
        name: str = "mnemo-serve",
        admin_key: Optional[str] = None,
    ) -> None:
        self.binary = str(binary)
        self.workdir = Path(workdir)
        self.api_key = api_key
        # Given, the server accepts it for the Admin API (and prints no key of its own).
        self.admin_key = admin_key
        self.extra = list(extra)
        self.key_in_env = key_in_env
        self.env = env
        self.name = name
        self.proc: Optional["subprocess.Popen[str]"] = None
        self.base_url = ""
        self.log_path = self.workdir / "server.stderr.log"
        self._log: Any = None
        self._database = database

    def database(self) -> str:
        """The `--database` URL."""
        return self._database or f"sqlite://{self.workdir / 'mnemo.sqlite'}"

    def extra_args(self) -> List[str]:
        """Flags after `--listen`, `--database` and `--api-key`."""
        return list(self.extra)

    def argv(self) -> List[str]:
        key = [] if self.key_in_env else ["--api-key", self.api_key]
        admin = ["--admin-key", self.admin_key] if self.admin_key else []
        return [
            self.binary, "serve", "--listen", "127.0.0.1:0", "--database", self.database(), *key, *admin,
            *self.extra_args(),
        ]

    def _env(self) -> Optional[Dict[str, str]]:
        if not self.key_in_env:
            return self.env
        env = dict(os.environ if self.env is None else self.env)
        env["MNEMO_API_KEY"] = self.api_key
        return env

    def start(self, timeout: float = 30.0) -> None:
        """Starts the server and waits for its `listening on` line; raises `StartError`."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w", encoding="utf-8")
        argv = self.argv()
        # Messages name the command without the key.
        hidden = {self.api_key: "<api key>", self.admin_key: "<admin key>"}
        shown = " ".join(hidden.get(a, a) for a in argv)
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._log,
                text=True,
                encoding="utf-8",
                errors="replace",
                start_new_session=True,  # Ctrl-C reaches the runner only; it stops the server
                env=self._env(),
            )
        except OSError as err:
            raise StartError(f"cannot execute {self.binary}: {err}") from None
        lines: "queue.Queue[Optional[str]]" = queue.Queue()
        stdout = self.proc.stdout
        assert stdout is not None

        def pump() -> None:
            # The first line to the queue; the rest is drained so the pipe never fills up.
            first = True
            for line in stdout:
                if first:
                    lines.put(line)
                    first = False
            if first:
                lines.put(None)

        threading.Thread(target=pump, name=f"stdout-{self.name}", daemon=True).start()
        try:
            first_line = lines.get(timeout=timeout)
        except queue.Empty:
            raise StartError(f"no `listening on` line on stdout within {timeout:.0f}s\n  command: {shown}") from None
        if first_line is None:
            code = self.proc.wait(timeout=5)
            raise StartError(f"server exited with status {code} before printing `listening on`\n  command: {shown}")
        first_line = first_line.rstrip("\r\n")
        match = LISTEN_LINE.match(first_line)
        if not match:
            raise StartError(
                f"first stdout line must be `listening on http://127.0.0.1:PORT`, got {first_line!r}\n  command: {shown}"
            )
        self.base_url = match.group(1)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 40) -> str:
        """The last `lines` lines of the server's stderr, indented."""
        try:
            if self._log is not None:
                self._log.flush()
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no server log)"
        last = text.splitlines()[-lines:]
        return "\n".join("    | " + line for line in last) if last else "    | (server log is empty)"

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after `grace` seconds; then any
        straggler of the group (a wrapper script's children) is killed too."""
        proc = self.proc
        if proc is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    break
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    continue
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                break
        if self._log is not None:
            self._log.close()
            self._log = None
