"""A scripted fake of the model APIs for the compat suite (standard library only).

    python compat/fake_model.py [--script FILE]

Listens on 127.0.0.1:0 and prints `listening on http://127.0.0.1:PORT` (then serves until
killed).  It has the semantics of `mnemo_model::testing::FakeModelServer`:

* `POST /v1/messages`: the Anthropic Messages API's SSE stream; `POST /v1/chat/completions`
  (and `/chat/completions`): the OpenAI chat completions SSE stream.  Each request takes the
  next reply of the script; an empty script answers 400 "the script is empty".
* A reply is a JSON object: `text` (str), `tool_calls` ([{"name", "input", "id"?}]),
  `stop_reason`, `chunk_delay_ms` (pause before each frame after the first),
  `cut_after_frames` (end the body after that many SSE frames), `error`
  ({"status", "retry_after"?, "message"}: an HTTP error instead of a stream), `stream_error`
  (an error type: a 200 stream whose first frame is followed by an error event of that type).
* The script: a JSON list of replies, from `--script FILE` and/or `POST /_script` (appends).
* `GET /_requests`: every request received, `[{"path", "headers", "body"}]`, in order.
  `GET /_stats`: `{"cancelled": N}`, the streams the client closed before their end.
  `POST /_reset`: empties the script, the requests and the cache.
* Prefix caching for the Anthropic format, as the Rust fake: blocks in cache order (tools,
  system blocks, content blocks), each JSON without `cache_control`; a block with
  `cache_control` is a breakpoint whose prefix is written; a request reads the longest written
  prefix ending at one of its breakpoints or up to 20 block boundaries before one; tokens are
  bytes / 4 rounded up.  OpenAI replies report `cached_tokens: 0`.
* `POST /v1/embeddings` (OpenAI-compatible, for semantic memory search): deterministic vectors
  of 64 numbers with some meaning, as `mnemo_model::fake_embeddings`: each word adds 1 to one
  coordinate, the words of one `CONCEPTS` group sharing it (`postgres` and `database` point the
  same way), any other word on a coordinate picked by its hash.  Not scripted and not in
  `/_requests` (`/_stats` counts them as `embeddings`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

LOCK = threading.Lock()
SCRIPT: List[Dict[str, Any]] = []
REQUESTS: List[Dict[str, Any]] = []
CACHE: set = set()
STATS = {"cancelled": 0, "embeddings": 0}
DIMENSIONS = 64
CONCEPTS = [
    ["database", "databases", "db", "postgres", "postgresql", "sqlite", "mysql", "sql"],
    ["editor", "vim", "neovim", "emacs", "vscode", "ide"],
    ["lunch", "dinner", "food", "pizza", "restaurant", "meal"],
    ["deploy", "deployment", "release", "rollout", "ship"],
    ["cat", "cats", "kitten", "pet", "dog", "dogs"],
]


def embedding(text: str) -> List[float]:
    """The fake's vector for `text` (not of unit length)."""
    v = [0.0] * DIMENSIONS
    word = ""
    for ch in text + " ":
        if ch.isalnum():
            word += ch.lower()
            continue
        if word:
            at = next((i for i, group in enumerate(CONCEPTS) if word in group), None)
            if at is None:
                at = len(CONCEPTS) + int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big") % (DIMENSIONS - len(CONCEPTS))
            v[at] += 1.0
            word = ""
    if not any(v):
        v[-1] = 1.0
    return v


def dumps(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def tokens(n: int) -> int:
    return (n + 3) // 4


def pieces(s: str, n: int) -> List[str]:
    return [s[i : i + n] for i in range(0, len(s), n)] or [""]


def prompt_blocks(body: Dict[str, Any]) -> List[Tuple[str, bool]]:
    def strip(v: Any) -> Tuple[str, bool]:
        if isinstance(v, dict) and "cache_control" in v:
            v = {k: x for k, x in v.items() if k != "cache_control"}
            return dumps(v), True
        return dumps(v), False

    out = [strip(t) for t in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str):
        out.append((dumps(system), False))
    elif isinstance(system, list):
        out.extend(strip(b) for b in system)
    for m in body.get("messages") or []:
        role = m.get("role", "")
        content = m.get("content")
        if isinstance(content, str):
            out.append((f"{role}:{dumps(content)}", False))
        elif isinstance(content, list):
            for b in content:
                s, bp = strip(b)
                out.append((f"{role}:{s}", bp))
    return out


def cache_usage(body: Dict[str, Any]) -> Tuple[int, int, int]:
    """(input, cache_read, cache_creation) tokens; writes the request's breakpoints."""
    blocks = prompt_blocks(body)
    h = hashlib.sha256(str(body.get("model", "")).encode())
    hashes = [h.hexdigest()]
    sizes = [0]
    for s, _ in blocks:
        h.update(b"\0" + s.encode())
        hashes.append(h.hexdigest())
        sizes.append(sizes[-1] + len(s.encode()))
    bps = [i + 1 for i, (_, bp) in enumerate(blocks) if bp]
    read = 0
    with LOCK:
        for bp in bps:
            for k in range(bp, max(bp - 20, 1) - 1, -1):
                if hashes[k] in CACHE:
                    read = max(read, k)
                    break
        for bp in bps:
            CACHE.add(hashes[bp])
    last = max(bps[-1] if bps else 0, read)
    return tokens(sizes[-1] - sizes[last]), tokens(sizes[read]), tokens(sizes[last] - sizes[read])


def frame(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {dumps(data)}\n\n".encode()


def anthropic_frames(reply: Dict[str, Any], n: int, usage: Tuple[int, int, int]) -> List[bytes]:
    text = reply.get("text")
    calls = reply.get("tool_calls") or []
    out_tokens = max(1, tokens(len((text or "").encode()) + sum(len(dumps(c.get("input", {}))) for c in calls)))
    f = [
        frame(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_fake_{n}", "type": "message", "role": "assistant", "model": "fake",
                    "content": [], "stop_reason": None, "stop_sequence": None,
                    "usage": {"input_tokens": usage[0], "output_tokens": 1,
                              "cache_read_input_tokens": usage[1], "cache_creation_input_tokens": usage[2]},
                },
            },
        )
    ]
    index = 0
    if text is not None:
        f.append(frame("content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}))
        f.append(frame("ping", {"type": "ping"}))
        for p in pieces(text, 8):
            f.append(frame("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}))
        f.append(frame("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for i, c in enumerate(calls):
        cid = c.get("id") or f"toolu_fake_{n}_{i}"
        f.append(frame("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": {"type": "tool_use", "id": cid, "name": c["name"], "input": {}}}))
        for p in pieces(dumps(c.get("input", {})), 7):
            f.append(frame("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "input_json_delta", "partial_json": p}}))
        f.append(frame("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    stop = reply.get("stop_reason") or ("tool_use" if calls else "end_turn")
    f.append(frame("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": out_tokens}}))
    f.append(frame("message_stop", {"type": "message_stop"}))
    return f


def openai_frames(reply: Dict[str, Any], n: int, body: Dict[str, Any]) -> List[bytes]:
    cid = f"chatcmpl-fake-{n}"

    def chunk(delta: Any, finish: Any = None) -> bytes:
        return f"data: {dumps({'id': cid, 'object': 'chat.completion.chunk', 'model': 'fake', 'choices': [{'index': 0, 'delta': delta, 'finish_reason': finish}]})}\n\n".encode()

    text = reply.get("text")
    calls = reply.get("tool_calls") or []
    f = [chunk({"role": "assistant", "content": ""})]
    for p in pieces(text, 8) if text is not None else []:
        f.append(chunk({"content": p}))
    for i, c in enumerate(calls):
        call_id = c.get("id") or f"call_fake_{n}_{i}"
        for j, p in enumerate(pieces(dumps(c.get("input", {})), 7)):
            tc = ({"index": i, "id": call_id, "type": "function", "function": {"name": c["name"], "arguments": p}}
                  if j == 0 else {"index": i, "function": {"arguments": p}})
            f.append(chunk({"tool_calls": [tc]}))
    f.append(chunk({}, reply.get("stop_reason") or ("tool_calls" if calls else "stop")))
    prompt = tokens(len(dumps(body.get("messages", []))) + len(dumps(body.get("tools", []))))
    completion = max(1, tokens(len((text or "").encode())))
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
             "prompt_tokens_details": {"cached_tokens": 0}}
    f.append(f"data: {dumps({'id': cid, 'object': 'chat.completion.chunk', 'model': 'fake', 'choices': [], 'usage': usage})}\n\n".encode())
    f.append(b"data: [DONE]\n\n")
    return f


ERROR_TYPES = {429: "rate_limit_error", 529: "overloaded_error", 401: "authentication_error", 404: "not_found_error"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def send_json(self, status: int, value: Any, headers: Optional[Dict[str, str]] = None) -> None:
        data = dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        with LOCK:
            if self.path == "/_requests":
                return self.send_json(200, REQUESTS)
            if self.path == "/_stats":
                return self.send_json(200, STATS)
        self.send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"null")
        except ValueError as e:
            return self.send_json(400, {"error": {"message": f"not JSON: {e}"}})
        if self.path == "/_script":
            if not isinstance(body, list):
                return self.send_json(400, {"error": {"message": "the script is a JSON list of replies"}})
            with LOCK:
                SCRIPT.extend(body)
            return self.send_json(200, {"queued": len(SCRIPT)})
        if self.path in ("/v1/embeddings", "/embeddings"):
            texts = body.get("input") if isinstance(body, dict) else None
            texts = [texts] if isinstance(texts, str) else texts
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                return self.send_json(400, {"error": {"message": "input: a string or a list of strings"}})
            with LOCK:
                STATS["embeddings"] += len(texts)
            data = [{"object": "embedding", "index": i, "embedding": embedding(t)} for i, t in enumerate(texts)]
            return self.send_json(200, {"object": "list", "data": data, "model": body.get("model")})
        if self.path == "/_reset":
            with LOCK:
                SCRIPT.clear(), REQUESTS.clear(), CACHE.clear()
                STATS["cancelled"] = 0
                STATS["embeddings"] = 0
            return self.send_json(200, {})
        anthropic = self.path == "/v1/messages"
        if not anthropic and self.path not in ("/v1/chat/completions", "/chat/completions"):
            return self.send_json(404, {"error": {"message": f"no route {self.path}"}})
        with LOCK:
            REQUESTS.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
            n = len(REQUESTS)
            reply = SCRIPT.pop(0) if SCRIPT else {"error": {"status": 400, "message": "fake_model: the script is empty"}}
        err = reply.get("error")
        if err:
            status = int(err["status"])
            kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
            message = err.get("message", "")
            payload = ({"type": "error", "error": {"type": kind, "message": message}} if anthropic
                       else {"error": {"message": message, "type": kind, "code": None}})
            headers = {"retry-after": str(err["retry_after"])} if err.get("retry_after") is not None else {}
            return self.send_json(status, payload, headers)
        frames = anthropic_frames(reply, n, cache_usage(body)) if anthropic else openai_frames(reply, n, body)
        kind = reply.get("stream_error")
        if kind and anthropic:
            frames = [frames[0], frame("error", {"type": "error", "error": {"type": kind, "message": "injected by the fake"}})]
        elif kind:
            frames = [frames[0], f"data: {dumps({'error': {'message': 'injected by the fake', 'type': kind, 'code': 500}})}\n\n".encode()]
        total = len(frames)
        cut = reply.get("cut_after_frames")
        if cut is not None:
            frames = frames[: int(cut)]
        delay = float(reply.get("chunk_delay_ms") or 0) / 1000.0
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for i, f in enumerate(frames):
                if i and delay:
                    time.sleep(delay)
                self.wfile.write(f)
                self.wfile.flush()
            if len(frames) < total:
                return
        except (BrokenPipeError, ConnectionResetError):
            with LOCK:
                STATS["cancelled"] += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--script", help="a JSON file holding a list of replies")
    args = ap.parse_args()
    if args.script:
        with open(args.script, encoding="utf-8") as fh:
            SCRIPT.extend(json.load(fh))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
