#!/usr/bin/env python3
"""mnemo <-> official Python SDK compatibility suite runner.

Usage:
    MNEMO_BIN=target/debug/mnemo python compat/run.py [SUBSTRING ...]

Starts `$MNEMO_BIN serve` on a free port with a throw-away database (one server per
configuration a selected test needs), discovers `test_*` functions in `compat/test_*.py`, runs
them against the server through `anthropic.Anthropic(base_url=..., api_key=...)`, and prints
one line per test (`PASS name`, `FAIL name: reason`, or `SKIP name: reason` for a test that
cannot run against this backend).  The output ends with `# backend: …` and then the summary
line `N passed, M failed` (skipped tests count as neither); the exit code is 0 iff no test
failed.  Positional arguments keep only tests whose `module::function` name contains one of the
substrings.

Environment:
    MNEMO_BIN               path to the mnemo binary (required)
    MNEMO_COMPAT_DATABASE   `sqlite` (default: an SQLite file per server) or `postgres` (a fresh
                            schema per server in the database at MNEMO_TEST_POSTGRES)
    MNEMO_TEST_POSTGRES     base URL of that database, e.g. postgres://mnemo@127.0.0.1:55432/mnemo
    MNEMO_COMPAT_KEEP_SCHEMAS  1: do not drop the schemas at the end (postgres mode)
    MNEMO_COMPAT_TIMEOUT    per-request SDK timeout in seconds (default 60)
    MNEMO_COMPAT_START_TIMEOUT  seconds to wait for the `listening on` line (default 30)
"""

from __future__ import annotations

import importlib
import inspect
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent


def log(line: str = "") -> None:
    print(line, flush=True)


# The SDK reads credentials, base URL, extra headers and proxies from the environment; none
# of that may leak into the suite.
for _name in list(os.environ):
    if _name.startswith("ANTHROPIC_"):
        del os.environ[_name]
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

sys.path.insert(0, str(HERE))
import compat_lib  # noqa: E402
import mnemo_serve  # noqa: E402


# `mnemo serve` is started and stopped by the launcher every Python suite shares.
ServerStartError = mnemo_serve.StartError


class Server(mnemo_serve.MnemoServe):
    """One `mnemo serve` subprocess of server configuration `config`."""

    def __init__(
        self, binary: str, config: str, workdir: Path, api_key: str, database: Optional[str] = None
    ) -> None:
        """`database`: the `--database` URL; by default a fresh one for this run's backend (an
        SQLite file `workdir/mnemo.sqlite`, or a fresh PostgreSQL schema)."""
        admin_key = "sk-mnemo-admin-compat-" + secrets.token_hex(16)
        super().__init__(binary, workdir, api_key, database=database, name=config, admin_key=admin_key)
        self.config = config
        self.stderr_path = self.log_path
        self.reported_death = False
        self.db = workdir / "mnemo.sqlite"  # the SQLite file, when no `database` URL was given

    def extra_args(self) -> List[str]:
        """The flags of this server's configuration (see `compat_lib.SERVER_CONFIGS`)."""
        return compat_lib.SERVER_CONFIGS[self.config]

    def database(self) -> str:
        """The `--database` URL (fixed on first use)."""
        if self._database is None:
            if compat_lib.BACKEND == compat_lib.POSTGRES:
                self._database = compat_lib.new_schema_url(self.config)
            else:
                self._database = f"sqlite://{self.db}"
                # A copy of an older release's database: the suite then runs on what the
                # migration made of it (scripts/test does this once, with the committed fixture).
                start_from = os.environ.get("MNEMO_COMPAT_START_FROM", "").strip()
                if start_from:
                    self.db.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(start_from, self.db)
        return self._database

    def stderr_tail(self, lines: int = 40) -> str:
        return self.tail(lines)


TestFn = Callable[[compat_lib.Fixture], Any]


def discover(
    filters: List[str],
) -> Tuple[List[Tuple[str, TestFn, str, Optional[Tuple[str, str]]]], List[Tuple[str, str]]]:
    """(name, function, server configuration, only-backend requirement) for every selected
    test, in file then source order; plus (module, error) for every test module that failed to
    import."""
    found = []
    broken = []
    for path in sorted(HERE.glob("test_*.py")):
        try:
            module = importlib.import_module(path.stem)
        except Exception as err:  # noqa: BLE001 — a broken module is a failure, not a crash
            broken.append((path.stem, "".join(traceback.format_exception_only(type(err), err)).strip()))
            continue
        module_config = getattr(module, "SERVER", compat_lib.DEFAULT)
        module_only = getattr(module, "ONLY_BACKEND", None)
        functions = [
            fn
            for attr, fn in vars(module).items()
            if attr.startswith("test_") and inspect.isfunction(fn) and fn.__module__ == module.__name__
        ]
        functions.sort(key=lambda fn: fn.__code__.co_firstlineno)
        for fn in functions:
            name = f"{path.stem}::{fn.__name__}"
            if filters and not any(f in name for f in filters):
                continue
            config = getattr(fn, "mnemo_server", module_config)
            if config not in compat_lib.SERVER_CONFIGS:
                raise SystemExit(f"{name}: unknown server configuration {config!r}")
            only = getattr(fn, "mnemo_only_backend", module_only)
            if only is not None and only[0] not in compat_lib.BACKENDS:
                raise SystemExit(f"{name}: unknown backend {only[0]!r}")
            found.append((name, fn, config, only))
    return found, broken


def short_traceback(err: BaseException) -> str:
    """The frames inside compat/ (test code and helpers), most recent last."""
    frames = [
        f
        for f in traceback.extract_tb(err.__traceback__)
        if Path(f.filename).resolve().parent == HERE and Path(f.filename).name != "run.py"
    ]
    out = []
    for chunk in traceback.format_list(frames[-6:]):
        for line in chunk.splitlines():
            if line.strip() and set(line.strip()) - set("^~"):  # drop 3.11+ caret markers
                out.append("    " + line)
    return "\n".join(out)


def describe(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    if not isinstance(err, AssertionError):
        text = f"{type(err).__name__}: {text}"
    text = " ".join(text.split())
    return text if len(text) <= 600 else text[:600] + "..."


def summary(passed: int, failed: int) -> None:
    log(f"# backend: {compat_lib.describe_backend()}")
    log(f"{passed} passed, {failed} failed")


def check_backend() -> Optional[str]:
    """None if the selected backend can be used, else why not."""
    if compat_lib.BACKEND not in compat_lib.BACKENDS:
        return f"MNEMO_COMPAT_DATABASE={compat_lib.BACKEND!r}: expected one of {', '.join(compat_lib.BACKENDS)}"
    if compat_lib.BACKEND != compat_lib.POSTGRES:
        return None
    url = compat_lib.POSTGRES_BASE_URL
    if not url:
        return "MNEMO_COMPAT_DATABASE=postgres needs MNEMO_TEST_POSTGRES (e.g. postgres://mnemo@127.0.0.1:55432/mnemo)"
    try:
        compat_lib.psql(url, "SELECT 1")
    except compat_lib.PsqlError as err:
        return f"cannot reach MNEMO_TEST_POSTGRES: {err}"
    return None


def drop_schemas() -> None:
    schemas = list(dict.fromkeys(compat_lib.SCHEMAS_CREATED))
    if not schemas:
        return
    if os.environ.get("MNEMO_COMPAT_KEEP_SCHEMAS") == "1":
        log(f"# kept {len(schemas)} schema(s): {', '.join(schemas)}")
        return
    sql = "; ".join(f'DROP SCHEMA IF EXISTS "{s}" CASCADE' for s in schemas)
    try:
        compat_lib.psql(compat_lib.POSTGRES_BASE_URL, sql, timeout=30)
    except compat_lib.PsqlError as err:
        log(f"# could not drop the suite's schemas ({err}): {', '.join(schemas)}")


def main(argv: List[str]) -> int:
    filters = [a for a in argv if not a.startswith("-")]
    if any(a in ("-h", "--help") for a in argv):
        log(__doc__ or "")
        return 0

    binary = os.environ.get("MNEMO_BIN", "").strip()
    if not binary:
        log("error: set MNEMO_BIN to the mnemo server binary, e.g. MNEMO_BIN=target/debug/mnemo")
        summary(0, 1)
        return 2
    binary_path = Path(binary)
    if not binary_path.is_file() or not os.access(binary_path, os.X_OK):
        found = shutil.which(binary)
        if found is None:
            log(f"error: MNEMO_BIN={binary!r} is not an executable file")
            summary(0, 1)
            return 2
        binary_path = Path(found)
    binary = str(binary_path.resolve())
    problem = check_backend()
    if problem is not None:
        log(f"error: {problem}")
        summary(0, 1)
        return 2
    log(f"# backend: {compat_lib.describe_backend()}")

    request_timeout = float(os.environ.get("MNEMO_COMPAT_TIMEOUT", "60"))
    start_timeout = float(os.environ.get("MNEMO_COMPAT_START_TIMEOUT", "30"))

    tests, broken = discover(filters)
    for module_name, error in broken:
        log(f"FAIL {module_name}: cannot import: {error}")
    if not tests:
        log(f"no tests match {filters!r}")
        summary(0, len(broken))
        return 1 if broken else 0

    # SIGTERM (e.g. from CI cancelling the job) takes the same clean-up path as Ctrl-C.
    def on_sigterm(signum: int, frame: Any) -> None:  # noqa: ARG001
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    # Ctrl-C raises KeyboardInterrupt even if we were started with SIGINT ignored (`cmd &`).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    tmpdir = Path(tempfile.mkdtemp(prefix="mnemo-compat-"))
    servers: Dict[str, Server] = {}
    start_errors: Dict[str, str] = {}
    passed, failed, skipped = 0, len(broken), 0
    interrupted = False
    started_at = time.monotonic()
    try:
        for name, fn, config, only in tests:
            if only is not None and only[0] != compat_lib.BACKEND:
                skipped += 1
                log(f"SKIP {name}: {only[1]}")
                continue
            srv: Optional[Server] = None
            fixture: Any
            if config == compat_lib.OWN:
                fixture = compat_lib.BareFixture(request_timeout)
            else:
                if config in start_errors:
                    failed += 1
                    log(f"FAIL {name}: server `{config}` did not start")
                    continue
                srv = servers.get(config)
                if srv is None:
                    srv = Server(binary, config, tmpdir / config, "sk-compat-" + secrets.token_hex(16))
                    servers[config] = srv
                    try:
                        srv.start(start_timeout)
                        log(f"# server `{config}` at {srv.base_url} (log: {srv.stderr_path})")
                    except ServerStartError as err:
                        start_errors[config] = str(err)
                        log(f"# server `{config}` failed to start: {err}")
                        log("#   last lines of its stderr:")
                        log(srv.stderr_tail())
                        srv.stop()
                        failed += 1
                        log(f"FAIL {name}: server `{config}` did not start")
                        continue
                fixture = compat_lib.Fixture(srv.base_url, srv.api_key, request_timeout, srv.admin_key)
            try:
                fn(fixture)
            except KeyboardInterrupt:
                raise
            except compat_lib.Skip as why:
                skipped += 1
                log(f"SKIP {name}: {why}")
            except BaseException as err:  # noqa: BLE001 — a test may raise anything
                failed += 1
                log(f"FAIL {name}: {describe(err)}")
                tb = short_traceback(err)
                if tb:
                    log(tb)
                if srv is not None and not srv.alive() and not srv.reported_death:
                    srv.reported_death = True
                    log(f"# server `{config}` is no longer running (exit status {srv.proc.returncode if srv.proc else '?'}); last lines of its stderr:")
                    log(srv.stderr_tail())
            else:
                passed += 1
                log(f"PASS {name}")
            finally:
                try:
                    if fixture.client is not None:
                        fixture.client.close()
                except Exception:  # noqa: BLE001
                    pass
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for hook in compat_lib.END_HOOKS:
            try:
                hook()
            except Exception as err:  # noqa: BLE001 — clean-up goes on
                log(f"# clean-up {getattr(hook, '__qualname__', hook)!s} failed: {describe(err)}")
        for srv in servers.values():
            srv.stop()
        drop_schemas()
        shutil.rmtree(tmpdir, ignore_errors=True)

    if interrupted:
        not_run = len(tests) + len(broken) - passed - failed - skipped
        log(f"# interrupted; {not_run} test(s) not run (counted as failed)")
        failed += not_run
    skipped_note = f"; {skipped} skipped (see the SKIP lines)" if skipped else ""
    log(f"# {len(tests)} test(s) in {time.monotonic() - started_at:.1f}s{skipped_note}")
    summary(passed, failed)
    if interrupted:
        return 130
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
