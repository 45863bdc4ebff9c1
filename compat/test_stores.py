"""Memory stores: create, retrieve, update, list, archive, delete."""

from __future__ import annotations

from compat_lib import (
    check,
    check_store_shape,
    eq,
    expect_invalid_request,
    expect_not_found,
    has_prefix,
    is_utc,
    pages,
    pages_by_hand,
    tick,
    unique,
)


def test_create_defaults(fx):
    name = unique("defaults")
    store = fx.stores.create(name=name)
    check_store_shape(store)
    eq(store.name, name, "name")
    eq(store.description, "", "description defaults to empty string")
    eq(store.metadata, {}, "metadata defaults to {}")
    eq(store.archived_at, None, "archived_at")
    check(store.updated_at >= store.created_at, "updated_at >= created_at")
    got = fx.stores.retrieve(store.id)
    eq(got.model_dump(), store.model_dump(), "retrieve returns the created store")


def test_create_with_description_and_metadata(fx):
    meta = {"end_user": "u-42", "k" * 64: "v" * 512, "unicode": "héllo ✓"}
    store = fx.new_store(name="Ünïcode name ✓", description="remember things", metadata=meta)
    check_store_shape(store)
    eq(store.name, "Ünïcode name ✓", "name")
    eq(store.description, "remember things", "description")
    eq(store.metadata, meta, "metadata")
    got = fx.stores.retrieve(store.id)
    eq(got.metadata, meta, "retrieved metadata")
    eq(got.description, "remember things", "retrieved description")
    # Names are not unique.
    twin = fx.new_store(name="Ünïcode name ✓")
    check(twin.id != store.id, "two stores with one name get distinct ids")


def test_create_validation(fx):
    cases = [
        ("empty name", dict(name="")),
        ("name of 256 chars", dict(name="n" * 256)),
        ("name with a control character", dict(name="bad\x07name")),
        ("name with a newline", dict(name="bad\nname")),
        ("description of 1025 chars", dict(name="ok", description="d" * 1025)),
        ("17 metadata pairs", dict(name="ok", metadata={f"k{i}": "v" for i in range(17)})),
        ("empty metadata key", dict(name="ok", metadata={"": "v"})),
        ("metadata key of 65 chars", dict(name="ok", metadata={"k" * 65: "v"})),
        ("metadata value of 513 chars", dict(name="ok", metadata={"k": "v" * 513})),
    ]
    for what, kwargs in cases:
        expect_invalid_request(lambda: fx.stores.create(**kwargs), f"create store with {what}")
    # Boundaries are accepted.
    store = fx.new_store(name="n" * 255, description="d" * 1024, metadata={f"k{i}": "v" for i in range(16)})
    eq(len(store.name), 255, "255-char name accepted")
    eq(len(store.description), 1024, "1024-char description accepted")
    eq(len(store.metadata), 16, "16 metadata pairs accepted")


def test_retrieve_unknown_store_is_404(fx):
    expect_not_found(lambda: fx.stores.retrieve("memstore_0000000000000000000000"), "retrieve unknown store")


def test_update_name_description_metadata(fx):
    store = fx.new_store(name="before", description="desc", metadata={"a": "1", "b": "2", "c": "3"})
    tick()
    upd = fx.stores.update(store.id, name="after")
    check_store_shape(upd)
    eq(upd.id, store.id, "id")
    eq(upd.name, "after", "name after update")
    eq(upd.description, "desc", "description untouched by a name-only update")
    eq(upd.metadata, {"a": "1", "b": "2", "c": "3"}, "metadata untouched by a name-only update")
    eq(upd.created_at, store.created_at, "created_at unchanged")
    check(upd.updated_at > store.updated_at, f"updated_at advances ({store.updated_at} -> {upd.updated_at})")

    upd = fx.stores.update(store.id, description="")
    eq(upd.description, "", "description '' clears it")
    eq(upd.name, "after", "name untouched by a description-only update")

    upd = fx.stores.update(store.id, metadata={"a": "one", "b": None, "d": "4", "zz": None})
    eq(upd.metadata, {"a": "one", "c": "3", "d": "4"}, "metadata patch (upsert a, remove b, keep c, add d)")

    got = fx.stores.retrieve(store.id)
    eq(got.name, "after", "persisted name")
    eq(got.description, "", "persisted description")
    eq(got.metadata, {"a": "one", "c": "3", "d": "4"}, "persisted metadata")

    upd = fx.stores.update(store.id, description="new desc", name="again")
    eq((upd.name, upd.description), ("again", "new desc"), "name and description together")


def test_memory_changes_do_not_touch_store_updated_at(fx):
    store = fx.new_store()
    tick()
    mem = fx.new_memory(store.id, "/m.md", "1")
    fx.memories.update(mem.id, memory_store_id=store.id, content="2")
    fx.memories.delete(mem.id, memory_store_id=store.id)
    got = fx.stores.retrieve(store.id)
    eq(got.updated_at, store.updated_at, "store updated_at after memory create/update/delete")


def test_update_metadata_pair_limit(fx):
    store = fx.new_store(metadata={f"k{i:02d}": "v" for i in range(15)})
    upd = fx.stores.update(store.id, metadata={"k15": "v"})
    eq(len(upd.metadata), 16, "16th pair accepted")
    err = expect_invalid_request(lambda: fx.stores.update(store.id, metadata={"k16": "v"}), "update adding a 17th metadata pair")
    check(err.api_message, "400 message is empty")
    eq(len(fx.stores.retrieve(store.id).metadata), 16, "rejected update changed nothing")
    # Removing one and adding one in the same patch stays within the limit.
    upd = fx.stores.update(store.id, metadata={"k00": None, "k16": "v"})
    eq(len(upd.metadata), 16, "swap within the limit")
    check("k00" not in upd.metadata and upd.metadata.get("k16") == "v", f"swap applied: {upd.metadata}")


def test_update_validation(fx):
    store = fx.new_store(name="valid")
    for what, kwargs in [
        ("empty name", dict(name="")),
        ("256-char name", dict(name="n" * 256)),
        ("control char in name", dict(name="a\x00b")),
        ("1025-char description", dict(description="d" * 1025)),
        ("65-char metadata key", dict(metadata={"k" * 65: "v"})),
        ("513-char metadata value", dict(metadata={"k": "v" * 513})),
    ]:
        expect_invalid_request(lambda: fx.stores.update(store.id, **kwargs), f"update store with {what}")
    got = fx.stores.retrieve(store.id)
    eq((got.name, got.description, got.metadata), ("valid", "", {}), "store unchanged after rejected updates")
    expect_not_found(lambda: fx.stores.update("memstore_0000000000000000000000", name="x"), "update unknown store")


def _my_stores(fx, marker, **kwargs):
    return [s for s in fx.stores.list(**kwargs) if s.metadata.get("marker") == marker]


def test_list_order_and_pagination(fx):
    marker = unique("page")
    created = []
    first = None
    for i in range(7):
        store = fx.new_store(name=f"list-{i}", metadata={"marker": marker})
        created.append(store)
        first = first or store
        if i in (2, 5):
            tick()  # guarantees distinct timestamps between groups even at 1 s precision

    # Newest first over the whole listing, every item a well-formed store.
    everything = list(fx.stores.list(limit=100))
    for s in everything:
        check_store_shape(s, f"listed store {s.id}")
    for a, b in zip(everything, everything[1:]):
        check(a.created_at >= b.created_at, f"stores not newest first: {a.id}@{a.created_at} before {b.id}@{b.created_at}")

    # Auto-paging with a small limit: every store once, newest first.
    listing = fx.stores.list(limit=2, created_at_gte=first.created_at)
    all_pages = pages(listing)
    for p in all_pages:
        check(len(p.data) <= 2, f"page larger than limit=2: {len(p.data)}")
    ids = [s.id for p in all_pages for s in p.data]
    eq(len(ids), len(set(ids)), "no store repeated across pages")
    mine = [i for i in ids if i in {s.id for s in created}]
    eq(len(mine), 7, "all 7 stores found via auto-paging")
    expected_order = [s.id for s in sorted(created, key=lambda s: s.created_at, reverse=True)]
    # Within equal timestamps order is free; compare the groups separated by tick().
    groups = [set(s.id for s in created[0:3]), set(s.id for s in created[3:6]), set(s.id for s in created[6:7])]
    eq([set(mine[0:1]), set(mine[1:4]), set(mine[4:7])], groups[::-1], "newest-first order across groups")
    check(set(expected_order) == set(mine), "same set of stores")
    check(len(all_pages) >= 4, f"limit=2 over >=7 stores needs >=4 pages, got {len(all_pages)}")

    # The same via explicit next_page.
    hand = pages_by_hand(lambda cur: fx.stores.list(limit=3, created_at_gte=first.created_at, page=cur) if cur else fx.stores.list(limit=3, created_at_gte=first.created_at))
    hand_ids = [s.id for p in hand for s in p.data]
    eq(hand_ids, ids, "next_page traversal (limit 3) yields the same sequence as auto-paging (limit 2)")

    # Default limit is 20.
    eq(len(fx.stores.list().data) <= 20, True, "default page size <= 20")


def test_list_limit_bounds(fx):
    fx.new_store()
    for limit in (0, 101, -1):
        expect_invalid_request(lambda: fx.stores.list(limit=limit), f"list stores with limit={limit}")
    eq(len(fx.stores.list(limit=1).data), 1, "limit=1 returns one store")
    check(len(fx.stores.list(limit=100).data) >= 1, "limit=100 accepted")


def test_list_include_archived(fx):
    marker = unique("arch")
    live = fx.new_store(metadata={"marker": marker})
    gone = fx.new_store(metadata={"marker": marker})
    fx.stores.archive(gone.id)
    default_ids = {s.id for s in _my_stores(fx, marker, limit=100)}
    eq(default_ids, {live.id}, "default listing excludes archived stores")
    false_ids = {s.id for s in _my_stores(fx, marker, limit=100, include_archived=False)}
    eq(false_ids, {live.id}, "include_archived=false excludes archived stores")
    all_ids = {s.id for s in _my_stores(fx, marker, limit=100, include_archived=True)}
    eq(all_ids, {live.id, gone.id}, "include_archived=true includes archived stores")
    archived = [s for s in _my_stores(fx, marker, include_archived=True) if s.id == gone.id][0]
    is_utc(archived.archived_at, "listed archived_at")


def test_list_created_at_filters(fx):
    marker = unique("time")
    a = fx.new_store(metadata={"marker": marker})
    tick()
    b = fx.new_store(metadata={"marker": marker})
    tick()
    c = fx.new_store(metadata={"marker": marker})
    check(a.created_at < b.created_at < c.created_at, f"created_at strictly increasing: {a.created_at}, {b.created_at}, {c.created_at}")

    def ids(**kw):
        return [s.id for s in _my_stores(fx, marker, limit=100, **kw)]

    eq(ids(), [c.id, b.id, a.id], "newest first")
    eq(ids(created_at_gte=b.created_at), [c.id, b.id], "created_at[gte]=b is inclusive")
    eq(ids(created_at_lte=b.created_at), [b.id, a.id], "created_at[lte]=b is inclusive")
    eq(ids(created_at_gte=b.created_at, created_at_lte=b.created_at), [b.id], "gte=lte=b")
    eq(ids(created_at_gte=c.created_at.isoformat().replace("+00:00", "Z")), [c.id], "gte as a Z string")
    eq(ids(created_at_lte=a.created_at.isoformat()), [a.id], "lte as an offset string")
    eq(ids(created_at_gte=c.created_at, created_at_lte=a.created_at), [], "empty range")


def test_archive(fx):
    store = fx.new_store(name="to-archive", metadata={"m": "1"})
    tick()
    arch = fx.stores.archive(store.id)
    check_store_shape(arch)
    eq(arch.id, store.id, "id")
    is_utc(arch.archived_at, "archived_at set")
    check(arch.archived_at > store.created_at, "archived_at after created_at")
    check(arch.updated_at > store.updated_at, f"archive advances updated_at ({store.updated_at} -> {arch.updated_at})")
    eq((arch.name, arch.metadata, arch.description), ("to-archive", {"m": "1"}, ""), "archive keeps fields")
    got = fx.stores.retrieve(store.id)
    eq(got.archived_at, arch.archived_at, "retrieve shows archived_at")

    tick()
    again = fx.stores.archive(store.id)
    eq(again.model_dump(), arch.model_dump(), "archiving an archived store returns it unchanged")

    expect_not_found(lambda: fx.stores.archive("memstore_0000000000000000000000"), "archive unknown store")


def test_archived_store_rules(fx):
    store = fx.new_store()
    keep = fx.new_memory(store.id, "/keep.md", "keep v1")
    keep2 = fx.memories.update(keep.id, memory_store_id=store.id, content="keep v2")
    doomed = fx.new_memory(store.id, "/doomed.md", "bye")
    fx.stores.archive(store.id)

    expect_invalid_request(lambda: fx.memories.create(store.id, path="/new.md", content="x"), "create memory in archived store")
    expect_invalid_request(
        lambda: fx.memories.update(keep.id, memory_store_id=store.id, content="changed"),
        "update memory content in archived store",
    )
    expect_invalid_request(
        lambda: fx.memories.update(keep.id, memory_store_id=store.id, path="/renamed.md"),
        "rename memory in archived store",
    )
    for what, kwargs in [("name", dict(name="x")), ("description", dict(description="x")), ("metadata", dict(metadata={"a": "b"}))]:
        expect_invalid_request(lambda: fx.stores.update(store.id, **kwargs), f"update archived store {what}")
    got = fx.stores.retrieve(store.id)
    eq((got.name.startswith("compat-"), got.description, got.metadata), (True, "", {}), "archived store unchanged")

    # Reads still work.
    eq(fx.memories.retrieve(keep.id, memory_store_id=store.id).content, "keep v2", "retrieve memory in archived store")
    eq(sorted(m.path for m in fx.list_all_memories(store.id)), ["/doomed.md", "/keep.md"], "list memories in archived store")
    check(len(fx.list_all_versions(store.id)) == 3, "list versions in archived store")

    # Redacting an old version still works.
    red = fx.versions.redact(keep.memory_version_id, memory_store_id=store.id)
    check(red.redacted_at is not None, "redact in archived store sets redacted_at")
    eq(red.content_sha256, None, "redacted sha")

    # Deleting a memory still works.
    dele = fx.memories.delete(doomed.id, memory_store_id=store.id)
    eq(dele.type, "memory_deleted", "delete memory in archived store")
    eq([m.path for m in fx.list_all_memories(store.id)], ["/keep.md"], "deleted memory gone")
    eq(fx.memories.retrieve(keep.id, memory_store_id=store.id).memory_version_id, keep2.memory_version_id, "keep untouched")

    # Deleting the store still works.
    eq(fx.stores.delete(store.id).type, "memory_store_deleted", "delete archived store")
    expect_not_found(lambda: fx.stores.retrieve(store.id), "retrieve deleted store")


def test_delete_store(fx):
    store = fx.new_store()
    mem = fx.new_memory(store.id, "/a.md", "a")
    res = fx.stores.delete(store.id)
    eq(res.type, "memory_store_deleted", "delete type")
    eq(res.id, store.id, "delete id")
    expect_not_found(lambda: fx.stores.retrieve(store.id), "retrieve deleted store")
    expect_not_found(lambda: fx.memories.list(store.id), "list memories of deleted store")
    expect_not_found(lambda: fx.memories.retrieve(mem.id, memory_store_id=store.id), "retrieve memory of deleted store")
    expect_not_found(lambda: fx.versions.list(memory_store_id=store.id), "list versions of deleted store")
    expect_not_found(lambda: fx.stores.delete(store.id), "delete store twice")
    ids = {s.id for s in fx.stores.list(limit=100, include_archived=True)}
    check(store.id not in ids, "deleted store still listed")
    has_prefix(res.id, "memstore_", "deleted id")
