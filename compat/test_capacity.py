"""Store capacity, against a server started with `--max-memories-per-store 5`."""

from __future__ import annotations

import anthropic

from compat_lib import CAPACITY5, check, eq, expect_invalid_request, sha256_hex

SERVER = CAPACITY5
CAP = 5


def test_sixth_memory_refused(fx):
    store = fx.new_store()
    mems = [fx.new_memory(store.id, f"/m{i}.md", f"m{i}") for i in range(CAP)]
    err = expect_invalid_request(
        lambda: fx.memories.create(store.id, path="/m5.md", content="one too many"),
        f"create memory #{CAP + 1} in a store capped at {CAP}",
    )
    msg = (err.api_message or "").lower()
    check(
        str(CAP) in msg or any(w in msg for w in ("limit", "maximum", "capacity", "full", "too many")),
        f"the 400 message should say the store is full, got {err.api_message!r}",
    )
    eq(len(fx.list_all_memories(store.id)), CAP, "still exactly 5 memories")
    eq(len(fx.list_all_versions(store.id)), CAP, "the refused create wrote no version")

    # Existing memories stay readable and writable.
    for i, m in enumerate(mems):
        eq(fx.memories.retrieve(m.id, memory_store_id=store.id).content, f"m{i}", f"read m{i}")
    upd = fx.memories.update(
        mems[0].id,
        memory_store_id=store.id,
        content="m0 edited",
        precondition={"type": "content_sha256", "content_sha256": sha256_hex("m0")},
    )
    eq(upd.content_sha256, sha256_hex("m0 edited"), "update in a full store")
    ren = fx.memories.update(mems[1].id, memory_store_id=store.id, path="/renamed.md")
    eq(ren.path, "/renamed.md", "rename in a full store")

    # Deleting one frees a slot.
    fx.memories.delete(mems[2].id, memory_store_id=store.id)
    again = fx.memories.create(store.id, path="/m5.md", content="fits now")
    eq(again.path, "/m5.md", "create after a delete")
    expect_invalid_request(lambda: fx.memories.create(store.id, path="/m6.md", content="full again"), "create when full again")
    eq(
        sorted(m.path for m in fx.list_all_memories(store.id)),
        ["/m0.md", "/m3.md", "/m4.md", "/m5.md", "/renamed.md"],
        "final contents",
    )


def test_capacity_is_per_store(fx):
    a = fx.new_store()
    b = fx.new_store()
    for i in range(CAP):
        fx.new_memory(a.id, f"/a{i}.md", "a")
    expect_invalid_request(lambda: fx.memories.create(a.id, path="/over.md", content="x"), "store a is full")
    for i in range(CAP):
        eq(fx.new_memory(b.id, f"/b{i}.md", "b").path, f"/b{i}.md", f"store b accepts memory {i}")


def test_conflict_beats_capacity_for_a_taken_path(fx):
    """In a full store, a create on an existing path is still refused; whichever error the
    server picks, the store must not change."""
    store = fx.new_store()
    for i in range(CAP):
        fx.new_memory(store.id, f"/c{i}.md", "c")
    try:
        fx.memories.create(store.id, path="/c0.md", content="dup")
    except anthropic.APIStatusError as err:
        check(err.status_code in (400, 409), f"create on a taken path in a full store: got {err.status_code}")
    else:
        raise AssertionError("create on a taken path in a full store succeeded")
    eq(fx.memories.list(store.id).data[0].content_sha256, sha256_hex("c"), "c0 untouched")
