"""Plain-text documents of a chosen length, written for a test to load."""

from __future__ import annotations

import random
from pathlib import Path

WORDS = "river stone light house garden winter market letter window music paper forest bridge candle".split()


def write_document(path: Path, n_words: int) -> Path:
    """``n_words`` words (rounded down to tens) in lines of ten, the same for the same length."""
    rng = random.Random(n_words)
    lines = [" ".join(rng.choice(WORDS) for _ in range(10)) + "." for _ in range(n_words // 10)]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
