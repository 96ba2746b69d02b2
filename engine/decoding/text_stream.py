"""Turning a stream of token pieces into text deltas that are safe to show.

Two things can go wrong when text is streamed token by token: a multi-byte UTF-8 character can be
split across tokens (emitting its first half would show a replacement character), and the tail of
the text can be the start of a stop string (emitting it would show text that is later cut). Both
are handled by holding back just enough bytes or characters until they are decided.
"""

from __future__ import annotations

import codecs


class Utf8Stream:
    """Decodes token pieces (bytes) incrementally; never returns half a character."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, piece: bytes) -> str:
        return self._decoder.decode(piece)

    def flush(self) -> str:
        """Whatever is left at the end (an incomplete sequence becomes U+FFFD)."""
        return self._decoder.decode(b"", final=True)


class StopStringFilter:
    """Withholds text that might be the start of a stop string; reports when one is complete."""

    def __init__(self, stop_strings: list[str] | tuple[str, ...] = ()) -> None:
        self._stops = [s for s in stop_strings if s]
        self._pending = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        """Returns the text that is certainly not part of a stop string."""
        if self.stopped:
            return ""
        self._pending += text
        if not self._stops:
            out, self._pending = self._pending, ""
            return out
        cut = self._first_stop_index()
        if cut is not None:
            self.stopped = True
            out, self._pending = self._pending[:cut], ""
            return out
        hold = self._longest_partial_suffix()
        out = self._pending[: len(self._pending) - hold]
        self._pending = self._pending[len(out):]
        return out

    def flush(self) -> str:
        out, self._pending = ("" if self.stopped else self._pending), ""
        return out

    def _first_stop_index(self) -> int | None:
        hits = [i for i in (self._pending.find(s) for s in self._stops) if i >= 0]
        return min(hits) if hits else None

    def _longest_partial_suffix(self) -> int:
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(self._pending)), best, -1):
                if self._pending.endswith(stop[:n]):
                    best = n
                    break
        return best
