"""The OpenAPI document `GET /v1/openapi.json`: valid OpenAPI 3.1 by a real validator
(`openapi-spec-validator`), and true — every answer of a scripted tour of the whole API (each
resource, successes and errors) validates (`jsonschema`, draft 2020-12, the dialect of OpenAPI 3.1)
against the schema the document gives for that operation and status, and carries no field the
schema does not declare."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from compat_lib import WEBHOOKS, HttpResult, check, eq, http, server, unique

JSON_TYPE = "application/json"


def _document(fx: Any) -> Dict[str, Any]:
    res = http("GET", f"{fx.base_url}/v1/openapi.json")
    eq(res.status, 200, f"GET /v1/openapi.json ({res.body[:200]!r})")
    eq(res.headers.get("content-type"), JSON_TYPE, "content type of the document")
    return res.json()


def test_openapi_document_is_valid_openapi_3_1(fx):
    from openapi_spec_validator import validate

    doc = _document(fx)
    eq(doc["openapi"], "3.1.0", "OpenAPI version")
    validate(doc)  # raises with the reason when the document is not valid OpenAPI 3.1
    ops = [(m, p) for p, item in doc["paths"].items() for m in item]
    check(len(ops) >= 49, f"every route is described ({len(ops)} operations)")


class Tour:
    """Calls the API and checks every answer against the document."""

    def __init__(self, fx: Any, doc: Dict[str, Any]) -> None:
        from jsonschema import Draft202012Validator

        self.fx = fx
        self.doc = doc
        self.validator_class = Draft202012Validator
        self.components = doc["components"]
        self.routes: List[Tuple[str, re.Pattern[str], str]] = []
        for path, item in doc["paths"].items():
            pattern = re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$")
            for method in item:
                self.routes.append((method, pattern, path))
        self.checked: Dict[Tuple[str, str], set] = {}

    # -- calling --------------------------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        body: Optional[Any] = None,
        token: Optional[str] = None,
        headers: Optional[Dict[str, str]] = None,
        expect: int = 200,
    ) -> Any:
        all_headers = {"Accept": JSON_TYPE, **(headers or {})}
        if token is not False:
            all_headers["Authorization"] = f"Bearer {token or self.fx.api_key}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = JSON_TYPE
        res = http(method, f"{self.fx.base_url}{path}", all_headers, data)
        eq(res.status, expect, f"{method} {path} status ({res.body[:300]!r})")
        self.validate(method, path, res)
        return res.json() if res.body else None

    # -- checking -------------------------------------------------------------------------

    def operation(self, method: str, path: str) -> Tuple[str, Dict[str, Any]]:
        bare = path.split("?", 1)[0]
        for m, pattern, template in self.routes:
            if m == method.lower() and pattern.match(bare):
                return template, self.doc["paths"][template][m]
        raise AssertionError(f"{method} {bare} is not in the document")

    def validate(self, method: str, path: str, res: HttpResult) -> None:
        template, op = self.operation(method, path)
        responses = op["responses"]
        answer = responses.get(str(res.status)) or responses.get("default")
        check(answer is not None, f"{method} {template} documents no answer for {res.status}")
        self.checked.setdefault((method.upper(), template), set()).add(res.status)
        content = answer.get("content")
        if not content:
            check(not res.body, f"{method} {template} {res.status} has a body the document does not describe")
            return
        kind = res.headers.get("content-type", "").split(";")[0]
        check(kind in content, f"{method} {template} {res.status}: content type {kind!r} is not documented")
        schema = content[kind].get("schema")
        if schema is None or kind != JSON_TYPE:
            return
        instance = json.loads(res.body)
        root = {**schema, "components": self.components}
        errors = sorted(self.validator_class(root).iter_errors(instance), key=lambda e: list(e.path))
        check(
            not errors,
            f"{method} {template} {res.status} does not match its schema: "
            + "; ".join(f"at {list(e.path)}: {e.message[:200]}" for e in errors[:3]),
        )
        undeclared = self.undeclared(instance, [schema], "$")
        check(not undeclared, f"{method} {template} {res.status} has undeclared fields: {undeclared[:5]}")

    def resolve(self, schema: Any) -> Any:
        while isinstance(schema, dict) and "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            schema = self.components["schemas"][name]
        return schema

    def parts(self, schema: Any) -> List[Dict[str, Any]]:
        """`schema` and every schema it composes (allOf, oneOf, anyOf), resolved."""
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return []
        out = [schema]
        for key in ("allOf", "oneOf", "anyOf"):
            for sub in schema.get(key, []):
                out.extend(self.parts(sub))
        return out

    def undeclared(self, instance: Any, schemas: List[Any], where: str) -> List[str]:
        """Object keys no candidate schema declares (a schema without `properties`, or with
        `additionalProperties`, declares anything)."""
        parts = [p for s in schemas for p in self.parts(s)]
        if not parts:
            return []
        found: List[str] = []
        if isinstance(instance, dict):
            open_ = any(
                ("properties" not in p and not any(k in p for k in ("allOf", "oneOf", "anyOf")))
                or p.get("additionalProperties") not in (None, False)
                for p in parts
            )
            props: Dict[str, List[Any]] = {}
            for p in parts:
                for name, sub in p.get("properties", {}).items():
                    props.setdefault(name, []).append(sub)
            for key, value in instance.items():
                if key not in props:
                    if not open_:
                        found.append(f"{where}.{key}")
                    continue
                found.extend(self.undeclared(value, props[key], f"{where}.{key}"))
        elif isinstance(instance, list):
            items = [p["items"] for p in parts if isinstance(p.get("items"), dict)]
            for i, value in enumerate(instance):
                found.extend(self.undeclared(value, items, f"{where}[{i}]"))
        return found


# On the webhook configuration: the tour's endpoint is on 127.0.0.1, which only
# `--webhook-allow-private` allows (its other flags only speed up retries).
@server(WEBHOOKS)
def test_every_answer_of_a_tour_of_the_api_matches_the_document(fx):
    doc = _document(fx)
    t = Tour(fx, doc)

    # Memory stores.
    store = t.call("POST", "/v1/memory_stores", {"name": unique("openapi"), "description": "tour", "metadata": {"k": "v"}})
    sid = store["id"]
    t.call("GET", f"/v1/memory_stores/{sid}")
    t.call("POST", f"/v1/memory_stores/{sid}", {"description": "changed", "metadata": {"k": None}})
    t.call("GET", "/v1/memory_stores?limit=2&include_archived=true")
    t.call("GET", "/v1/memory_stores/memstore_0000000000000000000000", expect=404)
    t.call("GET", "/v1/memory_stores?limit=0", expect=400)
    t.call("GET", "/v1/memory_stores", token=False, expect=401)

    # Memories.
    a = t.call("POST", f"/v1/memory_stores/{sid}/memories", {"path": "/notes/a.md", "content": "alpha"})
    t.call("POST", f"/v1/memory_stores/{sid}/memories?view=full", {"path": "/b.md", "content": ""})
    t.call("POST", f"/v1/memory_stores/{sid}/memories", {"path": "/notes/a.md", "content": "again"}, expect=409)
    t.call("POST", f"/v1/memory_stores/{sid}/memories", {"path": "no-slash", "content": "x"}, expect=400)
    listing = http(
        "GET", f"{fx.base_url}/v1/memory_stores/{sid}/memories", {"Authorization": f"Bearer {fx.api_key}"}
    )
    etag = listing.headers.get("etag")
    check(etag, "a memory listing carries an ETag")
    t.call("GET", f"/v1/memory_stores/{sid}/memories", headers={"If-None-Match": etag}, expect=304)
    t.call("GET", f"/v1/memory_stores/{sid}/memories?view=full&limit=1")
    t.call("GET", f"/v1/memory_stores/{sid}/memories?depth=1&path_prefix=/")
    t.call("GET", f"/v1/memory_stores/{sid}/memories/{a['id']}")
    t.call("GET", f"/v1/memory_stores/{sid}/memories/{a['id']}?view=basic")
    a2 = t.call(
        "POST",
        f"/v1/memory_stores/{sid}/memories/{a['id']}?view=full",
        {"content": "beta", "precondition": {"type": "content_sha256", "content_sha256": a["content_sha256"]}},
    )
    t.call(
        "POST",
        f"/v1/memory_stores/{sid}/memories/{a['id']}",
        {"content": "gamma", "precondition": {"type": "content_sha256", "content_sha256": a["content_sha256"]}},
        expect=409,
    )
    t.call("POST", f"/v1/memory_stores/{sid}/memories/{a['id']}", {"path": "/notes/renamed.md"})
    # The memory batch (a mnemo extension): one result per write, each as its own request's answer.
    batch = t.call("POST", f"/v1/memory_stores/{sid}/memories:batch", {"writes": [
        {"type": "create", "path": "/batch/one.md", "content": "one"},
        {"type": "create", "path": "/b.md", "content": "taken"},
        {"type": "update", "memory_id": "mem_0000000000000000000000", "content": "none"},
    ]})
    eq([r["status"] for r in batch["results"]], [200, 409, 404], "the batch's results, in order")
    t.call("POST", f"/v1/memory_stores/{sid}/memories:batch", {"writes": []}, expect=400)
    # Memory search (a mnemo extension): in one store and across the workspace, and a malformed query.
    found = t.call("GET", f"/v1/memory_stores/{sid}/memories:search?q=one&path_prefix=/batch/")
    eq([r["path"] for r in found["data"]], ["/batch/one.md"], "a store's search")
    t.call("GET", "/v1/memories:search?q=one&limit=5")
    t.call("GET", f"/v1/memory_stores/{sid}/memories:search?q=%22unclosed", expect=400)
    # Version retention (a mnemo extension): read, set, a malformed window, back to the server's.
    eq(t.call("GET", f"/v1/memory_stores/{sid}/version_retention")["effective"], "forever", "the default retention")
    eq(t.call("POST", f"/v1/memory_stores/{sid}/version_retention", {"retention": "30d"})["retention"], "30d",
       "a store's own retention")
    t.call("POST", f"/v1/memory_stores/{sid}/version_retention", {"retention": "a month"}, expect=400)
    t.call("POST", f"/v1/memory_stores/{sid}/version_retention", {"retention": None})

    # Versions and the change feed.
    versions = t.call("GET", f"/v1/memory_stores/{sid}/memory_versions?view=full")
    t.call("GET", f"/v1/memory_stores/{sid}/memory_versions?memory_id={a['id']}&operation=modified")
    vid = versions["data"][-1]["id"]
    t.call("GET", f"/v1/memory_stores/{sid}/memory_versions/{vid}")
    t.call("POST", f"/v1/memory_stores/{sid}/memory_versions/{a['memory_version_id']}/redact")
    t.call("GET", f"/v1/memory_stores/{sid}/changes?format=json&after=0&wait_ms=0")
    t.call("GET", f"/v1/memory_stores/{sid}/changes?format=xml", expect=400)
    t.call(
        "DELETE",
        f"/v1/memory_stores/{sid}/memories/{a['id']}?expected_content_sha256={a2['content_sha256']}",
    )

    # Environments, keys, the work queue's administration.
    env = t.call("POST", "/v1/environments", {"name": unique("env"), "config": {"type": "self_hosted"}})
    eid = env["id"]
    t.call("GET", f"/v1/environments/{eid}")
    t.call("POST", f"/v1/environments/{eid}", {"description": "tour"})
    t.call("GET", "/v1/environments?limit=5")
    key = t.call("POST", f"/v1/environments/{eid}/keys")
    t.call("GET", f"/v1/environments/{eid}/keys")
    env_key = key["key"]
    t.call("GET", f"/v1/environments/{eid}/work/stats", token=env_key)
    t.call("POST", f"/v1/environments/{eid}/work/healthcheck")
    t.call("GET", f"/v1/environments/{eid}/work")
    t.call("GET", f"/v1/memory_stores/{sid}", token=env_key, expect=403)

    # Agents.
    agent = t.call(
        "POST",
        "/v1/agents",
        {"name": unique("agent"), "model": "claude-opus-4-6", "tools": [{"type": "agent_toolset_20260401"}]},
    )
    t.call("GET", f"/v1/agents/{agent['id']}")
    t.call("POST", f"/v1/agents/{agent['id']}", {"version": agent["version"], "description": "tour"})
    t.call("GET", f"/v1/agents/{agent['id']}?version=1")
    t.call("GET", "/v1/agents")

    # A session served through the work queue.
    ro = t.call("POST", "/v1/memory_stores", {"name": unique("openapi-ro")})
    session = t.call(
        "POST",
        "/v1/sessions",
        {
            "agent": agent["id"],
            "environment_id": eid,
            "title": "tour",
            "resources": [
                {"type": "memory_store", "memory_store_id": sid, "instructions": "notes"},
                {"type": "memory_store", "memory_store_id": ro["id"], "access": "read_only"},
            ],
        },
    )
    ses = session["id"]
    t.call("GET", f"/v1/sessions/{ses}")
    t.call("GET", "/v1/sessions?limit=3&statuses[]=idle")
    t.call("POST", f"/v1/sessions/{ses}", {"title": "renamed", "metadata": {"k": "v"}})
    t.call("POST", f"/v1/sessions/{ses}/events", {"events": []}, expect=400)
    t.call(
        "POST",
        f"/v1/sessions/{ses}/events",
        {"events": [{"type": "user.message", "content": [{"type": "text", "text": "hello"}]}]},
    )
    # Skip the healthcheck item queued above, then claim the session's.
    item = t.call("GET", f"/v1/environments/{eid}/work/poll?block_ms=500", token=env_key)
    while item is not None and item["data"]["type"] != "session":
        t.call("POST", f"/v1/environments/{eid}/work/{item['id']}/stop", {"force": True}, token=env_key)
        item = t.call("GET", f"/v1/environments/{eid}/work/poll?block_ms=500", token=env_key)
    check(item is not None, "the session's work item is delivered")
    wid = item["id"]
    t.call("POST", f"/v1/environments/{eid}/work/{wid}/ack", token=env_key)
    beat = t.call(
        "POST",
        f"/v1/environments/{eid}/work/{wid}/heartbeat?expected_last_heartbeat=NO_HEARTBEAT&desired_ttl_seconds=60",
        token=env_key,
    )
    t.call(
        "POST",
        f"/v1/environments/{eid}/work/{wid}/heartbeat?expected_last_heartbeat=NO_HEARTBEAT",
        token=env_key,
        expect=412,
    )
    check(beat["lease_extended"], "the first heartbeat extends the lease")
    t.call("GET", f"/v1/environments/{eid}/work/{wid}")
    t.call("POST", f"/v1/environments/{eid}/work/{wid}", {"metadata": {"host": "tour"}})
    t.call("GET", f"/v1/environments/{eid}/work/poll?block_ms=1", token=env_key)
    t.call(
        "POST",
        f"/v1/sessions/{ses}/events",
        {
            "events": [
                {"type": "agent.message", "content": [{"type": "text", "text": "noted"}]},
                {"type": "agent.tool_use", "name": "read", "input": {"file_path": "/mnt/memory/x"}},
            ]
        },
    )
    log = t.call("GET", f"/v1/sessions/{ses}/events?limit=100")
    tool_use = next(e for e in log["data"] if e["type"] == "agent.tool_use")
    t.call(
        "POST",
        f"/v1/sessions/{ses}/events",
        {
            "events": [
                {
                    "type": "user.tool_result",
                    "tool_use_id": tool_use["id"],
                    "content": [{"type": "text", "text": "nothing there"}],
                    "is_error": True,
                }
            ]
        },
        token=env_key,
    )
    t.call("POST", f"/v1/sessions/{ses}/events", {"events": [{"type": "session.status_idle"}]})
    t.call("GET", f"/v1/sessions/{ses}/events?order=desc&types[]=agent.message")
    t.call("POST", f"/v1/environments/{eid}/work/{wid}/stop", {})

    # Webhook endpoints and their deliveries (the changes above made none: it was registered
    # only now; the archive below makes one, pending towards a port nobody listens on).
    hook = t.call(
        "POST",
        "/v1/webhook_endpoints",
        {"url": "http://127.0.0.1:9/hook", "event_types": ["session.archived"], "description": "tour"},
    )
    t.call("POST", "/v1/webhook_endpoints", {"url": "ftp://127.0.0.1/hook"}, expect=400)
    t.call("GET", f"/v1/webhook_endpoints/{hook['id']}")
    t.call("GET", f"/v1/webhook_endpoints/{hook['id']}/secret")
    t.call("POST", f"/v1/webhook_endpoints/{hook['id']}/rotate_secret", {"keep_previous_seconds": 60})
    t.call("POST", f"/v1/webhook_endpoints/{hook['id']}/rotate_secret", {"keep_previous_seconds": -1}, expect=400)
    t.call("POST", f"/v1/webhook_endpoints/{hook['id']}", {"event_types": None, "description": None})
    t.call("GET", "/v1/webhook_endpoints?limit=5")

    # Dreams: this server runs no models, so a create is the 400 that names the model; the rest
    # answer an empty list and unknown ids (a dream's own answers are checked by test_dreams.py).
    store = t.call("POST", "/v1/memory_stores", {"name": unique("tour-dream")})
    dream_inputs = [{"type": "memory_store", "memory_store_id": store["id"]},
                    {"type": "sessions", "session_ids": ["sesn_000000000000000000000000"]}]
    t.call("POST", "/v1/dreams", {"inputs": dream_inputs, "model": "tour-dreamer"}, expect=400)
    t.call("POST", "/v1/dreams", {"inputs": dream_inputs[:1], "model": "tour-dreamer"}, expect=400)
    t.call("GET", "/v1/dreams?limit=5&statuses[]=completed")
    t.call("GET", "/v1/dreams?statuses[]=sleeping", expect=400)
    t.call("GET", "/v1/dreams/drm_000000000000000000000000", expect=404)
    t.call("POST", "/v1/dreams/drm_000000000000000000000000/cancel", expect=404)
    t.call("POST", "/v1/dreams/drm_000000000000000000000000/archive", expect=404)

    # The Admin API, with the server's admin key.
    admin = fx.admin_key
    t.call("GET", "/v1/organizations/me", token=admin)
    t.call("GET", "/v1/organizations/me")
    ws = t.call("POST", "/v1/organizations/workspaces", {"name": unique("tour"), "tags": {"k": "v"}}, token=admin)
    t.call("POST", "/v1/organizations/workspaces", {"name": ""}, token=admin, expect=400)
    t.call("GET", f"/v1/organizations/workspaces/{ws['id']}", token=admin)
    t.call("POST", f"/v1/organizations/workspaces/{ws['id']}", {"name": unique("tour2")}, token=admin)
    t.call("GET", "/v1/organizations/workspaces?limit=2&include_default=true", token=admin)
    minted = t.call("POST", "/v1/organizations/api_keys", {"name": "tour", "workspace_id": ws["id"]}, token=admin)
    t.call("GET", f"/v1/organizations/api_keys/{minted['id']}", token=admin)
    t.call("POST", f"/v1/organizations/api_keys/{minted['id']}", {"status": "inactive"}, token=admin)
    t.call("GET", f"/v1/organizations/api_keys?workspace_id={ws['id']}", token=admin)
    t.call("GET", "/v1/organizations/rate_limits", token=admin)
    t.call(
        "POST",
        f"/v1/organizations/workspaces/{ws['id']}/rate_limits/ratelimit_api",
        {"limits": [{"type": "requests_per_minute", "value": 6000}]},
        token=admin,
    )
    t.call("GET", f"/v1/organizations/workspaces/{ws['id']}/rate_limits", token=admin)
    t.call("GET", "/v1/organizations/audit_events?limit=5", token=admin)
    # People: an invite, joined through the console's page, then the person and their membership.
    from test_organization import join_through_the_console

    email = unique("tour") + "@example.com"
    invite = t.call("POST", "/v1/organizations/invites", {"email": email, "role": "developer"}, token=admin)
    t.call("GET", f"/v1/organizations/invites/{invite['id']}", token=admin)
    t.call("GET", "/v1/organizations/invites?statuses[]=pending", token=admin)
    join_through_the_console(invite["accept_url"], "Tour Guide", "a long enough password")
    user = t.call("GET", f"/v1/organizations/users?email={email}", token=admin)["data"][0]
    t.call("GET", f"/v1/organizations/users/{user['id']}", token=admin)
    t.call("POST", f"/v1/organizations/users/{user['id']}", {"role": "user"}, token=admin)
    t.call("POST", f"/v1/organizations/users/{user['id']}", {"role": "admin"}, token=admin, expect=400)
    members = f"/v1/organizations/workspaces/{ws['id']}/members"
    t.call("POST", members, {"user_id": user["id"], "workspace_role": "workspace_user"}, token=admin)
    t.call("GET", members, token=admin)
    t.call("GET", f"{members}/{user['id']}", token=admin)
    t.call("POST", f"{members}/{user['id']}", {"workspace_role": "workspace_developer"}, token=admin)
    t.call("DELETE", f"{members}/{user['id']}", token=admin)
    t.call("POST", f"/v1/organizations/users/{user['id']}/sign_out", token=admin)
    t.call("DELETE", f"/v1/organizations/users/{user['id']}", token=admin)
    other = t.call("POST", "/v1/organizations/invites", {"email": unique("gone") + "@example.com", "role": "user"}, token=admin)
    t.call("DELETE", f"/v1/organizations/invites/{other['id']}", token=admin)
    t.call("GET", "/v1/organizations/workspaces", token=None, expect=403)
    t.call("POST", f"/v1/organizations/workspaces/{ws['id']}/archive", token=admin)

    # Clean-up, each answer checked too.
    t.call("POST", f"/v1/sessions/{ses}/archive")
    t.call("GET", f"/v1/webhook_endpoints/{hook['id']}/deliveries?limit=5")
    t.call("GET", f"/v1/webhook_endpoints/{hook['id']}/deliveries?status=failed")
    t.call("DELETE", f"/v1/webhook_endpoints/{hook['id']}")
    t.call("DELETE", f"/v1/sessions/{ses}")
    t.call("POST", f"/v1/agents/{agent['id']}/archive")
    t.call("POST", f"/v1/environments/{eid}/keys/{key['id']}/revoke")
    t.call("POST", f"/v1/environments/{eid}/archive")
    t.call("DELETE", f"/v1/environments/{eid}")
    t.call("POST", f"/v1/memory_stores/{sid}/archive")
    t.call("DELETE", f"/v1/memory_stores/{sid}")
    t.call("DELETE", f"/v1/memory_stores/{ro['id']}")
    t.call("GET", "/healthz", token=False)

    covered = {op for op in t.checked}
    documented = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    # The event stream (SSE) is the one operation whose answer is not JSON; its events are the
    # same objects the event list returns, checked above.
    missing = sorted(documented - covered - {("GET", "/v1/sessions/{session}/events/stream"), ("GET", "/v1/openapi.json"),
                                      # JSON Lines, not one JSON answer: its lines are checked by the HTTP suite
                                      ("GET", "/v1/memory_stores/{store}/memories:stream")})
    check(not missing, f"the tour checked every documented operation; not: {missing}")
