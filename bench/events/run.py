"""Session-event round trips through `mnemo serve`: the agent side posts an `agent.tool_use`, the
worker answers it with a `user.tool_result` (sessions token), one after the other — the path
every tool call of a session takes through the event log and its state machine.

    python3 bench/events/run.py BINARY [BINARY ...] [--pairs 500] [--rounds 3]

Each binary gets a fresh server and database per round; binaries alternate within a round.
Prints pairs per second and latency percentiles per run (standard library only).
"""
import argparse
import base64
import http.client
import json
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent.parent / "compat"))  # the shared launcher
from mnemo_serve import MnemoServe  # noqa: E402


class Conn:
    """One keep-alive HTTP/1.1 connection with one credential."""

    def __init__(self, base, headers):
        host, port = base.removeprefix("http://").split(":")
        self.http = http.client.HTTPConnection(host, int(port))
        self.headers = {"content-type": "application/json", **headers}

    def call(self, method, path, body=None):
        self.http.request(method, path, body=None if body is None else json.dumps(body), headers=self.headers)
        resp = self.http.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:200]!r}")
        return json.loads(data) if data else None


# Operator keys have at least 32 characters; a fresh one per run.
KEY = "sk-bench-" + secrets.token_hex(16)


def serve(binary, folder):
    server = MnemoServe(binary, Path(folder), KEY, database=f"sqlite://{folder}/db.sqlite", name="events")
    server.start()
    return server


def run(binary, pairs):
    with tempfile.TemporaryDirectory() as folder:
        server = serve(binary, folder)
        base = server.base_url
        try:
            api = Conn(base, {"x-api-key": KEY})
            agent = api.call("POST", "/v1/agents", {"name": "a", "model": "m", "tools": [{"type": "agent_toolset_20260401"}]})
            env = api.call("POST", "/v1/environments", {"name": "e"})
            key = api.call("POST", f"/v1/environments/{env['id']}/keys")["key"]
            session = api.call("POST", "/v1/sessions", {"agent": agent["id"], "environment_id": env["id"]})
            worker = Conn(base, {"authorization": f"Bearer {key}"})
            work = worker.call("GET", f"/v1/environments/{env['id']}/work/poll")
            worker.call("POST", f"/v1/environments/{env['id']}/work/{work['id']}/ack")
            token = json.loads(base64.urlsafe_b64decode(work["secret"] + "==="))["sessions_token"]
            sandbox = Conn(base, {"authorization": f"Bearer {token}"})
            path = f"/v1/sessions/{session['id']}/events"
            latencies = []
            started = time.perf_counter()
            for _ in range(pairs):
                t0 = time.perf_counter()
                call = api.call("POST", path, {"events": [{"type": "agent.tool_use", "name": "read", "input": {"file_path": "x"}}]})
                result = {"type": "user.tool_result", "tool_use_id": call["data"][0]["id"], "content": [{"type": "text", "text": "ok"}]}
                sandbox.call("POST", path, {"events": [result]})
                latencies.append(time.perf_counter() - t0)
            elapsed = time.perf_counter() - started
            latencies.sort()
            return pairs / elapsed, statistics.median(latencies) * 1e3, latencies[int(pairs * 0.99)] * 1e3
        finally:
            server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--pairs", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rates = {b: [] for b in args.binaries}
    for round_ in range(args.rounds):
        for binary in args.binaries:
            rate, p50, p99 = run(binary, args.pairs)
            rates[binary].append(rate)
            print(f"round {round_} {binary}: {rate:.0f} pairs/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms", flush=True)
    for binary, r in rates.items():
        print(f"median {binary}: {statistics.median(r):.0f} pairs/s")


if __name__ == "__main__":
    main()
