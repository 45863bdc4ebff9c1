"""`compat/fake_model.py` (the scripted model fake other compat tests start) checked against the
official SDK: its Anthropic SSE stream is read by `client.messages.stream(...)` and its errors
raise the SDK's own exception classes, so the fake speaks the real wire format.

* `test_fake_model_streams_text_and_tool_calls`: a reply with text and two tool calls; the SDK's
  final message holds the same blocks (tool inputs assembled from `input_json_delta`s), the
  stop reason and usage; the request log shows what the SDK sent.
* `test_fake_model_caches_marked_prefixes`: the same long system prompt with `cache_control`
  twice: the second call reads from the cache what the first wrote; without `cache_control`
  nothing is read.
* `test_fake_model_errors_raise_the_sdk_exceptions`: 429 (with `retry-after`), 529, 500, 400, and
  an `error` event mid-stream.
* `test_fake_model_openai_stream`: the OpenAI format, read by hand (no OpenAI SDK here).
* `test_fake_model_counts_a_closed_stream`: a client closing a slow stream is counted (`/_stats`).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import anthropic

from compat_lib import OWN, check, eq
from compat_lib import FakeModel as Fake

SERVER = OWN


def test_fake_model_streams_text_and_tool_calls(fx):
    fake = Fake()
    fake.script([{
        "text": "Reading the notes first.",
        "tool_calls": [{"name": "read", "input": {"path": "/mnt/memory/notes/a.md"}},
                       {"name": "write", "input": {"path": "/mnt/memory/notes/b.md", "content": "ünïcode"}}],
    }])
    tools = [{"name": n, "description": n, "input_schema": {"type": "object"}} for n in ("read", "write")]
    with fake.client().messages.stream(model="claude-fake", max_tokens=100, tools=tools,
                                       messages=[{"role": "user", "content": "hi"}]) as s:
        msg = s.get_final_message()
    eq([b.type for b in msg.content], ["text", "tool_use", "tool_use"], "block types")
    eq(msg.content[0].text, "Reading the notes first.", "text")
    eq(msg.content[1].input, {"path": "/mnt/memory/notes/a.md"}, "first tool input")
    eq(msg.content[2].input, {"path": "/mnt/memory/notes/b.md", "content": "ünïcode"}, "second tool input")
    eq(msg.stop_reason, "tool_use", "stop reason")
    check(msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0, f"usage {msg.usage}")
    reqs = fake.call("GET", "/_requests")
    eq(len(reqs), 1, "requests recorded")
    eq(reqs[0]["path"], "/v1/messages", "path")
    hdrs = reqs[0]["headers"]
    check("fake-key" in (hdrs.get("x-api-key"), hdrs.get("authorization", "").removeprefix("Bearer ")),
          f"the key reached the fake (x-api-key or authorization): {sorted(hdrs)}")
    check(hdrs.get("anthropic-version"), "anthropic-version header")
    eq(reqs[0]["body"]["stream"], True, "stream flag")
    eq([t["name"] for t in reqs[0]["body"]["tools"]], ["read", "write"], "tools sent")


def test_fake_model_caches_marked_prefixes(fx):
    fake = Fake()
    fake.script([{"text": "a"}, {"text": "b"}, {"text": "c"}])
    client = fake.client()
    long = "You keep careful notes. " * 300

    def usage(marked: bool) -> Any:
        block: Any = {"type": "text", "text": long}
        if marked:
            block["cache_control"] = {"type": "ephemeral"}
        with client.messages.stream(model="claude-fake", max_tokens=10, system=[block],
                                    messages=[{"role": "user", "content": "hi"}]) as s:
            return s.get_final_message().usage

    u0 = usage(False)
    eq(u0.cache_read_input_tokens, 0, "nothing cached without cache_control")
    u1 = usage(True)
    eq(u1.cache_read_input_tokens, 0, "first marked call reads nothing")
    check(u1.cache_creation_input_tokens > 1000, f"first marked call writes the system prompt: {u1}")
    u2 = usage(True)
    eq(u2.cache_read_input_tokens, u1.cache_creation_input_tokens, "second call reads what the first wrote")
    eq(u2.cache_creation_input_tokens, 0, "second call writes nothing new")


def test_fake_model_errors_raise_the_sdk_exceptions(fx):
    fake = Fake()
    fake.script([
        {"error": {"status": 429, "retry_after": "7", "message": "slow down"}},
        {"error": {"status": 529, "message": "Overloaded"}},
        {"error": {"status": 500, "message": "boom"}},
        {"error": {"status": 400, "message": "messages: roles must alternate"}},
        {"stream_error": "overloaded_error"},
    ])
    client = fake.client()
    for cls, status in ((anthropic.RateLimitError, 429), (anthropic.OverloadedError, 529),
                        (anthropic.InternalServerError, 500), (anthropic.BadRequestError, 400)):
        try:
            client.messages.create(model="claude-fake", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        except cls as e:
            eq(e.status_code, status, "status")
            if status == 429:
                eq(e.response.headers.get("retry-after"), "7", "retry-after")
            if status == 400:
                eq(e.body["error"]["message"], "messages: roles must alternate", "message")
        else:
            raise AssertionError(f"no {cls.__name__}")
    try:
        with client.messages.stream(model="claude-fake", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as s:
            s.get_final_message()
    except anthropic.APIStatusError as e:
        check("overloaded_error" in str(e.body), f"the error event reached the SDK: {e.body}")
    else:
        raise AssertionError("no error from an error event mid-stream")


def test_fake_model_openai_stream(fx):
    fake = Fake()
    fake.script([{"text": "Hi there", "tool_calls": [{"name": "bash", "input": {"command": "ls"}}]}])
    req = urllib.request.Request(fake.url + "/v1/chat/completions", method="POST",
                                 data=json.dumps({"model": "m", "stream": True, "messages": []}).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        lines = [ln[6:] for ln in r.read().decode().splitlines() if ln.startswith("data: ")]
    eq(lines[-1], "[DONE]", "ends with [DONE]")
    chunks = [json.loads(ln) for ln in lines[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    args = "".join(tc["function"].get("arguments", "") for c in chunks if c["choices"]
                   for tc in c["choices"][0]["delta"].get("tool_calls", []))
    eq(text, "Hi there", "text")
    eq(json.loads(args), {"command": "ls"}, "tool arguments")
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    eq(finish, ["tool_calls"], "finish reason")
    check(chunks[-1]["usage"]["prompt_tokens"] >= 0, "usage chunk")


def test_fake_model_counts_a_closed_stream(fx):
    import http.client
    import time

    fake = Fake()
    fake.script([{"text": "a slow answer, frame by frame", "chunk_delay_ms": 100}])
    host, port = fake.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("POST", "/v1/messages", body=json.dumps({"model": "m", "max_tokens": 5, "stream": True, "messages": []}),
                 headers={"content-type": "application/json"})
    resp = conn.getresponse()
    check(b"message_start" in resp.readline() + resp.readline(), "the first frame arrived")
    resp.close()
    conn.close()
    deadline = time.monotonic() + 20
    while fake.call("GET", "/_stats")["cancelled"] < 1:
        check(time.monotonic() < deadline, "the fake never saw the client close the stream")
        time.sleep(0.05)
