"""Two replicas on one PostgreSQL schema, driven end to end (postgres mode only).

`MNEMO_COMPAT_DATABASE=postgres` only: with SQLite every test here is reported as `SKIP`.  The
module starts its own pair of `$MNEMO_BIN serve` processes — replica A and replica B, each on
127.0.0.1 with an ephemeral port, both on ONE fresh schema, started at the same moment (so the
migrations and the `--api-key` registration race) with

    --max-memories-per-store 5  --work-lease-ttl 3  --memory-mount-root <area>/mnt/memory
    --pg-connect-timeout 2

The pair is shared by the tests below (in this order) and stopped by the last one (or at the end
of the run); a test that finds a replica dead starts a fresh pair on a fresh schema.

* `test_worker_on_a_serves_a_session_driven_through_b` — the SDK's `EnvironmentWorker.run()`
  (driven as in test_worker.py) polls A; the store, agent, environment and key are created
  through B, and the session too, *after* the worker's first poll was answered (B's enqueue
  must reach A's long polls); the agent's calls (write, read, bash) and the end of the turn go
  through B, the worker's results go through A (every HTTP exchange of the worker is checked
  to be A's) and are read through B; the item reaches `stopped`, the mount is removed, the loop
  ends only through cancellation, and the memory the session wrote carries its
  `session_actor`.
* `test_event_stream_on_a_follows_appends_through_b` — an SDK event stream
  (`client.beta.sessions.events.stream`) on A; 100 `agent.message` events posted one at a time
  through B (10 ms apart).  The stream must carry exactly the session's events (as B lists
  them) after a warm-up event, in order, none missing, none twice.  Delivery latency (from just
  before the POST through B to the arrival on A) is printed as p50/p99/max; p99 must be under
  1 s.
* `test_overlapping_paths_race_across_replicas` — 8 SDK clients (4 on A, 4 on B) start each
  wave together (a barrier): one family `/a`, `/a/b`, `/a/b/c` (with duplicates), 8 creates of
  one path, and two families at once; 5 rounds, a fresh store each.  Exactly one create per
  family succeeds; every other one is a 409 `memory_path_conflict_error` naming the winner;
  the store then holds exactly the winners.
* `test_capacity_race_across_replicas` — the same 8 clients race 16 creates of distinct paths
  into an empty store capped at 5 (exactly 5 succeed, the rest are 400
  `invalid_request_error`), and 8 creates into a store holding 4 (exactly 1 succeeds).
* `test_revoked_key_is_refused_by_the_other_replica` — an environment key minted through A is
  accepted by B (so B has seen it), revoked through A; A refuses it at once and B within 1 s
  (and keeps refusing it).
* `test_database_restart_under_writes` — 4 writers (2 per replica, SDK clients with
  `max_retries=8`) create stores and memories while PostgreSQL restarts
  (`MNEMO_COMPAT_PG_RESTART`; by default `.ci/postgres restart` when MNEMO_TEST_POSTGRES is that
  throw-away cluster, else the test is skipped; `none` skips it too — the restart disturbs
  everything else using that server).
  Every HTTP response the writers get is recorded: requests during the outage must fail as 503
  with `retry-after` and `x-should-retry: true` (at least one must, or the outage was not
  observed), no other error status is allowed except a 409 on a retried create (its first
  attempt landed); a write may be given up after its retries only with a 503 before the restart
  command returned (+1 s); both replicas must acknowledge writes again within 10 s of the restart,
  then answer 10 requests each without any retry.  Meanwhile a stream on A stays open (an SSE
  client that reopens with `Last-Event-ID` if it ends) while an event is posted through B every
  50 ms (plain HTTP: each answer is a 200 or a 503 with `retry-after`): it must carry every
  acknowledged event, in the session's order, none twice (the listener reconnected).  Every acknowledged store and memory is read back
  through the other replica.
* `test_killed_replica_lease_expires_and_item_is_redelivered` — a long poll on A is in flight
  when the session is created through B: it must return the item (not come back empty at the end
  of its 999 ms).  The item is acked and heartbeated through A, A is killed with SIGKILL; B still serves (health, reads, writes); B's
  polls deliver nothing while the lease holds and the same item once the 3 s lease lapses (within
  the TTL plus 5 s); the old sessions token is then dead.

The whole module takes about 30-40 s.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import anthropic

import compat_lib
from compat_lib import (
    AGENTS_BETA,
    ANTHROPIC_VERSION,
    OWN,
    POSTGRES,
    Skip,
    check,
    eq,
    has_prefix,
    http,
    short,
)
from run import Server as _RunnerServer
from test_worker import Diagnostics, Driver, Setup, WorkerThread, decoded_secret

SERVER = OWN
ONLY_BACKEND = (POSTGRES, "two replicas need a shared PostgreSQL schema (run with MNEMO_COMPAT_DATABASE=postgres)")

CAP = 5
LEASE_TTL = 3
MAX_IDLE = 2.0
HERE = Path(__file__).resolve().parent


def note(line: str) -> None:
    print(f"# replicas: {line}", flush=True)


# --------------------------------------------------------------------------------------
# The pair.
# --------------------------------------------------------------------------------------


class Replica(_RunnerServer):
    def __init__(self, binary: str, name: str, workdir: Path, api_key: str, database: str, mount_root: Path):
        super().__init__(binary, name, workdir, api_key, database)
        self.mount_root = mount_root

    def extra_args(self) -> List[str]:
        return [
            "--max-memories-per-store",
            str(CAP),
            "--work-lease-ttl",
            str(LEASE_TTL),
            "--memory-mount-root",
            str(self.mount_root),
            "--pg-connect-timeout",
            "2",
        ]

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


def mnemo_binary() -> str:
    binary = os.environ.get("MNEMO_BIN", "").strip()
    check(binary, "MNEMO_BIN must name the mnemo binary")
    path = Path(binary)
    if not path.is_file():
        found = shutil.which(binary)
        check(found is not None, f"MNEMO_BIN={binary!r} is not an executable file")
        path = Path(found)  # type: ignore[arg-type]
    return str(path.resolve())


class Pair:
    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.area = Path(tempfile.mkdtemp(prefix="mnemo-replicas-")).resolve()
        self.mount_root = self.area / "mnt" / "memory"
        self.mount_root.mkdir(parents=True)
        self.api_key = "sk-replicas-" + secrets.token_hex(16)
        self.database = compat_lib.new_schema_url("replicas")
        binary = mnemo_binary()
        self.a = Replica(binary, "replica-A", self.area / "A", self.api_key, self.database, self.mount_root)
        self.b = Replica(binary, "replica-B", self.area / "B", self.api_key, self.database, self.mount_root)
        self._clients: List[Any] = []
        errors: Dict[str, str] = {}

        def start(r: Replica) -> None:
            try:
                r.start(30)
            except Exception as err:  # noqa: BLE001
                errors[r.config] = str(err)

        threads = [threading.Thread(target=start, args=(r,)) for r in (self.a, self.b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            tails = "\n".join(f"{r.config}:\n{r.stderr_tail(15)}" for r in (self.a, self.b))
            self.stop()
            raise AssertionError(f"replicas did not start: {errors}\n{tails}")
        note(f"A at {self.a.base_url}, B at {self.b.base_url}, one schema ({self.database.split('?')[1]})")

    def alive(self) -> bool:
        return self.a.alive() and self.b.alive()

    def fx(self, replica: Replica, **client_kwargs: Any) -> compat_lib.Fixture:
        f = compat_lib.Fixture(replica.base_url, self.api_key, self.timeout)
        if client_kwargs:
            f.client.close()
            f.client = f.make_client(**client_kwargs)
        self._clients.append(f.client)
        return f

    def tails(self) -> None:
        for r in (self.a, self.b):
            print(f"# --- {r.config} log (tail) ---", flush=True)
            print(r.stderr_tail(25), flush=True)

    def stop(self) -> None:
        for c in self._clients:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass
        self._clients.clear()
        for r in (self.a, self.b):
            r.stop()
        shutil.rmtree(self.area, ignore_errors=True)


_PAIR: Optional[Pair] = None


def _stop_pair() -> None:
    global _PAIR
    if _PAIR is not None:
        _PAIR.stop()
        _PAIR = None


def replicas(fx: Any) -> Pair:
    """The running pair (a fresh one if there is none or a replica died)."""
    global _PAIR
    compat_lib.at_end(_stop_pair)
    if _PAIR is not None and not _PAIR.alive():
        note("a replica of the previous pair is gone; starting a fresh pair")
        _stop_pair()
    if _PAIR is None:
        _PAIR = Pair(fx.timeout)
    return _PAIR


def with_logs(pair: Pair, body: Callable[[], None]) -> None:
    try:
        body()
    except BaseException:
        pair.tails()
        raise


def agents_headers(key: str) -> Dict[str, str]:
    return {
        "Authorization": f"Bearer {key}",
        "anthropic-version": ANTHROPIC_VERSION,
        "anthropic-beta": AGENTS_BETA,
        "content-type": "application/json",
    }


def percentile(values: List[float], p: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


# --------------------------------------------------------------------------------------
# (a) The SDK worker on A, the session on B.
# --------------------------------------------------------------------------------------

SEED = "seeded through replica B\n"
NOTE = "written by the worker polling replica A\n"


def test_worker_on_a_serves_a_session_driven_through_b(fx):
    pair = replicas(fx)
    with_logs(pair, lambda: _worker_scenario(pair))


def _worker_scenario(pair: Pair) -> None:
    a, b = pair.fx(pair.a), pair.fx(pair.b)
    tag = uuid.uuid4().hex[:8]
    store = b.new_store(name=f"Replica Notes {tag}")
    b.new_memory(store.id, "/seed.md", SEED)
    setup = Setup(b, tag)
    env = setup.env
    workdir = pair.area / f"workdir-{tag}"
    workdir.mkdir()

    diag = Diagnostics()
    sdk_log = logging.getLogger("anthropic")
    old_level = sdk_log.level
    sdk_log.addHandler(diag)
    sdk_log.setLevel(logging.DEBUG)
    # The SDK's whole loop (`EnvironmentWorker.run()`): it polls A until cancelled.
    worker = WorkerThread("run", pair.a.base_url, pair.timeout, env.id, setup.key, workdir, diag)
    try:
        worker.start()
        poll_answered = f"<- 200 GET /v1/environments/{env.id}/work/poll"
        deadline = time.monotonic() + 30
        while diag.count(poll_answered) < 1:
            check(worker.is_alive(), f"the worker ended before its first poll (error: {worker.error!r})")
            check(time.monotonic() < deadline, "the worker's first poll on A was not answered within 30s")
            time.sleep(0.05)

        # The session is created through B while the worker polls A.
        created = time.monotonic()
        session = b.client.beta.sessions.create(
            agent=setup.agent.id,
            environment_id=env.id,
            resources=[{"type": "memory_store", "memory_store_id": store.id, "access": "read_write"}],
        )
        (mount,) = [r.mount_path for r in session.resources if r.type == "memory_store"]
        items = [w for w in b.client.beta.environments.work.list(environment_id=env.id) if w.data.id == session.id]
        eq(len(items), 1, "work items of the session, listed through B")
        item = items[0]
        acked = f"<- 200 POST /v1/environments/{env.id}/work/{item.id}/ack"
        deadline = time.monotonic() + 30
        while diag.count(acked) < 1:
            check(worker.is_alive(), f"the worker ended (error: {worker.error!r})")
            check(time.monotonic() < deadline, "the worker polling A did not ack the item within 30s")
            time.sleep(0.01)
        claim_s = time.monotonic() - created

        driver = Driver(b, session.id, worker)  # the agent speaks through B, reads results through B
        note_path = f"{mount}/from-a.md"
        _, is_error, text = driver.call("write", {"file_path": note_path, "content": NOTE})
        eq((is_error, text), (False, f"wrote {len(NOTE)} bytes to {note_path}"), "write result (read through B)")
        _, is_error, text = driver.call("read", {"file_path": f"{mount}/seed.md"})
        eq((is_error, text), (False, SEED), "read of the memory seeded through B")
        _, is_error, text = driver.call("bash", {"command": f"ls {mount}"})
        check(not is_error and {"seed.md", "from-a.md"} <= set(text.split()), f"bash ls {mount}: {text!r}")

        status, body = driver.post_events([{"type": "session.status_idle"}])
        check(status == 200, f"ending the turn through B answered {status}: {short(body, 300)}")
        deadline = time.monotonic() + 60
        while b.client.beta.environments.work.retrieve(item.id, environment_id=env.id).state != "stopped":
            check(worker.is_alive(), f"the worker ended (error: {worker.error!r})")
            check(time.monotonic() < deadline, "the work item did not reach `stopped` within 60s of the turn's end")
            time.sleep(0.1)
        check(not Path(mount).exists(), f"the worker should have removed {mount} at teardown")
        worker.cancel()
        worker.join(30)
        check(not worker.is_alive(), "run() did not end within 30s of being cancelled")
        check(worker.error is None, f"the worker raised: {worker.error!r}")
        check(worker.cancelled, "run() should have ended through the cancellation")
        errors = diag.worker_records(logging.ERROR)
        check(not errors, f"the worker logged errors: {[r.getMessage() for r in errors]}")

        # Every exchange of the worker was with A.
        with diag._mu:
            lines = [line for line in diag.exchanges if " -> " in line]
        check(lines, "no HTTP exchange of the worker was recorded")
        elsewhere = [line for line in lines if pair.a.base_url not in line]
        check(not elsewhere, f"the worker must only talk to A; also: {elsewhere[:3]}")
        results_via_a = [line for line in lines if f"POST {pair.a.base_url}/v1/sessions/{session.id}/events" in line]
        check(results_via_a, "the worker posted no events (tool results) through A")

        for replica_fx, name in ((b, "B"), (a, "A")):
            work = replica_fx.client.beta.environments.work.retrieve(item.id, environment_id=env.id)
            eq(work.state, "stopped", f"the work item's state read through {name}")
        mems = {m.path: m for m in a.list_all_memories(store.id, view="full")}
        eq(sorted(mems), ["/from-a.md", "/seed.md"], "paths in the store (read through A)")
        eq(mems["/from-a.md"].content, NOTE, "the memory the worker wrote")
        latest = b.versions.retrieve(mems["/from-a.md"].memory_version_id, memory_store_id=store.id)
        eq(
            latest.created_by.to_dict() if latest.created_by else None,
            {"type": "session_actor", "session_id": session.id},
            "created_by of the worker's write (read through B)",
        )
        eq(b.client.beta.sessions.retrieve(session.id).status, "idle", "session status through B")
        note(
            f"(a) the SDK worker polling A acked the item of the session created on B after {claim_s * 1000:.0f} ms "
            "(the SDK sleeps 1-3 s after an empty poll)"
        )
    except BaseException:
        if worker.error_text:
            print("# --- the worker's exception ---", flush=True)
            for line in worker.error_text.splitlines()[-20:]:
                print(f"#   {line}", flush=True)
        diag.dump()
        raise
    finally:
        if worker.is_alive():
            worker.cancel()
            worker.join(30)
        sdk_log.removeHandler(diag)
        sdk_log.setLevel(old_level)


# --------------------------------------------------------------------------------------
# (b) An event stream on A follows appends through B.
# --------------------------------------------------------------------------------------

STREAM_EVENTS = 100
STREAM_GAP = 0.01
STREAM_P99_LIMIT = 1.0


class StreamReader(threading.Thread):
    """Reads an SDK event stream in a thread; `received` holds (arrival, id, type, text).

    With `resume`, a stream that ends or breaks is opened again after the last event received
    (`Last-Event-ID`, as an SSE client does), until `close()`; `resumed` counts how often."""

    def __init__(self, client: Any, session_id: str, resume: bool = False) -> None:
        super().__init__(name="compat-sse-reader", daemon=True)
        self.client = client
        self.session_id = session_id
        self.resume = resume
        self.resumed = 0
        self.resume_errors: List[str] = []
        # Returns once the response headers are in: the server has subscribed by then.
        self.stream = client.beta.sessions.events.stream(session_id)
        self.received: List[Tuple[float, str, str, str]] = []
        self.cond = threading.Condition()
        self.error: Optional[BaseException] = None
        self.stopping = False
        self.ended = False

    def _read(self) -> None:
        for ev in self.stream:
            now = time.monotonic()
            text = ""
            for block in getattr(ev, "content", None) or []:
                text += getattr(block, "text", "") or ""
            with self.cond:
                self.received.append((now, getattr(ev, "id", ""), getattr(ev, "type", ""), text))
                self.cond.notify_all()
            if self.stopping:
                return

    def run(self) -> None:
        try:
            while True:
                try:
                    self._read()
                except Exception as err:  # noqa: BLE001
                    if not self.resume or self.stopping:
                        raise
                    self.resume_errors.append(repr(err)[:200])
                if not self.resume or self.stopping:
                    return
                # Ended or broke: open it again after the last event seen.
                while not self.stopping:
                    last = self.ids()[-1:] or [None]
                    headers = {"Last-Event-ID": last[0]} if last[0] else {}
                    try:
                        self.stream = self.client.beta.sessions.events.stream(self.session_id, extra_headers=headers)
                        self.resumed += 1
                        break
                    except Exception as err:  # noqa: BLE001
                        self.resume_errors.append(repr(err)[:200])
                        time.sleep(0.2)
        except BaseException as err:  # noqa: BLE001
            if not self.stopping:
                self.error = err
        finally:
            with self.cond:
                self.ended = True
                self.cond.notify_all()

    def wait_for(self, pred: Callable[[List[Tuple[float, str, str, str]]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred(self.received):
                left = deadline - time.monotonic()
                if left <= 0 or self.ended:
                    return pred(self.received)
                self.cond.wait(min(left, 0.1))
            return True

    def ids(self) -> List[str]:
        with self.cond:
            return [r[1] for r in self.received]

    def close(self) -> None:
        self.stopping = True
        try:
            self.stream.close()
        except Exception:  # noqa: BLE001
            pass


def agent_message(text: str) -> Dict[str, Any]:
    return {"type": "agent.message", "content": [{"type": "text", "text": text}]}


def session_on_new_env(fx: compat_lib.Fixture, tag: str) -> Tuple[Setup, Any]:
    setup = Setup(fx, tag)
    session = fx.client.beta.sessions.create(agent=setup.agent.id, environment_id=setup.env.id)
    return setup, session


def test_event_stream_on_a_follows_appends_through_b(fx):
    pair = replicas(fx)
    with_logs(pair, lambda: _stream_scenario(pair))


def _stream_scenario(pair: Pair) -> None:
    a = pair.fx(pair.a, timeout=30.0)
    b = pair.fx(pair.b)
    tag = uuid.uuid4().hex[:8]
    _, session = session_on_new_env(b, tag)
    driver = Driver(b, session.id)
    reader = StreamReader(a.client, session.id)
    reader.start()
    try:
        status, body = driver.post_events([agent_message(f"warm-up {tag}")])
        check(status == 200, f"posting the warm-up event through B answered {status}: {short(body, 300)}")
        warm_id = body["data"][0]["id"]
        check(
            reader.wait_for(lambda rs: any(r[1] == warm_id for r in rs), 5.0),
            f"the stream on A did not deliver the warm-up event {warm_id} posted through B within 5s "
            f"(stream error: {reader.error!r}; received {[r[1:3] for r in reader.received]})",
        )

        sent: List[Tuple[float, str]] = []
        for i in range(STREAM_EVENTS):
            t0 = time.monotonic()
            status, body = driver.post_events([agent_message(f"seq {i} {tag}")])
            check(status == 200, f"posting event #{i} through B answered {status}: {short(body, 300)}")
            sent.append((t0, body["data"][0]["id"]))
            time.sleep(STREAM_GAP)
        last_id = sent[-1][1]
        got_all = reader.wait_for(lambda rs: any(r[1] == last_id for r in rs), 10.0)
        time.sleep(0.3)  # anything the server appends right after the last one
    finally:
        reader.close()

    received = reader.ids()
    check(
        got_all,
        f"the stream on A did not deliver the last event posted through B within 10s: received "
        f"{sum(1 for i in received if i in {s[1] for s in sent})} of {STREAM_EVENTS} (stream error: {reader.error!r})",
    )
    # What the stream carried after the warm-up must be exactly the session's log after it.
    listed = [e.id for e in b.client.beta.sessions.events.list(session.id, limit=1000)]
    check(warm_id in listed, f"the warm-up event {warm_id} is not in the session's log")
    expected = listed[listed.index(warm_id) + 1 : listed.index(last_id) + 1]
    after = received[received.index(warm_id) + 1 :]
    after = after[: after.index(last_id) + 1] if last_id in after else after
    if after != expected:
        missing = [i for i in expected if i not in after]
        extra = [i for i in after if i not in expected]
        dups = sorted({i for i in after if after.count(i) > 1})
        raise AssertionError(
            f"the stream on A differs from the session's log (read through B) after the warm-up: "
            f"{len(after)} streamed vs {len(expected)} logged; missing {missing[:5]}, unexpected {extra[:5]}, "
            f"twice {dups[:5]}, same set in another order: {sorted(after) == sorted(expected)}"
        )
    sent_ids = [s[1] for s in sent]
    eq([i for i in after if i in set(sent_ids)], sent_ids, "the posted events, in the order they were posted")

    arrival = {r[1]: r[0] for r in reader.received}
    lat = [arrival[i] - t0 for t0, i in sent]
    p50, p99, worst = percentile(lat, 50), percentile(lat, 99), max(lat)
    note(
        f"(b) SSE delivery B -> A over {len(lat)} events: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"max {worst * 1000:.1f} ms (from just before the POST through B to the arrival on A)"
    )
    check(p99 <= STREAM_P99_LIMIT, f"p99 delivery latency {p99 * 1000:.0f} ms exceeds {STREAM_P99_LIMIT * 1000:.0f} ms")


# --------------------------------------------------------------------------------------
# (c) Races across the replicas.
# --------------------------------------------------------------------------------------

RACERS = 8
RACE_ROUNDS = 5


def racing_clients(pair: Pair) -> List[compat_lib.Fixture]:
    return [pair.fx(pair.a if i % 2 == 0 else pair.b) for i in range(RACERS)]


class Outcome:
    def __init__(self, who: int, path: str, mem: Any = None, err: Optional[anthropic.APIStatusError] = None,
                 other: Optional[BaseException] = None) -> None:
        self.who = who
        self.path = path
        self.mem = mem
        self.err = err
        self.other = other

    def error_type(self) -> str:
        if self.err is None:
            return ""
        try:
            return (self.err.response.json().get("error") or {}).get("type", "")
        except ValueError:
            return ""

    def error_field(self, name: str) -> Any:
        try:
            return (self.err.response.json().get("error") or {}).get(name) if self.err is not None else None
        except ValueError:
            return None

    def __repr__(self) -> str:
        where = "A" if self.who % 2 == 0 else "B"
        if self.mem is not None:
            return f"[{self.who}@{where}] {self.path}: created {self.mem.id}"
        if self.err is not None:
            return f"[{self.who}@{where}] {self.path}: {self.err.status_code} {self.error_type()}"
        return f"[{self.who}@{where}] {self.path}: {self.other!r}"


def race(clients: List[compat_lib.Fixture], store_id: str, plan: List[List[str]]) -> List[Outcome]:
    """Client i creates the paths plan[i] in order, all clients released together."""
    barrier = threading.Barrier(len(plan))

    def run(i: int) -> List[Outcome]:
        out = []
        barrier.wait(10)
        for path in plan[i]:
            try:
                mem = clients[i].memories.create(store_id, path=path, content=f"client {i} wrote {path}")
                out.append(Outcome(i, path, mem=mem))
            except anthropic.APIStatusError as err:
                out.append(Outcome(i, path, err=err))
            except Exception as err:  # noqa: BLE001
                out.append(Outcome(i, path, other=err))
        return out

    with ThreadPoolExecutor(max_workers=len(plan)) as pool:
        return [o for part in pool.map(run, range(len(plan))) for o in part]


def overlaps(p: str, q: str) -> bool:
    return p == q or p.startswith(q + "/") or q.startswith(p + "/")


WAVES: List[Tuple[str, List[str]]] = [
    ("one family", ["/a", "/a/b", "/a/b/c", "/a", "/a/b", "/a/b/c", "/a/b", "/a"]),
    ("one path eight times", ["/dup/same.md"] * RACERS),
    ("two families", ["/p", "/r/s", "/p/q", "/r", "/p/q/z", "/r/s/t", "/p", "/r"]),
]


def test_overlapping_paths_race_across_replicas(fx):
    pair = replicas(fx)
    with_logs(pair, lambda: _paths_race(pair))


def _paths_race(pair: Pair) -> None:
    clients = racing_clients(pair)
    reader = pair.fx(pair.a)
    for rnd in range(RACE_ROUNDS):
        store = reader.new_store(name=f"race-{rnd}-{uuid.uuid4().hex[:6]}")
        winners: Dict[str, Any] = {}
        for label, paths in WAVES:
            what = f"round {rnd}, {label}"
            outcomes = race(clients, store.id, [[p] for p in paths])
            # Families: the connected groups of overlapping paths of this wave.
            families: List[List[str]] = []
            for p in dict.fromkeys(paths):
                joined = [f for f in families if any(overlaps(p, q) for q in f)]
                merged = [p] + [q for f in joined for q in f]
                families = [f for f in families if f not in joined] + [merged]
            for fam in families:
                mine = [o for o in outcomes if o.path in fam]
                won = [o for o in mine if o.mem is not None]
                check(len(won) == 1, f"{what}: family {sorted(fam)}: expected exactly one create to succeed, got {mine}")
                winner = won[0].mem
                winners[winner.path] = winner
                for o in mine:
                    if o.mem is not None:
                        continue
                    check(
                        o.err is not None and o.err.status_code == 409 and o.error_type() == "memory_path_conflict_error",
                        f"{what}: a losing create must be a 409 memory_path_conflict_error, got {o} "
                        f"({short(o.err.response.text if o.err is not None else o.other, 300)})",
                    )
                    eq(o.error_field("conflicting_memory_id"), winner.id, f"{what}: {o}: conflicting_memory_id (the winner)")
                    eq(o.error_field("conflicting_path"), winner.path, f"{what}: {o}: conflicting_path (the winner)")
        listed = {m.path: m.id for m in pair.fx(pair.b).list_all_memories(store.id)}
        eq(listed, {p: m.id for p, m in winners.items()}, f"round {rnd}: the store's memories (read through B) = the winners")


def test_capacity_race_across_replicas(fx):
    pair = replicas(fx)
    with_logs(pair, lambda: _capacity_race(pair))


def _capacity_race(pair: Pair) -> None:
    clients = racing_clients(pair)
    a, b = pair.fx(pair.a), pair.fx(pair.b)
    for rnd, prefill in enumerate((0, 0, CAP - 1, CAP - 1)):
        store = a.new_store(name=f"cap-race-{rnd}-{uuid.uuid4().hex[:6]}")
        for i in range(prefill):
            b.new_memory(store.id, f"/pre/{i}.md", "prefilled")
        per_client = 2 if prefill == 0 else 1
        plan = [[f"/race/c{i}-{j}.md" for j in range(per_client)] for i in range(RACERS)]
        outcomes = race(clients, store.id, plan)
        won = [o for o in outcomes if o.mem is not None]
        what = f"round {rnd} ({len(outcomes)} creates into a store holding {prefill}, capped at {CAP})"
        check(len(won) == CAP - prefill, f"{what}: expected exactly {CAP - prefill} to succeed, got {len(won)}: {outcomes}")
        for o in outcomes:
            if o.mem is None:
                check(
                    o.err is not None and o.err.status_code == 400 and o.error_type() == "invalid_request_error",
                    f"{what}: a refused create must be a 400 invalid_request_error, got {o} "
                    f"({short(o.err.response.text if o.err is not None else o.other, 300)})",
                )
        listed = sorted(m.id for m in b.list_all_memories(store.id) if m.path.startswith("/race/"))
        eq(listed, sorted(o.mem.id for o in won), f"{what}: the racing memories the store holds (read through B)")
        eq(len(a.list_all_memories(store.id)), CAP, f"{what}: the store holds exactly the cap (read through A)")


# --------------------------------------------------------------------------------------
# (d) A key revoked through A is refused by B.
# --------------------------------------------------------------------------------------

REVOKE_WITHIN = 1.0


def test_revoked_key_is_refused_by_the_other_replica(fx):
    pair = replicas(fx)
    with_logs(pair, lambda: _revocation(pair))


def _revocation(pair: Pair) -> None:
    a = pair.fx(pair.a)
    tag = uuid.uuid4().hex[:8]
    env = a.client.beta.environments.create(name=f"revoke-{tag}", config={"type": "self_hosted"})
    res = http("POST", f"{pair.a.base_url}/v1/environments/{env.id}/keys", agents_headers(pair.api_key), b"{}")
    check(res.status == 200, f"minting a key through A answered {res.status}: {res.body[:300]!r}")
    key = res.json()
    has_prefix(key.get("id"), "envkey_", "environment key id")
    secret = key["key"]

    def use(replica: Replica) -> int:
        return http("GET", f"{replica.base_url}/v1/environments/{env.id}/work", agents_headers(secret), timeout=10).status

    for replica in (pair.b, pair.a, pair.b):
        eq(use(replica), 200, f"the fresh key listing work through {replica.config}")

    res = http(
        "POST", f"{pair.a.base_url}/v1/environments/{env.id}/keys/{key['id']}/revoke", agents_headers(pair.api_key), b"{}"
    )
    revoked = time.monotonic()
    check(res.status == 200, f"revoking through A answered {res.status}: {res.body[:300]!r}")
    check(res.json().get("revoked_at"), f"the revoked key must carry revoked_at: {res.body[:300]!r}")
    eq(use(pair.a), 401, "the revoked key on A, right after the revocation")

    statuses: List[Tuple[float, int]] = []
    while True:
        status = use(pair.b)
        statuses.append((time.monotonic() - revoked, status))
        if status == 401 or time.monotonic() - revoked > REVOKE_WITHIN + 2:
            break
        time.sleep(0.02)
    took, last = statuses[-1]
    check(
        last == 401 and took <= REVOKE_WITHIN,
        f"B must refuse the key revoked through A within {REVOKE_WITHIN:.0f}s: after {took:.2f}s B answered "
        f"{last} ({len(statuses)} tries, statuses {sorted({s for _, s in statuses})})",
    )
    for _ in range(5):
        eq(use(pair.b), 401, "the revoked key on B, afterwards")
    listed = http("GET", f"{pair.b.base_url}/v1/environments/{env.id}/keys", agents_headers(pair.api_key)).json()
    mine = [k for k in listed.get("data", []) if k.get("id") == key["id"]]
    check(mine and mine[0].get("revoked_at"), f"B lists the key as revoked: {short(listed, 300)}")
    note(f"(d) B refused the key revoked through A after {took * 1000:.0f} ms ({len(statuses)} tries)")


# --------------------------------------------------------------------------------------
# (e) PostgreSQL restarts while both replicas take writes.
# --------------------------------------------------------------------------------------

WRITERS_PER_REPLICA = 2
WRITE_RETRIES = 8
HEAL_WITHIN = 10.0


class Exchange:
    def __init__(self, at: float, replica: str, method: str, path: str, retry_count: str, status: int,
                 headers: Dict[str, str], body: str) -> None:
        self.at = at
        self.replica = replica
        self.method = method
        self.path = path
        self.retry_count = retry_count
        self.status = status
        self.headers = headers
        self.body = body

    def __repr__(self) -> str:
        return (f"{self.replica} {self.method} {self.path} (retry {self.retry_count}) -> {self.status} "
                f"retry-after={self.headers.get('retry-after')!r} x-should-retry={self.headers.get('x-should-retry')!r} "
                f"{self.body[:200]}")


class Writer(threading.Thread):
    def __init__(self, idx: int, pair: Pair, replica: Replica, log: List[Exchange], mu: threading.Lock,
                 stop: threading.Event) -> None:
        super().__init__(name=f"compat-writer-{idx}", daemon=True)
        self.idx = idx
        self.replica = replica
        self.log = log
        self.mu = mu
        self.stop_flag = stop
        self.stores: List[Tuple[str, str, float]] = []  # (id, name, acknowledged at)
        self.memories: List[Tuple[str, str, str, str, float]] = []  # (store, id, path, content, at)
        self.failures: List[Tuple[float, int, str]] = []  # (when, status or 0 for no response, what)
        http_client = anthropic.DefaultHttpxClient(event_hooks={"response": [self.on_response]})
        self.fx = pair.fx(replica, max_retries=WRITE_RETRIES, timeout=20.0, http_client=http_client)

    def on_response(self, response: Any) -> None:
        body = ""
        if response.status_code >= 400:
            try:
                response.read()
                body = response.text
            except Exception as err:  # noqa: BLE001
                body = f"(unreadable: {err!r})"
        headers = {k: response.headers.get(k) for k in ("retry-after", "x-should-retry", "request-id")}
        ex = Exchange(time.monotonic(), self.replica.config[-1], response.request.method, response.request.url.path,
                      response.request.headers.get("x-stainless-retry-count", "?"), response.status_code, headers, body)
        with self.mu:
            self.log.append(ex)

    def run(self) -> None:
        n = 0
        store: Optional[str] = None
        held = 0
        while not self.stop_flag.is_set():
            n += 1
            try:
                if store is None or held >= CAP:
                    name = f"outage-w{self.idx}-{n}"
                    s = self.fx.stores.create(name=name)
                    self.stores.append((s.id, name, time.monotonic()))
                    store, held = s.id, 0
                else:
                    path, content = f"/w{self.idx}/m{n}.md", f"writer {self.idx}, write {n}"
                    m = self.fx.memories.create(store, path=path, content=content)
                    self.memories.append((store, m.id, path, content, time.monotonic()))
                    held += 1
            except anthropic.APIStatusError as err:
                self.failures.append((time.monotonic(), err.status_code, f"{err.status_code} {short(err.body, 200)}"))
                store = None  # its outcome is unknown: go on in a new store
            except anthropic.APIConnectionError as err:
                self.failures.append((time.monotonic(), 0, f"no response: {err!r}"))
                store = None
            time.sleep(0.02)


def restart_command() -> Tuple[Optional[List[str]], str]:
    """The command that restarts the PostgreSQL server behind MNEMO_TEST_POSTGRES, or None and
    why there is none."""
    configured = os.environ.get("MNEMO_COMPAT_PG_RESTART", "").strip()
    if configured == "none":
        return None, "MNEMO_COMPAT_PG_RESTART=none"
    if configured:
        return shlex.split(configured), ""
    # Default: the throw-away cluster of `.ci/postgres`, if that is the one the suite uses.
    script = HERE.parent / ".ci" / "postgres"
    if script.is_file() and os.access(script, os.X_OK):
        try:
            status = subprocess.run([str(script), "status"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            status = None
        ours = status is not None and status.returncode == 0 and status.stdout.strip()
        if ours and urllib.parse.urlsplit(ours).port == urllib.parse.urlsplit(compat_lib.POSTGRES_BASE_URL).port:
            return [str(script), "restart"], ""
    return None, "MNEMO_TEST_POSTGRES is not the running .ci/postgres cluster and MNEMO_COMPAT_PG_RESTART is unset"


def test_database_restart_under_writes(fx):
    command, why = restart_command()
    if command is None:
        raise Skip(f"no way to restart PostgreSQL ({why}); set MNEMO_COMPAT_PG_RESTART to a command that does")
    pair = replicas(fx)
    with_logs(pair, lambda: _restart_scenario(pair, command))


class EventPoster(threading.Thread):
    """Posts one `agent.message` through B every 50 ms (plain HTTP, no retries): the events a
    stream on A must carry across the restart.  `posted`: (when, event id) of each 200;
    `refused`: (when, status, retry-after, x-should-retry, body) of every other answer."""

    def __init__(self, base_url: str, api_key: str, session_id: str, stop: threading.Event) -> None:
        super().__init__(name="compat-event-poster", daemon=True)
        self.url = f"{base_url}/v1/sessions/{session_id}/events"
        self.headers = agents_headers(api_key)
        self.stop_flag = stop
        self.posted: List[Tuple[float, str]] = []
        self.refused: List[Tuple[float, int, Optional[str], Optional[str], str]] = []

    def run(self) -> None:
        n = 0
        while not self.stop_flag.is_set():
            n += 1
            body = json.dumps({"events": [agent_message(f"across the restart {n}")]}).encode()
            try:
                res = http("POST", self.url, self.headers, body, timeout=15)
            except OSError as err:
                self.refused.append((time.monotonic(), 0, None, None, repr(err)[:200]))
            else:
                if res.status == 200:
                    self.posted.append((time.monotonic(), res.json()["data"][0]["id"]))
                else:
                    self.refused.append((time.monotonic(), res.status, res.headers.get("retry-after"),
                                         res.headers.get("x-should-retry"), res.body[:200].decode("utf-8", "replace")))
            time.sleep(0.05)


def _restart_scenario(pair: Pair, command: List[str]) -> None:
    log: List[Exchange] = []
    mu = threading.Lock()
    stop = threading.Event()
    writers = [
        Writer(i, pair, replica, log, mu, stop)
        for i, replica in enumerate([pair.a, pair.b] * WRITERS_PER_REPLICA)
    ]
    # A stream on A stays open across the restart while events are posted through B.
    a_stream, b = pair.fx(pair.a, timeout=30.0), pair.fx(pair.b)
    _, session = session_on_new_env(b, uuid.uuid4().hex[:8])
    reader = StreamReader(a_stream.client, session.id, resume=True)
    reader.start()
    poster = EventPoster(pair.b.base_url, pair.api_key, session.id, stop)
    poster.start()
    for w in writers:
        w.start()
    try:
        time.sleep(1.0)
        began = time.monotonic()
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
        ended = time.monotonic()
        check(proc.returncode == 0, f"{' '.join(command)} exited {proc.returncode}: {(proc.stdout + proc.stderr)[-500:]}")

        # Both replicas acknowledge writes again, by themselves.
        healed: Dict[str, float] = {}
        deadline = ended + HEAL_WITHIN
        while len(healed) < 2 and time.monotonic() < deadline:
            for w in writers:
                name = w.replica.config[-1]
                if name in healed:
                    continue
                acks = [t for *_, t in w.stores + w.memories if t > ended]
                if acks:
                    healed[name] = min(acks) - ended
            time.sleep(0.1)
        time.sleep(1.0)
    finally:
        stop.set()
        for w in writers:
            w.join(60)
        poster.join(30)
    check(all(not w.is_alive() for w in writers) and not poster.is_alive(), "a writer did not finish within 60s")
    check(
        set(healed) == {"A", "B"},
        f"within {HEAL_WITHIN:.0f}s of the restart only {sorted(healed) or 'no replica'} acknowledged a write again",
    )

    # What the writers saw.
    errors = [ex for ex in log if ex.status >= 400]
    unavailable = [ex for ex in errors if ex.status == 503]
    for ex in unavailable:
        check(
            ex.headers.get("retry-after") not in (None, "") and ex.headers.get("x-should-retry") == "true",
            f"a 503 must carry retry-after and x-should-retry: true: {ex}",
        )
        try:
            eq(json.loads(ex.body).get("type"), "error", f"the 503's body: {ex.body[:200]}")
        except ValueError:
            raise AssertionError(f"the 503's body is not JSON: {ex}") from None
    explained = [
        ex for ex in errors if ex.status == 409 and ex.retry_count not in ("0", "?") and "memory_path_conflict" in ex.body
    ]
    other = [ex for ex in errors if ex.status != 503 and ex not in explained]
    # A write the SDK gave up on after its retries (each 503 waits the 1 s `retry-after`) is
    # expected only while the database is down (a restart may take longer than the retries);
    # any other failure, or one after the restart finished, is not.
    failures = [f for w in writers for f in w.failures]
    outlived = [f for f in failures if f[1] == 503 and f[0] <= ended + 1.0]
    bad_failures = [f[2] for f in failures if f not in outlived]
    acked_stores = sum(len(w.stores) for w in writers)
    acked_mems = sum(len(w.memories) for w in writers)
    note(
        f"(e) restart took {ended - began:.1f}s; {len(log)} responses, {len(unavailable)} x 503 "
        f"(A {sum(ex.replica == 'A' for ex in unavailable)}, B {sum(ex.replica == 'B' for ex in unavailable)}), "
        f"{len(other)} other errors, {len(outlived)} writes given up during the outage, {len(bad_failures)} otherwise; acknowledged {acked_stores} stores and "
        f"{acked_mems} memories; A wrote again {healed.get('A', -1):.2f}s and B {healed.get('B', -1):.2f}s after the restart"
    )
    check(not other, f"requests during the outage must fail as 503 + retry-after; also got {len(other)}: {other[:4]}")
    check(unavailable, "no request met the outage (no 503 at all): the restart was not observed")
    check(
        not bad_failures,
        f"writes failed even after {WRITE_RETRIES} retries, other than with a 503 during the outage: {bad_failures[:4]}",
    )

    # No retry needed any more, on either replica.
    for replica in (pair.a, pair.b):
        plain = pair.fx(replica, max_retries=0)
        for i in range(10):
            try:
                plain.stores.list(limit=1)
            except anthropic.APIError as err:
                raise AssertionError(f"{replica.config} request {i} after the restart (no retries) failed: {err!r}") from None

    # The stream on A carried every event acknowledged through B, before, during and after the
    # restart (the listener reconnected), in the session's order.
    check(poster.posted, "no event was posted through B during the restart test")
    bad_posts = [r for r in poster.refused if not (r[1] == 503 and r[2] and r[3] == "true")]
    check(not bad_posts, f"posting events through B during the restart: answers other than 503 + retry-after: {bad_posts[:3]}")
    last_id = poster.posted[-1][1]
    try:
        arrived = reader.wait_for(lambda rs: any(r[1] == last_id for r in rs), 10.0)
    finally:
        reader.close()
    got = reader.ids()
    missing = [i for _, i in poster.posted if i not in got]
    check(
        arrived and not missing,
        f"the stream on A, open across the restart, lacks {len(missing)} of the {len(poster.posted)} events "
        f"acknowledged through B (first missing acknowledged {[round(t - ended, 2) for t, i in poster.posted if i in missing][:5]} s "
        f"after the restart returned; stream resumed {reader.resumed} times; errors {reader.resume_errors[:2]}, {reader.error!r})",
    )
    eq(len(got), len(set(got)), "events the stream on A carried twice")
    listed = [e.id for e in b.client.beta.sessions.events.list(session.id, limit=1000)]
    check(got and got[0] in listed, f"the stream's first event {got[:1]} is not in the session's log")
    expected = listed[listed.index(got[0]) : listed.index(last_id) + 1]
    check(poster.posted[0][1] in expected, "the stream on A began after the first event posted through B")
    eq(got[: got.index(last_id) + 1], expected, "the events the stream on A carried vs the session's log (read through B)")
    note(
        f"(e) the stream on A carried all {len(poster.posted)} events acknowledged through B across the restart "
        f"({len(poster.refused)} posts refused with 503; stream reopened {reader.resumed} times)"
    )

    # Every acknowledged write is there (read through the other replica).
    for w in writers:
        other_fx = pair.fx(pair.b if w.replica is pair.a else pair.a)
        by_store: Dict[str, Dict[str, Tuple[str, str]]] = {}
        for store_id, mem_id, path, content, _ in w.memories:
            by_store.setdefault(store_id, {})[path] = (mem_id, content)
        for store_id, name, _ in w.stores:
            eq(other_fx.stores.retrieve(store_id).name, name, f"acknowledged store {store_id}")
        for store_id, want in by_store.items():
            have = {m.path: (m.id, m.content) for m in other_fx.list_all_memories(store_id, view="full")}
            missing = {p: v for p, v in want.items() if have.get(p) != v}
            check(not missing, f"acknowledged memories missing or changed in {store_id}: {sorted(missing)[:5]}")


# --------------------------------------------------------------------------------------
# (f) A replica killed while a lease taken through it is held.
# --------------------------------------------------------------------------------------

REDELIVERY_SLACK = 5.0


def test_killed_replica_lease_expires_and_item_is_redelivered(fx):
    pair = replicas(fx)
    try:
        with_logs(pair, lambda: _kill_scenario(pair))
    finally:
        _stop_pair()


def _kill_scenario(pair: Pair) -> None:
    b = pair.fx(pair.b)
    tag = uuid.uuid4().hex[:8]
    setup = Setup(b, tag)
    env_id = setup.env.id
    worker_a = pair.fx(pair.a, api_key=setup.key)
    worker_b = pair.fx(pair.b, api_key=setup.key, max_retries=0)

    # A long poll on A is in flight when B queues the item: it must come back with it (B's
    # enqueue wakes A's poll) rather than empty at the end of its 999 ms.
    polled: Dict[str, Any] = {}

    def long_poll() -> None:
        started = time.monotonic()
        try:
            polled["item"] = worker_a.client.beta.environments.work.poll(env_id, block_ms=999)
        except Exception as err:  # noqa: BLE001
            polled["error"] = err
        polled["took"] = time.monotonic() - started

    poller = threading.Thread(target=long_poll, daemon=True)
    poller.start()
    time.sleep(0.3)
    created = time.monotonic()
    session = b.client.beta.sessions.create(agent=setup.agent.id, environment_id=env_id)
    poller.join(10)
    woke = time.monotonic() - created
    check("error" not in polled, f"the long poll on A failed: {polled.get('error')!r}")
    item = polled.get("item")
    check(
        item is not None,
        f"a long poll on A (block_ms=999, in flight when the session was created through B) came back empty "
        f"after {polled.get('took', -1):.2f}s: B's enqueue did not wake it",
    )
    eq(item.data.id, session.id, "the item's session")
    token = decoded_secret(item.secret).get("sessions_token")
    worker_a.client.beta.environments.work.ack(item.id, environment_id=env_id)
    beat = worker_a.client.beta.environments.work.heartbeat(
        item.id, environment_id=env_id, expected_last_heartbeat="NO_HEARTBEAT"
    )
    beat_at = time.monotonic()
    check(beat.lease_extended, f"the heartbeat through A must extend the lease: {beat!r}")
    eq(
        http("GET", f"{pair.b.base_url}/v1/sessions/{session.id}", agents_headers(token)).status,
        200,
        "the item's sessions token, through B, before the kill",
    )

    pair.a.kill9()
    killed_at = time.monotonic()
    check(not pair.a.alive(), "replica A survived SIGKILL")

    # B still serves.
    eq(http("GET", f"{pair.b.base_url}/healthz").status, 200, "B's health after A was killed")
    store = b.new_store(name=f"after-kill-{tag}")
    b.new_memory(store.id, "/still.md", "B still writes")
    eq([m.path for m in b.list_all_memories(store.id)], ["/still.md"], "B reads its own write")
    state = b.client.beta.environments.work.retrieve(item.id, environment_id=env_id).state
    eq(state, "active", "the leased item's state through B right after the kill")

    # Nothing while the lease holds, the same item once it lapsed.
    polls: List[Tuple[float, Optional[str]]] = []
    again = None
    while time.monotonic() < beat_at + LEASE_TTL + REDELIVERY_SLACK:
        got = worker_b.client.beta.environments.work.poll(env_id, block_ms=200)
        polls.append((time.monotonic() - beat_at, got.id if got is not None else None))
        if got is not None:
            again = got
            break
    check(again is not None, f"B did not deliver the item again within {LEASE_TTL + REDELIVERY_SLACK:.0f}s of the last heartbeat")
    after = polls[-1][0]
    eq(again.id, item.id, "the item B delivered again")
    early_null = [t for t, got in polls if got is None and t < LEASE_TTL - 0.5]
    check(
        after >= LEASE_TTL - 0.25,
        f"the item came back {after:.2f}s after its last heartbeat, before the {LEASE_TTL}s lease lapsed",
    )
    check(early_null or killed_at - beat_at > LEASE_TTL - 0.5, "no poll on B happened while the lease still held")
    eq(
        http("GET", f"{pair.b.base_url}/v1/sessions/{session.id}", agents_headers(token)).status,
        401,
        "the old sessions token after the item was delivered again",
    )
    new_token = decoded_secret(again.secret).get("sessions_token")
    check(new_token and new_token != token, "the item delivered again must carry a new sessions token")
    worker_b.client.beta.environments.work.ack(again.id, environment_id=env_id)
    worker_b.client.beta.environments.work.stop(again.id, environment_id=env_id)
    note(f"(f) a long poll on A came back with the item queued through B {woke * 1000:.0f} ms after the creation began")
    note(
        f"(f) A killed {killed_at - beat_at:.2f}s after the last heartbeat; B delivered the item again "
        f"{after:.2f}s after it (lease {LEASE_TTL}s), after {len(polls) - 1} empty polls"
    )
