"""A session's page while a real worker serves it: the transcript (messages, tool calls with
their input, results, status changes) follows the session live, and the memory the worker
synced back is listed under "Memory written by this session".

The test plays the operator and the agent through the API (DRIVER.md: an API key posts the
agent's `agent.tool_use` events and ends the turn) and starts a real `mnemo worker poll` with an
environment key minted through the API; the server mounts memory under the run's own directory
(`run.py` passes `--memory-mount-root`). The worker is stopped at the end whatever happens (and
the runner stops anything a test leaves behind).

A second test watches a session the server's own agent loop runs: `run.py` starts
`compat/fake_model.py` and passes the server a `--models` file mapping the agent model
`browser-fake` to it; the test scripts the fake's answer and reads the model call, its tokens and
the session's token total off the page.
"""

from __future__ import annotations

import json
import urllib.request
from typing import List

from console import NARROW, WIDE, Console, wait_for

STORE = "Worker notes"
SESSION_TITLE = "Stand-up notes"
ASK = "Please keep a note of today's stand-up."
SAY = "I'll check the shell, then write the note into my memory."
BASH = 'echo "hello $((6 * 7)) from $(basename "$PWD")"'
BASH_OUTPUT = "hello 42 from work"
NOTE_PATH = "/notes/standup.md"
NOTE = "Stand-up: the console docs ship on Friday.\n"
LATER = "Thanks, that is all for today."


def events(c: Console, session: str) -> List[dict]:
    return c.api("GET", f"/v1/sessions/{session}/events?limit=1000")["data"]


def result_of(c: Console, session: str, tool_use_id: str, timeout: float = 45.0) -> dict:
    """Waits for the worker's result of the call `tool_use_id`."""
    def find() -> dict:
        for e in events(c, session):
            if e["type"] == "user.tool_result" and e.get("tool_use_id") == tool_use_id:
                return e
        return {}

    return wait_for(find, f"the worker posted no result for {tool_use_id}", timeout)


def result_text(result: dict) -> str:
    return "".join(b.get("text", "") for b in result.get("content") or [] if isinstance(b, dict))


def call(c: Console, session: str, tool: str, tool_input: dict) -> str:
    """Posts one tool call as the agent; answers its event id."""
    body = {"events": [{"type": "agent.tool_use", "name": tool, "input": tool_input}]}
    return c.api("POST", f"/v1/sessions/{session}/events", body)["data"][0]["id"]


def work_states(c: Console, env: str, session: str) -> List[str]:
    page = c.api("GET", f"/v1/environments/{env}/work?limit=100")
    items = sorted((w for w in page["data"] if w["data"]["id"] == session), key=lambda w: w["created_at"])
    return [w["state"] for w in items]


def transcript_entries(c: Console) -> List[str]:
    """The transcript's entries as a person reads them, in order."""
    return [
        " ".join(li.text.split())
        for li in c.driver.find_elements("css selector", "#transcript > li")
    ]


def expect_entry(c: Console, *parts: str, timeout: float = 20.0) -> str:
    """Waits (without reloading) until one transcript entry shows every one of `parts`."""
    def find() -> str:
        for entry in transcript_entries(c):
            if all(p in entry for p in parts):
                return entry
        return ""

    return wait_for(find, f"no transcript entry shows {parts!r}; the entries: {transcript_entries(c)}", timeout)


def test_transcript_follows_a_session_a_worker_serves(c: Console) -> None:
    assert c.binary and c.mount_root, "the runner did not say which mnemo binary and mount root to use"
    store = c.api("POST", "/v1/memory_stores", {"name": STORE, "description": "What the agent noted"})
    c.api("POST", f"/v1/memory_stores/{store['id']}/memories", {"path": "/notes/seed.md", "content": "seeded\n"})
    env = c.api("POST", "/v1/environments", {"name": "Worker hosts", "config": {"type": "self_hosted"}})
    env_key = c.api("POST", f"/v1/environments/{env['id']}/keys", {})["key"]
    agent = c.api("POST", "/v1/agents", {"name": "Note taker", "model": "none", "tools": [{"type": "agent_toolset_20260401"}]})
    session = c.api(
        "POST",
        "/v1/sessions",
        {
            "agent": agent["id"],
            "environment_id": env["id"],
            "title": SESSION_TITLE,
            "resources": [{"type": "memory_store", "memory_store_id": store["id"]}],
        },
    )
    sid = session["id"]
    mount = session["resources"][0]["mount_path"]
    assert mount.startswith(str(c.mount_root)), f"the store mounts at {mount}, outside {c.mount_root}"
    c.api("POST", f"/v1/sessions/{sid}/events", {"events": [{"type": "user.message", "content": [{"type": "text", "text": ASK}]}]})

    workdir = c.scratch / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    worker = c.spawn(
        "worker",
        [
            c.binary, "worker", "poll",
            "--environment-id", env["id"],
            "--base-url", c.origin,
            "--workdir", str(workdir),
            "--state-dir", str(c.scratch / "worker-state"),
            "--max-idle", "1s",
        ],
        env={"ANTHROPIC_ENVIRONMENT_KEY": env_key, "NO_PROXY": "127.0.0.1", "MNEMO_MEMORY_MOUNT_ROOT": str(c.mount_root)},
    )
    try:
        c.sign_in()
        c.click("Sessions")
        c.click(SESSION_TITLE)
        c.expect_text(SESSION_TITLE)
        c.expect_text(sid)
        c.expect_text(STORE)
        c.expect_text(mount)
        expect_entry(c, "User", ASK)
        c.expect_text("Live: new events appear here as they happen.")  # the event stream is open
        # Everything from here on must arrive without a reload: the page's heading stays the
        # same element, and a mark left on this document stays.
        heading = c.driver.find_element("tag name", "h1")
        c.driver.execute_script("window.__sameDocument = 'yes';")

        c.api("POST", f"/v1/sessions/{sid}/events", {"events": [{"type": "agent.message", "content": [{"type": "text", "text": SAY}]}]})
        expect_entry(c, "Agent", SAY)

        bash_id = call(c, sid, "bash", {"command": BASH})
        expect_entry(c, "Tool call: bash", BASH)
        bash = result_of(c, sid, bash_id)
        assert not bash.get("is_error") and BASH_OUTPUT in result_text(bash), f"bash answered {bash}; worker log:\n{c.log_of('worker')}"
        expect_entry(c, "Tool result", BASH_OUTPUT)

        note_file = mount.rstrip("/") + NOTE_PATH
        write_id = call(c, sid, "write", {"file_path": note_file, "content": NOTE})
        expect_entry(c, "Tool call: write", note_file, NOTE.strip())
        write = result_of(c, sid, write_id)
        assert not write.get("is_error"), f"write answered {write}; worker log:\n{c.log_of('worker')}"
        expect_entry(c, "Tool result", result_text(write).strip()[:60])

        c.api("POST", f"/v1/sessions/{sid}/events", {"events": [{"type": "session.status_idle"}]})
        expect_entry(c, "Status: idle", "the agent finished its turn")
        wait_for(
            lambda: c.driver.find_element("id", "session-status").text == "idle",
            f"the status at the top does not read idle: {c.excerpt()}",
            10,
        )
        # The worker leaves after its idle time: the final sync, then the item is stopped.
        wait_for(
            lambda: work_states(c, env["id"], sid) == ["stopped"],
            f"the work item did not stop: {work_states(c, env['id'], sid)}; worker log:\n{c.log_of('worker')}",
            45,
        )
        c.api("POST", f"/v1/sessions/{sid}/events", {"events": [{"type": "user.message", "content": [{"type": "text", "text": LATER}]}]})
        expect_entry(c, "User", LATER)

        assert c.driver.execute_script("return window.__sameDocument || null;") == "yes", "the page was reloaded"
        assert heading.text, "the page was replaced"
        entries = transcript_entries(c)
        logged = events(c, sid)
        assert len(entries) == len(logged), (
            f"the transcript shows {len(entries)} entries, the API has {len(logged)} events: "
            f"{[e['type'] for e in logged]} vs {entries}"
        )
        titles = [e.split(" ")[0] for e in entries]
        for status in ("running", "idle"):
            assert any(e.startswith(f"Status: {status}") for e in entries), f"no 'Status: {status}' entry: {entries}"
        position = {text: next(i for i, e in enumerate(entries) if text in e) for text in (ASK, SAY, BASH, BASH_OUTPUT, LATER)}
        assert sorted(position.values()) == list(position.values()), f"entries out of order: {position}; {titles}"
        c.shot("session")
        # Each entry names who posted it, as a person reads it: the key that asked, the worker's
        # token that answered; the server's own status changes name nobody.
        assert any(e.startswith("User by API key apikey_") for e in entries), entries
        assert any(e.startswith("Tool result by worker (sessions token of work_") for e in entries), entries
        assert not any(e.startswith("Status:") and "by mnemo" in e for e in entries), entries
        # On a phone's width the entries and their posters fit the screen.
        c.resize(NARROW)
        overflow = c.driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth;")
        assert overflow <= 0, f"the transcript is {overflow} px wider than a narrow screen"
        c.shot("session-narrow")
        c.resize(WIDE)

        # What the worker synced back, listed after a reload and recorded as the session's.
        versions = c.api("GET", f"/v1/memory_stores/{store['id']}/memory_versions?session_id={sid}&limit=100")["data"]
        assert [(v["operation"], v["path"]) for v in versions] == [("created", NOTE_PATH)], versions
        assert versions[0]["created_by"] == {"type": "session_actor", "session_id": sid}, versions[0]
        c.driver.refresh()
        c.expect_text("Memory written by this session")
        row = " | ".join(c.row(NOTE_PATH).text.split("\n"))
        assert STORE in row and "created" in row, f"the row of {NOTE_PATH} reads {row!r}"
        c.click(NOTE_PATH)
        wait_for(lambda: c.path().endswith("/versions/" + versions[0]["id"]), f"the link led to {c.path()}")
        c.expect_text(NOTE.strip())
        c.expect_text(f"session {sid}")
    finally:
        status = c.stop(worker)
    assert status is not None, "the worker did not stop"


LOOP_TITLE = "Asked the model"
LOOP_ASK = "Say hello in one sentence."
LOOP_ANSWER = "Hello from the model, in one sentence."


def test_a_session_the_agent_loop_runs_shows_its_model_calls_and_tokens(c: Console) -> None:
    """The server's own agent loop answers (on the run's model fake): the transcript shows the
    model call and its tokens as they happen, and the session's facts its token total."""
    assert c.fake_model_url, "the runner started no model fake"
    body = json.dumps([{"text": LOOP_ANSWER}]).encode()
    req = urllib.request.Request(c.fake_model_url + "/_script", data=body, method="POST",
                                 headers={"content-type": "application/json"})
    urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10).read()
    env = c.api("POST", "/v1/environments", {"name": "Model hosts"})
    agent = c.api("POST", "/v1/agents", {"name": "Greeter", "model": "browser-fake"})
    session = c.api("POST", "/v1/sessions", {"agent": agent["id"], "environment_id": env["id"], "title": LOOP_TITLE})
    sid = session["id"]
    c.sign_in()
    c.click("Sessions")
    c.click(LOOP_TITLE)
    c.expect_text(LOOP_TITLE)
    c.expect_text("Live: new events appear here as they happen.")
    c.api("POST", f"/v1/sessions/{sid}/events",
          {"events": [{"type": "user.message", "content": [{"type": "text", "text": LOOP_ASK}]}]})
    expect_entry(c, "User", LOOP_ASK)
    expect_entry(c, "Model call")
    expect_entry(c, "Agent", LOOP_ANSWER)
    finished = expect_entry(c, "Model call finished", "tokens in", "out")
    expect_entry(c, "Status: idle", "the agent finished its turn")
    call = next(e for e in events(c, sid) if e["type"] == "span.model_request_end")["model_usage"]
    assert f"{call['output_tokens']:,} out" in finished, f"{finished!r} vs {call}"
    c.shot("session-agent-loop")
    c.driver.refresh()
    c.expect_text("Model tokens")
    total = c.driver.find_element("id", "session-tokens").text
    assert total.endswith(f"{call['output_tokens']:,} out") and "tokens in" in total, total
    c.shot("session-agent-loop-tokens")
