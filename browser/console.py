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
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, TypeVar
from urllib.parse import urlsplit

from selenium.common.exceptions import (
    NoAlertPresentException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

T = TypeVar("T")

WIDE = (1280, 800)
NARROW = (390, 800)

# Every element a person can click to act: buttons, submit inputs, links.
CLICKABLE = "button, input[type=submit], input[type=button], a[href], [role=button]"
# JavaScript: the text a person reads on an element (collapsed whitespace).
VISIBLE_TEXT = (
    "const e = arguments[0];"
    "const t = e.tagName === 'INPUT' ? (e.value || '') : (e.innerText || e.textContent || '');"
    "return t.replace(/\\s+/g, ' ').trim();"
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
        except (StaleElementReferenceException, Missing) as err:
            last = err
        if time.monotonic() > deadline:
            raise Missing(f"{what} (waited {timeout:.0f}s){': ' + str(last) if last else ''}")
        time.sleep(0.05)


class Console:
    def __init__(self, driver: WebDriver, base_url: str, api_key: str, shots_dir: Path) -> None:
        self.driver = driver
        self.base_url = base_url
        self.origin = base_url.rstrip("/")
        self.api_key = api_key
        self.shots_dir = shots_dir
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
        """The page's text as a person reads it."""
        return self.driver.find_element(By.TAG_NAME, "body").text

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
        for element in self.driver.find_elements(By.TAG_NAME, "label"):
            text = self._visible_text(element)
            if not (text == label or text.startswith(label + " ") or text.startswith(label + "(")):
                continue
            target: Optional[WebElement] = None
            for_id = element.get_attribute("for")
            if for_id:
                found = self.driver.find_elements(By.ID, for_id)
                target = found[0] if found else None
            else:
                inner = element.find_elements(By.CSS_SELECTOR, "input, textarea, select")
                target = inner[0] if inner else None
            if target is not None and target.is_displayed():
                return target
        return None

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

    def find_control(self, text: str) -> Optional[WebElement]:
        """The shown button or link that reads `text`."""
        for element in self.driver.find_elements(By.CSS_SELECTOR, CLICKABLE):
            if element.is_displayed() and self._visible_text(element) == text:
                return element
        return None

    def control(self, text: str, timeout: float = 5.0) -> WebElement:
        self._not_an_error_page()
        return wait_for(
            lambda: self.find_control(text),
            f"no button or link {text!r} at {self.path()}; the page shows: {self.excerpt()}",
            timeout,
        )

    def click(self, text: str) -> None:
        self.control(text).click()

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
