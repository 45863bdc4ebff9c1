"""The agent loop of `mnemo serve`, driven and watched through the official SDK.

Each test starts `compat/fake_model.py` (the scripted model) and its own `mnemo serve --models
FILE` on the suite's backend, with the fake configured as two providers (the Anthropic Messages
format and the OpenAI chat-completions format).  Through the SDK it creates a memory store with
one memory, an agent on a mapped model with the built-in toolset, a self-hosted environment and
a session with the store attached; it opens the session's event stream, then sends one
`user.message`.  The scripted model reads the memory, writes a new one and answers; a worker
runs the two tools:

* `test_the_loop_with_mnemo_worker_on_an_openai_compatible_model`: `mnemo worker poll`, the
  agent's model mapped to the OpenAI-format provider;
* `test_the_loop_with_the_sdk_environment_worker_on_an_anthropic_model`: the SDK's own
  `EnvironmentWorker` (`handle_item`, as in `test_worker.py`), the Anthropic-format provider.

Checks: the turn ends `end_turn`; the transcript read from the stream equals the listed one
from the `user.message` on (same ids, same order) and holds what the model said (two
`agent.message`s, the `read` and `write` calls) with one result per call (the `read` result
carries the memory); three model calls, each `span.model_request_start` closed by a
`span.model_request_end` with its usage, the session's cumulative usage their sum; the model's
requests carried the agent's system prompt, the memory prompt naming the mount and the first
tool result; the store holds the new memory, written by the `session_actor`; the work item is
`stopped` and the folder removed.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

import anthropic

import compat_lib
from compat_lib import OWN, FakeModel, check, eq, short
from test_worker import Diagnostics, WorkerThread, api_post, dump_failed_worker, slug
from test_worker_diff import MnemoWorker, OwnServer, mnemo_binary, work_items

SERVER = OWN  # starts its own server (with --models) and model fake

STORE_NAME = "Agent Notes"
HELLO = "The deploy password rotates on Mondays.\n"
LEARNED = "Learned \u2713: passwords rotate on Mondays.\n"
SYSTEM = "You are a careful assistant who keeps notes."
QUESTION = "What do you remember about passwords?"
FIRST = "Let me look at my notes first."
ANSWER = "I read your note and saved what I learned: passwords rotate on Mondays."
TURN_WAIT = 90.0
ITEM_STOP_WAIT = 90.0


class LoopServer(OwnServer):
    """`mnemo serve --models FILE` on the suite's backend, with a memory mount root."""

    def __init__(self, binary: str, workdir: Path, api_key: str, mount_root: Path, models: Path) -> None:
        super().__init__(binary, "agent-loop", workdir, api_key, None, mount_root)
        self.models = models

    def extra_args(self) -> List[str]:
        return [*super().extra_args(), "--models", str(self.models)]


class Transcript(threading.Thread):
    """Reads the session's event stream (opened before anything is sent) until the turn ends."""

    def __init__(self, client: anthropic.Anthropic, session_id: str) -> None:
        super().__init__(name="compat-agent-stream", daemon=True)
        self.client = client
        self.session_id = session_id
        self.events: List[Any] = []
        self.opened = threading.Event()
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            with self.client.beta.sessions.events.stream(self.session_id) as stream:
                self.opened.set()
                for event in stream:
                    self.events.append(event)
                    if event.type == "session.status_idle" and event.stop_reason.type != "requires_action":
                        return
        except BaseException as err:  # noqa: BLE001 — reported to the test
            self.error = err
        finally:
            self.opened.set()


def script(fake: FakeModel, mount: str) -> None:
    fake.script([
        {"text": FIRST, "tool_calls": [{"name": "read", "input": {"file_path": f"{mount}/hello.md"}}]},
        {"tool_calls": [{"name": "write", "input": {"file_path": f"{mount}/learned.md", "content": LEARNED}}]},
        {"text": ANSWER},
    ])


def run_scenario(fx: Any, worker_kind: str, model: str) -> None:
    binary = mnemo_binary()
    area = Path(tempfile.mkdtemp(prefix="mnemo-compat-agent-")).resolve()
    api_key = "sk-agent-" + secrets.token_hex(16)
    fake = FakeModel()
    mount_root = area / "mnt" / "memory"
    mount = str(mount_root / slug(STORE_NAME))
    script(fake, mount)
    models = area / "models.toml"
    models.write_text(fake.models_toml({"claude-fake": "fake/claude-fake-1", "qwen-fake": "fake-openai/qwen-fake-7b"}))
    server = LoopServer(binary, area / "server", api_key, mount_root, models)
    worker: Any = None
    diag = Diagnostics()
    sdk_log = logging.getLogger("anthropic")
    old_level = sdk_log.level
    try:
        server.start(fx.timeout)
        sfx = compat_lib.Fixture(server.base_url, api_key, fx.timeout)
        client = sfx.client
        store = sfx.new_store(name=STORE_NAME)
        sfx.new_memory(store.id, "/hello.md", HELLO)
        tag = uuid.uuid4().hex[:8]
        agent = client.beta.agents.create(
            name=f"compat-agent-{tag}", model=model, system=SYSTEM, tools=[{"type": "agent_toolset_20260401"}]
        )
        env = client.beta.environments.create(name=f"compat-agent-env-{tag}", config={"type": "self_hosted"})
        status, key = api_post(sfx, f"/v1/environments/{env.id}/keys", {})
        check(status == 200, f"POST /v1/environments/{{id}}/keys answered {status}: {short(key, 300)}")
        session = client.beta.sessions.create(
            agent=agent.id,
            environment_id=env.id,
            resources=[{"type": "memory_store", "memory_store_id": store.id, "access": "read_write"}],
        )
        eq([r.mount_path for r in session.resources if r.type == "memory_store"], [mount], "the store's mount path")

        transcript = Transcript(client, session.id)
        transcript.start()
        check(transcript.opened.wait(30), "the event stream did not open within 30 s")
        check(transcript.error is None, f"the event stream failed: {transcript.error!r}")
        client.beta.sessions.events.send(
            session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": QUESTION}]}]
        )

        workdir = area / "workdir"
        workdir.mkdir()
        mount_root.mkdir(parents=True, exist_ok=True)
        if worker_kind == "sdk":
            sdk_log.addHandler(diag)
            sdk_log.setLevel(logging.DEBUG)
            worker = WorkerThread("item", server.base_url, fx.timeout, env.id, key["key"], workdir, diag)
            worker.start()
            check(worker.claimed.wait(60), "the SDK poller claimed nothing within 60 s")
            check(worker.item is not None, f"the SDK poller found no work item (error: {worker.error!r})")
        else:
            worker = MnemoWorker(binary, server.base_url, env.id, key["key"], workdir, area / "state",
                                 area / "worker.log", live=True, mount_root=mount_root)

        transcript.join(TURN_WAIT)
        check(not transcript.is_alive(), f"the turn did not end within {TURN_WAIT:.0f} s; streamed: "
                                         f"{[e.type for e in transcript.events]}")
        check(transcript.error is None, f"the event stream failed: {transcript.error!r}")
        check_transcript(sfx, session.id, transcript.events, mount)
        check_model_requests(fake.requests(), mount)

        deadline = time.monotonic() + ITEM_STOP_WAIT
        while True:
            items = work_items(sfx, env.id, session.id)
            if items and all(w.state == "stopped" for w in items):
                break
            check(time.monotonic() < deadline, f"work item(s) not stopped within {ITEM_STOP_WAIT:.0f} s: "
                                               f"{[w.state for w in items]}")
            if worker_kind == "mnemo":
                check(worker.is_alive(), f"the mnemo worker exited early (status {worker.proc.returncode})")
            time.sleep(0.2)
        if worker_kind == "sdk":
            worker.join(60)
            check(not worker.is_alive() and worker.returned, f"handle_item did not return (error: {worker.error!r})")
            errors = diag.worker_records(logging.ERROR)
            check(not errors, f"the SDK worker logged errors: {[r.getMessage() for r in errors]}")
        else:
            eq(worker.stop(), 0, "exit status of `mnemo worker poll` after SIGTERM")
        check(not Path(mount).exists(), f"the worker should have removed {mount}")

        memories = {m.path: m for m in sfx.list_all_memories(store.id, view="full")}
        eq(sorted(memories), ["/hello.md", "/learned.md"], "the store's memories")
        eq(memories["/learned.md"].content, LEARNED, "the memory the agent wrote")
        eq(memories["/hello.md"].content, HELLO, "the memory the agent read")
        written = sfx.versions.retrieve(memories["/learned.md"].memory_version_id, memory_store_id=store.id)
        eq(written.created_by.to_dict(), {"type": "session_actor", "session_id": session.id},
           "created_by of the written memory")
        sfx.client.close()
    except BaseException:
        dump_failed_worker(worker_kind, worker, diag, server, "server")
        raise
    finally:
        if worker_kind == "sdk":
            if worker is not None and worker.is_alive():
                worker.cancel()
                worker.join(45)
            sdk_log.removeHandler(diag)
            sdk_log.setLevel(old_level)
        elif worker is not None and worker.is_alive():
            worker.stop(10)
        server.stop()
        fake.stop()
        shutil.rmtree(area, ignore_errors=True)


def texts(event: Any) -> str:
    return "".join(b.text for b in (event.content or []) if getattr(b, "type", None) == "text")


def check_transcript(fx: compat_lib.Fixture, session_id: str, streamed: List[Any], mount: str) -> None:
    listed = list(fx.client.beta.sessions.events.list(session_id, limit=1000))
    first = next((i for i, e in enumerate(listed) if e.type == "user.message"), None)
    check(first is not None, f"no user.message in the listed events: {[e.type for e in listed]}")
    end = next((i for i, e in enumerate(listed) if e.type == "session.status_idle"
                and e.stop_reason.type != "requires_action"), None)
    check(end is not None, f"the listed events hold no end of the turn: {[e.type for e in listed]}")
    turn = listed[first:end + 1]
    eq([(e.id, e.type) for e in streamed], [(e.id, e.type) for e in turn],
       "the streamed transcript (ids, types) vs the listed one from the user.message to the end of the turn")
    eq(turn[-1].stop_reason.type, "end_turn", "the turn's stop reason")

    eq([texts(e) for e in turn if e.type == "agent.message"], [FIRST, ANSWER], "what the agent said")
    calls = [e for e in turn if e.type == "agent.tool_use"]
    eq([(c.name, c.input.get("file_path")) for c in calls], [("read", f"{mount}/hello.md"), ("write", f"{mount}/learned.md")],
       "the agent's tool calls")
    eq([c.evaluated_permission for c in calls], ["allow", "allow"], "evaluated_permission of the calls")
    results = {e.tool_use_id: e for e in turn if e.type == "user.tool_result"}
    eq(sorted(results), sorted(c.id for c in calls), "one user.tool_result per call")
    read_result = results[calls[0].id]
    check(not read_result.is_error and HELLO.strip() in texts(read_result),
          f"the read result carries the memory: {short(read_result.content, 300)}")
    check(not results[calls[1].id].is_error, f"the write succeeded: {short(results[calls[1].id].content, 300)}")

    starts = [e for e in turn if e.type == "span.model_request_start"]
    ends = [e for e in turn if e.type == "span.model_request_end"]
    eq(len(starts), 3, "model calls started")
    eq([e.model_request_start_id for e in ends], [s.id for s in starts], "each model call start closed by its end")
    check(all(not e.is_error and e.model_usage.output_tokens > 0 for e in ends), f"usage per call: {short(ends, 400)}")
    session = fx.client.beta.sessions.retrieve(session_id)
    eq(session.usage.output_tokens, sum(e.model_usage.output_tokens for e in ends), "the session's output tokens")
    eq(session.usage.input_tokens, sum(e.model_usage.input_tokens for e in ends), "the session's input tokens")
    eq(session.status, "idle", "the session's status")


def check_model_requests(requests: List[Dict[str, Any]], mount: str) -> None:
    eq(len(requests), 3, "requests the model received")
    second = str(requests[1]["body"])
    check(SYSTEM in second, "the agent's system prompt reached the model")
    check(mount in second, "the memory prompt naming the mount reached the model")
    check(QUESTION in second, "the user's message reached the model")
    check(HELLO.strip() in second, "the read result reached the model")
    check(LEARNED.strip() not in second and LEARNED.strip() in str(requests[2]["body"]),
          "the write call reached the model with the third request")


def test_the_loop_with_mnemo_worker_on_an_openai_compatible_model(fx):
    run_scenario(fx, "mnemo", "qwen-fake")


def test_the_loop_with_the_sdk_environment_worker_on_an_anthropic_model(fx):
    run_scenario(fx, "sdk", "claude-fake")
