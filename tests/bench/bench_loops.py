"""How often the built-in model's answers end in a loop, with one set of sampling defaults or another.

A fixed set of varied prompts (:data:`PROMPTS`: questions, lists, poems, code, summaries, advice) is
answered by the embedded SmolLM2 through the worker loop (``InprocClient``, the same ``Chat`` request
the CLI sends), once at the defaults' own temperature with a fixed seed per prompt and once at
temperature 0. An answer *loops* (:func:`loops`) when the same run of :data:`RUN` tokens occurs three
times or more, or when it runs to the token limit while repeating (its last :data:`RUN` tokens were
written once before: a long poem cut by the limit is not a loop, a cycle cut by it is).

Each named configuration is the sampling a request gets when nobody sets a field: ``before`` is what
every path sent until issue 51 (repeat penalty 1.0), ``after`` is what the built-in model resolves to
now (:func:`app.services.sampling_defaults.resolve_sampling`), and ``--try`` adds others
(``--try strong:rp=1.15,min_p=0.1``, ``--try wide:rp=1.1,last_n=256``: the penalty's window, by default
:data:`engine.protocol.REPEAT_WINDOW`) to choose Hearth's defaults by measurement. With drafting on
(``--draft auto``, the default) the answers also report the drafter's acceptance, so the cost of the
penalty to drafting shows beside the loops.

Prints one JSON object. Usage: ``python tests/bench/bench_loops.py [--max-tokens N] [--limit N]
[--configs before,after] [--try NAME:rp=X,temp=X,top_k=N,top_p=X,min_p=X,last_n=N] [--show] [--model PATH]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.engine_clients.client import new_request_id  # noqa: E402
from app.engine_clients.inproc_client import InprocClient  # noqa: E402
from engine import protocol as p  # noqa: E402
from engine.models.model_files import embedded_model_path  # noqa: E402
from tests.helpers.loops import RUN, loops  # noqa: E402

SEED = 51  # the seed of the first prompt; prompt i samples with SEED + i

PROMPTS = [
    "What is the capital of Italy?",
    "Write a short poem about a dragon who bakes bread.",
    "What is the capital of France?",
    "How many legs does a spider have?",
    "Who wrote Romeo and Juliet?",
    "Why is the sky blue?",
    "What is photosynthesis? Answer in two sentences.",
    "List five fruits that are red.",
    "Give me three tips for sleeping better.",
    "List the planets of the solar system in order.",
    "Name four musical instruments and say one thing about each.",
    "Write a haiku about autumn leaves.",
    "Write a limerick about a cat who loves cheese.",
    "Write a four-line poem about the sea.",
    "Write a short story about a robot who learns to paint.",
    "Write a Python function that reverses a string.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "How do I read a file line by line in Python?",
    "Write a SQL query that counts the rows of a table named users.",
    "Explain what a for loop is to a beginner.",
    "Summarize in one paragraph: The Industrial Revolution began in Britain in the late 18th century. "
    "Steam engines powered new factories, railways connected cities, and many people moved from farms "
    "to towns to work. Living conditions were often poor, but productivity grew quickly.",
    "Summarize this in one sentence: Bees collect nectar from flowers and turn it into honey. They also "
    "carry pollen between plants, which helps the plants make seeds and fruit.",
    "What are the main causes of climate change?",
    "How do I make a cup of tea?",
    "What should I pack for a weekend camping trip?",
    "Translate 'good morning' into Spanish, French and German.",
    "What is 12 times 7?",
    "Explain the difference between weather and climate.",
    "Give me a recipe for pancakes.",
    "What is the tallest mountain in the world?",
    "Write an email to my manager asking for a day off next Friday.",
    "Describe your ideal weekend in three sentences.",
    "What are the benefits of regular exercise?",
    "Tell me a joke about computers.",
]


def before() -> p.SamplingSpec:
    """What a request got when nobody set a field, until issue 51."""
    return p.SamplingSpec(temperature=0.7, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0, dry_multiplier=0.0)


def after() -> p.SamplingSpec:
    """What the built-in model resolves to now."""
    from app.services.sampling_defaults import resolve_sampling
    return resolve_sampling(embedded_model_path()).spec()


def tried(text: str) -> tuple[str, p.SamplingSpec]:
    """``NAME:rp=1.15,temp=0.7`` -> a named configuration over ``before``."""
    name, _, fields = text.partition(":")
    spec = before()
    keys = {"rp": "repeat_penalty", "temp": "temperature", "top_k": "top_k", "top_p": "top_p", "min_p": "min_p",
            "last_n": "repeat_last_n", "dry": "dry_multiplier"}
    for item in filter(None, fields.split(",")):
        key, _, value = item.partition("=")
        field = keys[key]
        spec = msgspec.structs.replace(spec, **{field: int(value) if field in ("top_k", "repeat_last_n") else float(value)})
    return name, spec


def answer(client: InprocClient, prompt: str, spec: p.SamplingSpec, max_tokens: int, draft: str
           ) -> tuple[list[int], str, p.DraftStats | None, str]:
    command = p.Chat(request_id=new_request_id("loops"), messages=[p.WireMessage("user", prompt)], sampling=spec,
                     max_tokens=max_tokens, draft=p.DraftSpec(draft), draft_auto_off=False)
    text, finished = [], None
    for event in client.stream(command):
        if isinstance(event, p.TokenDelta):
            text.append(event.text)
        elif isinstance(event, p.Finished):
            finished = event
        elif isinstance(event, p.Error):
            raise RuntimeError(event.message)
    return finished.token_ids, finished.finish_reason, finished.draft, "".join(text)


def measure(client: InprocClient, spec: p.SamplingSpec, temperature: float, prompts: dict[int, str],
            args: argparse.Namespace) -> dict:
    looped, drafted, accepted, tokens, examples = [], 0, 0, 0, {}
    for i, prompt in prompts.items():
        run = msgspec.structs.replace(spec, temperature=temperature, seed=SEED + i)
        ids, reason, draft, text = answer(client, prompt, run, args.max_tokens, args.draft)
        tokens += len(ids)
        if draft is not None:
            drafted, accepted = drafted + draft.drafted, accepted + draft.accepted
        if loops(ids, reason):
            looped.append(i)
            examples.setdefault(prompt, text[:160])
        if args.show:
            print(f"--- [{i}] t={temperature} loop={loops(ids, reason)} {prompt}\n{text}\n", file=sys.stderr)
    return {"temperature": temperature, "answers": len(prompts), "loops": len(looped), "looped_prompts": looped,
            "tokens": tokens, "drafted": drafted, "accepted": accepted,
            "acceptance": round(accepted / drafted, 3) if drafted else None,
            "examples": dict(list(examples.items())[:3])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--limit", type=int, default=len(PROMPTS), help="the first N prompts only")
    parser.add_argument("--only", default="", help="these prompts only (indices: 14,27); seeds stay theirs")
    parser.add_argument("--configs", default="before,after")
    parser.add_argument("--try", dest="tries", action="append", default=[])
    parser.add_argument("--draft", default="auto")
    parser.add_argument("--show", action="store_true", help="print every answer to stderr")
    parser.add_argument("--model", default="default", help="default (the built-in model as Hearth loads it) or a path")
    args = parser.parse_args()
    configs = {name: {"before": before, "after": after}[name]() for name in filter(None, args.configs.split(","))}
    configs.update(tried(text) for text in args.tries)
    chosen = [int(i) for i in args.only.split(",")] if args.only else range(min(args.limit, len(PROMPTS)))
    prompts = {i: PROMPTS[i] for i in chosen}
    client = InprocClient()
    client.start()
    client.load_model(args.model)
    report: dict = {"prompts": len(prompts), "max_tokens": args.max_tokens, "run": RUN, "seed": SEED,
                    "draft": args.draft, "configs": {}}
    try:
        for name, spec in configs.items():
            started = time.monotonic()
            report["configs"][name] = {
                "sampling": msgspec.to_builtins(spec), "repeat_window": p.REPEAT_WINDOW,
                "default_temperature": measure(client, spec, spec.temperature, prompts, args),
                "temperature_0": measure(client, spec, 0.0, prompts, args),
                "seconds": round(time.monotonic() - started, 1)}
            print(json.dumps({name: report["configs"][name]}), file=sys.stderr, flush=True)
    finally:
        client.close(mode="abort")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
