"""Memory versions: one per mutation, listing and filters, retrieve, redaction."""

from __future__ import annotations

from compat_lib import (
    check,
    check_api_actor,
    check_version_shape,
    eq,
    expect_invalid_request,
    expect_not_found,
    is_utc,
    pages,
    pages_by_hand,
    sha256_hex,
    tick,
)


def _history(fx):
    """A store with one memory taken through create -> modify -> rename -> delete."""
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/h/one.md", "one")
    v_mod = fx.memories.update(mem.id, memory_store_id=store.id, content="one, edited")
    v_ren = fx.memories.update(mem.id, memory_store_id=store.id, path="/h/renamed.md")
    fx.memories.delete(mem.id, memory_store_id=store.id)
    return store, mem, v_mod, v_ren


def test_every_mutation_writes_one_version(fx):
    store, mem, v_mod, v_ren = _history(fx)
    versions = fx.list_all_versions(store.id, view="full")
    eq([v.operation for v in versions], ["deleted", "modified", "modified", "created"], "operations, newest first")
    for v in versions:
        check_version_shape(v, f"version {v.operation}")
        eq(v.memory_id, mem.id, "memory_id")
        eq(v.memory_store_id, store.id, "memory_store_id")
        eq(v.redacted_at, None, "redacted_at")
        eq(v.redacted_by, None, "redacted_by")
    deleted, renamed, modified, created = versions
    eq(created.id, mem.memory_version_id, "created version is the one named by the create response")
    eq(modified.id, v_mod.memory_version_id, "modified version is the one named by the update response")
    eq(renamed.id, v_ren.memory_version_id, "rename version is the one named by the rename response")
    eq(len({v.id for v in versions}), 4, "distinct version ids")

    eq((created.path, created.content, created.content_sha256, created.content_size_bytes), ("/h/one.md", "one", sha256_hex("one"), 3), "created version")
    eq(
        (modified.path, modified.content, modified.content_sha256, modified.content_size_bytes),
        ("/h/one.md", "one, edited", sha256_hex("one, edited"), 11),
        "modified version",
    )
    eq(
        (renamed.path, renamed.content, renamed.content_sha256),
        ("/h/renamed.md", "one, edited", sha256_hex("one, edited")),
        "rename version carries the new path and the unchanged content",
    )
    eq(deleted.path, "/h/renamed.md", "deleted version carries the last path")
    eq((deleted.content, deleted.content_sha256, deleted.content_size_bytes), (None, None, None), "deleted version has no content")

    for a, b in zip(versions, versions[1:]):
        check(a.created_at >= b.created_at, f"versions newest first: {a.id}@{a.created_at} then {b.id}@{b.created_at}")

    # Every version was written by our API key.
    key_ids = {check_api_actor(v.created_by, f"{v.operation} created_by") for v in versions}
    eq(len(key_ids), 1, "one api_key_id for all versions written with one key")


def test_versions_list_basic_and_full(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/v.md", "first")
    fx.memories.update(mem.id, memory_store_id=store.id, content="second")
    basic = fx.list_all_versions(store.id)
    eq([v.operation for v in basic], ["modified", "created"], "basic operations")
    for v in basic:
        eq(v.content, None, f"basic {v.operation} content is null")
    eq([v.content_sha256 for v in basic], [sha256_hex("second"), sha256_hex("first")], "sha present in basic view")
    eq([v.content_size_bytes for v in basic], [6, 5], "size present in basic view")
    eq([v.path for v in basic], ["/v.md", "/v.md"], "path present in basic view")
    explicit = fx.list_all_versions(store.id, view="basic")
    eq([v.content for v in explicit], [None, None], "view=basic content")
    full = fx.list_all_versions(store.id, view="full")
    eq([v.content for v in full], ["second", "first"], "view=full content")


def test_versions_retrieve(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/r.md", "retrieve version")
    ver = fx.versions.retrieve(mem.memory_version_id, memory_store_id=store.id)
    check_version_shape(ver)
    eq((ver.id, ver.operation, ver.memory_id), (mem.memory_version_id, "created", mem.id), "identity")
    eq(ver.content, "retrieve version", "default retrieve view is full")
    eq(ver.content_sha256, mem.content_sha256, "sha matches memory")
    eq(ver.content_size_bytes, mem.content_size_bytes, "size matches memory")
    check_api_actor(ver.created_by, "created_by")
    basic = fx.versions.retrieve(mem.memory_version_id, memory_store_id=store.id, view="basic")
    eq((basic.content, basic.content_sha256), (None, mem.content_sha256), "basic retrieve")
    eq(fx.versions.retrieve(mem.memory_version_id, memory_store_id=store.id, view="full").content, "retrieve version", "view=full")
    expect_not_found(
        lambda: fx.versions.retrieve("memver_0000000000000000000000", memory_store_id=store.id),
        "retrieve unknown version",
    )


def test_versions_filter_memory_id_survives_delete(fx):
    store = fx.new_store()
    a = fx.new_memory(store.id, "/a.md", "a1")
    b = fx.new_memory(store.id, "/b.md", "b1")
    fx.memories.update(a.id, memory_store_id=store.id, content="a2")
    fx.memories.update(b.id, memory_store_id=store.id, content="b2")
    fx.memories.delete(a.id, memory_store_id=store.id)
    va = fx.list_all_versions(store.id, memory_id=a.id)
    eq([v.operation for v in va], ["deleted", "modified", "created"], "versions of deleted memory a")
    check(all(v.memory_id == a.id for v in va), "memory_id filter only returns a's versions")
    vb = fx.list_all_versions(store.id, memory_id=b.id)
    eq([v.operation for v in vb], ["modified", "created"], "versions of b")
    eq(fx.list_all_versions(store.id, memory_id="mem_0000000000000000000000"), [], "unknown memory_id -> empty")
    eq(len(fx.list_all_versions(store.id)), 5, "all versions of the store")


def test_versions_filter_operation(fx):
    store = fx.new_store()
    a = fx.new_memory(store.id, "/a.md", "a1")
    fx.new_memory(store.id, "/b.md", "b1")
    fx.memories.update(a.id, memory_store_id=store.id, content="a2")
    fx.memories.update(a.id, memory_store_id=store.id, content="a3")
    fx.memories.delete(a.id, memory_store_id=store.id)
    for op, count in (("created", 2), ("modified", 2), ("deleted", 1)):
        got = fx.list_all_versions(store.id, operation=op)
        eq(len(got), count, f"operation={op} count")
        check(all(v.operation == op for v in got), f"operation={op} returns only {op}")
    got = fx.list_all_versions(store.id, operation="modified", memory_id=a.id, view="full")
    eq([v.content for v in got], ["a3", "a2"], "operation + memory_id + view=full combined")
    expect_invalid_request(lambda: fx.versions.list(memory_store_id=store.id, operation="renamed"), "operation=renamed")


def test_versions_filter_api_key_and_session(fx):
    store = fx.new_store()
    m = fx.new_memory(store.id, "/k.md", "k")
    fx.memories.update(m.id, memory_store_id=store.id, content="k2")
    versions = fx.list_all_versions(store.id)
    key_id = check_api_actor(versions[0].created_by, "created_by")
    check(key_id != fx.api_key, "api_key_id must not be the secret itself")
    check(fx.api_key not in key_id, "api_key_id must not contain the secret")
    eq(len(fx.list_all_versions(store.id, api_key_id=key_id)), 2, "api_key_id filter matches our versions")
    eq(fx.list_all_versions(store.id, api_key_id="apikey_0000000000000000000000"), [], "other api_key_id -> empty")
    eq(fx.list_all_versions(store.id, session_id="sesn_0000000000000000000000"), [], "session_id without matches -> empty")
    eq(fx.list_all_versions(store.id, service_account_id="svac_0000000000000000000000"), [], "service_account_id without matches -> empty")
    # The key id is stable: a second store written with the same key reports the same id.
    other = fx.new_store()
    mv = fx.new_memory(other.id, "/o.md", "o")
    eq(fx.versions.retrieve(mv.memory_version_id, memory_store_id=other.id).created_by.api_key_id, key_id, "stable api_key_id")


def test_versions_filter_created_at(fx):
    store = fx.new_store()
    m = fx.new_memory(store.id, "/t.md", "t1")
    tick()
    fx.memories.update(m.id, memory_store_id=store.id, content="t2")
    tick()
    fx.memories.update(m.id, memory_store_id=store.id, content="t3")
    v3, v2, v1 = fx.list_all_versions(store.id)
    check(v1.created_at < v2.created_at < v3.created_at, f"distinct timestamps {v1.created_at} {v2.created_at} {v3.created_at}")
    for v in (v1, v2, v3):
        is_utc(v.created_at, "version created_at")

    def ids(**kw):
        return [v.id for v in fx.list_all_versions(store.id, **kw)]

    eq(ids(created_at_gte=v2.created_at), [v3.id, v2.id], "created_at[gte] inclusive")
    eq(ids(created_at_lte=v2.created_at), [v2.id, v1.id], "created_at[lte] inclusive")
    eq(ids(created_at_gte=v2.created_at, created_at_lte=v2.created_at), [v2.id], "gte = lte")
    eq(ids(created_at_gte=v3.created_at, created_at_lte=v1.created_at), [], "empty range")


def test_versions_pagination(fx):
    store = fx.new_store()
    m = fx.new_memory(store.id, "/pg.md", "0")
    for i in range(1, 12):
        fx.memories.update(m.id, memory_store_id=store.id, content=str(i))
    all_pages = pages(fx.versions.list(memory_store_id=store.id, limit=5, view="full"))
    contents = [v.content for p in all_pages for v in p.data]
    eq(contents, [str(i) for i in range(11, -1, -1)], "12 versions newest first across pages")
    for p in all_pages:
        check(len(p.data) <= 5, "page within limit")
    hand = pages_by_hand(
        lambda cur: fx.versions.list(memory_store_id=store.id, limit=4, page=cur) if cur else fx.versions.list(memory_store_id=store.id, limit=4)
    )
    eq([v.id for p in hand for v in p.data], [v.id for p in all_pages for v in p.data], "next_page traversal matches")
    full_first = fx.versions.list(memory_store_id=store.id, view="full", limit=100)
    check(len(full_first.data) <= 20, f"view=full caps the version page at 20, got {len(full_first.data)}")
    for limit in (0, 101):
        expect_invalid_request(lambda: fx.versions.list(memory_store_id=store.id, limit=limit), f"versions limit={limit}")


def test_redact_old_version(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/secret.md", "password=hunter2")
    fx.memories.update(mem.id, memory_store_id=store.id, content="password=<removed>")
    before = fx.versions.retrieve(mem.memory_version_id, memory_store_id=store.id)
    red = fx.versions.redact(mem.memory_version_id, memory_store_id=store.id)
    check_version_shape(red, "redacted")
    eq(red.id, mem.memory_version_id, "redacted id")
    eq(red.operation, "created", "operation kept")
    eq(red.memory_id, mem.id, "memory_id kept")
    eq((red.content, red.path, red.content_sha256, red.content_size_bytes), (None, None, None, None), "redacted fields nulled")
    is_utc(red.redacted_at, "redacted_at")
    check_api_actor(red.redacted_by, "redacted_by")
    eq(red.created_by.model_dump(), before.created_by.model_dump(), "created_by unchanged by redaction")
    eq(red.created_at, before.created_at, "created_at unchanged by redaction")

    got = fx.versions.retrieve(mem.memory_version_id, memory_store_id=store.id)
    eq((got.content, got.path, got.content_sha256, got.content_size_bytes), (None, None, None, None), "retrieve after redaction")
    eq(got.redacted_at, red.redacted_at, "retrieve shows redacted_at")
    listed = {v.id: v for v in fx.list_all_versions(store.id, view="full")}
    eq(listed[mem.memory_version_id].content, None, "listed redacted version has no content")
    eq(listed[mem.memory_version_id].redacted_at, red.redacted_at, "listed redacted_at")

    tick()
    again = fx.versions.redact(mem.memory_version_id, memory_store_id=store.id)
    eq(again.redacted_at, red.redacted_at, "redacting again is idempotent (redacted_at unchanged)")
    eq(again.model_dump(), red.model_dump(), "redacting again returns the same version")

    # The memory itself is untouched.
    cur = fx.memories.retrieve(mem.id, memory_store_id=store.id)
    eq(cur.content, "password=<removed>", "current content unaffected by redacting an old version")
    expect_not_found(
        lambda: fx.versions.redact("memver_0000000000000000000000", memory_store_id=store.id),
        "redact unknown version",
    )


def test_redact_current_version_refused(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/live.md", "live")
    err = expect_invalid_request(
        lambda: fx.versions.redact(mem.memory_version_id, memory_store_id=store.id),
        "redact the current version of a live memory",
    )
    check(err.api_message, "message explains the refusal")
    got = fx.versions.retrieve(mem.memory_version_id, memory_store_id=store.id)
    eq((got.redacted_at, got.content), (None, "live"), "refused redaction changed nothing")

    # After an update, the old version is no longer current and can be redacted; the new one can't.
    upd = fx.memories.update(mem.id, memory_store_id=store.id, content="live 2")
    red = fx.versions.redact(mem.memory_version_id, memory_store_id=store.id)
    check(red.redacted_at is not None, "old version redacted")
    expect_invalid_request(
        lambda: fx.versions.redact(upd.memory_version_id, memory_store_id=store.id),
        "redact the new current version",
    )
    # A rename also makes a new current version.
    ren = fx.memories.update(mem.id, memory_store_id=store.id, path="/live2.md")
    eq(fx.versions.redact(upd.memory_version_id, memory_store_id=store.id).path, None, "version before rename redacted")
    expect_invalid_request(
        lambda: fx.versions.redact(ren.memory_version_id, memory_store_id=store.id),
        "redact the current version after a rename",
    )
    eq(fx.memories.retrieve(mem.id, memory_store_id=store.id).content, "live 2", "memory still readable")


def test_redact_after_delete(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/gone.md", "soon gone")
    fx.memories.delete(mem.id, memory_store_id=store.id)
    deleted, created = fx.list_all_versions(store.id, memory_id=mem.id)
    eq((deleted.operation, created.operation), ("deleted", "created"), "versions")
    # The last content version of a deleted memory is no longer current.
    red = fx.versions.redact(created.id, memory_store_id=store.id)
    eq((red.content, red.path, red.content_sha256), (None, None, None), "redacted created version")
    red_del = fx.versions.redact(deleted.id, memory_store_id=store.id)
    eq(red_del.operation, "deleted", "deleted version redacted")
    eq(red_del.path, None, "deleted version path nulled by redaction")
    check(red_del.redacted_at is not None, "redacted_at on deleted version")
    after = fx.list_all_versions(store.id, memory_id=mem.id)
    check(all(v.redacted_at is not None for v in after), "both versions listed as redacted")
