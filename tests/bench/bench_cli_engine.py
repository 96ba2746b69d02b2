"""What running the CLI's engine in a worker process costs: ``hearth generate``'s start-up and
first token with the engine in a worker process (as the CLI does now, so a native crash is a
message, not a dead terminal) against the engine on a thread of the command's own process.

Each rep starts two fresh commands, alternating which goes first, and times each from the
parent's spawn: to the handshake (``Ready``), the loaded model and the first token of a one-token
answer on the embedded model. Prints one JSON object with medians and the worker/in-process ratio.
Usage: ``python tests/bench/bench_cli_engine.py [--reps N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys, time
start = float(sys.argv[2])
from engine import protocol as p
from app.engine_clients.client import new_request_id
if sys.argv[1] == "worker":
    from app.engine_clients.process_client import ProcessClient as Client
else:
    from app.engine_clients.inproc_client import InprocClient as Client
client = Client()
client.start()
ready = time.time() - start
client.load_model("default")
loaded = time.time() - start
command = p.Chat(request_id=new_request_id("b"), messages=[p.WireMessage("user", "Hello")], max_tokens=1,
                 sampling=p.SamplingSpec(temperature=0.0), draft=p.DraftSpec("off"))
first = None
for event in client.stream(command):
    if isinstance(event, p.TokenDelta) and first is None:
        first = time.time() - start
client.close(mode="abort")
print(json.dumps({"ready_s": ready, "loaded_s": loaded, "first_token_s": first}))
"""


def run(kind: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CHILD, kind, repr(time.time())], capture_output=True, text=True,
                          env=env, cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"worker": [], "inproc": []}
    run("worker"), run("inproc")  # warm the page cache and the CPU check's cache
    for rep in range(args.reps):
        for kind in (("worker", "inproc") if rep % 2 else ("inproc", "worker")):
            runs[kind].append(run(kind))
    result = {}
    for key in ("ready_s", "loaded_s", "first_token_s"):
        worker = statistics.median(r[key] for r in runs["worker"])
        inproc = statistics.median(r[key] for r in runs["inproc"])
        result[key] = {"worker": round(worker, 3), "inproc": round(inproc, 3), "ratio": round(worker / inproc, 3),
                       "extra_s": round(worker - inproc, 3)}
    print(json.dumps({"bench": "cli_engine", "reps": args.reps, "results": result}, indent=2))


if __name__ == "__main__":
    main()
