"""A memory's history in the console: its versions, one version's line diff, restoring an old
version and redacting one.

The module builds its own memory through the API (so it runs alone too): three versions of
`/plans/launch.md` in the store `Launch`, each written with the API key, so every version's
actor is that key. The tests run in source order and build on each other: the list and the diff
first, then a restore (which writes a fourth version), then a redaction of an old version and
the refusal to redact the current one.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import List

from console import Console, wait_for

STORE = "Launch"
PATH = "/plans/launch.md"

V1 = "# Launch plan\n\n- freeze the release branch on Monday\n- write the release notes\n"
V2 = (
    "# Launch plan\n\n- freeze the release branch on Tuesday\n- write the release notes\n"
    "- tell support before the launch\n"
)
V3 = (
    "# Launch plan\n\n- freeze the release branch on Tuesday\n- write the release notes\n"
    "- tell support before the launch\n- book the launch review (Thursday 15:00)\n"
)
REMOVED = "- freeze the release branch on Monday"
ADDED = ["- freeze the release branch on Tuesday", "- tell support before the launch"]


# ---- the memory under test -------------------------------------------------------------------


def launch_memory(c: Console) -> dict:
    """The store, the memory and its versions (oldest first), made through the API once per run:
    {"store": id, "memory": id, "versions": [ids…], "actor": created_by of the API's writes}."""
    if "launch" in c.state:
        return c.state["launch"]
    store = c.api("POST", "/v1/memory_stores", {"name": STORE, "description": "The release, step by step"})
    memory = c.api("POST", f"/v1/memory_stores/{store['id']}/memories", {"path": PATH, "content": V1})
    for content in (V2, V3):
        c.api("POST", f"/v1/memory_stores/{store['id']}/memories/{memory['id']}", {"content": content})
    versions = versions_of(c, store["id"], memory["id"])
    assert [v["operation"] for v in versions] == ["created", "modified", "modified"], versions
    actor = versions[0]["created_by"]
    assert actor.get("type") == "api_actor" and actor.get("api_key_id", "").startswith("apikey_"), actor
    c.state["launch"] = {
        "store": store["id"],
        "memory": memory["id"],
        "versions": [v["id"] for v in versions],
        "actor": actor,
    }
    return c.state["launch"]


def versions_of(c: Console, store: str, memory: str) -> List[dict]:
    """The memory's versions through the API, oldest first (full view: with content)."""
    page = c.api("GET", f"/v1/memory_stores/{store}/memory_versions?memory_id={memory}&limit=100")
    basic = list(reversed(page["data"]))
    return [c.api("GET", f"/v1/memory_stores/{store}/memory_versions/{v['id']}?view=full") for v in basic]


def console_time(rfc3339: str) -> str:
    """An API timestamp as the console writes it (`2026-12-01 19:49:14 UTC`)."""
    t = datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).astimezone(timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def open_history(c: Console) -> None:
    """From the home page to the memory's page, level by level, then its History button."""
    c.open("/console")
    c.click(STORE)
    c.click("plans/")
    c.click("launch.md")
    c.expect_text(PATH)
    c.click("History")
    c.expect_text("History of " + PATH)


def open_version(c: Console, index: int) -> None:
    """Opens, from the memory's history (newest first), the `index`-th row's version."""
    open_history(c)
    c.click_in_row(index, "View")
    c.expect_text("version of " + PATH)


def signed_in_key_id(c: Console) -> str:
    """The API key id the console's header says the person is signed in with."""
    ids = re.findall(r"apikey_\w+", c.driver.find_element("css selector", "header").text)
    assert ids, f"the header names no API key: {c.excerpt()}"
    return ids[0]


# ---- history ---------------------------------------------------------------------------------


def test_history_lists_the_memorys_versions(c: Console) -> None:
    m = launch_memory(c)
    c.sign_in()
    c.open("/console")
    c.click(STORE)
    c.expect_text("1 memory ·")  # one memory (not "1 memories"), however many versions it has
    open_history(c)
    versions = list(reversed(versions_of(c, m["store"], m["memory"])))  # newest first, as shown
    rows = c.table_rows()
    assert len(rows) == len(versions), f"{len(versions)} versions through the API, {len(rows)} rows: {rows}"
    key_id = m["actor"]["api_key_id"]
    for shown, version in zip(rows, versions):
        line = " | ".join(shown)
        assert version["operation"] in shown[0], f"row {line!r}: not the operation {version['operation']!r}"
        assert PATH in line, f"row {line!r}: no path"
        assert f"API key {key_id}" in line, f"row {line!r}: not by API key {key_id}"
        assert console_time(version["created_at"]) in line, f"row {line!r}: not made at {version['created_at']}"
        size = f"{version['content_size_bytes']} B"
        assert size in shown, f"row {line!r}: not {size} ({version['content_size_bytes']} bytes through the API)"
        assert "View" in shown, f"row {line!r}: no View link"
    assert signed_in_key_id(c) == key_id, "the console is signed in with another key than the API's writes"
    c.shot("history")
    # The filters narrow the list the way the API's do.
    c.choose("Operation", "created")
    c.click("Apply filters")
    wait_for(lambda: len(c.table_rows()) == 1, f"filtered on created, the rows are {c.table_rows()}")
    assert c.table_rows()[0][0].startswith("created"), c.table_rows()
    c.click("Clear filters")
    wait_for(lambda: len(c.table_rows()) == len(versions), f"after Clear filters the rows are {c.table_rows()}")
    c.fill("API key", key_id)
    c.click("Apply filters")
    wait_for(lambda: "api_key=" in c.path(), f"the API key filter was not applied: {c.path()}")
    assert len(c.table_rows()) == len(versions), f"filtered on {key_id}: {c.table_rows()}"
    c.fill("API key", "apikey_" + "0" * 22)
    c.click("Apply filters")
    c.expect_text("No versions match.")


def test_version_shows_the_line_diff_against_the_one_before(c: Console) -> None:
    m = launch_memory(c)
    c.sign_in()
    open_version(c, 1)  # the second-newest: V2, after V1
    assert c.path().endswith("/versions/" + m["versions"][1]), f"opened {c.path()}, not version {m['versions'][1]}"
    c.expect_text("modified version of " + PATH)
    c.expect_text("Changes from the previous version")
    c.expect_text(m["versions"][1])
    rows = c.driver.find_elements("css selector", "table.diff tbody tr")
    assert rows, f"no diff table: {c.excerpt()}"
    diff = []
    for r in rows:
        cells = [td.text for td in r.find_elements("tag name", "td")]
        diff.append((r.get_attribute("class"), cells[2].strip(), cells[3]))
    removed = [text for kind, sign, text in diff if kind == "removed"]
    added = [text for kind, sign, text in diff if kind == "added"]
    assert removed == [REMOVED], f"removed rows {removed!r}, expected [{REMOVED!r}]; the diff: {diff}"
    assert added == ADDED, f"added rows {added!r}, expected {ADDED!r}; the diff: {diff}"
    for kind, sign, text in diff:
        want = {"added": "+", "removed": "−", "same": "", "gap": ""}.get(kind)
        assert want is not None, f"a diff row of unknown kind {kind!r}: {text!r}"
        assert sign == want, f"the {kind} row {text!r} is marked {sign!r}, not {want!r}"
    same = [text for kind, _, text in diff if kind == "same"]
    assert "- write the release notes" in same, f"the unchanged line is not shown as context: {diff}"
    # Added and removed rows look different from each other and from unchanged ones.
    colours = {
        kind: c.driver.execute_script("return getComputedStyle(arguments[0]).backgroundColor;", r)
        for r, (kind, _, _) in zip(rows, diff)
    }
    assert len({colours["added"], colours["removed"], colours["same"]}) == 3, f"diff rows are not told apart: {colours}"
    c.expect_text(V2.splitlines()[-1])  # the version's content, below the diff
    c.shot("version")
    c.click("Previous version")
    wait_for(lambda: c.path().endswith("/versions/" + m["versions"][0]), f"Previous version led to {c.path()}")
    c.expect_text("created version of " + PATH)
    c.expect_text("Content as created")
    assert c.find_control("Previous version") is None, "the first version offers a Previous version"


# ---- restore ---------------------------------------------------------------------------------


def test_restore_writes_the_old_content_as_a_new_version(c: Console) -> None:
    m = launch_memory(c)
    c.sign_in()
    key_id = signed_in_key_id(c)
    before = versions_of(c, m["store"], m["memory"])
    open_version(c, -1)  # the oldest: V1
    assert c.path().endswith("/versions/" + m["versions"][0]), c.path()
    c.click("Restore")
    wait_for(lambda: "/memories/" in c.path(), f"Restore did not lead to the memory's page: {c.path()}")
    c.expect_text(PATH)
    c.expect_text(REMOVED)  # V1's line is back
    assert "book the launch review" not in c.text(), f"the memory still shows V3's content: {c.excerpt()}"
    after = versions_of(c, m["store"], m["memory"])
    assert len(after) == len(before) + 1, f"restoring wrote {len(after) - len(before)} versions, not 1"
    new = after[-1]
    assert new["operation"] == "modified", new
    assert new["content"] == V1, f"the new version holds {new['content']!r}, not V1"
    assert new["created_by"] == {"type": "api_actor", "api_key_id": key_id}, (
        f"the restore was recorded as {new['created_by']}, not the signed-in key {key_id}"
    )
    memory = c.api("GET", f"/v1/memory_stores/{m['store']}/memories/{m['memory']}")
    assert memory["content"] == V1 and memory["memory_version_id"] == new["id"], memory
    m["versions"].append(new["id"])


# ---- redaction -------------------------------------------------------------------------------


def test_redact_an_old_version(c: Console) -> None:
    m = launch_memory(c)
    target = m["versions"][1]  # V2: history, not the current content
    c.sign_in()
    open_history(c)
    c.click_in_row(len(m["versions"]) - 2, "View")
    assert c.path().endswith("/versions/" + target), f"opened {c.path()}, not {target}"
    c.click("Redact")
    c.expect_text("Redact this version?")
    c.expect_text("cannot be undone")
    assert c.api("GET", f"/v1/memory_stores/{m['store']}/memory_versions/{target}")["redacted_at"] is None, (
        "the version was redacted before the confirmation"
    )
    c.click("Redact version")
    wait_for(lambda: c.path().endswith("/versions/" + target), f"Redact version led to {c.path()}")
    c.expect_text("This version was redacted")
    c.expect_text("Redacted")
    for gone in ("Restore", "Redact"):
        assert c.find_control(gone) is None, f"a redacted version still offers {gone}"
    assert ADDED[1] not in c.text(), f"the redacted content is still shown: {c.excerpt()}"
    version = c.api("GET", f"/v1/memory_stores/{m['store']}/memory_versions/{target}?view=full")
    assert version["redacted_at"], f"the API shows no redacted_at: {version}"
    assert version["content"] is None, f"the API still has content: {version['content']!r}"
    assert version["redacted_by"] == {"type": "api_actor", "api_key_id": m["actor"]["api_key_id"]}, version
    open_history(c)
    c.expect_text("redacted")


def test_the_current_version_cannot_be_redacted(c: Console) -> None:
    m = launch_memory(c)
    memory = c.api("GET", f"/v1/memory_stores/{m['store']}/memories/{m['memory']}")
    current = memory["memory_version_id"]
    c.sign_in()
    open_version(c, 0)
    assert c.path().endswith("/versions/" + current), f"the newest row is {c.path()}, not {current}"
    c.expect_text("current")
    c.expect_text("cannot be redacted")
    assert c.find_control("Redact") is None, "the current version offers Redact"
    # Typed into the address bar, the confirmation page explains the same.
    c.open(f"/console/stores/{m['store']}/versions/{current}/redact")
    c.expect_text("cannot be redacted")
    assert c.find_control("Redact version") is None, "the confirmation page offers to redact the current version"
    version = c.api("GET", f"/v1/memory_stores/{m['store']}/memory_versions/{current}?view=full")
    assert version["redacted_at"] is None and version["content"] == memory["content"], version


def test_restore_brings_a_deleted_memory_back(c: Console) -> None:
    m = launch_memory(c)
    path = "/plans/retired.md"
    content = "This plan was retired, then brought back.\n"
    memory = c.api("POST", f"/v1/memory_stores/{m['store']}/memories", {"path": path, "content": content})
    c.api("DELETE", f"/v1/memory_stores/{m['store']}/memories/{memory['id']}")
    c.sign_in()
    c.open("/console")
    c.click(STORE)
    c.click("History")
    c.expect_text("History of " + STORE)
    deleted = c.row(0).text
    assert deleted.startswith("deleted") and path in deleted, f"the newest row is {deleted!r}, not the deletion"
    c.click_in_row(0, "View")
    c.expect_text("A deleted version holds no content.")
    assert c.find_control("Restore") is None, "a deletion offers Restore"
    c.click("Previous version")
    c.expect_text("created version of " + path)
    c.click("Restore")
    wait_for(lambda: "/memories/" in c.path(), f"Restore did not lead to a memory's page: {c.path()}")
    c.expect_text(path)
    c.expect_text(content.strip())
    back = c.memory_by_path(m["store"], path)
    assert back["content"] == content, back
    newest = c.api("GET", f"/v1/memory_stores/{m['store']}/memory_versions?memory_id={back['id']}&limit=1")["data"][0]
    assert newest["operation"] == "created" and newest["created_by"] == m["actor"], newest
