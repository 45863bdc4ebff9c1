"""Dreams in the console (issue 34 item 4): the **Dreams** page lists the workspace's dreams, a
dream's page shows every field with its inputs, output and session linked, **Compare output
with input** shows what the dream added, removed and changed (with a line diff) and how to use
the output in a session, and **Archive output store**, **Cancel dream** and **Archive dream** act
through the console's forms. The dreams are real: created through the API on the model
`browser-fake`, which `run.py`'s `--models` file maps to `compat/fake_model.py`, scripted here
with the dream's tool calls (one completes, one stalls until it is canceled in the console, one
is refused by the provider and fails). Screenshots `dreams-*` at 1280 and 390 px.
"""

from __future__ import annotations

import json
import time
import urllib.request
from datetime import datetime, timezone
from typing import Any, Dict, List

from console import NARROW, WIDE, Console, wait_for

MODEL = "browser-fake"
STORE = "Dream notes"
SESSION_TITLE = "Friday deploy"
INSTRUCTIONS = "Keep one file per system; keep the deployment notes."
REPORT = "Merged the two database notes (the port is 5433 now), moved the deploy note up and added one insight."
OUT = "/mnt/memory/output"


def fake(c: Console, method: str, path: str, body: Any = None) -> Any:
    """A call to the model fake (never through a proxy)."""
    assert c.fake_model_url, "the runner started no model fake"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(c.fake_model_url + path, data=data, method=method,
                                 headers={"content-type": "application/json"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10) as answer:
        return json.loads(answer.read() or b"null")


def model_calls(c: Console) -> int:
    return len(fake(c, "GET", "/_requests"))


def shown_time(rfc3339: str) -> str:
    """A time as the console prints it (`2026-12-01 19:49:14 UTC`)."""
    t = datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).astimezone(timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def call(name: str, **input: str) -> Dict[str, Any]:
    return {"name": name, "input": input}


def inputs(c: Console) -> Dict[str, str]:
    """The store and the session the dreams read, made once through the API."""
    if "dream_inputs" not in c.state:
        store = c.api("POST", "/v1/memory_stores", {"name": STORE, "description": "What the team knows"})
        for path, content in (
            ("/db.md", "staging db: port 5432\nowner: ops\n"),
            ("/db-copy.md", "staging db: port 5432\n"),
            ("/style.md", "tabs, not spaces\n"),
            ("/old/deploy.md", "deploy on fridays\n"),
        ):
            c.api("POST", f"/v1/memory_stores/{store['id']}/memories", {"path": path, "content": content})
        env = c.api("POST", "/v1/environments", {"name": "Dream inputs"})
        # A model no provider runs: the session is left to its driver, so posting to it calls no model.
        agent = c.api("POST", "/v1/agents", {"name": "Deployer", "model": "claude-sonnet-4-6"})
        session = c.api("POST", "/v1/sessions", {"agent": agent["id"], "environment_id": env["id"], "title": SESSION_TITLE})
        c.api("POST", f"/v1/sessions/{session['id']}/events", {"events": [
            {"type": "user.message", "content": [{"type": "text", "text": "The staging db moved to port 5433."}]},
        ]})
        c.state["dream_inputs"] = {"store": store["id"], "session": session["id"]}
    return c.state["dream_inputs"]


def create_dream(c: Console, instructions: str = "") -> Dict[str, Any]:
    ins = inputs(c)
    body: Dict[str, Any] = {
        "inputs": [
            {"type": "memory_store", "memory_store_id": ins["store"]},
            {"type": "sessions", "session_ids": [ins["session"]]},
        ],
        "model": MODEL,
    }
    if instructions:
        body["instructions"] = instructions
    return c.api("POST", "/v1/dreams", body)


def until(c: Console, dream_id: str, statuses: List[str], timeout: float = 30.0) -> Dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        dream = c.api("GET", f"/v1/dreams/{dream_id}")
        if dream["status"] in statuses:
            return dream
        if time.monotonic() > deadline:
            raise AssertionError(f"dream {dream_id} is {dream['status']}, not {statuses}: {dream}")
        time.sleep(0.2)


def completed(c: Console) -> Dict[str, Any]:
    """A dream that merged, deleted, moved and wrote memories, then ended its turn."""
    if "dream_completed" not in c.state:
        inputs(c)
        fake(c, "POST", "/_script", [
            # A change needs a read of what it changes first (the tools' precondition).
            {"tool_calls": [call("read", file_path="/mnt/dream/sessions/_index.md"),
                            call("read", file_path=f"{OUT}/db.md"),
                            call("read", file_path=f"{OUT}/db-copy.md"),
                            call("read", file_path=f"{OUT}/old/deploy.md")]},
            {"tool_calls": [call("write", file_path=f"{OUT}/db.md", content="staging db: port 5433\nowner: ops\n"),
                            call("delete", file_path=f"{OUT}/db-copy.md"),
                            call("move", file_path=f"{OUT}/old/deploy.md", new_path=f"{OUT}/deploy.md"),
                            call("write", file_path=f"{OUT}/insights.md", content="deploys happen on fridays\n")]},
            {"text": REPORT},
        ])
        dream = create_dream(c, INSTRUCTIONS)
        done = until(c, dream["id"], ["completed", "failed", "canceled"])
        assert done["status"] == "completed", f"the scripted dream did not complete: {done}"
        c.state["dream_completed"] = done
    return c.state["dream_completed"]


def test_a_completed_dream_is_reviewed_and_its_output_compared_with_its_input(c: Console) -> None:
    done = completed(c)
    ins = inputs(c)
    output = done["outputs"][0]["memory_store_id"]
    assert output != ins["store"]
    c.sign_in()
    c.click("Dreams")
    c.expect_text("Archived dreams are hidden.")
    row = " ".join(next(r for r in c.table_rows() if done["id"] in " ".join(r)))
    for shown in ("completed", MODEL, STORE, f"{STORE} (dream)"):
        assert shown in row, f"the dream's row lacks {shown!r}: {row}"
    c.shot("dreams-list")

    # A dream opens from its creation time, the first cell of its row.
    c.click_in_row(done["id"], shown_time(done["created_at"]))
    c.expect_text(f"Dream {done['id']}")
    for shown in ("completed", "create_new", STORE, f"{STORE} (dream)", SESSION_TITLE, INSTRUCTIONS,
                  "Input tokens", "Cache read tokens", f"Dream {done['id']}"):
        c.expect_text(shown)
    c.control("Archive dream")
    assert c.find_control("Cancel dream") is None, "a completed dream offers Cancel dream"
    c.shot("dreams-dream-completed")

    # The dream's session is an ordinary session: its transcript shows the tools the server ran.
    c.click("Open the dream's transcript")
    c.expect_text(REPORT)
    c.expect_text("/mnt/memory/output/insights.md")
    c.driver.back()

    c.click("Compare output with input")
    c.expect_text(f"Compare “{STORE} (dream)” with “{STORE}”")
    c.expect_text("2 added · 2 removed · 1 changed · 1 unchanged")
    c.expect_text("same content as /old/deploy.md in the input (moved)")
    c.expect_text("staging db: port 5433")
    c.expect_text("1 memory is the same in both stores.")
    c.expect_text("Use this store in a session")
    c.expect_text(json.dumps({"type": "memory_store", "memory_store_id": output}, separators=(",", ":")))
    c.control("Open output store")
    c.control("Open input store")
    c.shot("dreams-compare")
    # Down to the changed memory and its line diff, as a person scrolls there.
    c.driver.execute_script("arguments[0].scrollIntoView(); window.scrollBy(0, -90);", c.control("In the output"))
    c.shot("dreams-compare-changes")

    # Each changed path opens in either store.
    c.click("In the input")
    c.expect_text("staging db: port 5432")
    c.driver.back()
    c.click("In the output")
    c.expect_text("staging db: port 5433")
    c.driver.back()

    # The inputs are untouched; the output holds exactly what the script wrote.
    kept = c.api("GET", f"/v1/memory_stores/{ins['store']}/memories?view=full&limit=100")["data"]
    assert sorted(m["path"] for m in kept) == ["/db-copy.md", "/db.md", "/old/deploy.md", "/style.md"], kept
    made = c.api("GET", f"/v1/memory_stores/{output}/memories?view=full&limit=100")["data"]
    assert sorted(m["path"] for m in made) == ["/db.md", "/deploy.md", "/insights.md", "/style.md"], made


def test_the_dream_pages_fit_a_narrow_screen(c: Console) -> None:
    done = completed(c)
    output = done["outputs"][0]["memory_store_id"]
    c.sign_in()
    c.resize(NARROW)
    try:
        for path, name in (
            ("/console/dreams", "dreams-list-narrow"),
            (f"/console/dreams/{done['id']}", "dreams-dream-narrow"),
            (f"/console/stores/{output}/compare?with={inputs(c)['store']}", "dreams-compare-narrow"),
        ):
            c.open(path)
            c.expect_text("Dream" if "compare" not in path else "Use this store in a session")
            extra, wide = c.overflow()
            assert extra <= 0, f"{path} is {extra}px wider than a 390px screen; too wide: {wide}"
            c.shot(name)
    finally:
        c.resize(WIDE)


def test_archive_the_output_store_from_the_comparison(c: Console) -> None:
    done = completed(c)
    output = done["outputs"][0]["memory_store_id"]
    c.sign_in()
    c.open(f"/console/dreams/{done['id']}")
    c.click("Compare output with input")
    c.click("Archive output store")
    c.expect_text("The output store is archived")
    assert "/compare?with=" in c.path(), f"archiving did not come back to the comparison: {c.path()}"
    assert c.find_control("Archive output store") is None
    assert not c.sees("Use this store in a session"), "an archived store is offered for sessions"
    assert c.api("GET", f"/v1/memory_stores/{output}")["archived_at"], "the API does not see the store archived"
    assert not c.api("GET", f"/v1/memory_stores/{inputs(c)['store']}").get("archived_at"), "the input was archived"


def test_a_running_dream_is_canceled_then_archived_in_the_console(c: Console) -> None:
    inputs(c)
    before = model_calls(c)
    # The model answers slowly (a piece every two seconds for minutes): the dream stays running
    # until it is canceled, and the fake sees its stream dropped within a piece.
    slow = "Reading every note slowly before deciding anything. " * 10
    fake(c, "POST", "/_script", [{"text": slow, "chunk_delay_ms": 2000}])
    dream = create_dream(c)
    until(c, dream["id"], ["running"])
    wait_for(lambda: model_calls(c) > before, "the stalling dream never called the model", timeout=20)
    c.sign_in()
    c.open(f"/console/dreams/{dream['id']}")
    c.expect_text("running")
    c.expect_text("This dream has not ended yet")
    assert c.find_control("Archive dream") is None, "a running dream offers Archive dream"
    c.shot("dreams-dream-running")
    c.click("Cancel dream")
    c.expect_text("canceled")
    assert c.api("GET", f"/v1/dreams/{dream['id']}")["status"] == "canceled"
    wait_for(lambda: fake(c, "GET", "/_stats")["cancelled"] > 0, "the model call in flight was not dropped", timeout=20)
    assert c.find_control("Cancel dream") is None
    c.shot("dreams-dream-canceled")
    c.click("Archive dream")
    c.expect_text("Archived")
    assert c.api("GET", f"/v1/dreams/{dream['id']}")["archived_at"], "the API does not see the dream archived"
    c.click("Dreams")
    c.expect_text("Archived dreams are hidden.")
    assert not any(dream["id"] in " ".join(r) for r in c.table_rows()), "an archived dream is listed"
    c.click("Show archived dreams")
    row = " ".join(next(r for r in c.table_rows() if dream["id"] in " ".join(r)))
    assert "canceled" in row and "archived" in row, row


def test_a_failed_dream_says_why(c: Console) -> None:
    inputs(c)
    fake(c, "POST", "/_script", [{"error": {"status": 400, "message": "prompt is too long for this fake"}}])
    dream = create_dream(c)
    failed = until(c, dream["id"], ["failed", "completed", "canceled"])
    assert failed["status"] == "failed" and failed["error"], failed
    c.sign_in()
    c.open(f"/console/dreams/{dream['id']}")
    c.expect_text(f"Failed: {failed['error']['type']}")
    c.expect_text(failed["error"]["message"])
    c.control("Archive dream")
    c.shot("dreams-dream-failed")
