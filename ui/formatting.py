"""Human-readable text for the numbers the worker reports (rates, sizes, durations, statistics).

Pure functions, no Qt: the telemetry panel, message tooltips and any later CLI output share them,
and they are unit-tested without a display.

Two kinds of "no number" are told apart, consistently in every formatter:

* ``"unavailable"`` (the protocol's :data:`engine.protocol.UNAVAILABLE`) means the worker *asked*
  and this machine cannot tell (no temperature sensor, no frequency counter, no draft yet). It is
  shown as the word ``"unavailable"``, never hidden and never shown as 0. A non-finite float
  (NaN, infinity) is treated the same way: a measurement that did not work.
* ``None`` means there is nothing to ask: no model loaded, no worker running. It is shown as
  :data:`NO_VALUE` (an em dash).

Sizes use binary units and say so (``KiB``, ``MiB``, ``GiB``): they are what memory is allocated
in, and "GB" would be off by 7% at that scale. Precision shrinks as numbers grow so a value
never shows more than about three significant digits.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any

from app.services.model_refs import model_display_name
from app.services.settings import app_data_dir
from model_store.installed import EMBEDDED_ID, EMBEDDED_NAME

UNAVAILABLE_TEXT = "unavailable"
NO_VALUE = "\u2014"  # em dash
NO_STATISTICS = "No statistics for this message."

_KIB = 1024
_MIB = 1024**2
_GIB = 1024**3


def model_name(ref: str) -> str:
    """What a model is called on screen: :func:`app.services.model_refs.model_display_name` (the
    catalogue's name, else the file's own, tidied, else its file name), asked once per model."""
    return EMBEDDED_NAME if ref == EMBEDDED_ID else _display_name(ref, app_data_dir())


@functools.lru_cache(maxsize=64)
def _display_name(ref: str, data_dir: Path) -> str:
    return model_display_name(ref, data_dir)


def _is_number(value: object) -> bool:
    """A real int or float (``bool`` is excluded: ``True`` is not a measurement)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _missing_text(value: object) -> str | None:
    """The text for a value that is not a usable number, or ``None`` if it is one."""
    if value is None:
        return NO_VALUE
    if not _is_number(value) or not math.isfinite(value):
        return UNAVAILABLE_TEXT
    return None


def fmt_rate(tok_s: float | str | None) -> str:
    """``"12.3 tok/s"``; ``"idle"`` for 0 (the worker's sliding window saw no work)."""
    if (missing := _missing_text(tok_s)) is not None:
        return missing
    if tok_s <= 0:
        return "idle"
    if round(tok_s, 1) < 100:
        return f"{tok_s:.1f} tok/s"
    return f"{tok_s:,.0f} tok/s"


def fmt_bytes(n: int | float | str | None) -> str:
    """``"512 B"``, ``"812 KiB"``, ``"4.9 MiB"``, ``"1.20 GiB"`` (binary units)."""
    if (missing := _missing_text(n)) is not None:
        return missing
    sign = "-" if n < 0 else ""
    size = abs(n)
    if size < _KIB:
        return f"{sign}{size:.0f} B"
    if round(size / _KIB) < 1024:
        return f"{sign}{size / _KIB:.0f} KiB"
    if round(size / _MIB, 1) < 1024:
        return f"{sign}{size / _MIB:.1f} MiB"
    return f"{sign}{size / _GIB:,.2f} GiB"


def fmt_duration(seconds: float) -> str:
    """A time left: ``"45 s"``, ``"2 min 05 s"``."""
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def fmt_ms(ms: float | str | None) -> str:
    """``"85 ms"`` below a second, ``"1.4 s"`` below a minute, then ``"2 min 5 s"``."""
    if (missing := _missing_text(ms)) is not None:
        return missing
    ms = max(0.0, float(ms))
    if round(ms) < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    whole_seconds = round(seconds)
    return f"{whole_seconds // 60} min {whole_seconds % 60} s"


def fmt_fraction(x: float | str | None) -> str:
    """A 0..1 fraction as a whole percentage: ``0.734`` -> ``"73%"``."""
    if (missing := _missing_text(x)) is not None:
        return missing
    return f"{x * 100:.0f}%"


def fmt_temperature(celsius: float | str | None) -> str:
    """``"61 °C"``."""
    if (missing := _missing_text(celsius)) is not None:
        return missing
    return f"{celsius:.0f} \u00b0C"


def _ghz(mhz: float) -> str:
    return f"{mhz / 1000:.1f}"


def fmt_throttle(
    throttled: bool | str | None,
    freq_mhz: float | str | None = None,
    freq_max_mhz: float | str | None = None,
) -> str:
    """``"throttled (1.2 of 3.4 GHz)"``, ``"not throttled"``, ``"unavailable"`` or ``"—"``.

    The frequencies only qualify a throttled CPU; any of them missing just shortens the text.
    """
    if throttled is None:
        return NO_VALUE
    if not isinstance(throttled, bool):
        return UNAVAILABLE_TEXT
    if not throttled:
        return "not throttled"
    has_freq = _missing_text(freq_mhz) is None
    has_max = _missing_text(freq_max_mhz) is None
    if has_freq and has_max:
        return f"throttled ({_ghz(freq_mhz)} of {_ghz(freq_max_mhz)} GHz)"
    if has_freq:
        return f"throttled ({_ghz(freq_mhz)} GHz)"
    return "throttled"


def fmt_device(planned: str | None, ran: str | None) -> str:
    """The device a phase runs on: the one that actually ran it wins over the planned one.

    ``fmt_device("npu", "cpu")`` -> ``"cpu (planned: npu)"``; same device, or only one known ->
    that device; neither -> ``"—"``.
    """
    if ran and planned and ran != planned:
        return f"{ran} (planned: {planned})"
    return ran or planned or NO_VALUE


# ------------------------------------------------------------------------ message statistics
#
# The stats dict is stored with each assistant message as JSON and read back from old versions
# too, so every lookup tolerates a missing key or a value of the wrong type: such a value simply
# contributes no line.


def _section(stats: dict[str, Any], key: str) -> dict[str, Any]:
    value = stats.get(key)
    return value if isinstance(value, dict) else {}


def _number(section: dict[str, Any], key: str) -> float | None:
    value = section.get(key)
    return float(value) if _missing_text(value) is None else None


def _count(section: dict[str, Any], key: str) -> int | None:
    value = _number(section, key)
    return None if value is None else int(value)


def _counted(n: int, noun: str) -> str:
    """``"1 token"``, ``"1,024 tokens"``."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _generation_line(timings: dict[str, Any]) -> str | None:
    gen_n = _count(timings, "gen_n")
    if gen_n is None:
        return None
    gen_ms = _number(timings, "gen_ms") or 0.0
    if gen_n > 0 and gen_ms > 0:
        return f"{_counted(gen_n, 'token')} \u00b7 {fmt_rate(gen_n / (gen_ms / 1000))}"
    return _counted(gen_n, "token")


def _first_token_line(timings: dict[str, Any]) -> str | None:
    ttft_ms = _number(timings, "ttft_ms")
    return f"first word after {fmt_ms(ttft_ms)}" if ttft_ms else None


def _prompt_line(timings: dict[str, Any], snapshot: dict[str, Any]) -> str | None:
    read = _count(snapshot, "prefilled_tokens")
    if read is None:
        read = _count(timings, "prompt_n")
    restored = (_count(snapshot, "restored_tokens") or 0) if snapshot.get("restored") is True else 0
    if read is None:
        return f"{_counted(restored, 'token')} resumed from where they were saved" if restored else None
    line = f"read {_counted(read, 'new token')}"
    return f"{line} ({restored:,} resumed from where they were saved, not read again)" if restored else line


def _draft_lines(draft: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    drafted = _count(draft, "drafted") or 0
    if drafted > 0:
        accepted = _count(draft, "accepted") or 0
        lines.append(f"guesses ahead: {accepted:,} of {drafted:,} kept ({fmt_fraction(accepted / drafted)})")
    reason = draft.get("reason") if isinstance(draft.get("reason"), str) else ""
    if draft.get("auto_off") is True or (draft.get("kind") == "off" and reason):
        lines.append(f"guessing ahead off: {_in_words(reason)}" if reason else "guessing ahead off")
    return lines


_MEASURED = re.compile(r"drafting measured ([\d.]+) tok/s against ([\d.]+) tok/s without; switched off")


def _in_words(reason: str) -> str:
    """The engine's reason for switching drafting off, in words (its numbers kept)."""
    found = _MEASURED.fullmatch(reason)
    if found is None:
        return reason
    return f"it was slower on this computer ({found[1]} tok/s with it, {found[2]} without)"


def _elapsed_line(stats: dict[str, Any]) -> str | None:
    elapsed_s = _number(stats, "elapsed_s")
    return f"took {fmt_ms(elapsed_s * 1000)} in all" if elapsed_s else None


def message_stats_tooltip(stats: dict[str, Any] | None) -> str:
    """A short plain-text tooltip, one fact per line, for an assistant message's statistics.

    Lines appear only for the facts the dict holds, in this order: tokens written and speed,
    time to first token, prompt tokens read (and restored from a snapshot), drafting, total time.
    """
    if not isinstance(stats, dict):
        return NO_STATISTICS
    timings = _section(stats, "timings")
    snapshot = _section(stats, "snapshot")
    candidates = [
        _generation_line(timings),
        _first_token_line(timings),
        _prompt_line(timings, snapshot),
        *_draft_lines(_section(stats, "draft")),
        _elapsed_line(stats),
    ]
    lines = [line for line in candidates if line]
    return "\n".join(lines) if lines else NO_STATISTICS
