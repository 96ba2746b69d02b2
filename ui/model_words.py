"""The Models page's figures in words people know, and rounded so that they hold still.

Numbers that follow the free memory are shown rounded (memory to two significant figures, words to
two significant figures), and the free memory itself is re-read into the page only when it moved by
:data:`STEADY_PERCENT` % or more (:func:`steady_memory`): a reading 1 % away from the one shown
changes nothing on screen. Memory is counted in binary gigabytes (1,024³ bytes) and written "GB",
as desktop systems show it. A token is about three quarters of an English word
(:data:`WORDS_PER_TOKEN`); the exact token counts stay in tooltips.
"""

from __future__ import annotations

import math

GIB = 1024**3
STEADY_PERCENT = 5  # free memory re-read into the page only when it moved at least this much
WORDS_PER_TOKEN = 0.75  # English prose, on the tokenizers of the catalogue's models


def round_significant(value: float, digits: int = 2) -> float:
    """``value`` to ``digits`` significant figures (0 stays 0)."""
    if value <= 0:
        return 0.0
    return round(value, digits - 1 - math.floor(math.log10(value)))


def round_memory(n_bytes: int) -> int:
    """Bytes rounded to two significant figures of a GB: 3.24 GB -> 3.2 GB, 8 GB stays 8 GB."""
    return int(round_significant(n_bytes / GIB) * GIB)


def steady_memory(shown: int | None, measured: int) -> int:
    """The free memory to show: ``shown`` while ``measured`` is within :data:`STEADY_PERCENT` % of it,
    else ``measured`` rounded (:func:`round_memory`)."""
    if shown and abs(measured - shown) * 100 < shown * STEADY_PERCENT:
        return shown
    return round_memory(measured)


def gb(n_bytes: int) -> str:
    """``"3.2 GB"``, ``"12 GB"``, ``"540 MB"``: two significant figures."""
    if n_bytes < GIB:
        return f"{round_significant(n_bytes / 1024**2):g} MB"
    return f"{round_significant(n_bytes / GIB):g} GB"


def words_at_once(tokens: int) -> str:
    """``"Reads about 24,000 words at once"``: the context in words, two significant figures."""
    if tokens <= 0:
        return "Too little free memory left to read anything at once"
    return f"Reads about {int(round_significant(tokens * WORDS_PER_TOKEN)):,} words at once"


def fit_words(fit: str, needed_bytes: int, available_bytes: int) -> str:
    """Whether the file fits this computer, and if not, why, in plain words."""
    need = f"needs about {gb(needed_bytes)} of memory, this computer has {gb(available_bytes)} free"
    if fit == "fits":
        return "Fits this computer"
    if fit == "tight":
        return f"Only just fits: it {need}; other programs may slow down"
    return f"Too big for this computer: it {need}"


def reads_tooltip(entry: dict, variant: dict) -> str:
    """The figures behind :func:`words_at_once`, with their technical names."""
    used, memory, trained = variant["max_context_tokens"], variant["memory_context_tokens"], entry["context_length"]
    text = (f"{used:,} tokens of context (a token is about ¾ of a word). The model was trained on up to "
            f"{trained:,} tokens")
    if memory > used:
        text += f"; this computer's memory would hold {memory:,}, more than it can use"
    transformer = variant["transformer_max_context_tokens"]
    if transformer != used:
        text += f". A usual model of the same size (a transformer) would read {transformer:,} here"
    return text + "."
