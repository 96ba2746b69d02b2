"""How often a fitted EAGLE-3 head's guesses are accepted, on prompts it was not fitted on.

For draft lengths 1..4 (every round drafts the full length), greedy, with the real drafter
(``Eagle3Drafter``) and verifier (``SpeculativeSource``): accepted / drafted tokens, mean accepted
length per round, and whether the output is token-identical to plain decoding. The head and its
target are fixtures (``make_models``): ``eagle3-bench-fitted`` on ``hybrid-bench`` by default,
``eagle3-tiny-fitted`` on ``hybrid-tiny`` with ``--tiny``. Prints one JSON object.
Usage: ``python tests/bench/bench_eagle3_fitted.py [--tiny] [--prompts N] [--tokens N]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.fixtures.eagle3_fit import fit_prompts  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402
from tests.helpers.eagle3_acceptance import acceptance  # noqa: E402
from tests.helpers.real_models import cache_dir  # noqa: E402

HELD_OUT_SEED = 1  # the fit reads prompts of seed 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="eagle3-tiny-fitted on hybrid-tiny")
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--cache", type=Path, default=None, help="fixture folder (default: the test-model cache)")
    args = parser.parse_args()
    target, head = ("hybrid-tiny", "eagle3-tiny-fitted") if args.tiny else ("hybrid-bench", "eagle3-bench-fitted")
    started = time.perf_counter()
    paths = make_models(args.cache or cache_dir(), [target, head])
    built = time.perf_counter() - started
    prompts = fit_prompts(args.prompts, HELD_OUT_SEED)
    result = acceptance(paths[target], paths[head], prompts, args.tokens)
    print(json.dumps({"bench": "eagle3_fitted", "target": target, "head": head, "held_out_prompts": args.prompts,
                      "tokens": args.tokens, "fixtures_ready_s": round(built, 1), "by_draft_length": result}, indent=2))


if __name__ == "__main__":
    main()
