"""The servers ``bench_serve.py`` compares and how it talks to them: ``hearth serve``, llama-cpp-python's
``llama_cpp.server`` and llama.cpp's C++ ``llama-server``, each behind the real ``openai`` client; a
streamed reply's time to first token, usage, the C++ server's own timings, and other programs' CPU
while it ran."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import openai

from tests.helpers.cpp_server import start_cpp_server
from tests.helpers.cpu_use import OthersCpu
from tests.helpers.llama_server import ServerDidNotStart
from tests.helpers.llama_server import start_llama_server as start_llama_cpp_server
from tests.helpers.serve import LISTENING, stop_process

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Server:
    name: str  # "hearth", "llama_server" (llama_cpp.server) or "cpp_llama_server" (llama.cpp's C++ server)
    process: subprocess.Popen
    base_url: str
    client: openai.OpenAI = field(init=False)
    model_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.client = openai.OpenAI(base_url=self.base_url, api_key="not-needed", max_retries=0, timeout=600)
        self.model_id = self.client.models.list().data[0].id

    def stop(self) -> None:
        stop_process(self.process)


@dataclass
class Reply:
    text: str
    ttft_ms: float
    decode_s: float  # from the first content chunk to the last
    chunks: int  # content chunks
    usage: dict
    timings: dict  # llama.cpp's C++ server's own (prompt_n: tokens it read; cache_n: reused); {} elsewhere
    others_cores: float  # other programs' average busy cores while the request ran

    def tokens_read(self, server: Server) -> int | None:
        if server.name == "hearth":
            cached = (self.usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            return self.usage.get("prompt_tokens", 0) - cached
        return self.timings.get("prompt_n")


def log_tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


def server_env(home: Path) -> dict[str, str]:
    return {**os.environ, "HEARTH_HOME": str(home), "PYTHONPATH": str(ROOT)}


def pin_to(cpus: list[int] | None):
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def start_hearth(model_ref: str, context: int, draft: str, home: Path, cpus: list[int] | None) -> Server:
    log = home / "hearth-serve.log"
    command = [sys.executable, "-m", "app", "serve", "--port", "0", "--model", model_ref, "--context", str(context),
               "--draft", draft]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=log.open("wb"),
                               stdin=subprocess.DEVNULL, text=True, env=server_env(home), preexec_fn=pin_to(cpus))
    match = LISTENING.search(process.stdout.readline())
    if match is None:
        process.kill()
        raise SystemExit(f"hearth serve did not start:\n{log_tail(log)}")
    return Server("hearth", process, match.group(1))


def start_llama_server(model: Path, context: int, threads: int, home: Path, cpus: list[int] | None) -> Server:
    try:
        started = start_llama_cpp_server(model, context=context, threads=threads, log_dir=home,
                                         env={"HEARTH_HOME": str(home)}, preexec_fn=pin_to(cpus))
    except ServerDidNotStart as exc:
        raise SystemExit(str(exc)) from None
    return Server("llama_server", started.process, started.base_url)


def stream_chat(server: Server, messages: list[dict], max_tokens: int) -> Reply:
    with OthersCpu([server.process.pid]) as others:
        reply = _stream_chat(server, messages, max_tokens)
    reply.others_cores = round(others.cores, 2)
    return reply


def _stream_chat(server: Server, messages: list[dict], max_tokens: int) -> Reply:
    sent = time.perf_counter()
    first = last = 0.0
    parts: list[str] = []
    usage: dict = {}
    timings: dict = {}
    stream = server.client.chat.completions.create(model=server.model_id, messages=messages, max_tokens=max_tokens,
                                                   temperature=0, stream=True,
                                                   stream_options={"include_usage": True})
    for chunk in stream:
        now = time.perf_counter()
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        timings = (chunk.model_extra or {}).get("timings") or timings
        delta = chunk.choices[0].delta if chunk.choices else None
        content = delta.content if delta is not None else None
        # a reasoning model's thinking (Hearth's delta.reasoning_content) is written text too: it times the answer
        thought = (delta.model_extra or {}).get("reasoning_content") if delta is not None else None
        ended = bool(chunk.choices and chunk.choices[0].finish_reason)
        if content or thought or (ended and not first):  # an empty answer: its end is its first token
            first = first or now
            last = now
            parts.append(content or thought or "")
    text = "".join(part for part in parts if part)  # what is sent back: the answer and, as plain text, the thinking
    return Reply(text, (first - sent) * 1000, last - first, sum(1 for p in parts if p), usage, timings, 0.0)


def prompt_tokens(server: Server, messages: list[dict]) -> int:
    """The server's own count of the rendered prompt (a non-streaming request, one answer token)."""
    answer = server.client.chat.completions.create(model=server.model_id, messages=messages, max_tokens=1,
                                                   temperature=0)
    return answer.usage.prompt_tokens


def count_tokens(server: Server, text: str) -> int:
    """``text``'s tokens, counted by the baseline server's tokenizer endpoint."""
    root = server.base_url.removesuffix("/v1")
    cpp = server.name == "cpp_llama_server"
    body = json.dumps({"content": text} if cpp else {"input": text}).encode()
    request = urllib.request.Request(root + ("/tokenize" if cpp else "/extras/tokenize/count"), body,
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.load(response)
    return len(answer["tokens"]) if cpp else answer["count"]


def start_baseline(path: Path, args: argparse.Namespace, home: Path, cpus: list[int] | None) -> Server:
    if args.against == "llama-cpp-python":
        return start_llama_server(path, args.context, args.threads, home, cpus)
    process, base_url = start_cpp_server(args.cpp_server, path, context=args.context, threads=args.threads,
                                         log=home / "cpp-llama-server.log", preexec_fn=pin_to(cpus))
    try:
        return Server("cpp_llama_server", process, base_url)
    except Exception:
        stop_process(process)
        raise
