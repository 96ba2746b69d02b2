"""How much of an answer Hearth takes from a remote engine, whatever the engine does.

A server is asked for at most ``max_tokens`` tokens, and an honest one stops there by itself. One
that does not (a bug, or a hostile server) would stream for ever: a test server that never stopped
had ``--max-tokens 8`` print 22 million characters in 96 s. So the client enforces the limit too,
with one rule (:class:`AnswerBudget`):

* **tokens**: the stream's own count where it gives one (``usage.completion_tokens`` in the chunks,
  as vLLM sends with continuous usage statistics), else its pieces: each chunk that brings answer
  text or reasoning counts as one token. Servers send one token a piece (llama.cpp's server, vLLM,
  Ollama, another Hearth) or several, never less, so a piece beyond ``max_tokens`` is a token beyond
  it. The answer ends at the first piece past the limit, which is not kept: an honest server that
  stops at exactly ``max_tokens`` is never cut.
* **bytes**: the answer's text and reasoning together, as UTF-8, may not pass :func:`byte_cap`
  (:data:`BYTES_PER_TOKEN` a token, at least :data:`MIN_ANSWER_BYTES`, at most
  :data:`MAX_ANSWER_BYTES`), whatever a piece holds: a server that sends megabytes in one piece is
  cut at the cap.

Either way the stream is closed (the server sees the connection go) and the answer ends as a
"length" finish cut by ``max_tokens``, with ``RemoteReport.closed_by_hearth`` saying which limit the
engine went past. No time cap is set here: a slow engine that keeps within its limits is waited for
(the read timeout of :mod:`app.engine_clients.remote.api` covers one that goes silent).
"""

from __future__ import annotations

# The longest tokens of common vocabularies are runs of 16 to 64 spaces, dashes or digits; English
# text averages about 4 bytes a token. 64 a token is room for any honest answer.
BYTES_PER_TOKEN = 64
MIN_ANSWER_BYTES = 64 * 1024
MAX_ANSWER_BYTES = 16 * 2**20  # about 4 million tokens of text: more than any model writes in one answer

# What RemoteReport.closed_by_hearth holds, and what the engine did, in words a message can use
OVER_TOKENS, OVER_BYTES = "max_tokens", "max_bytes"
OVERRUN_WORDS = {OVER_TOKENS: "did not stop at the answer's token limit (--max-tokens)",
                 OVER_BYTES: "sent more text than the answer's token limit (--max-tokens) allows"}


def byte_cap(max_tokens: int) -> int:
    """The most UTF-8 bytes of text and reasoning an answer of ``max_tokens`` tokens may bring."""
    return min(MAX_ANSWER_BYTES, max(MIN_ANSWER_BYTES, max_tokens * BYTES_PER_TOKEN))


def _clipped(text: str, room: int) -> str:
    """``text`` cut to at most ``room`` UTF-8 bytes, on a character's boundary."""
    return text.encode()[:max(room, 0)].decode(errors="ignore")


class AnswerBudget:
    """Counts one answer's pieces and bytes against its limits; :attr:`exceeded` names the limit the
    engine went past ("" while it keeps within them)."""

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.cap = byte_cap(max_tokens)
        self.pieces = 0
        self.bytes = 0
        self.counted: int | None = None  # the server's own count of the tokens written, once it gives one
        self.exceeded = ""

    def saw_usage(self, usage: dict) -> None:
        tokens = usage.get("completion_tokens")
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            self.counted = tokens

    @property
    def tokens(self) -> int:
        return self.counted if self.counted is not None else self.pieces

    def take(self, text: str, reasoning: str) -> tuple[str, str]:
        """What of a piece's ``text`` and ``reasoning`` may be shown: all of it, within the limits;
        only what fits under the byte cap; nothing once the engine went past ``max_tokens``."""
        if self.exceeded:
            return "", ""
        self.pieces += 1
        if self.tokens > self.max_tokens:
            self.exceeded = OVER_TOKENS
            return "", ""
        room = self.cap - self.bytes
        size = len(text.encode()) + len(reasoning.encode())
        if size > room:
            self.exceeded = OVER_BYTES
            reasoning = _clipped(reasoning, room)
            text = _clipped(text, room - len(reasoning.encode()))
            size = len(text.encode()) + len(reasoning.encode())
        self.bytes += size
        return text, reasoning
