"""What holding an answer to JSON costs per token: decode with no constraint, any JSON object, a schema.

For each model and sampling (greedy; Hearth's defaults: temperature 0.7, top-k 40, top-p 0.95, min-p 0.05), the three kinds take turns within each
rep (none, object, schema, then the reverse), answering one question of 120 tokens at most; each
figure is the median over reps of decode milliseconds per token (``Timings.gen_ms / gen_n``), and
``ratio`` is each kind's over no constraint's. The constrained answers write other tokens than the free
one (JSON), so this is a per-token cost, not the same answer timed twice.

Prints one JSON object. Usage: ``python tests/bench/bench_constraint.py [--models default,PATH...]
[--reps 5]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine import protocol as p  # noqa: E402
from engine.decoding.constraint import build_constraint  # noqa: E402
from engine.decoding.generation import Generation, GenerationSettings  # noqa: E402
from engine.decoding.sampling import GREEDY, SamplingParams  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from engine.templates.chat_template import ChatMessage, RenderOptions  # noqa: E402
from engine.templates.prompts import chat_prompt  # noqa: E402

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer"},
          "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 4},
          "bio": {"type": "string", "maxLength": 200}}, "required": ["name", "age", "hobbies", "bio"]}
KINDS = {"none": None, "json_object": p.OutputConstraint(kind="json"),
         "schema": p.constraint_from_schema_text(json.dumps(SCHEMA))}
QUESTION = "Describe a person as JSON: name, age, hobbies and a long bio."


def per_token_ms(session, tokens, reasoning, sampling, spec, seed: int) -> float:
    factory = build_constraint(session.model, spec, reasoning, *session.constraint_masks()) if spec else None
    chosen = sampling if sampling.greedy else replace(sampling, seed=seed)
    run = Generation(session, tokens, GenerationSettings(chosen, max_tokens=120, reasoning=reasoning, constraint=factory))
    list(run)
    return run.timings.gen_ms / max(run.timings.gen_n, 1)


def bench_model(ref: str, reps: int) -> list[dict]:
    session = open_session(ref, n_ctx=2048)
    tokens, reasoning = chat_prompt(session.model, [ChatMessage("user", QUESTION)], RenderOptions(enable_thinking=False))
    rows = []
    try:
        for label, sampling in (("greedy", GREEDY), ("defaults", SamplingParams())):
            times: dict[str, list[float]] = {kind: [] for kind in KINDS}
            for rep in range(reps):
                order = list(KINDS) if rep % 2 == 0 else list(reversed(KINDS))
                for kind in order:
                    times[kind].append(per_token_ms(session, tokens, reasoning, sampling, KINDS[kind], rep))
            median = {kind: statistics.median(values) for kind, values in times.items()}
            rows.append({"model": Path(ref).name, "sampling": label,
                         "ms_per_token": {k: round(v, 2) for k, v in median.items()},
                         "ratio": {k: round(v / median["none"], 3) for k, v in median.items()}})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        session.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="default")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    from engine.backends.llama_cpp import init_backend
    init_backend()
    results = [row for ref in args.models.split(",") for row in bench_model(ref, args.reps)]
    print(json.dumps({"bench": "constraint", "reps": args.reps, "results": results}, indent=2))


if __name__ == "__main__":
    main()
