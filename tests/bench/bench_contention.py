"""Reading and writing while other programs keep the cores busy: Hearth vs a bare llama-cpp-python loop.

For each number N of competitors (``--competitors``, default 0,1,2), N busy-loop processes (pure
Python spin, each ending by itself after ``--spin-seconds`` so none outlives the bench, and killed
when their phase ends) keep the cores busy while, alternating A/B then B/A for ``--rounds``:

* Hearth reads a generated document of about ``--doc-tokens`` tokens through the real worker
  process (:class:`~app.engine_clients.process_client.ProcessClient`, the ``ReadDocument`` command
  ``hearth doc load`` sends), then answers a question on it (an ``AnswerTurn`` of up to ``--gen``
  tokens, greedy, no drafting, as ``hearth send`` runs it);
* a bare loop on llama-cpp-python's C API, with the same model, threads, context and batch size,
  reads the same tokens in batches of the batch size and decodes as many tokens as Hearth wrote
  (Hearth's answer, fed back one token at a time, the greedy pick read after each).

Reading speed is prompt tokens over Hearth's own prefill time (``DocumentRead.timings``; the
caller's wall time of the whole command, snapshot save included, is reported beside it, and so is
the longest the caller went without hearing from a read: progress comes every half second); writing
speed is generated tokens over ``Finished.timings.gen_ms``; the bare loop is timed the same way.
``--threads`` runs everything once per thread count, so one can be compared with another under
the same load; ``auto`` (the default) loads Hearth as ``hearth doc load`` does, with no count, so
its :class:`~engine.decoding.thread_budget.ThreadBudget` picks one per decode, and gives the bare loop one thread
per core (``default_threads()``).
Goal: Hearth ≥ 0.9× the bare loop, reading and writing, at every N. A fixed count above the free
cores is slow under load (two threads wrote about one token a second on two cores shared with one
competitor): such a phase can take minutes.
Prints one JSON object (progress lines on stderr).
Usage: ``python tests/bench/bench_contention.py [--competitors 0,1,2] [--rounds 2] [--doc-tokens 1200]
[--gen 48] [--threads auto,2,1]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import llama_cpp  # noqa: E402
import numpy as np  # noqa: E402

from app.services.document_loading import fit_command, read_command, store_document  # noqa: E402
from app.services.turn import send_turn  # noqa: E402
from engine import protocol as p  # noqa: E402
from engine.backends.base import default_threads  # noqa: E402
from engine.backends.llama_cpp import LlamaModel  # noqa: E402
from engine.templates.chat_template import ChatMessage  # noqa: E402
from engine.models.model_files import resolve_model_ref  # noqa: E402
from app.engine_clients.process_client import ProcessClient  # noqa: E402
from engine.templates.prompts import render_for, rendered_tokens  # noqa: E402
from model_store.conversations import ConversationStore  # noqa: E402
from model_store.db import database_path, open_database  # noqa: E402
from model_store.documents import DocumentStore  # noqa: E402
from tests.bench.bench_documents import make_document  # noqa: E402

GREEDY = p.SamplingSpec(temperature=0)
QUESTION = "Repeat the text above, word for word."
SPIN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@contextmanager
def competitors(n: int, seconds: float):
    """``n`` busy processes for the duration of the block (and never longer than ``seconds``);
    yields a callable saying whether they all still run (a phase longer than ``seconds`` lost them)."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=seconds)]) for _ in range(n)]
    try:
        time.sleep(0.5 if n else 0)  # let the scheduler see them
        yield lambda: all(spinner.poll() is None for spinner in spinners)
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


class HearthSide:
    """A worker process with the model loaded, and a conversation store to put documents in."""

    def __init__(self, model: Path, folder: Path, threads: int) -> None:  # 0: Hearth's own choice
        self.store = ConversationStore(open_database(database_path(folder)))
        self.documents = DocumentStore(self.store.db)
        self.client = ProcessClient(data_dir=folder)
        self.client.start()
        self.client.send(p.SetTelemetry(interval_ms=0))
        self.loaded = self.client.load_model(str(model), n_threads=threads)

    def new_document(self, text_words: int):
        """Store a document as ``hearth doc load`` does; returns (stored, its ReadDocument command)."""
        document = make_document(text_words)
        measured = next(e for e in self.client.stream(fit_command(document.text, "all"))
                        if isinstance(e, p.TextMeasured))
        stored = store_document(self.store, self.documents, document, document.text,
                                measured.tokens, "all", model="bench", source_path=None)
        return stored, read_command(self.store, stored.conversation.id, stored.message.id)

    def run(self, stored, command: p.ReadDocument, gen: int) -> dict:
        started = time.perf_counter()
        heard = [started]  # when the caller heard from the read (progress events, then its end)
        for event in self.client.stream(command):
            heard.append(time.perf_counter())
            if isinstance(event, p.DocumentRead):
                read = event
        wall_s = time.perf_counter() - started
        if read.finish_reason != "stop":
            raise SystemExit(f"Hearth's read ended with {read.finish_reason}")
        turn = send_turn(self.store, self.client, stored.conversation.id, QUESTION, reply_to=stored.message.id,
                         sampling=GREEDY, max_tokens=gen, draft="off")
        t = turn.finished.timings
        return {"read_tok_s": read.timings.prompt_n / (read.timings.prompt_ms / 1000),
                "load_wall_tok_s": read.timings.prompt_n / wall_s, "prompt_n": read.timings.prompt_n,
                "silent_s": max(b - a for a, b in zip(heard, heard[1:])),
                "decode_tok_s": t.gen_n / (t.gen_ms / 1000), "token_ids": list(turn.finished.token_ids)}

    def close(self) -> None:
        self.client.close(mode="abort")


class BareLoop:
    """The least code that reads and writes with llama-cpp-python's C API, set up as Hearth's context."""

    def __init__(self, model: LlamaModel, n_ctx: int, threads: int, n_batch: int = 512) -> None:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = n_ctx, n_batch, n_batch
        params.n_threads = params.n_threads_batch = threads
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED  # as Hearth's ContextSettings
        self.ctx = llama_cpp.llama_init_from_model(model.handle, params)
        self.n_batch, self.n_vocab = n_batch, model.n_vocab
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, 1)

    def _decode(self, tokens: list[int], start: int) -> None:
        batch = self.batch
        for i, token in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, start + i, 1
            batch.seq_id[i][0], batch.logits[i] = 0, i == len(tokens) - 1
        batch.n_tokens = len(tokens)
        if llama_cpp.llama_decode(self.ctx, batch) != 0:
            raise SystemExit("the bare loop's decode failed")

    def _pick(self) -> int:
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, -1), shape=(self.n_vocab,))
        return int(logits.argmax())

    def run(self, tokens: list[int], answer: list[int]) -> dict:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        started = time.perf_counter()
        for begin in range(0, len(tokens), self.n_batch):
            self._decode(tokens[begin:begin + self.n_batch], begin)
        read_s = time.perf_counter() - started
        started = time.perf_counter()
        self._pick()
        for i, token in enumerate(answer[:-1]):  # as Hearth: n picks, n - 1 one-token decodes
            self._decode([token], len(tokens) + i)
            self._pick()
        decode_s = time.perf_counter() - started
        return {"read_tok_s": len(tokens) / read_s, "decode_tok_s": len(answer) / decode_s}

    def close(self) -> None:
        llama_cpp.llama_batch_free(self.batch)
        llama_cpp.llama_free(self.ctx)


def document_tokens(model: LlamaModel, command: p.ReadDocument) -> list[int]:
    """The tokens Hearth reads for ``command`` (engine.state.snapshot_cursor: the branch rendered without an answer cue)."""
    rendered = render_for(model, [ChatMessage(m.role, m.content) for m in command.messages], answer=False)
    return rendered_tokens(model, rendered, bos=True)


def words_for(model: LlamaModel, target_tokens: int) -> int:
    sample = make_document(1200).text
    per_word = len(model.tokenize(sample, add_special=False, parse_special=False)) / 1200
    return int(target_tokens / per_word)


def one_phase(hearth: HearthSide, bare: BareLoop, model: LlamaModel, args, words: int) -> dict:
    runs: dict[str, list[dict]] = {"hearth": [], "bare": []}
    for round_ in range(args.rounds):
        stored, command = hearth.new_document(words)
        tokens = document_tokens(model, command)
        order = ("hearth", "bare") if round_ % 2 == 0 else ("bare", "hearth")
        for side in order:
            if side == "hearth":
                result = hearth.run(stored, command, args.gen)
                if result["prompt_n"] != len(tokens):
                    raise SystemExit(f"Hearth read {result['prompt_n']} tokens, the bare loop {len(tokens)}")
            else:  # the same document every round (make_document is seeded), so the same greedy answer
                result = bare.run(tokens, runs["hearth"][-1]["token_ids"])
            runs[side].append(result)
    return summarize(runs)


def summarize(runs: dict[str, list[dict]]) -> dict:
    def median(side: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[side])

    def ratios(key: str) -> list[float]:
        return [h[key] / b[key] for h, b in zip(runs["hearth"], runs["bare"])]

    read, decode = ratios("read_tok_s"), ratios("decode_tok_s")
    return {
        "hearth_read_tok_s": round(median("hearth", "read_tok_s"), 1),
        "hearth_load_wall_tok_s": round(median("hearth", "load_wall_tok_s"), 1),
        "bare_read_tok_s": round(median("bare", "read_tok_s"), 1),
        "read_ratio": round(statistics.median(read), 3),
        "read_ratio_range": [round(min(read), 3), round(max(read), 3)],
        "hearth_decode_tok_s": round(median("hearth", "decode_tok_s"), 1),
        "bare_decode_tok_s": round(median("bare", "decode_tok_s"), 1),
        "decode_ratio": round(statistics.median(decode), 3),
        "decode_ratio_range": [round(min(decode), 3), round(max(decode), 3)],
        "hearth_read_longest_silence_s": round(max(r["silent_s"] for r in runs["hearth"]), 2),
        "document_tokens": runs["hearth"][0]["prompt_n"],
        "answer_tokens": len(runs["hearth"][0]["token_ids"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="default")
    parser.add_argument("--competitors", default="0,1,2")
    parser.add_argument("--rounds", type=int, default=2, help="A/B pairs per competitor count")
    parser.add_argument("--doc-tokens", type=int, default=1200)
    parser.add_argument("--gen", type=int, default=48)
    parser.add_argument("--threads", default="auto", help="comma-separated thread counts, or auto (Hearth's own)")
    parser.add_argument("--spin-seconds", type=float, default=600.0, help="a competitor's life at most")
    args = parser.parse_args()
    path = resolve_model_ref(args.model)
    thread_counts = [0 if t == "auto" else int(t) for t in args.threads.split(",")]
    model = LlamaModel(path)
    words = words_for(model, args.doc_tokens)
    folder = Path(tempfile.mkdtemp(prefix="hearth-bench-contention-"))
    results: dict = {"bench": "contention", "model": args.model, "cores": os.cpu_count(),
                     "hearth_default_threads": default_threads(), "rounds": args.rounds, "runs": []}
    started = time.perf_counter()
    try:
        for threads in thread_counts:
            hearth = HearthSide(path, folder / f"t{threads}", threads)
            bare = BareLoop(model, hearth.loaded.n_ctx, threads or default_threads())
            try:
                for n in map(int, args.competitors.split(",")):
                    with competitors(n, args.spin_seconds) as still_running:
                        load = os.getloadavg()[0]
                        phase = {"threads": threads or "auto", "competitors": n, "load_avg_1m_at_start": round(load, 2),
                                 **one_phase(hearth, bare, model, args, words)}
                        if not still_running():
                            phase["competitors_ended_early"] = True  # raise --spin-seconds
                    results["runs"].append(phase)
                    print(json.dumps(phase), file=sys.stderr, flush=True)
            finally:
                bare.close()
                hearth.close()
    finally:
        model.close()
        shutil.rmtree(folder, ignore_errors=True)
    results["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
