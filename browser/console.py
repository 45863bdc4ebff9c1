"""What a browser test has at hand: the console in a real Chromium, driven the way a person uses
it (controls found by their visible labels), and the HTTP API with the server's API key for
changing things behind the page's back.

Tests receive one `Console`; they must not reach into the page's markup beyond what a person
sees (label texts, button texts, the page's text), except for the inertness checks that need
JavaScript (`window.__pwned`, the resources the page loaded).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union
from urllib.parse import urlsplit

from selenium.common.exceptions import (
    JavascriptException,
    NoAlertPresentException,
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

T = TypeVar("T")

WIDE = (1280, 800)
NARROW = (390, 800)

# Every element a person can click to act: buttons, submit inputs, links.
CLICKABLE = "button, input[type=submit], input[type=button], a[href], [role=button], summary"
# JavaScript: the text a person reads on an element (collapsed whitespace).
VISIBLE_TEXT = (
    "const e = arguments[0];"
    "const t = e.tagName === 'INPUT' ? (e.value || '') : (e.innerText || e.textContent || '');"
    "return t.replace(/\\s+/g, ' ').trim();"
)

# JavaScript: whether an element is shown (laid out and not hidden), and the searches for a
# field by its label's text and a control by its text, done in the page in one round trip (the
# caller confirms with Selenium's own `is_displayed`).
_SHOWN = (
    "const shown = e => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length)"
    " && getComputedStyle(e).visibility !== 'hidden';"
    "const read = e => (e.tagName === 'INPUT' ? (e.value || '') : (e.innerText || e.textContent || ''))"
    ".replace(/\\s+/g, ' ').trim();"
)
FIND_FIELD = _SHOWN + (
    "const label = arguments[0];"
    "for (const l of document.querySelectorAll('label')) {"
    "  const t = read(l);"
    "  if (!(t === label || t.startsWith(label + ' ') || t.startsWith(label + '('))) continue;"
    "  const f = l.htmlFor ? document.getElementById(l.htmlFor) : l.querySelector('input, textarea, select');"
    "  if (f && shown(f)) return f;"
    "}"
    "return null;"
)
FIND_CONTROL = _SHOWN + (
    "for (const e of document.querySelectorAll(arguments[0])) {"
    "  if (shown(e) && read(e) === arguments[1]) return e;"
    "}"
    "return null;"
)


class Missing(AssertionError):
    """A control or text a person would look for is not on the page."""


def wait_for(check: Callable[[], Optional[T]], what: str, timeout: float = 5.0) -> T:
    """Polls `check` until it returns something truthy; fails naming `what`."""
    deadline = time.monotonic() + timeout
    last: Optional[BaseException] = None
    while True:
        try:
            value = check()
            if value:
                return value
        # A page that goes away while it is searched (a click's navigation still under way)
        # answers a stale element, "document unloaded", or, between the old document and the
        # new one, no `body` at all: look again.
        except (StaleElementReferenceException, NoSuchElementException, JavascriptException, Missing) as err:
            last = err
        # Chromium's own name for a node of the old document met while the new one loads.
        except WebDriverException as err:
            if "does not belong to the document" not in str(err):
                raise
            last = err
        if time.monotonic() > deadline:
            raise Missing(f"{what} (waited {timeout:.0f}s){': ' + str(last) if last else ''}")
        time.sleep(0.05)


class Console:
    def __init__(
        self,
        driver: WebDriver,
        base_url: str,
        api_key: str,
        shots_dir: Path,
        binary: str = "",
        scratch: Optional[Path] = None,
        mount_root: Optional[Path] = None,
        fake_model_url: str = "",
        admin_key: str = "",
    ) -> None:
        self.driver = driver
        self.base_url = base_url
        self.origin = base_url.rstrip("/")
        self.api_key = api_key
        self.shots_dir = shots_dir
        # The mnemo binary the server runs (for tests that start a worker of their own), a
        # directory tests may write in, and where the server mounts sessions' memory stores.
        self.binary = binary
        self.scratch = scratch if scratch is not None else shots_dir.parent / "scratch"
        self.mount_root = mount_root
        # The scripted model fake the server's `--models` file maps agent model `browser-fake`
        # to (compat/fake_model.py; `POST {url}/_script` queues its replies).
        self.fake_model_url = fake_model_url
        # The server's admin key (`--admin-key`): the Admin API, for what a test sets up behind
        # the page's back (a second workspace, its key, a rate-limit override).
        self.admin_key = admin_key
        # Processes tests started through `spawn`: the runner stops what is left after each test.
        self.processes: List[Tuple[str, "subprocess.Popen[bytes]", Any]] = []
        # Set by tests that create things other tests build on (store name → id, …).
        self.state: Dict[str, Any] = {}
        # Every URL the browser requested so far (the runner adds each test's).
        self.requested: List[str] = []

    # ---- navigation -------------------------------------------------------------------------

    def open(self, path: str = "/console") -> None:
        self.driver.get(self.origin + path)

    def path(self) -> str:
        parts = urlsplit(self.driver.current_url)
        return parts.path + (("?" + parts.query) if parts.query else "")

    def text(self) -> str:
        """The page's text as a person reads it (read again when a navigation still under way
        replaces the page while it is read: a click's answer may land at any moment)."""
        return wait_for(
            lambda: self.driver.find_element(By.TAG_NAME, "body").text or " ",
            f"the text of {self.driver.current_url}",
        )

    def sees(self, text: str) -> bool:
        """Whether `text` is on the page: in its text or in a shown field's value (a textarea
        holding what was typed is part of what a person sees)."""
        if text in self.text():
            return True
        values = self.driver.execute_script(
            "return Array.from(document.querySelectorAll('textarea, input:not([type=hidden]):not([type=password])'))"
            ".filter(e => e.offsetParent !== null).map(e => e.value);"
        )
        return any(text in value for value in values)

    def expect_text(self, text: str, timeout: float = 5.0) -> None:
        wait_for(lambda: self.sees(text), f"the page at {self.path()} does not show {text!r}; it shows: {self.excerpt()}", timeout)

    def excerpt(self, limit: int = 300) -> str:
        try:
            body = " ".join(self.text().split())
        except WebDriverException:
            return "(no page)"
        return repr(body[:limit] + ("…" if len(body) > limit else ""))

    # ---- controls by their visible labels ---------------------------------------------------

    def _visible_text(self, element: WebElement) -> str:
        return self.driver.execute_script(VISIBLE_TEXT, element)

    def find_field(self, label: str) -> Optional[WebElement]:
        """The input, textarea or select whose <label> reads `label` (exactly, or followed by
        a hint after a space or parenthesis), if shown."""
        element = self.driver.execute_script(FIND_FIELD, label)
        return element if element is not None and element.is_displayed() else None

    def _not_an_error_page(self) -> None:
        """Fails at once on the API's JSON error (e.g. a console page that does not exist):
        no control will appear there."""
        text = self.text().lstrip()
        if text.startswith('{"type":"error"'):
            raise Missing(f"{self.path()} answers the API's error instead of a page: {self.excerpt(200)}")

    def field(self, label: str, timeout: float = 5.0) -> WebElement:
        self._not_an_error_page()
        return wait_for(
            lambda: self.find_field(label),
            f"no field labelled {label!r} at {self.path()}; the page shows: {self.excerpt()}",
            timeout,
        )

    def fill(self, label: str, value: str) -> None:
        element = self.field(label)
        element.clear()
        if value:
            # send_keys types like a person; long or multi-line values go in the same way.
            element.send_keys(value)

    def choose(self, label: str, option: str) -> None:
        """Picks the option reading `option` in the drop-down labelled `label`."""
        from selenium.webdriver.support.select import Select

        Select(self.field(label)).select_by_visible_text(option)

    def find_control(self, text: str) -> Optional[WebElement]:
        """The shown button or link that reads `text`."""
        element = self.driver.execute_script(FIND_CONTROL, CLICKABLE, text)
        return element if element is not None and element.is_displayed() else None

    def control(self, text: str, timeout: float = 5.0) -> WebElement:
        self._not_an_error_page()
        return wait_for(
            lambda: self.find_control(text),
            f"no button or link {text!r} at {self.path()}; the page shows: {self.excerpt()}",
            timeout,
        )

    def click(self, text: str) -> None:
        self.control(text).click()

    # ---- tables, as a person reads them ----------------------------------------------------

    def table_rows(self) -> List[List[str]]:
        """The shown body rows of the page's tables, each as the texts of its cells."""
        return self.driver.execute_script(
            "return Array.from(document.querySelectorAll('tbody tr')).filter(r => r.offsetParent !== null)"
            ".map(r => Array.from(r.cells).map(c => (c.innerText || '').replace(/\\s+/g, ' ').trim()));"
        )

    def _row_elements(self) -> List[WebElement]:
        return [r for r in self.driver.find_elements(By.CSS_SELECTOR, "tbody tr") if r.is_displayed()]

    def row(self, which: Union[int, str]) -> WebElement:
        """A shown table row: the `which`-th (0 = first, -1 = last) or the first whose text
        contains `which`."""
        def find() -> Optional[WebElement]:
            rows = self._row_elements()
            if isinstance(which, int):
                return rows[which] if -len(rows) <= which < len(rows) else None
            for r in rows:
                if which in self._visible_text(r):
                    return r
            return None

        return wait_for(find, f"no table row {which!r} at {self.path()}; the rows are {self.table_rows()}")

    def click_in_row(self, which: Union[int, str], text: str) -> None:
        """Clicks the button or link reading `text` in the row `which` (see `row`)."""
        r = self.row(which)
        for element in r.find_elements(By.CSS_SELECTOR, CLICKABLE):
            if element.is_displayed() and self._visible_text(element) == text:
                element.click()
                return
        raise Missing(f"no {text!r} in the row {self._visible_text(r)!r} at {self.path()}")

    # ---- the keyboard ---------------------------------------------------------------------------

    def focused(self) -> WebElement:
        return self.driver.switch_to.active_element

    def press(self, *keys: str) -> None:
        """Types `keys` (text or `Keys.*`) into whatever has the focus, as a keyboard does."""
        self.focused().send_keys(*keys)

    def tab_to(self, element: WebElement, limit: int = 25, backwards: bool = False) -> int:
        """Presses Tab (Shift+Tab if `backwards`) until `element` has the focus; answers how
        many presses it took."""
        for count in range(1, limit + 1):
            if backwards:
                self.press(Keys.SHIFT, Keys.TAB)
            else:
                self.press(Keys.TAB)
            if self.focused() == element:
                return count
        raise Missing(f"{limit} presses of Tab never reached {self._visible_text(element) or element.tag_name!r}; the focus is on {self._visible_text(self.focused())!r}")

    # ---- signing in -------------------------------------------------------------------------

    def sign_in(self, key: Optional[str] = None) -> None:
        """Signs in from a clean browser (no cookies) with `key` (the API key by default) and
        waits until the sign-in form is gone."""
        self.driver.delete_all_cookies()
        self.open("/console")
        self.fill("API key", key if key is not None else self.api_key)
        self.click("Sign in")
        wait_for(
            lambda: self.find_field("API key") is None,
            f"still on the sign-in form after signing in; the page shows: {self.excerpt()}",
        )

    # ---- inertness checks ---------------------------------------------------------------------

    def alert_text(self) -> Optional[str]:
        try:
            return self.driver.switch_to.alert.text
        except NoAlertPresentException:
            return None

    def pwned(self) -> Any:
        return self.driver.execute_script("return typeof window.__pwned === 'undefined' ? null : String(window.__pwned);")

    def foreign_resources(self) -> List[str]:
        """URLs of the resources this page loaded from anywhere but the server."""
        names = self.driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
            ".concat(performance.getEntriesByType('navigation').map(e => e.name));"
        )
        return [n for n in names if not self.same_origin(n)]

    def requested_now(self) -> List[str]:
        """The URLs requested since the runner last collected them (and keeps them)."""
        urls = requested_urls(self.driver)
        self.requested.extend(urls)
        return urls

    def same_origin(self, url: str) -> bool:
        """Whether `url` is the server's own (or no network address at all: data:, about:,
        and the browser's internal pages such as chrome://new-tab-page that it opens with)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss", "ftp"):
            return not url.startswith("blob:") or url.startswith("blob:" + self.origin)
        return f"{parts.scheme}://{parts.netloc}" == self.origin

    # ---- screenshots ------------------------------------------------------------------------

    def shot(self, name: str) -> Path:
        """Saves the page as `<shots dir>/<name>.png` (docs/console/ when the run was asked to
        refresh the documentation's screenshots)."""
        self.shots_dir.mkdir(parents=True, exist_ok=True)
        path = self.shots_dir / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def resize(self, size: tuple) -> None:
        """Makes the page's viewport `size` (width, height) CSS pixels."""
        width, height = size
        inner = self.driver.execute_script("return [window.innerWidth, window.innerHeight];")
        if inner == [width, height]:
            return
        self.driver.set_window_size(width, height)
        inner = self.driver.execute_script("return [window.innerWidth, window.innerHeight];")
        if inner != [width, height]:
            self.driver.set_window_size(width + width - inner[0], height + height - inner[1])

    # ---- the HTTP API, with the API key -----------------------------------------------------

    def api(self, method: str, path: str, body: Optional[dict] = None, key: Optional[str] = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.origin + path, data=data, method=method)
        request.add_header("x-api-key", key if key is not None else self.api_key)
        request.add_header("anthropic-version", "2023-06-01")
        if data is not None:
            request.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as err:
            raise AssertionError(f"{method} {path}: HTTP {err.code}: {err.read()[:300]!r}") from None

    def http(
        self, method: str, path: str, body: Optional[dict] = None, bearer: Optional[str] = None,
    ) -> Tuple[int, Any]:
        """(status, parsed JSON body) of an API call that may fail; with `bearer`, the
        credential goes as `Authorization: Bearer` (how workers send environment keys) instead of
        the API key."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.origin + path, data=data, method=method)
        if bearer is not None:
            request.add_header("authorization", "Bearer " + bearer)
        else:
            request.add_header("x-api-key", self.api_key)
        request.add_header("anthropic-version", "2023-06-01")
        if data is not None:
            request.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                raw = response.read()
                return response.status, json.loads(raw or b"null")
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                return err.code, json.loads(raw or b"null")
            except ValueError:
                return err.code, raw.decode("utf-8", "replace")

    def admin(self, method: str, path: str, body: Optional[dict] = None) -> Any:
        """An Admin API call (`/v1/organizations/…`) with the server's admin key."""
        return self.api(method, path, body, key=self.admin_key)

    def overflow(self) -> Tuple[int, List[str]]:
        """How many CSS pixels the page is wider than the window, and the first elements
        that stick out past its right edge."""
        extra = self.driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth;")
        wide = self.driver.execute_script(
            "return Array.from(document.querySelectorAll('body *'))"
            ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)"
            ".slice(0, 5).map(e => e.tagName.toLowerCase() + (e.className ? '.' + e.className : ''));"
        )
        return extra, wide

    def store_by_name(self, name: str) -> dict:
        page = self.api("GET", "/v1/memory_stores?limit=100")
        for store in page["data"]:
            if store["name"] == name:
                return store
        raise AssertionError(f"the API lists no store named {name!r}")

    def memory_by_path(self, store_id: str, path: str) -> dict:
        page = self.api("GET", f"/v1/memory_stores/{store_id}/memories?view=full&limit=100")
        for memory in page["data"]:
            if memory.get("path") == path:
                return memory
        raise AssertionError(f"the API lists no memory at {path!r} in {store_id}")

    def get_with_cookies(self, path: str, cookies: List[dict]) -> tuple:
        """(status, final URL, body) of a plain GET carrying `cookies`, redirects not followed."""
        header = "; ".join(f"{c['name']}={c['value']}" for c in cookies)

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # noqa: ARG002
                return None

        opener = urllib.request.build_opener(NoRedirect)
        request = urllib.request.Request(self.origin + path, headers={"cookie": header})
        try:
            with opener.open(request, timeout=15) as response:
                return response.status, response.headers.get("location"), response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as err:
            return err.code, err.headers.get("location"), err.read().decode("utf-8", "replace")


    # ---- processes a test starts --------------------------------------------------------------

    def spawn(self, name: str, argv: Sequence[str], env: Optional[Dict[str, str]] = None) -> "subprocess.Popen[bytes]":
        """Starts `argv` in a process group of its own, its output in `<scratch>/<name>.log`.
        It is stopped by `stop(proc)`, or by the runner after the test whatever happened."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        log_file = open(self.scratch / f"{name}.log", "wb")
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})}, start_new_session=True,
        )
        self.processes.append((name, proc, log_file))
        return proc

    def log_of(self, name: str, lines: int = 15) -> str:
        try:
            text = (self.scratch / f"{name}.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, proc: "subprocess.Popen[bytes]", grace: float = 10.0) -> Optional[int]:
        """SIGTERM to the process's group, SIGKILL after `grace` seconds; answers its status."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            if proc.poll() is not None:
                break
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        for entry in [e for e in self.processes if e[1] is proc]:
            entry[2].close()
            self.processes.remove(entry)
        return proc.poll()

    def stop_processes(self) -> List[str]:
        """Stops every process a test started and left running; answers their names."""
        left = [name for name, proc, _ in self.processes if proc.poll() is None]
        for _, proc, _ in list(self.processes):
            self.stop(proc, grace=5.0)
        return left


def env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0", "false")


def requested_urls(driver: WebDriver) -> List[str]:
    """Every URL the browser asked for since the last call (Chrome's performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        try:
            message = json.loads(entry["message"])["message"]
        except (KeyError, ValueError):
            continue
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls
