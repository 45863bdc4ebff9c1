"""Memories: create, retrieve, update (content, preconditions, rename), delete, list."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import anthropic

from compat_lib import (
    EMPTY_SHA256,
    HEX64,
    MAX_CONTENT_BYTES,
    check,
    check_memory_shape,
    eq,
    expect_invalid_request,
    expect_not_found,
    expect_path_conflict,
    expect_precondition_failed,
    expect_too_large,
    has_prefix,
    no_retry_header,
    pages,
    pages_by_hand,
    sha256_hex,
    tick,
)

# ------------------------------------------------------------------------------ create


def test_create_basic_view_by_default(fx):
    store = fx.new_store()
    content = "hello memory\n"
    mem = fx.memories.create(store.id, path="/projects/foo/notes.md", content=content)
    check_memory_shape(mem, content, full=False)
    eq(mem.path, "/projects/foo/notes.md", "path")
    eq(mem.memory_store_id, store.id, "memory_store_id")
    eq(mem.content, None, "content is null in the default (basic) view")
    check(HEX64.match(mem.content_sha256), f"sha is 64 lowercase hex: {mem.content_sha256!r}")
    eq(mem.content_sha256, sha256_hex(content), "content_sha256")
    eq(mem.content_size_bytes, 13, "content_size_bytes")
    eq(mem.created_at, mem.updated_at, "created_at == updated_at on create")

    explicit = fx.memories.create(store.id, path="/projects/foo/other.md", content=content, view="basic")
    check_memory_shape(explicit, content, full=False)


def test_create_full_view(fx):
    store = fx.new_store()
    mem = fx.memories.create(store.id, path="/full.md", content="full content", view="full")
    check_memory_shape(mem, "full content", full=True)
    eq(mem.content, "full content", "content in full view")


def test_create_empty_and_unicode_content(fx):
    store = fx.new_store()
    empty = fx.memories.create(store.id, path="/empty.md", content="", view="full")
    eq(empty.content_sha256, EMPTY_SHA256, "sha of empty content")
    eq(empty.content_size_bytes, 0, "size of empty content")
    eq(empty.content, "", "empty content round-trips as '' (not null)")
    eq(fx.memories.retrieve(empty.id, memory_store_id=store.id).content, "", "retrieved empty content")

    text = "naïve café — 日本語 🚀\r\nline2\ttab \u2028 sep\n"
    uni = fx.memories.create(store.id, path="/unicode.md", content=text, view="full")
    eq(uni.content_sha256, sha256_hex(text), "sha over UTF-8 bytes")
    eq(uni.content_size_bytes, len(text.encode("utf-8")), "size in UTF-8 bytes, not characters")
    check(uni.content_size_bytes != len(text), "test content really is multi-byte")
    eq(uni.content, text, "unicode content round-trips byte for byte (incl. CRLF)")
    got = fx.memories.retrieve(uni.id, memory_store_id=store.id)
    eq(got.content, text, "retrieved unicode content")

    # No normalisation: NFD content stays NFD and hashes as sent.
    nfd = "e\u0301te\u0301"
    mem = fx.memories.create(store.id, path="/nfd-content.md", content=nfd, view="full")
    eq(mem.content, nfd, "content is not normalised")
    eq(mem.content_sha256, sha256_hex(nfd), "sha of NFD content")


def test_unicode_paths(fx):
    store = fx.new_store()
    paths = ["/日本語/ノート.md", "/café/menu.txt", "/with space/a b.md", "/UPPER.md", "/upper.md", "/.hidden", "/a..b/c...d"]
    for p in paths:
        mem = fx.new_memory(store.id, p, p)
        eq(mem.path, p, "unicode/odd path stored as sent")
    listed = [m.path for m in fx.list_all_memories(store.id)]
    eq(listed, sorted(paths, key=lambda s: s.encode("utf-8")), "paths listed in byte order, case-sensitive")
    # path_prefix with a space (the SDK encodes it as '+').
    eq([m.path for m in fx.list_all_memories(store.id, path_prefix="/with space/")], ["/with space/a b.md"], "prefix with a space")
    eq([m.path for m in fx.list_all_memories(store.id, path_prefix="/日本語/")], ["/日本語/ノート.md"], "unicode prefix")


def test_content_size_limit(fx):
    store = fx.new_store()
    exact = "a" * MAX_CONTENT_BYTES
    mem = fx.memories.create(store.id, path="/exact.md", content=exact)
    eq(mem.content_size_bytes, MAX_CONTENT_BYTES, "exactly 102,400 bytes accepted")
    eq(mem.content_sha256, sha256_hex(exact), "sha of 100 kB content")
    eq(fx.memories.retrieve(mem.id, memory_store_id=store.id).content, exact, "100 kB content round-trips")

    err = expect_too_large(
        lambda: fx.memories.create(store.id, path="/too-big.md", content="a" * (MAX_CONTENT_BYTES + 1)),
        "create with 102,401 bytes",
    )
    check(isinstance(err, anthropic.ContentTooLargeError), f"SDK maps 413 to ContentTooLargeError, got {type(err).__name__}")

    # The limit is in UTF-8 bytes: 51,201 two-byte characters = 102,402 bytes.
    expect_too_large(
        lambda: fx.memories.create(store.id, path="/too-big-utf8.md", content="é" * (MAX_CONTENT_BYTES // 2 + 1)),
        "create with 51,201 'é' (102,402 bytes)",
    )
    ok = fx.memories.create(store.id, path="/exact-utf8.md", content="é" * (MAX_CONTENT_BYTES // 2))
    eq(ok.content_size_bytes, MAX_CONTENT_BYTES, "51,200 'é' = 102,400 bytes accepted")

    # Update is held to the same limit, and a refused update changes nothing.
    expect_too_large(
        lambda: fx.memories.update(mem.id, memory_store_id=store.id, content="b" * (MAX_CONTENT_BYTES + 1)),
        "update with 102,401 bytes",
    )
    eq(fx.memories.retrieve(mem.id, memory_store_id=store.id).content_sha256, sha256_hex(exact), "refused update left content")
    eq(sorted(m.path for m in fx.list_all_memories(store.id)), ["/exact-utf8.md", "/exact.md"], "refused creates left nothing")


INVALID_PATHS = [
    ("empty", ""),
    ("root only", "/"),
    ("no leading slash", "notes/todo.md"),
    ("double slash", "/notes//todo.md"),
    ("leading double slash", "//todo.md"),
    ("trailing slash", "/notes/"),
    ("dot segment", "/notes/./todo.md"),
    ("dotdot segment", "/notes/../todo.md"),
    ("trailing dot segment", "/notes/."),
    ("trailing dotdot segment", "/notes/.."),
    ("leading dotdot segment", "/../etc/passwd"),
    ("21 segments", "/" + "/".join(f"s{i}" for i in range(21))),
    ("1025 bytes", "/" + "a" * 1024),
    ("1025 bytes multi-byte", "/" + "é" * 511 + "ab"),
    ("control char NUL", "/a\x00b.md"),
    ("control char BEL", "/a\x07b.md"),
    ("control char newline", "/a\nb.md"),
    ("control char tab", "/a\tb.md"),
    ("control char DEL", "/a\x7fb.md"),
    ("C1 control char", "/a\x85b.md"),
    ("U+2028 line separator", "/a\u2028b.md"),
    ("U+2029 paragraph separator", "/a\u2029b.md"),
    ("format char U+200B", "/a\u200bb.md"),
    ("format char U+FEFF", "/\ufeffa.md"),
    ("non-NFC e + combining acute", "/caf" + "e\u0301" + ".md"),
    ("non-NFC in a directory", "/e\u0301/x.md"),
]


def test_invalid_paths_rejected_on_create(fx):
    store = fx.new_store()
    for what, path in INVALID_PATHS:
        expect_invalid_request(
            lambda: fx.memories.create(store.id, path=path, content="x"),
            f"create with invalid path ({what}: {path[:60]!r})",
        )
    eq(fx.list_all_memories(store.id), [], "no memory was created by invalid paths")
    eq(fx.list_all_versions(store.id), [], "no version was written by invalid paths")


def test_invalid_paths_rejected_on_rename(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/ok.md", "ok")
    for what, path in INVALID_PATHS:
        expect_invalid_request(
            lambda: fx.memories.update(mem.id, memory_store_id=store.id, path=path),
            f"rename to invalid path ({what}: {path[:60]!r})",
        )
    got = fx.memories.retrieve(mem.id, memory_store_id=store.id)
    eq((got.path, got.memory_version_id), ("/ok.md", mem.memory_version_id), "memory unchanged after rejected renames")


def test_path_boundaries_accepted(fx):
    store = fx.new_store()
    twenty = "/" + "/".join(f"s{i}" for i in range(20))
    eq(fx.new_memory(store.id, twenty).path, twenty, "20 segments accepted")
    long_path = "/" + "b" * 1023
    eq(len(long_path.encode()), 1024, "test path is 1024 bytes")
    eq(fx.new_memory(store.id, long_path).path, long_path, "1024-byte path accepted")
    nfc = "/caf\u00e9.md"
    eq(fx.new_memory(store.id, nfc).path, nfc, "NFC path accepted")
    eq(fx.new_memory(store.id, "/x").path, "/x", "single short segment accepted")


def test_create_path_conflict(fx):
    store = fx.new_store()
    first = fx.new_memory(store.id, "/notes/todo.md", "one")
    err = expect_path_conflict(
        lambda: fx.memories.create(store.id, path="/notes/todo.md", content="two"), "create on a taken path", first
    )
    body = err.body
    check(isinstance(body, dict) and body["error"]["type"] == "memory_path_conflict_error", f"e.body: {body!r}")
    eq(fx.memories.retrieve(first.id, memory_store_id=store.id).content, "one", "original memory untouched")
    eq(len(fx.list_all_versions(store.id)), 1, "conflict wrote no version")

    # Case-sensitive: a different case is a different path.
    other = fx.new_memory(store.id, "/notes/TODO.md", "case")
    check(other.id != first.id, "case-different path is a distinct memory")


def test_create_overlapping_paths_conflict(fx):
    store = fx.new_store()
    file_a = fx.new_memory(store.id, "/a", "a file")
    deep = fx.new_memory(store.id, "/x/y/z.md", "deep")
    for path, blocking, where in [
        # Descendants of an existing memory.
        ("/a/b.md", file_a, "under memory /a"),
        ("/a/deeper/c.md", file_a, "under memory /a"),
        # Ancestors of an existing memory.
        ("/x", deep, "above memory /x/y/z.md"),
        ("/x/y", deep, "above memory /x/y/z.md"),
    ]:
        expect_path_conflict(lambda: fx.memories.create(store.id, path=path, content="x"), f"create {path} {where}", blocking)

    # Not overlapping: a sibling sharing a name prefix but not a segment.
    eq(fx.new_memory(store.id, "/ab", "sibling").path, "/ab", "/ab does not overlap /a")
    eq(fx.new_memory(store.id, "/a.md", "sibling").path, "/a.md", "/a.md does not overlap /a")
    eq(fx.new_memory(store.id, "/x/y2/z.md", "sibling").path, "/x/y2/z.md", "/x/y2/z.md does not overlap /x/y/z.md")
    eq(
        sorted(m.path for m in fx.list_all_memories(store.id)),
        sorted(["/a", "/ab", "/a.md", "/x/y/z.md", "/x/y2/z.md"]),
        "store holds exactly the non-conflicting memories",
    )


def test_create_requires_string_content_and_path(fx):
    store = fx.new_store()
    expect_invalid_request(lambda: fx.memories.create(store.id, path="/null.md", content=None), "create with content null")
    expect_invalid_request(
        lambda: fx.memories.create(store.id, path="/num.md", content="x", extra_body={"content": 42}),
        "create with numeric content",
    )
    expect_invalid_request(
        lambda: fx.memories.create(store.id, path="/x.md", content="x", extra_body={"path": None}),
        "create with path null",
    )
    eq(fx.list_all_memories(store.id), [], "nothing created")


def test_concurrent_creates_on_one_path(fx):
    """Exactly one of 16 simultaneous creates on one path wins; the rest get 409."""
    store = fx.new_store()

    def attempt(i):
        try:
            return ("ok", fx.memories.create(store.id, path="/race/same.md", content=f"writer {i}"))
        except anthropic.APIStatusError as err:
            return (err.status_code, err)

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(attempt, range(16)))
    winners = [r[1] for r in results if r[0] == "ok"]
    losers = [r for r in results if r[0] != "ok"]
    eq(len(winners), 1, f"winning creates (statuses {[r[0] for r in results]})")
    for status, err in losers:
        eq(status, 409, "losing create status")
        eq(err.type, "memory_path_conflict_error", "losing create error type")
        eq(err.body["error"].get("conflicting_memory_id"), winners[0].id, "losers name the winner")
    listed = fx.list_all_memories(store.id, view="full")
    eq([m.id for m in listed], [winners[0].id], "exactly the winner's memory exists")
    eq(listed[0].content_sha256, winners[0].content_sha256, "stored content is the winner's")
    eq(len(fx.list_all_versions(store.id)), 1, "one version")


def test_concurrent_conditional_updates_compare_and_set(fx):
    """16 writers share one precondition: exactly one update applies, the rest get 409."""
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/cas.md", "base")
    pre = {"type": "content_sha256", "content_sha256": sha256_hex("base")}

    def attempt(i):
        try:
            return ("ok", fx.memories.update(mem.id, memory_store_id=store.id, content=f"writer {i}", precondition=pre))
        except anthropic.APIStatusError as err:
            return (err.status_code, err)

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(attempt, range(16)))
    winners = [r[1] for r in results if r[0] == "ok"]
    eq(len(winners), 1, f"applied conditional updates (statuses {[r[0] for r in results]})")
    for status, err in (r for r in results if r[0] != "ok"):
        eq(status, 409, "losing update status")
        eq(err.type, "memory_precondition_failed_error", "losing update error type")
    got = fx.memories.retrieve(mem.id, memory_store_id=store.id)
    eq(got.content_sha256, winners[0].content_sha256, "stored content is the winner's")
    eq(got.memory_version_id, winners[0].memory_version_id, "current version is the winner's")
    eq([v.operation for v in fx.list_all_versions(store.id)], ["modified", "created"], "exactly one modified version")


def test_concurrent_conditional_deletes(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/del.md", "d")

    def attempt(_):
        try:
            fx.memories.delete(mem.id, memory_store_id=store.id, expected_content_sha256=sha256_hex("d"))
            return "ok"
        except anthropic.APIStatusError as err:
            return err.status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(attempt, range(8)))
    eq(results.count("ok"), 1, f"successful deletes (results {results})")
    check(all(r in ("ok", 404, 409) for r in results), f"losing deletes are 404 or 409: {results}")
    eq([v.operation for v in fx.list_all_versions(store.id)], ["deleted", "created"], "exactly one deleted version")


def test_malformed_preconditions_rejected(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/m.md", "m")
    for what, pre in [
        ("unknown precondition type", {"type": "etag", "content_sha256": sha256_hex("m")}),
        ("missing type", {"content_sha256": sha256_hex("m")}),
    ]:
        expect_invalid_request(
            lambda: fx.memories.update(mem.id, memory_store_id=store.id, content="n", precondition=pre),
            f"update with {what}",
        )
    # A malformed expected hash never deletes; 400 (malformed) or 409 (no match) are both fine.
    for bad in ("ab", sha256_hex("m").upper(), "z" * 64):
        try:
            fx.memories.delete(mem.id, memory_store_id=store.id, expected_content_sha256=bad)
        except anthropic.APIStatusError as err:
            check(err.status_code in (400, 409), f"delete with expected_content_sha256={bad!r}: got {err.status_code}")
        else:
            raise AssertionError(f"delete with malformed expected_content_sha256={bad!r} succeeded")
    got = fx.memories.retrieve(mem.id, memory_store_id=store.id)
    eq((got.content, got.memory_version_id), ("m", mem.memory_version_id), "memory unchanged")


# ------------------------------------------------------------------------------ retrieve


def test_retrieve_views(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/r.md", "retrieve me")
    full = fx.memories.retrieve(mem.id, memory_store_id=store.id)
    check_memory_shape(full, "retrieve me", full=True)
    eq(full.content, "retrieve me", "default retrieve view is full")
    eq((full.id, full.path, full.memory_version_id), (mem.id, mem.path, mem.memory_version_id), "same memory")
    eq(full.created_at, mem.created_at, "created_at")
    basic = fx.memories.retrieve(mem.id, memory_store_id=store.id, view="basic")
    check_memory_shape(basic, "retrieve me", full=False)
    eq(fx.memories.retrieve(mem.id, memory_store_id=store.id, view="full").content, "retrieve me", "view=full")
    expect_not_found(
        lambda: fx.memories.retrieve("mem_0000000000000000000000", memory_store_id=store.id),
        "retrieve unknown memory",
    )


# ------------------------------------------------------------------------------ update


def test_update_content_unconditional(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/u.md", "v1")
    tick()
    upd = fx.memories.update(mem.id, memory_store_id=store.id, content="v2")
    check_memory_shape(upd, "v2", full=False)
    eq(upd.id, mem.id, "id unchanged")
    eq(upd.path, "/u.md", "path unchanged")
    check(upd.memory_version_id != mem.memory_version_id, "new memory_version_id")
    eq(upd.created_at, mem.created_at, "created_at unchanged")
    check(upd.updated_at > mem.updated_at, f"updated_at advances ({mem.updated_at} -> {upd.updated_at})")
    full = fx.memories.update(mem.id, memory_store_id=store.id, content="v3", view="full")
    check_memory_shape(full, "v3", full=True)
    eq(fx.memories.retrieve(mem.id, memory_store_id=store.id).content, "v3", "persisted")
    expect_not_found(
        lambda: fx.memories.update("mem_0000000000000000000000", memory_store_id=store.id, content="x"),
        "update unknown memory",
    )


def test_update_with_matching_precondition(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/p.md", "base")
    upd = fx.memories.update(
        mem.id,
        memory_store_id=store.id,
        content="next",
        precondition={"type": "content_sha256", "content_sha256": sha256_hex("base")},
    )
    check_memory_shape(upd, "next", full=False)
    eq(fx.memories.retrieve(mem.id, memory_store_id=store.id).content, "next", "persisted")


def test_update_precondition_mismatch(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/p.md", "current")
    err = expect_precondition_failed(
        lambda: fx.memories.update(
            mem.id,
            memory_store_id=store.id,
            content="mine",
            precondition={"type": "content_sha256", "content_sha256": sha256_hex("stale")},
        ),
        "update with a stale precondition",
    )
    no_retry_header(err, "409 memory_precondition_failed_error")
    got = fx.memories.retrieve(mem.id, memory_store_id=store.id)
    eq((got.content, got.memory_version_id), ("current", mem.memory_version_id), "nothing changed")
    eq(len(fx.list_all_versions(store.id, memory_id=mem.id)), 1, "no version written by the failed update")

    # A failed precondition on a rename changes nothing either.
    expect_precondition_failed(
        lambda: fx.memories.update(
            mem.id,
            memory_store_id=store.id,
            path="/moved.md",
            precondition={"type": "content_sha256", "content_sha256": sha256_hex("stale")},
        ),
        "rename with a stale precondition",
    )
    eq(fx.memories.retrieve(mem.id, memory_store_id=store.id).path, "/p.md", "not renamed")


def test_update_precondition_mismatch_but_already_applied(fx):
    """A retried update whose first attempt already succeeded returns 200."""
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/retry.md", "old")
    pre = {"type": "content_sha256", "content_sha256": sha256_hex("old")}
    first = fx.memories.update(mem.id, memory_store_id=store.id, content="new", precondition=pre)
    again = fx.memories.update(mem.id, memory_store_id=store.id, content="new", precondition=pre)
    check_memory_shape(again, "new", full=False)
    eq(again.id, mem.id, "same memory")
    eq(again.memory_version_id, first.memory_version_id, "retry wrote no new version")
    eq(len(fx.list_all_versions(store.id, memory_id=mem.id)), 2, "created + one modified version only")
    # Same with the path given explicitly (equal to the current one).
    same = fx.memories.update(mem.id, memory_store_id=store.id, content="new", path="/retry.md", precondition=pre)
    eq(same.memory_version_id, first.memory_version_id, "retry with explicit same path wrote no version")
    # But a different requested content with the stale precondition still fails.
    expect_precondition_failed(
        lambda: fx.memories.update(mem.id, memory_store_id=store.id, content="other", precondition=pre),
        "stale precondition with different content",
    )
    # And so does the same content at a different path.
    expect_precondition_failed(
        lambda: fx.memories.update(mem.id, memory_store_id=store.id, content="new", path="/elsewhere.md", precondition=pre),
        "stale precondition, same content, different path",
    )


def test_noop_update_writes_no_version(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/same.md", "same")
    tick()
    upd = fx.memories.update(mem.id, memory_store_id=store.id, content="same")
    eq(upd.memory_version_id, mem.memory_version_id, "no-op content update keeps memory_version_id")
    eq(upd.updated_at, mem.updated_at, "no-op update keeps updated_at")
    upd = fx.memories.update(mem.id, memory_store_id=store.id, path="/same.md")
    eq(upd.memory_version_id, mem.memory_version_id, "no-op rename keeps memory_version_id")
    upd = fx.memories.update(mem.id, memory_store_id=store.id)
    eq(upd.memory_version_id, mem.memory_version_id, "empty update keeps memory_version_id")
    check_memory_shape(upd, "same", full=False)
    eq(len(fx.list_all_versions(store.id)), 1, "only the created version exists")


def test_rename(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/old/name.md", "keep me")
    tick()
    ren = fx.memories.update(mem.id, memory_store_id=store.id, path="/new/place/name.md")
    check_memory_shape(ren, "keep me", full=False)
    eq(ren.id, mem.id, "id unchanged by rename")
    eq(ren.path, "/new/place/name.md", "new path")
    check(ren.memory_version_id != mem.memory_version_id, "rename writes a version")
    check(ren.updated_at > mem.updated_at, "rename advances updated_at")
    eq([m.path for m in fx.list_all_memories(store.id)], ["/new/place/name.md"], "listing shows only the new path")
    # The old path is free again, and even its old directory can now be a file.
    eq(fx.new_memory(store.id, "/old/name.md", "reuse").path, "/old/name.md", "old path reusable")
    # Rename + content + matching precondition in one call.
    both = fx.memories.update(
        mem.id,
        memory_store_id=store.id,
        path="/final.md",
        content="changed",
        precondition={"type": "content_sha256", "content_sha256": sha256_hex("keep me")},
        view="full",
    )
    check_memory_shape(both, "changed", full=True)
    eq(both.path, "/final.md", "renamed and rewritten")
    # Rename onto a path whose directory is the memory's own current parent is fine.
    eq(fx.memories.update(mem.id, memory_store_id=store.id, path="/final2.md").path, "/final2.md", "rename again")


def test_rename_conflicts(fx):
    store = fx.new_store()
    a = fx.new_memory(store.id, "/a.md", "a")
    b = fx.new_memory(store.id, "/b.md", "b")
    d = fx.new_memory(store.id, "/dir/file.md", "d")
    for path, blocking, what in [
        ("/b.md", b, "rename onto a taken path"),
        ("/dir", d, "rename onto an ancestor of another memory"),
        ("/b.md/child.md", b, "rename below another memory"),
    ]:
        expect_path_conflict(lambda: fx.memories.update(a.id, memory_store_id=store.id, path=path), what, blocking)
    expect_path_conflict(
        lambda: fx.memories.update(a.id, memory_store_id=store.id, path="/b.md", content="new"),
        "rename + content onto a taken path",
    )
    got = fx.memories.retrieve(a.id, memory_store_id=store.id)
    eq((got.path, got.content, got.memory_version_id), ("/a.md", "a", a.memory_version_id), "a unchanged")
    eq(len(fx.list_all_versions(store.id)), 3, "conflicting renames wrote no versions")


# ------------------------------------------------------------------------------ delete


def test_delete(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/d.md", "delete me")
    res = fx.memories.delete(mem.id, memory_store_id=store.id)
    eq(res.type, "memory_deleted", "delete type")
    eq(res.id, mem.id, "delete id")
    expect_not_found(lambda: fx.memories.retrieve(mem.id, memory_store_id=store.id), "retrieve deleted memory")
    expect_not_found(lambda: fx.memories.update(mem.id, memory_store_id=store.id, content="zombie"), "update deleted memory")
    expect_not_found(lambda: fx.memories.delete(mem.id, memory_store_id=store.id), "delete twice")
    eq(fx.list_all_memories(store.id), [], "deleted memory not listed")
    # The path is free again; the new memory has a new id.
    again = fx.new_memory(store.id, "/d.md", "again")
    check(again.id != mem.id, "re-created memory gets a new id")


def test_delete_with_expected_sha(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/cas.md", "v1")
    err = expect_precondition_failed(
        lambda: fx.memories.delete(mem.id, memory_store_id=store.id, expected_content_sha256=sha256_hex("not v1")),
        "delete with a mismatching expected_content_sha256",
    )
    no_retry_header(err, "409 delete precondition")
    eq(fx.memories.retrieve(mem.id, memory_store_id=store.id).content, "v1", "memory still there")
    eq(len(fx.list_all_versions(store.id, memory_id=mem.id)), 1, "failed delete wrote no version")

    res = fx.memories.delete(mem.id, memory_store_id=store.id, expected_content_sha256=sha256_hex("v1"))
    eq((res.type, res.id), ("memory_deleted", mem.id), "delete with matching sha")
    eq(fx.list_all_memories(store.id), [], "memory gone")


# ------------------------------------------------------------------------------ list


def _seed(fx, store_id, paths):
    for p in paths:
        fx.new_memory(store_id, p, f"content of {p}")


def test_list_views_and_order(fx):
    store = fx.new_store()
    paths = ["/b.md", "/a/z.md", "/a/b/c.md", "/A.md", "/a-b.md", "/a.b", "/aa/x.md", "/~tilde", "/0.md"]
    _seed(fx, store.id, paths)
    expected = sorted(paths, key=lambda p: p.encode("utf-8"))

    basic = fx.list_all_memories(store.id)
    eq([m.path for m in basic], expected, "default listing is in byte order of path")
    for m in basic:
        check_memory_shape(m, f"content of {m.path}", full=False, what=f"basic item {m.path}")

    full = fx.list_all_memories(store.id, view="full")
    eq([m.path for m in full], expected, "full listing order")
    for m in full:
        check_memory_shape(m, f"content of {m.path}", full=True, what=f"full item {m.path}")

    explicit_basic = fx.list_all_memories(store.id, view="basic", limit=3)
    eq([m.path for m in explicit_basic], expected, "view=basic limit=3 traversal")
    check(all(m.content is None for m in explicit_basic), "basic items have content null")

    # Default page size is 20.
    page = fx.memories.list(store.id)
    eq(len(page.data), len(paths), "all 9 on the first default page")
    eq(page.next_page, None, "no next page when everything fits")


def test_list_full_view_caps_page_at_20(fx):
    store = fx.new_store()
    paths = [f"/cap/{i:03d}.md" for i in range(45)]
    _seed(fx, store.id, paths)
    first = fx.memories.list(store.id, view="full", limit=100)
    check(0 < len(first.data) <= 20, f"view=full limit=100 page holds {len(first.data)} items (max 20)")
    all_pages = pages(first)
    for p in all_pages:
        check(len(p.data) <= 20, f"full page with {len(p.data)} items")
        for m in p.data:
            check(m.content == f"content of {m.path}", f"full item {m.path} has content {m.content!r}")
    eq([m.path for p in all_pages for m in p.data], paths, "full traversal yields every memory once, in order")
    basic = fx.memories.list(store.id, view="basic", limit=100)
    eq(len(basic.data), 45, "view=basic limit=100 returns all 45 in one page")
    eq(basic.next_page, None, "no next page")
    b40 = fx.memories.list(store.id, limit=40)
    eq(len(b40.data), 40, "basic limit=40 page is full")


def test_list_limit_bounds(fx):
    store = fx.new_store()
    _seed(fx, store.id, ["/a.md"])
    for limit in (0, 101, -5):
        expect_invalid_request(lambda: fx.memories.list(store.id, limit=limit), f"list memories limit={limit}")
    eq(len(fx.memories.list(store.id, limit=1).data), 1, "limit=1")
    eq(len(fx.memories.list(store.id, limit=100).data), 1, "limit=100")


def test_list_pagination_stable(fx):
    store = fx.new_store()
    paths = sorted(f"/p/{i:02d}/{j}.md" for i in range(6) for j in ("x", "y", "z"))
    _seed(fx, store.id, paths)

    # SDK auto-paging.
    all_pages = pages(fx.memories.list(store.id, limit=4))
    for p in all_pages[:-1]:
        eq(len(p.data), 4, "non-final page size")
    got = [m.path for p in all_pages for m in p.data]
    eq(got, paths, "auto-paging yields every path once, in order")
    eq(all_pages[-1].next_page, None, "last page has next_page null")

    # Explicit next_page; a write between pages must not repeat or skip already-seen items.
    seen = []
    cursor = None
    inserted = False
    while True:
        page = fx.memories.list(store.id, limit=5, page=cursor) if cursor else fx.memories.list(store.id, limit=5)
        seen += [m.path for m in page.data]
        if not inserted:
            # Insert one path before and one after the cursor position.
            fx.new_memory(store.id, "/p/00/w.md", "early")
            fx.new_memory(store.id, "/p/99/late.md", "late")
            inserted = True
        if not page.next_page:
            break
        cursor = page.next_page
    eq(len(seen), len(set(seen)), f"no path repeated across pages: {seen}")
    eq(seen, sorted(seen, key=lambda s: s.encode()), "pages are in order across a concurrent insert")
    check(set(paths) <= set(seen), "every path present before the listing started was listed")

    # Pagination with a prefix keeps the prefix.
    pref = [m.path for m in fx.list_all_memories(store.id, path_prefix="/p/03/", limit=1)]
    eq(pref, ["/p/03/x.md", "/p/03/y.md", "/p/03/z.md"], "prefix + limit=1 traversal")


def test_list_path_prefix(fx):
    store = fx.new_store()
    _seed(fx, store.id, ["/notes/todo.md", "/notes/sub/deep.md", "/notes-archive/todo.md", "/notesx.md", "/other/notes/a.md"])
    eq(
        [m.path for m in fx.list_all_memories(store.id, path_prefix="/notes/")],
        ["/notes/sub/deep.md", "/notes/todo.md"],
        "path_prefix=/notes/ matches whole segments only",
    )
    eq([m.path for m in fx.list_all_memories(store.id, path_prefix="/notes/sub/")], ["/notes/sub/deep.md"], "nested prefix")
    eq([m.path for m in fx.list_all_memories(store.id, path_prefix="/nothing/")], [], "prefix without matches")
    eq(len(fx.list_all_memories(store.id, path_prefix="/")), 5, "prefix / matches everything")
    for bad in ("/notes", "notes/", "/notes/todo.md"):
        expect_invalid_request(lambda: fx.memories.list(store.id, path_prefix=bad), f"path_prefix={bad!r} (must end with /)")


def test_list_depth_one(fx):
    store = fx.new_store()
    _seed(fx, store.id, ["/a.md", "/b/c.md", "/b/d/e.md", "/b/f.md", "/c/x/y/z.md", "/d.md", "/b.md"])

    def items(**kw):
        out = []
        for it in fx.memories.list(store.id, depth=1, **kw):
            if it.type == "memory_prefix":
                check(it.path.endswith("/"), f"prefix path ends with /: {it.path!r}")
                check(not hasattr(it, "id") or getattr(it, "id", None) is None, f"prefix has no id: {it!r}")
            else:
                eq(it.type, "memory", "item type")
                check_memory_shape(it, f"content of {it.path}", full=kw.get("view") == "full", what=f"depth=1 item {it.path}")
            out.append((it.type, it.path))
        return out

    root = [("memory", "/a.md"), ("memory", "/b.md"), ("memory_prefix", "/b/"), ("memory_prefix", "/c/"), ("memory", "/d.md")]
    eq(items(), root, "depth=1 at the root")
    eq(items(view="full"), root, "depth=1 at the root, view=full")
    eq(items(path_prefix="/b/"), [("memory", "/b/c.md"), ("memory_prefix", "/b/d/"), ("memory", "/b/f.md")], "depth=1 under /b/")
    eq(items(path_prefix="/c/"), [("memory_prefix", "/c/x/")], "depth=1 under /c/")
    eq(items(path_prefix="/c/x/y/"), [("memory", "/c/x/y/z.md")], "depth=1 at the leaf")

    # Prefix items count toward the limit and paginate without repeats.
    for limit in (1, 2, 3):
        all_pages = pages(fx.memories.list(store.id, depth=1, limit=limit))
        for p in all_pages:
            check(len(p.data) <= limit, f"depth=1 limit={limit}: page has {len(p.data)} items")
        eq([(i.type, i.path) for p in all_pages for i in p.data], root, f"depth=1 limit={limit} traversal")
    first = fx.memories.list(store.id, depth=1, limit=3)
    eq([(i.type, i.path) for i in first.data], root[:3], "first page of limit=3 holds 2 memories and 1 prefix")
    check(first.next_page, "first page of limit=3 has a next_page")
    hand = pages_by_hand(lambda cur: fx.memories.list(store.id, depth=1, limit=2, page=cur) if cur else fx.memories.list(store.id, depth=1, limit=2))
    eq([(i.type, i.path) for p in hand for i in p.data], root, "depth=1 traversal via next_page")

    # depth=0 (explicit) lists everything flat.
    eq(len(fx.list_all_memories(store.id, depth=0)), 7, "depth=0 lists all memories")


def test_list_depth_one_many_under_one_prefix(fx):
    """A prefix standing for many memories appears exactly once even when pages are tiny."""
    store = fx.new_store()
    paths = ["/a.md"] + [f"/big/{i:02d}.md" for i in range(30)] + ["/big2/x.md", "/z.md"]
    _seed(fx, store.id, paths)
    expected = [("memory", "/a.md"), ("memory_prefix", "/big/"), ("memory_prefix", "/big2/"), ("memory", "/z.md")]
    for limit in (1, 2, 100):
        all_pages = pages(fx.memories.list(store.id, depth=1, limit=limit))
        got = [(i.type, i.path) for p in all_pages for i in p.data]
        eq(got, expected, f"depth=1 limit={limit}")
        check(len([p for p in all_pages if p.data]) <= 4, f"at most 4 non-empty pages, got {len(all_pages)}")


def test_list_depth_two_rejected(fx):
    store = fx.new_store()
    _seed(fx, store.id, ["/a/b/c.md"])
    for depth in (2, -1):
        expect_invalid_request(lambda: fx.memories.list(store.id, depth=depth), f"list depth={depth}")


def test_list_invalid_view_rejected(fx):
    store = fx.new_store()
    expect_invalid_request(lambda: fx.memories.list(store.id, view="everything"), "list view=everything")
    has_prefix(store.id, "memstore_", "store id")
