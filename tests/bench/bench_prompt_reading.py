"""The built-in model's prompt reading: Hearth against llama.cpp's own ``llama-bench`` and ``llama-server``.

Both llama.cpp tools are built from the source Hearth vendors, stock, with the CPU backend Hearth's
canary chose on this machine (``tests/helpers/cpp_server.py``). Each reads the same prompts, fresh
(nothing of them cached), one answer token each:

* **Hearth**: the real worker process on ``default`` (the built-in model as the app loads it: the
  fast-reading copy, ``engine/models/embedded_layout.py``), a ``Complete`` request; speed = the worker's
  ``prompt_n / prompt_ms``; and ``hearth_shipped``, a second worker on the shipped file (Hearth
  before the copy);
* **llama-server**: the same text to ``/completion`` with ``cache_prompt: false``; speed = its own
  ``timings.prompt_per_second``; threads as Hearth's default;
* **llama-bench**: ``-p N -n 0`` on the same file (``bench_copy``) and on the shipped file
  (``bench_shipped``: what a llama.cpp user runs on the package's Q4_1), its own default threads.

Runs twice: on an idle machine, and with one core kept busy by another program (a spinning
process). Tools alternate within every rep, a second apart. Per condition and prompt length the JSON gives each
tool's median speed and Hearth's ratio to each (above 1: Hearth reads faster).

Usage: ``python tests/bench/bench_prompt_reading.py [--prompts 16,512,2048] [--reps 3]
[--conditions idle,busy]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.engine_clients.client import new_request_id  # noqa: E402
from app.engine_clients.process_client import ProcessClient  # noqa: E402
from engine import protocol as p  # noqa: E402
from engine.backends.base import default_threads  # noqa: E402
from engine.backends.llama_cpp import init_backend  # noqa: E402
from engine.models.model_files import DEFAULT_MODEL, embedded_model_path, resolve_model_ref  # noqa: E402
from tests.helpers.cpp_server import built_tool, start_cpp_server  # noqa: E402
from tests.helpers.serve import stop_process  # noqa: E402

SETTLE_S = 3.0
# Before every measurement: the tool before has stopped for longer than Hearth's thread budget looks
# back (engine/decoding/thread_budget.py, half a second), so none reads while the last one's CPU use is in view.
PAUSE_S = 1.0
WORDS = ("river mill lamp grain harbour winter letter garden market window candle bridge orchard "
         "ledger meadow copper lantern valley thunder engine").split()


def text_of(length_words: int, rep: int) -> str:
    """A fresh prompt: its first word differs per rep, so nothing of an earlier one is reused."""
    words = [WORDS[(i * 7 + rep * 3) % len(WORDS)] for i in range(length_words)]
    return f"Note {rep}: " + " ".join(words) + "."


def hearth_speed(client: ProcessClient, text: str) -> tuple[int, float]:
    command = p.Complete(request_id=new_request_id("read"), prompt=text, max_tokens=1,
                         sampling=p.SamplingSpec(temperature=0.0), draft=p.DraftSpec("off"))
    finished = next(e for e in client.stream(command) if isinstance(e, (p.Finished, p.Error)))
    if isinstance(finished, p.Error):
        raise RuntimeError(finished.message)
    return finished.timings.prompt_n, finished.timings.prompt_n / finished.timings.prompt_ms * 1000


def server_speed(base_url: str, text: str) -> tuple[int, float]:
    body = json.dumps({"prompt": text, "n_predict": 1, "cache_prompt": False, "temperature": 0}).encode()
    request = urllib.request.Request(base_url.removesuffix("/v1") + "/completion", body,
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as reply:
        timings = json.load(reply)["timings"]
    return int(timings["prompt_n"]), float(timings["prompt_per_second"])


def bench_speed(binary: Path, model: Path, tokens: int) -> float:
    done = subprocess.run([str(binary), "-m", str(model), "-p", str(tokens), "-n", "0", "-r", "1", "-fa", "1",
                           "-b", "512", "-ub", "512", "-o", "json"], capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout)[0]["avg_ts"])


@contextmanager
def one_core_busy(busy: bool):
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        yield
    finally:
        if spinner is not None:
            stop_process(spinner)


def start_worker(home: Path, model: str) -> ProcessClient:
    client = ProcessClient(data_dir=home / "data", env={"HEARTH_HOME": str(home)})
    client.start()
    client.send(p.SetTelemetry(interval_ms=0))
    client.load_model(model, n_ctx=4096)
    return client


def measure(condition: str, lengths: list[int], reps: int, tools: dict, home: Path) -> dict:
    speeds: dict[int, dict[str, list[float]]] = {n: {} for n in lengths}
    tokens: dict[int, int] = {}
    (home / "data").mkdir(mode=0o700)
    client, shipped = (start_worker(home, model) for model in (DEFAULT_MODEL, str(tools["shipped"])))
    server, base_url = start_cpp_server(tools["llama-server"], tools["copy"], context=4096,
                                        threads=default_threads(), log=home / f"server-{condition}.log")
    time.sleep(SETTLE_S)  # a first start's one-time NPU check (a child process) is over: the machine is idle again
    runners = {
        "hearth": lambda n, text: hearth_speed(client, text),
        "hearth_shipped": lambda n, text: hearth_speed(shipped, text),
        "llama_server": lambda n, text: server_speed(base_url, text),
        "llama_bench_copy": lambda n, text: (n, bench_speed(tools["llama-bench"], tools["copy"], tokens[n])),
        "llama_bench_shipped": lambda n, text: (n, bench_speed(tools["llama-bench"], tools["shipped"], tokens[n])),
    }
    try:
        with one_core_busy(condition == "busy"):
            hearth_speed(client, text_of(8, -1))  # one warm-up request each
            hearth_speed(shipped, text_of(8, -1))
            server_speed(base_url, text_of(8, -1))
            for rep in range(reps):
                order = list(runners) if rep % 2 == 0 else list(reversed(runners))
                for words in lengths:
                    text = text_of(words, rep)
                    if words not in tokens:  # the length llama-bench reads: the prompt's tokens
                        tokens[words] = hearth_speed(client, text_of(words, 10_000 + rep))[0]
                    for name in order:
                        time.sleep(PAUSE_S)
                        speeds[words].setdefault(name, []).append(runners[name](words, text)[1])
    finally:
        client.close(mode="abort")
        shipped.close(mode="abort")
        stop_process(server)
    report = {}
    for words, by_tool in speeds.items():
        medians = {name: round(statistics.median(values), 1) for name, values in by_tool.items()}
        ratios = {f"hearth_over_{name}": round(medians["hearth"] / value, 3)
                  for name, value in medians.items() if name != "hearth"}
        report[f"{tokens[words]}_tokens"] = {**medians, **ratios, "all": {k: [round(v, 1) for v in vs]
                                                                          for k, vs in by_tool.items()}}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", default="8,300,1300", help="prompt lengths in words (about 1.5 tokens each)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--conditions", default="idle,busy")
    args = parser.parse_args()
    variant = init_backend().variant
    tools = {"llama-server": built_tool(variant, "llama-server"), "llama-bench": built_tool(variant, "llama-bench"),
             "copy": resolve_model_ref(DEFAULT_MODEL), "shipped": embedded_model_path()}
    lengths = [int(n) for n in args.prompts.split(",")]
    report = {"bench": "prompt_reading", "variant": variant, "threads": default_threads(),
              "copy": tools["copy"].name, "shipped": tools["shipped"].name, "reps": args.reps}
    with tempfile.TemporaryDirectory(prefix="hearth-bench-reading-") as work:
        for condition in args.conditions.split(","):
            home = Path(work) / condition
            home.mkdir()
            report[condition] = measure(condition, lengths, args.reps, tools, home)
            print(json.dumps({condition: report[condition]}), file=sys.stderr, flush=True)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
