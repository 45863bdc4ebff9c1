"""The "done when" scenario: one store with 2,000 memories driven end to end by the SDK."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from compat_lib import (
    check,
    check_memory_shape,
    eq,
    expect_invalid_request,
    expect_path_conflict,
    expect_precondition_failed,
    no_retry_header,
    pages_by_hand,
    sha256_hex,
)

N = 2000
WORKERS = 16


def _path(i: int) -> str:
    return f"/scenario/d{i // 100:02d}/note-{i:04d}.md"


def _content(i: int) -> str:
    return f"memory {i}: " + ("lorem ipsum ✓ " * (i % 7)) + "\n"


def test_two_thousand_memories_end_to_end(fx):
    store = fx.new_store(name="scenario", description="2,000 memories", metadata={"scenario": "done-when"})

    # 1. Write 2,000 memories, 16 SDK calls at a time.
    def create(i):
        return fx.memories.create(store.id, path=_path(i), content=_content(i))

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        created = list(pool.map(create, range(N)))
    for i, mem in enumerate(created):
        eq(mem.path, _path(i), f"create #{i} path")
        eq(mem.content_sha256, sha256_hex(_content(i)), f"create #{i} sha")
    eq(len({m.id for m in created}), N, "2,000 distinct memory ids")
    eq(len({m.memory_version_id for m in created}), N, "2,000 distinct version ids")

    model = {_path(i): sha256_hex(_content(i)) for i in range(N)}  # path -> sha, what the store should hold
    ordered = sorted(model)

    # 2. Basic view, limit 100: 20 full pages, every path once, in order.
    basic_pages = list(fx.memories.list(store.id, limit=100).iter_pages())
    non_empty = [p for p in basic_pages if p.data]
    eq(len(non_empty), 20, "basic view, limit=100: number of pages")
    check(len(basic_pages) <= 21, f"at most one trailing empty page, got {len(basic_pages)} pages")
    for n, p in enumerate(non_empty):
        eq(len(p.data), 100, f"basic page {n} size")
    items = [m for p in basic_pages for m in p.data]
    eq([m.path for m in items], ordered, "basic traversal: every path exactly once, in order")
    for m in items:
        check(m.content is None, f"basic item {m.path} has content")
        eq(m.content_sha256, model[m.path], f"basic item {m.path} sha")
    eq(basic_pages[-1].next_page, None, "last basic page ends the listing")

    # 3. Full view, 20 per page (following next_page by hand): 100 pages.
    full_pages = pages_by_hand(
        lambda cur: fx.memories.list(store.id, view="full", limit=20, page=cur)
        if cur
        else fx.memories.list(store.id, view="full", limit=20)
    )
    non_empty = [p for p in full_pages if p.data]
    eq(len(non_empty), 100, "full view, 20 per page: number of pages")
    for n, p in enumerate(non_empty):
        eq(len(p.data), 20, f"full page {n} size")
    full_items = [m for p in full_pages for m in p.data]
    eq([m.path for m in full_items], ordered, "full traversal: every path exactly once, in order")
    by_path = {_path(i): i for i in range(N)}
    for m in full_items:
        eq(m.content, _content(by_path[m.path]), f"full item {m.path} content")

    # 4. Mutations.
    ids = {m.path: m.id for m in created}
    # 4a. Unconditional updates (concurrently).
    plain = list(range(0, 200, 2))

    def update_plain(i):
        return fx.memories.update(ids[_path(i)], memory_store_id=store.id, content=f"plain update {i}")

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for i, mem in zip(plain, pool.map(update_plain, plain)):
            check_memory_shape(mem, f"plain update {i}", full=False, what=f"plain update {i}")
            model[_path(i)] = sha256_hex(f"plain update {i}")

    # 4b. Conditional updates with the right precondition.
    cond = list(range(1, 200, 2))

    def update_cond(i):
        return fx.memories.update(
            ids[_path(i)],
            memory_store_id=store.id,
            content=f"conditional update {i}",
            precondition={"type": "content_sha256", "content_sha256": sha256_hex(_content(i))},
        )

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for i, mem in zip(cond, pool.map(update_cond, cond)):
            check_memory_shape(mem, f"conditional update {i}", full=False, what=f"conditional update {i}")
            model[_path(i)] = sha256_hex(f"conditional update {i}")

    # 4c. A stale precondition fails and changes nothing.
    err = expect_precondition_failed(
        lambda: fx.memories.update(
            ids[_path(0)],
            memory_store_id=store.id,
            content="lost update",
            precondition={"type": "content_sha256", "content_sha256": sha256_hex(_content(0))},
        ),
        "stale precondition",
    )
    no_retry_header(err, "stale precondition")
    eq(fx.memories.retrieve(ids[_path(0)], memory_store_id=store.id).content, "plain update 0", "stale update lost")

    # 4d. Renames (id unchanged) and a rename onto a taken path.
    for i in range(200, 210):
        new_path = f"/scenario/renamed/note-{i:04d}.md"
        mem = fx.memories.update(ids[_path(i)], memory_store_id=store.id, path=new_path)
        eq((mem.id, mem.path), (ids[_path(i)], new_path), f"rename {i}")
        model[new_path] = model.pop(_path(i))
        ids[new_path] = ids.pop(_path(i))
    err = expect_path_conflict(
        lambda: fx.memories.update(ids[_path(300)], memory_store_id=store.id, path=_path(301)),
        "rename onto a taken path",
    )
    eq(err.body["error"].get("conflicting_memory_id"), ids[_path(301)], "conflicting_memory_id")

    # 4e. Deletes: half unconditional, half with the expected hash; one with a wrong hash.
    deleted_ids = []
    for i in range(1000, 1020):
        p = _path(i)
        if i % 2:
            res = fx.memories.delete(ids[p], memory_store_id=store.id, expected_content_sha256=model[p])
        else:
            res = fx.memories.delete(ids[p], memory_store_id=store.id)
        eq((res.type, res.id), ("memory_deleted", ids[p]), f"delete {i}")
        deleted_ids.append(ids.pop(p))
        del model[p]
    expect_precondition_failed(
        lambda: fx.memories.delete(ids[_path(1500)], memory_store_id=store.id, expected_content_sha256=sha256_hex("nope")),
        "delete with a wrong hash",
    )

    # 5. The listing now matches the model exactly.
    after = list(fx.memories.list(store.id, limit=100))
    eq([m.path for m in after], sorted(model), "listing after mutations (paths, in order)")
    for m in after:
        eq(m.content_sha256, model[m.path], f"sha after mutations {m.path}")
        eq(m.id, ids[m.path], f"id after mutations {m.path}")

    # 6. Versions: one per mutation, newest first, filters.
    expected_total = N + len(plain) + len(cond) + 10 + 20
    versions = list(fx.versions.list(memory_store_id=store.id, limit=100))
    eq(len(versions), expected_total, "total versions (2,000 created + 200 modified + 10 renamed + 20 deleted)")
    eq(len({v.id for v in versions}), expected_total, "no version repeated across pages")
    for a, b in zip(versions, versions[1:]):
        check(a.created_at >= b.created_at, f"versions newest first: {a.id}@{a.created_at} before {b.id}@{b.created_at}")
    ops = {}
    for v in versions:
        ops[v.operation] = ops.get(v.operation, 0) + 1
    eq(ops, {"created": N, "modified": len(plain) + len(cond) + 10, "deleted": 20}, "operation counts")
    eq(len(list(fx.versions.list(memory_store_id=store.id, operation="deleted", limit=100))), 20, "operation=deleted")
    hist = list(fx.versions.list(memory_store_id=store.id, memory_id=deleted_ids[0], view="full"))
    eq([v.operation for v in hist], ["deleted", "created"], "history of a deleted memory")
    eq(hist[1].content, _content(1000), "created version content of the deleted memory")
    cond_hist = list(fx.versions.list(memory_store_id=store.id, memory_id=ids[_path(1)], view="full"))
    eq([v.content for v in cond_hist], ["conditional update 1", _content(1)], "history of a conditionally updated memory")

    # 7. Redaction: the old version yes, the current one no.
    old, cur = cond_hist[1], cond_hist[0]
    red = fx.versions.redact(old.id, memory_store_id=store.id)
    eq((red.content, red.path, red.content_sha256, red.content_size_bytes), (None, None, None, None), "redacted")
    check(red.redacted_at is not None and red.redacted_by is not None, "redacted_at / redacted_by set")
    eq(red.created_by.model_dump(), old.created_by.model_dump(), "created_by unchanged")
    expect_invalid_request(lambda: fx.versions.redact(cur.id, memory_store_id=store.id), "redact the current version")
    eq(fx.versions.redact(hist[0].id, memory_store_id=store.id).path, None, "redact a deleted version")

    # 8. Archive: reads keep working, writes are refused.
    arch = fx.stores.archive(store.id)
    check(arch.archived_at is not None, "archived")
    expect_invalid_request(
        lambda: fx.memories.update(ids[_path(500)], memory_store_id=store.id, content="after archive"),
        "update after archive",
    )
    first = fx.memories.list(store.id, limit=100)
    eq([m.path for m in first.data], sorted(model)[:100], "first page after archive")
    eq(fx.memories.retrieve(ids[_path(500)], memory_store_id=store.id).content, _content(500), "read after archive")
    eq(fx.memories.retrieve(ids[_path(5)], memory_store_id=store.id).content, "conditional update 5", "read after archive")


def test_default_capacity_is_10000(fx):
    """The default cap is 10,000 memories per store (current hosted docs; older docs said 2,000):
    the next create is a 400 while existing memories stay readable, and a delete frees a slot."""
    store = fx.new_store(name="capacity-default")
    cap = 10_000

    def create(i):
        return fx.memories.create(store.id, path=f"/cap/{i:05d}", content="")

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        eq(len(list(pool.map(create, range(cap)))), cap, "10,000 creates")
    err = expect_invalid_request(
        lambda: fx.memories.create(store.id, path="/cap/one-too-many", content="x"),
        "memory #10,001 with the default configuration",
    )
    check("10000" in err.api_message, "the 400 names the limit")
    first = fx.memories.list(store.id, limit=1).data[0]
    eq(fx.memories.retrieve(first.id, memory_store_id=store.id).content, "", "existing memories stay readable")
    fx.memories.delete(first.id, memory_store_id=store.id)
    eq(fx.memories.create(store.id, path="/cap/after-delete", content="").path, "/cap/after-delete", "create after delete")
