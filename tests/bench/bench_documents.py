"""Documents: questions from the saved document state vs reading it, prefill speed, drafting, a long read.

For each document length: a fresh engine, with the automatic context (as the app loads a model;
the peak resident memory of this process is reported against the engine's estimate), reads a generated document and answers a first question
(time to first token counted from the start of reading: what a user waits for); then a second
question forks from the document's snapshot (counted from sending it). Also: prefill tok/s of the
read against a bare llama-cpp-python loop over the same tokens, and prompt-lookup drafting on a
question that quotes the document. ``--long N`` reads an N-token document on the same model,
cancels at half way, and reports the gaps between progress events and the peak RSS (of a process
that does only that).
Prints one JSON object. Target: the second question's time to first token ≤ 1/20 of the first at
16k tokens and up.
Usage: ``python tests/bench/bench_documents.py [--lengths 4096,16384] [--long 100000]``.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import llama_cpp  # noqa: E402

from app.services.document_loading import fit_command, read_command, store_document  # noqa: E402
from app.services.turn import send_turn  # noqa: E402
from engine import protocol as p  # noqa: E402
from engine.backends.base import default_threads  # noqa: E402
from engine.backends.llama_cpp import init_backend  # noqa: E402
from app.engine_clients.inproc_client import InprocClient  # noqa: E402
from model_store.conversations import ConversationStore  # noqa: E402
from model_store.db import database_path, open_database  # noqa: E402
from model_store.documents import DocumentStore  # noqa: E402
from app.services.extract import ExtractedDocument  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402

GREEDY = p.SamplingSpec(temperature=0)
WORDS = ("river stone light house garden winter market letter window music paper forest bridge candle "
         "morning harbor orchard valley meadow lantern").split()


def make_document(n_words: int) -> ExtractedDocument:
    rng = random.Random(n_words)
    lines = [" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(max(1, n_words // 12))]
    return ExtractedDocument("bench.txt", "text", "\n".join(lines), None, "utf-8", 0)


def bare_prefill_rate(model: Path, tokens: list[int], n_ctx: int) -> float:
    """Tokens per second of the least code that reads ``tokens`` with llama-cpp-python's C API."""
    init_backend()  # the CPU build of llama.cpp Hearth runs on this machine
    mparams = llama_cpp.llama_model_default_params()
    handle = llama_cpp.llama_model_load_from_file(str(model).encode(), mparams)
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = n_ctx, 512, 512
    cparams.n_threads = cparams.n_threads_batch = default_threads()
    ctx = llama_cpp.llama_init_from_model(handle, cparams)
    batch = llama_cpp.llama_batch_init(512, 0, 1)
    started = time.perf_counter()
    for begin in range(0, len(tokens), 512):
        chunk = tokens[begin:begin + 512]
        for i, token in enumerate(chunk):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, begin + i, 1
            batch.seq_id[i][0], batch.logits[i] = 0, i == len(chunk) - 1
        batch.n_tokens = len(chunk)
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise SystemExit("the bare loop's decode failed")
    seconds = time.perf_counter() - started
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(handle)
    return len(tokens) / seconds


class Bench:
    def __init__(self, model: Path, folder: Path, n_ctx: int = 0) -> None:
        """``n_ctx`` 0: the automatic context, as the app loads a model."""
        self.model, self.folder = model, folder
        self.store = ConversationStore(open_database(database_path(folder)))
        self.client = InprocClient(telemetry_interval_ms=0, data_dir=folder)
        self.client.start()
        self.context = self.client.load_model(str(model), n_ctx=n_ctx).context

    def measure(self, document: ExtractedDocument) -> p.TextMeasured:
        return next(e for e in self.client.stream(fit_command(document.text, "all"))
                    if isinstance(e, p.TextMeasured))

    def store_it(self, document: ExtractedDocument, measured: p.TextMeasured):
        return store_document(self.store, DocumentStore(self.store.db), document, document.text,
                              measured.tokens, "all", model="bench", source_path=None)

    def ask(self, conversation_id: str, after: str, question: str, draft: str = "off") -> tuple[float, p.Finished]:
        sent, first = time.perf_counter(), []
        on_event = lambda e: first.append(time.perf_counter()) if isinstance(e, (p.TokenDelta, p.Finished)) \
            and not first else None  # noqa: E731
        turn = send_turn(self.store, self.client, conversation_id, question, reply_to=after, sampling=GREEDY,
                         max_tokens=48, draft=draft, on_event=on_event)
        return (first[0] - sent) * 1000, turn.finished

    def close(self) -> None:
        self.client.close(mode="abort")


def bench_length(model: Path, target_tokens: int, tokens_per_word: float, work: Path) -> dict:
    document = make_document(int(target_tokens / tokens_per_word))
    bench = Bench(model, work / f"len-{target_tokens}")  # the automatic context, no hand-set size
    measured = bench.measure(document)
    started = time.perf_counter()
    stored = bench.store_it(document, measured)
    read = next(e for e in bench.client.stream(read_command(bench.store, stored.conversation.id, stored.message.id))
                if isinstance(e, p.DocumentRead))
    reading_ms = (time.perf_counter() - started) * 1000
    first_ms, first = bench.ask(stored.conversation.id, stored.message.id, "What is the first word of the text?")
    second_ms, second = bench.ask(stored.conversation.id, stored.message.id, "What is the last word of the text?")
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # the engine runs in this process
    context = bench.client.context
    bench.close()
    tokens = bench_tokens(model, document.text)
    bare = bare_prefill_rate(model, tokens, target_tokens + 2048)
    hearth_rate = read.tokens / (read.timings.prompt_ms / 1000)
    return {
        "document_tokens": read.tokens,
        "n_ctx": context.n_ctx, "context_mode": context.mode,
        "estimated_bytes": context.estimated_bytes, "peak_rss_bytes": peak_rss,
        "peak_rss_over_estimate": round(peak_rss / context.estimated_bytes, 3),
        "first_question_ttft_ms": round(reading_ms + first_ms, 1),
        "second_question_ttft_ms": round(second_ms, 1),
        "second_over_first": round(second_ms / (reading_ms + first_ms), 4),
        "second_prefilled_tokens": second.snapshot.prefilled_tokens,
        "hearth_prefill_tok_s": round(hearth_rate, 1),
        "bare_prefill_tok_s": round(bare, 1),
        "prefill_ratio": round(hearth_rate / bare, 3),
    }


def bench_lookup(work: Path) -> dict:
    """Prompt lookup on a document question whose answer quotes it, on the real SmolLM2."""
    from engine.models.model_files import embedded_model_path

    text = "\n".join(f"Entry {i}: the keeper lit the lamp at dusk and logged the wind from the {WORDS[i % 20]}."
                     for i in range(60))
    document = ExtractedDocument("log.txt", "text", text, None, "utf-8", 0)
    bench = Bench(embedded_model_path(), work / "lookup", 8192)
    stored = bench.store_it(document, bench.measure(document))
    next(e for e in bench.client.stream(read_command(bench.store, stored.conversation.id, stored.message.id))
         if isinstance(e, p.DocumentRead))
    _, quote = bench.ask(stored.conversation.id, stored.message.id, "Copy entries 3 to 6 of the log exactly.",
                         draft="lookup")
    bench.close()
    d = quote.draft
    return {"model": "smollm2", "drafted": d.drafted, "accepted": d.accepted,
            "acceptance": round(d.accepted / d.drafted, 3) if d.drafted else 0.0, "auto_off": d.auto_off,
            "reason": d.reason}


def bench_tokens(model: Path, text: str) -> list[int]:
    from engine.models.session import open_session

    session = open_session(str(model), n_ctx=256)
    try:
        return session.model.tokenize(text, add_special=False, parse_special=False)
    finally:
        session.close()


def bench_long(model: Path, target_tokens: int, tokens_per_word: float, work: Path) -> dict:
    """Read a long document, cancel at half way: progress cadence, cancel, peak memory."""
    document = make_document(int(target_tokens / tokens_per_word))
    bench = Bench(model, work / "long", target_tokens + 2048)
    measured = bench.measure(document)
    stored = bench.store_it(document, measured)
    command = read_command(bench.store, stored.conversation.id, stored.message.id)
    arrivals, processed, cancelled_at = [], [], None
    for event in bench.client.stream(command):
        if isinstance(event, p.PromptProgress):
            arrivals.append(time.perf_counter())
            processed.append(event.processed)
            if cancelled_at is None and event.processed >= event.total / 2:
                cancelled_at = event.processed
                bench.client.send(p.Cancel(request_id=command.request_id))
        elif isinstance(event, p.DocumentRead):
            result = event
    bench.close()
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    return {
        "document_tokens": measured.tokens,
        "progress_events": len(arrivals),
        "max_gap_s": round(max(gaps), 3) if gaps else None,
        "monotone": processed == sorted(processed),
        "cancelled_at_tokens": cancelled_at,
        "finish_reason": result.finish_reason,
        "tokens_read_before_cancel": result.timings.prompt_n,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def long_in_fresh_process(target_tokens: int, cache: Path) -> dict:
    """:func:`bench_long` in a process of its own, so its peak RSS is that read's alone."""
    child = subprocess.run([sys.executable, __file__, "--long-only", str(target_tokens), "--cache", str(cache)],
                           capture_output=True, text=True, check=True)
    return json.loads(child.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lengths", default="4096,16384")
    parser.add_argument("--long", type=int, default=0, help="also read an N-token document and cancel at half way")
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models")
    parser.add_argument("--long-only", type=int, default=0, help=argparse.SUPPRESS)  # the child of --long
    args = parser.parse_args()
    model = make_models(args.cache, ["hybrid-bench"])["hybrid-bench"]
    sample = make_document(2400)
    tokens_per_word = len(bench_tokens(model, sample.text)) / 2400
    work = Path(tempfile.mkdtemp(prefix="hearth-bench-docs-"))
    if args.long_only:
        try:
            print(json.dumps(bench_long(model, args.long_only, tokens_per_word, work)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    results: dict = {"bench": "documents", "model": "hybrid-bench", "lengths": []}
    try:
        for target in map(int, args.lengths.split(",")):
            results["lengths"].append(bench_length(model, target, tokens_per_word, work))
            print(json.dumps(results["lengths"][-1]), file=sys.stderr)
        results["lookup_on_document_question"] = bench_lookup(work)
        print(json.dumps(results["lookup_on_document_question"]), file=sys.stderr)
        if args.long:
            results["long"] = long_in_fresh_process(args.long, args.cache)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
