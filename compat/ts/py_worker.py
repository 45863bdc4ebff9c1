"""The Python SDK's `EnvironmentWorker.run()` (anthropic==2.10.0) as a subprocess, for the
TypeScript suite's differential worker test (worker_diff.test.mjs).

Reuses the Python suite's own driving (`compat/test_worker.py`: `WorkerThread` in mode "run",
`max_idle=2`, an API key the server does not know, the SDK's log records and HTTP exchanges
collected by `Diagnostics`). Reads MNEMO_PYW_BASE_URL, MNEMO_PYW_ENVIRONMENT_ID,
MNEMO_PYW_ENVIRONMENT_KEY (never on the command line) and MNEMO_PYW_WORKDIR; prints `ready`
once its first poll was answered, runs until SIGTERM, then cancels the loop and prints one JSON
line: {"cancelled", "error", "errors": [ERROR log records], "exchanges": [...]}.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # compat/

from test_worker import Diagnostics, WorkerThread  # noqa: E402

for name in list(os.environ):
    if name.startswith("ANTHROPIC_"):
        del os.environ[name]
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"


def main() -> int:
    base_url = os.environ["MNEMO_PYW_BASE_URL"]
    env_id = os.environ["MNEMO_PYW_ENVIRONMENT_ID"]
    env_key = os.environ.pop("MNEMO_PYW_ENVIRONMENT_KEY")
    workdir = Path(os.environ["MNEMO_PYW_WORKDIR"])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    diag = Diagnostics()
    sdk_log = logging.getLogger("anthropic")
    sdk_log.addHandler(diag)
    sdk_log.setLevel(logging.DEBUG)
    worker = WorkerThread("run", base_url, 60.0, env_id, env_key, workdir, diag)
    worker.start()
    deadline = time.monotonic() + 30
    while diag.count(f"<- 200 GET /v1/environments/{env_id}/work/poll") == 0 and worker.is_alive():
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    print("ready", flush=True)
    while not stop.wait(0.1):
        if not worker.is_alive():
            break
    worker.cancel()
    worker.join(45)
    records = [f"{r.levelname} {r.name}: {r.getMessage()}" for r in diag.worker_records(logging.ERROR)]
    with diag._mu:  # noqa: SLF001 — our own collector
        exchanges = list(diag.exchanges)
    print(
        json.dumps(
            {
                "cancelled": worker.cancelled,
                "alive": worker.is_alive(),
                "error": worker.error_text or None,
                "errors": records,
                "exchanges": exchanges[-150:],
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
