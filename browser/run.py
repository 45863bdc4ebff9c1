#!/usr/bin/env python3
"""mnemo web console browser suite runner.

Usage:
    MNEMO_BIN=target/debug/mnemo python browser/run.py [SUBSTRING ...]

Starts `$MNEMO_BIN serve` on a free port with a throw-away SQLite database, a generated API
key and its memory mount root inside the run's directory, then chromedriver and a headless
Chromium (1280×800, its own profile, no network beyond 127.0.0.1), discovers `test_*` functions
in `browser/test_*.py` (modules by file name, functions in source order) and runs them, each
with a `console.Console` (see that module): the console driven by visible labels, plus the HTTP
API with the API key and `spawn` for processes such as a worker (which the runner stops after
each test, whatever happened).  Prints one line per test (`PASS name` or `FAIL name: reason`)
and ends with the summary line `N passed, M failed`; the exit code is 0 iff no test failed.
Positional arguments keep only tests whose `module::function` name contains one of them.  On a
failure the run's directory (server log, chromedriver log, a screenshot per failed test) is kept
and named.

Environment:
    MNEMO_BIN                path to the mnemo binary (required)
    MNEMO_BROWSER_CHROMIUM   the browser (default /usr/bin/chromium)
    MNEMO_BROWSER_DRIVER     chromedriver (default /usr/bin/chromedriver)
    MNEMO_BROWSER_SHOTS      a directory (e.g. docs/console) to save the tests' screenshots in
                             for the documentation; by default they go to the run's directory
"""

from __future__ import annotations

import importlib
import inspect
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

HERE = Path(__file__).resolve().parent

# Selenium must never reach out for a driver or a browser of its own.
os.environ["SE_OFFLINE"] = "true"
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
for _name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
    os.environ.pop(_name, None)

sys.path.insert(0, str(HERE))
sys.path.append(str(HERE.parent / "compat"))  # the launcher every Python suite shares
import mnemo_serve  # noqa: E402

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--lang=en-US",
]


def log(line: str = "") -> None:
    print(line, flush=True)


StartError = mnemo_serve.StartError


class Server(mnemo_serve.MnemoServe):
    """One `mnemo serve` on a free port with a fresh SQLite database."""

    def __init__(self, binary: str, workdir: Path, mount_root: Path, models: Optional[Path] = None) -> None:
        super().__init__(binary, workdir, "sk-browser-" + secrets.token_hex(16), name="browser")
        # The providers file of the agent loop (`--models`), if the run has a model fake.
        self.models = models
        # Where workers that tests start mount sessions' memory stores (never /mnt/memory).
        self.mount_root = mount_root
        # An admin key, for tests that make a second workspace through the Admin API.
        self.admin_key = "sk-mnemo-admin-browser-" + secrets.token_hex(16)

    def extra_args(self) -> List[str]:
        models = ["--models", str(self.models)] if self.models else []
        return ["--memory-mount-root", str(self.mount_root), "--admin-key", self.admin_key, *models]


def start_browser(workdir: Path) -> Any:
    """chromedriver and headless Chromium, both given by path (Selenium Manager stays idle)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = os.environ.get("MNEMO_BROWSER_CHROMIUM", "/usr/bin/chromium")
    driver_path = os.environ.get("MNEMO_BROWSER_DRIVER", "/usr/bin/chromedriver")
    for what, path in (("Chromium", chromium), ("chromedriver", driver_path)):
        if not os.access(path, os.X_OK):
            raise StartError(f"{what} not found at {path} (Debian: apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={workdir / 'chromium-profile'}")
    options.add_argument("--window-size=1280,800")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    options.set_capability("unhandledPromptBehavior", "ignore")
    service = Service(executable_path=driver_path, log_output=str(workdir / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(10)
    return driver


TestFn = Callable[[Any], Any]


def discover(filters: List[str]) -> Tuple[List[Tuple[str, TestFn]], List[Tuple[str, str]]]:
    found, broken = [], []
    for path in sorted(HERE.glob("test_*.py")):
        try:
            module = importlib.import_module(path.stem)
        except Exception as err:  # noqa: BLE001
            broken.append((path.stem, "".join(traceback.format_exception_only(type(err), err)).strip()))
            continue
        functions = [
            fn for attr, fn in vars(module).items()
            if attr.startswith("test_") and inspect.isfunction(fn) and fn.__module__ == module.__name__
        ]
        functions.sort(key=lambda fn: fn.__code__.co_firstlineno)
        for fn in functions:
            name = f"{path.stem}::{fn.__name__}"
            if not filters or any(f in name for f in filters):
                found.append((name, fn))
    return found, broken


def short_traceback(err: BaseException) -> str:
    frames = [
        f for f in traceback.extract_tb(err.__traceback__)
        if Path(f.filename).resolve().parent == HERE and Path(f.filename).name.startswith("test_")
    ]
    out = []
    for chunk in traceback.format_list(frames[-2:]):
        for line in chunk.splitlines():
            if line.strip() and set(line.strip()) - set("^~"):
                out.append("    " + line)
    return "\n".join(out)


def describe(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    if not isinstance(err, AssertionError):
        text = f"{type(err).__name__}: {text}"
    # WebDriver errors carry a stack trace of chromedriver's own; the first line says it.
    text = text.split("\nStacktrace:")[0]
    text = " ".join(text.split())
    return text if len(text) <= 600 else text[:600] + "..."


FAKE_MODEL = Path(__file__).resolve().parent.parent / "compat" / "fake_model.py"
FAKE_MODEL_ID = "browser-fake"  # the agent model id the run's `--models` file maps to the fake


def start_fake_model(workdir: Path) -> Tuple[Optional[Tuple["subprocess.Popen[str]", str]], Optional[Path]]:
    """`compat/fake_model.py` on 127.0.0.1 and a providers file mapping `FAKE_MODEL_ID` to it, so
    tests can watch sessions the server's agent loop runs (they script it: `POST {url}/_script`)."""
    try:
        proc = subprocess.Popen([sys.executable, str(FAKE_MODEL)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
    except OSError as err:
        log(f"# no model fake ({err}); agent-loop tests will fail")
        return None, None
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("listening on "):
        log(f"# the model fake printed {line!r}; agent-loop tests will fail")
        proc.kill()
        return None, None
    url = line.split("listening on ", 1)[1].strip()
    models = workdir / "models.toml"
    workdir.mkdir(parents=True, exist_ok=True)
    models.write_text(
        f'[providers.fake]\nkind = "anthropic"\nbase_url = "{url}"\napi_key = "fake-key"\n'
        f'[providers.fake-embed]\nkind = "openai"\nbase_url = "{url}/v1"\n'
        f'[models]\n"{FAKE_MODEL_ID}" = "fake/fake-model-1"\n'
        # Semantic search in the console ranks by the fake's deterministic vectors.
        f'[embeddings]\nprovider = "fake-embed"\nmodel = "fake-embed"\n',
        encoding="utf-8",
    )
    return (proc, url), models


def main(argv: List[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        log(__doc__ or "")
        return 0
    filters = [a for a in argv if not a.startswith("-")]
    binary = os.environ.get("MNEMO_BIN", "").strip()
    if not binary or not os.access(binary, os.X_OK):
        log(f"error: set MNEMO_BIN to the mnemo binary (got {binary!r})")
        log("0 passed, 1 failed")
        return 2
    binary = str(Path(binary).resolve())

    tests, broken = discover(filters)
    for module_name, error in broken:
        log(f"FAIL {module_name}: cannot import: {error}")
    if not tests:
        log(f"no tests match {filters!r}")
        log(f"0 passed, {len(broken)} failed")
        return 1 if broken else 0

    def on_sigterm(signum: int, frame: Any) -> None:  # noqa: ARG001
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    import console as console_lib

    workdir = Path(tempfile.mkdtemp(prefix="mnemo-browser-"))
    shots = os.environ.get("MNEMO_BROWSER_SHOTS", "").strip()
    shots_dir = Path(shots).resolve() if shots else workdir / "shots"
    fake_model, models = start_fake_model(workdir)
    server = Server(binary, workdir / "server", workdir / "mnt", models)
    driver = None
    console = None
    passed, failed = 0, len(broken)
    interrupted = False
    started = time.monotonic()
    try:
        try:
            server.start()
            log(f"# server at {server.base_url} (log: {server.log_path})")
            driver = start_browser(workdir)
            log(f"# {driver.capabilities.get('browserName')} {driver.capabilities.get('browserVersion')}")
        except Exception as err:  # noqa: BLE001 — nothing can run; every test fails
            log(f"# cannot start: {describe(err)}")
            for name, _ in tests:
                log(f"FAIL {name}: the server or the browser did not start")
            failed += len(tests)
            tests = []
        console = (
            console_lib.Console(
                driver, server.base_url, server.api_key, shots_dir,
                binary=binary, scratch=workdir / "scratch", mount_root=server.mount_root,
                fake_model_url=fake_model[1] if fake_model else "",
                admin_key=server.admin_key,
            )
            if driver
            else None
        )
        for name, fn in tests:
            assert console is not None and driver is not None
            console.resize(console_lib.WIDE)
            try:
                fn(console)
            except KeyboardInterrupt:
                raise
            except BaseException as err:  # noqa: BLE001 — a test may raise anything
                failed += 1
                log(f"FAIL {name}: {describe(err)}")
                tb = short_traceback(err)
                if tb:
                    log(tb)
                try:
                    failures = workdir / "failures"
                    failures.mkdir(exist_ok=True)
                    driver.save_screenshot(str(failures / (name.replace("::", "-") + ".png")))
                    driver.switch_to.alert.dismiss()
                except Exception:  # noqa: BLE001 — best effort
                    pass
                if not server.alive():
                    log("# the server is no longer running; last lines of its log:")
                    log(server.tail(20))
            else:
                passed += 1
                log(f"PASS {name}")
            finally:
                left = console.stop_processes()
                if left:
                    log(f"# {name} left {', '.join(left)} running; stopped")
                try:
                    console.requested.extend(console_lib.requested_urls(driver))
                except Exception:  # noqa: BLE001
                    pass
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if console is not None:
            console.stop_processes()
        if driver is not None:
            try:
                driver.quit()
            except Exception:  # noqa: BLE001
                pass
        server.stop()
        if fake_model is not None:
            fake_model[0].kill()
            fake_model[0].wait()
    if failed:
        log(f"# kept {workdir} (server log, chromedriver log, failures/*.png)")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    log(f"# {time.monotonic() - started:.1f}s")
    if interrupted:
        log("# interrupted")
    log(f"{passed} passed, {failed} failed")
    return 1 if failed or interrupted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
