"""Service-wide conventions: health, credentials, request ids, error envelope, beta header."""

from __future__ import annotations

import json

from compat_lib import (
    AGENTS_BETA,
    ANTHROPIC_VERSION,
    MEMORY_BETA,
    check,
    check_error_envelope,
    check_store_shape,
    eq,
    expect_invalid_request,
    expect_not_found,
    expect_unauthenticated,
    has_prefix,
    http,
    rfc3339,
    unique,
)


def test_healthz(fx):
    res = http("GET", f"{fx.base_url}/healthz")
    eq(res.status, 200, f"GET /healthz status (body {res.body[:200]!r})")


def test_wrong_api_key_is_authentication_error(fx):
    bad = fx.make_client(api_key="sk-compat-wrong-" + unique("k"))
    err = expect_unauthenticated(lambda: bad.beta.memory_stores.list(), "list stores with a wrong key")
    check("request_id" in err.body, "401 body carries request_id")
    # Writes are refused too, and nothing is created.
    name = unique("never-created")
    expect_unauthenticated(lambda: bad.beta.memory_stores.create(name=name), "create store with a wrong key")
    names = [s.name for s in fx.stores.list(limit=100, include_archived=True)]
    check(name not in names, "a store was created by a request with a wrong key")


def test_bearer_and_x_api_key_headers_both_authenticate(fx):
    url = f"{fx.base_url}/v1/memory_stores?limit=1"
    common = {"anthropic-version": ANTHROPIC_VERSION, "anthropic-beta": MEMORY_BETA, "Accept": "application/json"}

    res = http("GET", url, {**common, "Authorization": f"Bearer {fx.api_key}"})
    eq(res.status, 200, f"GET with Authorization: Bearer ({res.body[:200]!r})")
    check(isinstance(res.json().get("data"), list), f"list body has a data array: {res.json()!r}")

    res = http("GET", url, {**common, "x-api-key": fx.api_key})
    eq(res.status, 200, f"GET with x-api-key only ({res.body[:200]!r})")
    page = res.json()
    check(isinstance(page.get("data"), list), f"list body has a data array: {page!r}")
    check("next_page" in page, f"list body has next_page: {page!r}")

    # A write with x-api-key only.
    body = json.dumps({"name": unique("xapikey")}).encode()
    res = http(
        "POST",
        f"{fx.base_url}/v1/memory_stores",
        {**common, "x-api-key": fx.api_key, "Content-Type": "application/json"},
        body,
    )
    eq(res.status, 200, f"POST /v1/memory_stores with x-api-key ({res.body[:200]!r})")
    created = res.json()
    eq(created.get("type"), "memory_store", "created store type")
    has_prefix(created.get("id"), "memstore_", "created store id")
    # Timestamps on the wire are RFC 3339 UTC with Z.
    rfc3339(created.get("created_at"), "created_at on the wire")
    rfc3339(created.get("updated_at"), "updated_at on the wire")
    eq(created.get("archived_at"), None, "archived_at on the wire")
    eq(fx.stores.retrieve(created["id"]).name, created["name"], "store created via x-api-key is retrievable via SDK")

    res = http("GET", url, {**common, "x-api-key": "sk-compat-wrong"})
    eq(res.status, 401, "GET with a wrong x-api-key")


def test_missing_credentials_is_401(fx):
    headers = {"anthropic-version": ANTHROPIC_VERSION, "anthropic-beta": MEMORY_BETA}
    for method, path in (
        ("GET", "/v1/memory_stores"),
        ("POST", "/v1/memory_stores"),
        ("GET", "/v1/memory_stores/memstore_doesnotexist"),
        ("GET", "/v1/memory_stores/memstore_doesnotexist/memories"),
    ):
        body = json.dumps({"name": "x"}).encode() if method == "POST" else None
        hdrs = dict(headers, **({"Content-Type": "application/json"} if body else {}))
        res = http(method, f"{fx.base_url}{path}", hdrs, body)
        eq(res.status, 401, f"{method} {path} without credentials ({res.body[:200]!r})")
        envelope = res.json()
        eq(envelope.get("type"), "error", f"{method} {path} 401 body.type")
        eq(envelope.get("error", {}).get("type"), "authentication_error", f"{method} {path} 401 error.type")
        check(envelope["error"].get("message"), f"{method} {path} 401 error.message is empty")
        has_prefix(res.headers.get("request-id"), "req_", f"{method} {path} 401 request-id header")
        eq(envelope.get("request_id"), res.headers.get("request-id"), f"{method} {path} body.request_id vs header")


def test_request_id_header_on_every_success(fx):
    seen = set()
    raw = fx.stores.with_raw_response.create(name=unique("reqid"))
    eq(raw.status_code, 200, "create store status")
    store = raw.parse()
    check_store_shape(store)
    calls = [
        ("create store", raw),
        ("retrieve store", fx.stores.with_raw_response.retrieve(store.id)),
        ("list stores", fx.stores.with_raw_response.list(limit=1)),
        ("update store", fx.stores.with_raw_response.update(store.id, description="d")),
    ]
    mem_raw = fx.memories.with_raw_response.create(store.id, path="/r.md", content="r")
    mem = mem_raw.parse()
    calls += [
        ("create memory", mem_raw),
        ("retrieve memory", fx.memories.with_raw_response.retrieve(mem.id, memory_store_id=store.id)),
        ("update memory", fx.memories.with_raw_response.update(mem.id, memory_store_id=store.id, content="r2")),
        ("list memories", fx.memories.with_raw_response.list(store.id)),
        ("list versions", fx.versions.with_raw_response.list(memory_store_id=store.id)),
        (
            "retrieve version",
            fx.versions.with_raw_response.retrieve(mem.memory_version_id, memory_store_id=store.id),
        ),
        ("redact version", fx.versions.with_raw_response.redact(mem.memory_version_id, memory_store_id=store.id)),
        ("delete memory", fx.memories.with_raw_response.delete(mem.id, memory_store_id=store.id)),
        ("archive store", fx.stores.with_raw_response.archive(store.id)),
        ("delete store", fx.stores.with_raw_response.delete(store.id)),
    ]
    # Timestamps on the wire are RFC 3339 UTC with Z, for every object kind.
    mem_json = mem_raw.json()
    rfc3339(mem_json.get("created_at"), "memory created_at on the wire")
    rfc3339(mem_json.get("updated_at"), "memory updated_at on the wire")
    ver_json = calls[-5][1].json()
    rfc3339(ver_json.get("created_at"), "version created_at on the wire")
    red_json = calls[-4][1].json()
    rfc3339(red_json.get("redacted_at"), "version redacted_at on the wire")
    rfc3339(calls[-2][1].json().get("archived_at"), "store archived_at on the wire")
    eq(mem_json.get("content"), None, "basic memory on the wire has content: null")
    check("content" in mem_json, "memory on the wire carries the content key")
    for what, response in calls:
        eq(response.status_code, 200, f"{what} status")
        rid = response.headers.get("request-id")
        has_prefix(rid, "req_", f"{what} request-id header")
        eq(response.request_id, rid, f"{what} SDK request_id")
        check(rid not in seen, f"{what}: request-id {rid} was reused")
        seen.add(rid)


def test_error_envelope_and_request_id_on_errors(fx):
    store = fx.new_store()
    # 404
    err = expect_not_found(lambda: fx.stores.retrieve("memstore_doesnotexist0000"), "retrieve unknown store")
    # 400
    err400 = expect_invalid_request(
        lambda: fx.memories.create(store.id, path="no-leading-slash", content="x"),
        "create memory with a relative path",
    )
    check(err.request_id != err400.request_id, "two errors share one request id")
    # 404 for a memory in an existing store, and for a version.
    expect_not_found(lambda: fx.memories.retrieve("mem_doesnotexist0000", memory_store_id=store.id), "retrieve unknown memory")
    expect_not_found(
        lambda: fx.versions.retrieve("memver_doesnotexist0000", memory_store_id=store.id),
        "retrieve unknown version",
    )
    expect_not_found(lambda: fx.memories.list("memstore_doesnotexist0000"), "list memories of unknown store")
    expect_not_found(
        lambda: fx.memories.create("memstore_doesnotexist0000", path="/a.md", content="x"),
        "create memory in unknown store",
    )
    # Error body parsed by the SDK exposes message and type.
    check(isinstance(err.api_message, str) and err.api_message, f"api_message is empty: {err.body!r}")
    inner = check_error_envelope(err, "not_found_error")
    eq(inner["message"], err.api_message, "SDK api_message mirrors error.message")


def test_objects_of_another_store_are_not_found(fx):
    a = fx.new_store()
    b = fx.new_store()
    mem = fx.new_memory(a.id, "/only-in-a.md", "a")
    expect_not_found(lambda: fx.memories.retrieve(mem.id, memory_store_id=b.id), "retrieve memory through the wrong store")
    expect_not_found(
        lambda: fx.memories.update(mem.id, memory_store_id=b.id, content="hijack"),
        "update memory through the wrong store",
    )
    expect_not_found(lambda: fx.memories.delete(mem.id, memory_store_id=b.id), "delete memory through the wrong store")
    expect_not_found(
        lambda: fx.versions.retrieve(mem.memory_version_id, memory_store_id=b.id),
        "retrieve version through the wrong store",
    )
    expect_not_found(
        lambda: fx.versions.redact(mem.memory_version_id, memory_store_id=b.id),
        "redact version through the wrong store",
    )
    eq(fx.list_all_memories(b.id), [], "store b lists no memories")
    eq(fx.list_all_versions(b.id), [], "store b lists no versions")
    got = fx.memories.retrieve(mem.id, memory_store_id=a.id)
    eq(got.content, "a", "memory untouched in store a")


def test_any_anthropic_version_accepted(fx):
    for version in ("2023-06-01", "2099-01-01"):
        res = http(
            "GET",
            f"{fx.base_url}/v1/memory_stores?limit=1",
            {"Authorization": f"Bearer {fx.api_key}", "anthropic-version": version, "anthropic-beta": MEMORY_BETA},
        )
        eq(res.status, 200, f"anthropic-version: {version} ({res.body[:200]!r})")


def test_empty_body_posts_accepted(fx):
    """The SDK sends archive/redact with Content-Type: application/json and no body."""
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/e.md", "1")
    fx.memories.update(mem.id, memory_store_id=store.id, content="2")
    headers = dict(fx.auth_headers(), **{"Content-Type": "application/json", "Content-Length": "0"})
    res = http("POST", f"{fx.base_url}/v1/memory_stores/{store.id}/memory_versions/{mem.memory_version_id}/redact", headers, b"")
    eq(res.status, 200, f"redact with an empty JSON body ({res.body[:200]!r})")
    eq(res.json().get("path"), None, "redacted")
    res = http("POST", f"{fx.base_url}/v1/memory_stores/{store.id}/archive", headers, b"")
    eq(res.status, 200, f"archive with an empty JSON body ({res.body[:200]!r})")
    check(res.json().get("archived_at"), "archived")


def test_malformed_query_parameters_rejected(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/q.md", "q")
    cases = [
        ("stores page=garbage", lambda: fx.stores.list(page="garbage")),
        ("memories page=garbage", lambda: fx.memories.list(store.id, page="garbage")),
        ("versions page=garbage", lambda: fx.versions.list(memory_store_id=store.id, page="garbage")),
        ("include_archived=maybe", lambda: fx.stores.list(extra_query={"include_archived": "maybe"})),
        ("stores created_at[gte]=notadate", lambda: fx.stores.list(created_at_gte="notadate")),
        ("versions created_at[lte]=notadate", lambda: fx.versions.list(memory_store_id=store.id, created_at_lte="notadate")),
        ("limit=abc", lambda: fx.memories.list(store.id, extra_query={"limit": "abc"})),
        ("create view=bogus", lambda: fx.memories.create(store.id, path="/v.md", content="v", view="bogus")),
        ("retrieve view=bogus", lambda: fx.memories.retrieve(mem.id, memory_store_id=store.id, view="bogus")),
        ("version retrieve view=bogus", lambda: fx.versions.retrieve(mem.memory_version_id, memory_store_id=store.id, view="bogus")),
    ]
    for what, call in cases:
        expect_invalid_request(call, what)
    eq([m.path for m in fx.list_all_memories(store.id)], ["/q.md"], "nothing created by rejected calls")


def test_beta_header_either_value_accepted(fx):
    """Memory endpoints accept `agent-memory-2026-07-22` or `managed-agents-2026-04-01` (spec §1.2)."""
    store = fx.new_store()
    for beta in (AGENTS_BETA, MEMORY_BETA):
        res = http(
            "GET",
            f"{fx.base_url}/v1/memory_stores/{store.id}",
            {"Authorization": f"Bearer {fx.api_key}", "anthropic-version": ANTHROPIC_VERSION, "anthropic-beta": beta},
        )
        eq(res.status, 200, f"retrieve with anthropic-beta: {beta} ({res.body[:200]!r})")
        eq(res.json().get("id"), store.id, f"retrieve with anthropic-beta: {beta}")


def test_sdk_betas_parameter_sends_both_betas_and_is_rejected(fx):
    """`betas=["managed-agents-2026-04-01"]` makes the SDK send
    `anthropic-beta: managed-agents-2026-04-01,agent-memory-2026-07-22`.

    The public memory docs (platform.claude.com/docs/en/managed-agents/memory, "supported
    platforms" notes) say that sending both betas on a memory-store call returns a 400; mnemo
    does the same.  (Spec §1.2's "be lenient" is an inference that the docs override.)
    """
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/b.md", "beta")
    name = unique("betas")
    calls = [
        ("create store", lambda: fx.stores.create(name=name, betas=[AGENTS_BETA])),
        ("list stores", lambda: fx.stores.list(betas=[AGENTS_BETA])),
        ("create memory", lambda: fx.memories.create(store.id, path="/c.md", content="c", betas=[AGENTS_BETA])),
        ("retrieve memory", lambda: fx.memories.retrieve(mem.id, memory_store_id=store.id, betas=[AGENTS_BETA])),
        ("list memories", lambda: fx.memories.list(store.id, betas=[AGENTS_BETA])),
        ("list versions", lambda: fx.versions.list(memory_store_id=store.id, betas=[AGENTS_BETA])),
    ]
    for what, call in calls:
        err = expect_invalid_request(call, f"{what} with both betas")
        sent = err.response.request.headers.get("anthropic-beta", "")
        eq(sorted(b.strip() for b in sent.split(",")), sorted([AGENTS_BETA, MEMORY_BETA]), f"{what}: beta header the SDK sent")
    check(name not in {s.name for s in fx.stores.list(limit=100, include_archived=True)}, "no store created")
    eq([m.path for m in fx.list_all_memories(store.id)], ["/b.md"], "no memory created")
