"""Webhooks: what `mnemo serve` POSTs is what the official SDK's `client.beta.webhooks.unwrap`
verifies (Standard Webhooks signatures, with the `standardwebhooks` package the SDK imports)
and parses into its own event types; a wrong secret or a changed payload fails it.

Endpoints are registered through mnemo's own API (the hosted product registers them in its
console); the receiver is an HTTP server on 127.0.0.1 in this process.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Tuple

from compat_lib import DEFAULT, WEBHOOKS, Skip, check, eq, http, server

SERVER = WEBHOOKS


class Receiver:
    """Records every POST (headers, raw body) and answers with the next scripted status."""

    def __init__(self, statuses: List[int]) -> None:
        self.statuses = list(statuses)
        self.got: List[Tuple[Dict[str, str], str]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode("utf-8")
                with receiver.lock:
                    receiver.got.append(({k.lower(): v for k, v in self.headers.items()}, body))
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, n: int, timeout: float = 20.0) -> List[Tuple[Dict[str, str], str]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.got) >= n:
                    return list(self.got)
            time.sleep(0.05)
        raise AssertionError(f"expected {n} deliveries within {timeout}s, got {len(self.got)}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def register(fx: Any, url: str, event_types: List[str]) -> Dict[str, Any]:
    headers = {**fx.auth_headers(), "content-type": "application/json"}
    body = json.dumps({"url": url, "event_types": event_types}).encode()
    resp = http("POST", f"{fx.base_url}/v1/webhook_endpoints", headers, body)
    eq(resp.status, 200, f"register a webhook endpoint: {resp.body!r}")
    return resp.json()


def remove(fx: Any, endpoint_id: str) -> None:
    http("DELETE", f"{fx.base_url}/v1/webhook_endpoints/{endpoint_id}", fx.auth_headers())


def other_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def unwrap_or_skip(fx: Any, body: str, headers: Dict[str, str], key: str) -> Any:
    try:
        import standardwebhooks  # noqa: F401  (what unwrap imports)
    except ImportError:
        raise Skip("standardwebhooks is not installed (scripts/test installs it)")
    return fx.client.beta.webhooks.unwrap(body, headers=headers, key=key)


def refused(fx: Any, body: str, headers: Dict[str, str], key: str) -> bool:
    try:
        fx.client.beta.webhooks.unwrap(body, headers=headers, key=key)
    except Exception:  # standardwebhooks.WebhookVerificationError
        return True
    return False


def test_sdk_unwrap_verifies_and_parses_what_mnemo_sends(fx):
    from anthropic.types.beta.beta_webhook_event import BetaWebhookEvent
    from anthropic.types.beta.beta_webhook_memory_store_archived_event_data import (
        BetaWebhookMemoryStoreArchivedEventData,
    )
    from anthropic.types.beta.beta_webhook_memory_store_created_event_data import (
        BetaWebhookMemoryStoreCreatedEventData,
    )

    receiver = Receiver([])
    endpoint = register(fx, receiver.url, ["memory_store.created", "memory_store.archived"])
    secret = endpoint["secret"]
    check(secret.startswith("whsec_"), f"a whsec_ secret: {endpoint}")
    check("secret" not in http("GET", f"{fx.base_url}/v1/webhook_endpoints/{endpoint['id']}", fx.auth_headers()).json(),
          "a retrieval never shows the secret")
    try:
        store = fx.new_store()
        fx.stores.archive(store.id)
        got = receiver.wait_for(2)
        events = []
        for headers, body in got:
            event = unwrap_or_skip(fx, body, headers, secret)
            check(isinstance(event, BetaWebhookEvent), f"a BetaWebhookEvent: {event!r}")
            eq(event.type, "event", "payload type")
            eq(event.id, headers["webhook-id"], "the payload's id is the webhook-id")
            eq(event.data.id, store.id, "data.id names the store")
            check(event.created_at.tzinfo is not None, "created_at is an aware datetime")
            check(isinstance(event.data.organization_id, str) and isinstance(event.data.workspace_id, str),
                  "organization and workspace ids")
            events.append(event)
        by_type = {e.data.type: e for e in events}
        eq(sorted(by_type), ["memory_store.archived", "memory_store.created"], "one event per change")
        check(isinstance(by_type["memory_store.created"].data, BetaWebhookMemoryStoreCreatedEventData),
              "parsed into the SDK's created type")
        check(isinstance(by_type["memory_store.archived"].data, BetaWebhookMemoryStoreArchivedEventData),
              "parsed into the SDK's archived type")
        check(len({e.id for e in events}) == 2, "distinct event ids")

        headers, body = got[0]
        check(refused(fx, body, headers, other_secret()), "a wrong secret fails unwrap")
        check(refused(fx, body.replace(store.id, store.id + "x"), headers, secret), "a changed payload fails unwrap")
        stale = {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) - 3600)}
        check(refused(fx, body, stale, secret), "a replayed (old) timestamp fails unwrap")
    finally:
        remove(fx, endpoint["id"])
        receiver.close()


def test_a_retried_delivery_is_the_same_event_and_verifies_again(fx):
    receiver = Receiver([500, 502])
    endpoint = register(fx, receiver.url, ["memory_store.created"])
    try:
        store = fx.new_store()
        got = receiver.wait_for(3)
        ids = {h["webhook-id"] for h, _ in got}
        eq(len(ids), 1, "every attempt carries the event's webhook-id")
        eq(len({b for _, b in got}), 1, "and the same payload")
        for headers, body in got:
            event = unwrap_or_skip(fx, body, headers, endpoint["secret"])
            eq((event.data.type, event.data.id), ("memory_store.created", store.id), "each attempt parses")
        deadline = time.monotonic() + 10
        while True:
            page = http("GET", f"{fx.base_url}/v1/webhook_endpoints/{endpoint['id']}/deliveries", fx.auth_headers()).json()
            mine = [d for d in page["data"] if d["resource_id"] == store.id]
            if mine and mine[0]["status"] == "delivered":
                break
            check(time.monotonic() < deadline, f"the delivery is listed as delivered: {page}")
            time.sleep(0.05)
        eq((mine[0]["attempts"], mine[0]["last_status_code"]), (3, 200), "three attempts, the last answered 200")
    finally:
        remove(fx, endpoint["id"])
        receiver.close()


def test_after_a_rotation_the_sdk_accepts_either_secret_until_the_overlap_ends(fx):
    receiver = Receiver([])
    endpoint = register(fx, receiver.url, ["memory_store.created"])
    old = endpoint["secret"]
    url = f"{fx.base_url}/v1/webhook_endpoints/{endpoint['id']}/rotate_secret"
    headers = {**fx.auth_headers(), "content-type": "application/json"}
    try:
        resp = http("POST", url, headers, json.dumps({"keep_previous_seconds": 3600}).encode())
        eq(resp.status, 200, f"rotate: {resp.body!r}")
        new = resp.json()["secret"]
        check(new != old and resp.json()["previous_secret_expires_at"], "a new secret, the old one overlapping")
        store = fx.new_store()
        got = receiver.wait_for(1)
        headers_1, body_1 = got[0]
        for key in (old, new):
            event = unwrap_or_skip(fx, body_1, headers_1, key)
            eq(event.data.id, store.id, "either secret verifies during the overlap")
        check(refused(fx, body_1, headers_1, other_secret()), "no other secret does")

        resp = http("POST", url, headers, json.dumps({"keep_previous_seconds": 0}).encode())
        eq(resp.status, 200, f"rotate without overlap: {resp.body!r}")
        newest = resp.json()["secret"]
        second = fx.new_store()
        headers_2, body_2 = receiver.wait_for(2)[1]
        eq(unwrap_or_skip(fx, body_2, headers_2, newest).data.id, second.id, "the newest secret verifies")
        check(refused(fx, body_2, headers_2, new), "the replaced one no longer does")
    finally:
        remove(fx, endpoint["id"])
        receiver.close()


@server(DEFAULT)
def test_a_default_server_refuses_endpoints_on_private_addresses(fx):
    """Without --webhook-allow-private, loopback, metadata and private addresses in any spelling
    (and localhost) are refused at registration with a 400 that says what to do."""
    headers = {**fx.auth_headers(), "content-type": "application/json"}
    for url in [
        "http://127.0.0.1:9/hook",
        "http://2130706433/hook",
        "http://0x7f000001/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/hook",
        "http://localhost/hook",
    ]:
        resp = http("POST", f"{fx.base_url}/v1/webhook_endpoints", headers, json.dumps({"url": url}).encode())
        eq(resp.status, 400, f"registering {url}: {resp.body!r}")
        message = resp.json()["error"]["message"]
        check("--webhook-allow-private" in message, f"the 400 says what to do: {message!r}")
