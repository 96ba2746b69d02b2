"""What a conversation's turn costs besides reading its prompt, under a model's real chat template.

A real worker process answers one conversation of ``--turns`` turns (greedy, ``--answer-tokens``
tokens, messages of ``--words`` filler words). Per turn, the time from sending it to its first
token as the caller sees it (``send_turn``'s events), less the worker's own time from the start of
reading to the first token (``Finished.timings.ttft_ms``). What is left is the turn's overhead:
storing the messages, the pipe, rendering the conversation and finding its snapshot, and bringing
the state there (restored from its files, or taken back in memory). Prompt reading does not enter
it, so it stays steady on a machine whose reading speed wanders from one minute to the next (see
``bench_prefill_pairs.py``); ``against_commit.py`` compares it across commits.

Models are cache names of the real-template fixtures (tests/helpers/real_models.py): by default
``qwen35-real-tiny`` (Qwen3.5's template and vocabulary, tiny weights: the overhead a template and a
tokenizer cost) and ``qwen35-0.8b-shape`` (the same at Qwen3.5-0.8B's shape: its state is real-sized).
``--path window`` sends each turn as the window does (``app.services.turn_start.store_and_send``, on
the caller's thread here: the store's job, with the look-up of an installed EAGLE-3 head that
``auto`` drafting makes, then the events) instead of ``send_turn`` as the command line does.
Prints one JSON object: per model, every turn's overhead and tokens read, and the median over the
continued turns (``overhead_ms_median``).
Usage: ``python tests/bench/bench_turn_overhead.py [--models qwen35-real-tiny,qwen35-0.8b-shape]
[--turns 12] [--words 300] [--answer-tokens 8] [--path send|window]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.engine_clients.client import new_request_id  # noqa: E402
from app.services.pending_turn import PendingTurn  # noqa: E402
from app.services.turn import TurnOptions, Writer, end_answer, send_turn  # noqa: E402
from app.services.turn_start import Answering, NewMessage, TurnJob, store_and_send  # noqa: E402
from engine import protocol as p  # noqa: E402
from tests.helpers.real_models import real_model  # noqa: E402
from tests.helpers.snapshot_chat import Chat  # noqa: E402

WORDS = ("the river runs past the mill and under the old stone bridge where children fish in summer "
         "while the town keeps its market on the square beside the church").split()


def message(turn: int, words: int) -> str:
    return f"Message {turn}: " + " ".join(WORDS[(turn + i) % len(WORDS)] for i in range(words))


def one_turn(chat: Chat, text: str, answer_tokens: int, path: str) -> dict:
    first: list[float] = []

    def on_event(event) -> None:
        if isinstance(event, p.TokenDelta) and not first:
            first.append(time.perf_counter())

    sent = time.perf_counter()
    if path == "window":
        result = window_turn(chat, text, answer_tokens, on_event)
    else:
        result = send_turn(chat.store, chat.client, chat.conversation.id, text, sampling=p.SamplingSpec(temperature=0),
                           max_tokens=answer_tokens, on_event=on_event)
    if result.errors or result.finished is None or not first:
        raise SystemExit(f"the turn failed: {result.errors}")
    finished = result.finished
    caller_ttft = (first[0] - sent) * 1000
    return {"caller_ttft_ms": round(caller_ttft, 1), "worker_ttft_ms": round(finished.timings.ttft_ms, 1),
            "overhead_ms": round(caller_ttft - finished.timings.ttft_ms, 1),
            "read_tokens": finished.snapshot.prefilled_tokens if finished.snapshot else None}


def window_turn(chat: Chat, text: str, answer_tokens: int, on_event) -> PendingTurn:
    """A turn as the window sends it: stored and sent by the store's job, then followed to its end."""
    request_id = new_request_id("turn")
    options = TurnOptions(sampling=p.SamplingSpec(temperature=0), max_tokens=answer_tokens)
    job = TurnJob(NewMessage(text, chat.conversation.id, options), Answering(chat.model, chat.loaded.facts),
                  request_id, Writer("a Hearth window"), lambda command: chat.client.send(command) or True,
                  lambda store, conversation_id: None)
    stored, _ = store_and_send(job, chat.store)
    turn = stored[1]
    while (event := chat.client.next_event(timeout=120)) is not None:
        on_event(event)
        if getattr(event, "request_id", None) == request_id and turn.feed(event):
            break
    return end_answer(chat.store, turn)


def run_model(name: str, turns: int, words: int, answer_tokens: int, path: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="hearth-turn-overhead-") as folder:
        os.environ["HEARTH_HOME"] = folder  # the window's look-ups read this folder's database
        chat = Chat(Path(folder), str(real_model(name)))
        chat.start_worker()
        rows = []
        try:
            for turn in range(1, turns + 1):
                rows.append({"turn": turn} | one_turn(chat, message(turn, words), answer_tokens, path))
                print(json.dumps({"model": name} | rows[-1]), file=sys.stderr, flush=True)
        finally:
            chat.stop_worker()
            chat.store.db.close()
    continued = [row["overhead_ms"] for row in rows[1:]]
    return {"turns": rows, "overhead_ms_median": round(statistics.median(continued), 1) if continued else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="qwen35-real-tiny,qwen35-0.8b-shape")
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--words", type=int, default=300, help="filler words per user message")
    parser.add_argument("--answer-tokens", type=int, default=8)
    parser.add_argument("--path", choices=("send", "window"), default="send",
                        help="send each turn as the command line does (send_turn) or as the window does")
    args = parser.parse_args()
    models = {name: run_model(name, args.turns, args.words, args.answer_tokens, args.path)
              for name in args.models.split(",")}
    print(json.dumps({"bench": "turn_overhead", "turns": args.turns, "words": args.words, "path": args.path,
                      "models": models}, indent=2))


if __name__ == "__main__":
    main()
