"""How long each draft is, and whether drafting is worth it at all on this workload.

Draft length adapts per round: one more after a fully accepted draft, one less after a round that
accepted nothing. Auto-off compares measured speed, not a model: tokens per second over recent
drafting rounds against tokens per second over recent plain steps (a short plain probe is run when
there is no recent plain measurement). When drafting is slower it is switched off, with the numbers
as the reason, and tried again every so often, since the text being written can change: after
:data:`DraftPolicy.REPROBE_EVERY` plain steps times how many times slower it was (a drafter at 0.3×
waits 3.7 times as long as one at 0.9×), doubled after each try that loses. A try costs its rounds'
tokens times that slowness beyond plain steps, so the tries cost no more than their rounds' tokens
every :data:`DraftPolicy.REPROBE_EVERY` plain steps however badly the drafter lost: a 3-path tree of
a head that guesses nothing, whose round costs five plain steps, was tried as often as a drafter that
lost narrowly, at a tenth of the speed of the answer it fell in.

A drafter whose guesses cost nothing (``Proposer.free``: prompt lookup) is also watched while off:
each plain step it still guesses, unverified, and the answer then shows how many of those tokens a
round would have accepted (:meth:`DraftPolicy.record_guess`). When the last guesses (at first
:data:`DraftPolicy.GUESS_ROUNDS`), at what a round measured to cost, would have been a clear margin
(:data:`DraftPolicy.GUESS_MARGIN`) faster than plain steps, drafting is tried again at once instead of
after hundreds of steps. An answer that starts in its own words and then quotes a document loses the
first rounds and wins the quote. A try that loses doubles the guesses the next one needs, so prose in
which a few guesses happen to be right does not pay for a try every few tokens.

A policy carries over between requests with the same drafter on the same loaded model
(:meth:`DraftPolicy.carried_over`): a drafter that lost starts the next answer switched off, still
counting towards its re-probe, and one that won starts at the length it reached with the plain speed
already measured. So a losing drafter's warm-up (two rounds of a 3-path tree, ``tests/bench/bench_auto_off.py``) is
paid once per model, not once per answer.
"""

from __future__ import annotations

from collections import deque


class _Rate:
    """Tokens per second over the last ``keep`` samples."""

    def __init__(self, keep: int = 16) -> None:
        self.samples: deque[tuple[int, float]] = deque(maxlen=keep)

    def add(self, tokens: int, seconds: float) -> None:
        self.samples.append((tokens, seconds))

    @property
    def per_second(self) -> float:
        seconds = sum(s for _, s in self.samples)
        return sum(t for t, _ in self.samples) / seconds if seconds > 0 else 0.0


class DraftPolicy:
    WARMUP_ROUNDS = 2  # drafting rounds before the first comparison
    PROBE_STEPS = 3  # plain steps measured for a comparison
    STALE_ROUNDS = 64  # drafting rounds after which the plain measurement is taken again
    REPROBE_EVERY = 512  # plain steps, once off, before drafting is tried again (doubles after each loss)
    SLOWNESS_MAX = 16.0  # the most the wait is stretched for a drafter that lost badly (times REPROBE_EVERY)
    REPROBE_ROUNDS = 2
    GUESS_ROUNDS = 4  # unverified guesses of a free drafter, while off, that may bring drafting back
    GUESS_MARGIN = 1.25  # how much faster than plain steps those guesses must look
    GUESS_ROUNDS_MAX = 64  # the most guesses a try ever needs, however many tries lost

    def __init__(self, max_draft: int, auto_off: bool = True, start: int = 2) -> None:
        self.max_draft = max_draft
        self.auto_off = auto_off
        self.length = max(1, min(start, max_draft))
        self.drafting, self.plain = _Rate(), _Rate()
        self.guesses: list[int] = []  # tokens each unverified guess got right, since drafting was last tried
        self.guess_rounds = self.GUESS_ROUNDS  # guesses the next try needs (doubles after a try that lost)
        self.guessed_try = False  # the running probe was started by guesses
        self.mode = "draft"  # draft | probe_plain | off | probe_draft
        self.count = 0  # rounds or steps in the current mode
        self.ever_off = False
        self.reprobe_every = self.REPROBE_EVERY
        self.off_for = self.REPROBE_EVERY  # plain steps this time off lasts (reprobe_every times the slowness)
        self.reason = ""

    @property
    def off(self) -> bool:
        return self.mode in ("off", "probe_draft")

    def carried_over(self) -> DraftPolicy:
        """The policy for the next request with this drafter: it starts where this one ended (mode,
        length, measured speeds, re-probe interval), and reports auto-off if it starts switched off."""
        following = DraftPolicy(self.max_draft, self.auto_off)
        following.length, following.mode, following.count = self.length, self.mode, self.count
        following.drafting.samples.extend(self.drafting.samples)
        following.plain.samples.extend(self.plain.samples)
        following.reprobe_every, following.off_for, following.reason = self.reprobe_every, self.off_for, self.reason
        following.guess_rounds = self.guess_rounds
        following.ever_off = self.off
        return following

    def draft_length(self) -> int:
        """How many tokens to draft now; 0 means a plain step."""
        return self.length if self.max_draft > 0 and self.mode in ("draft", "probe_draft") else 0

    def record_round(self, n_draft: int, n_accepted: int, n_tokens: int, seconds: float) -> None:
        self.drafting.add(n_tokens, seconds)
        if n_accepted == n_draft:
            self.length = min(self.length + 1, self.max_draft)
        elif n_accepted == 0:
            self.length = max(1, self.length - 1)
        self.count += 1
        if not self.auto_off:
            return
        if self.mode == "probe_draft" and self.count >= self.REPROBE_ROUNDS:
            self._decide()
        elif self.mode == "draft" and self.count >= self.WARMUP_ROUNDS:
            if len(self.plain.samples) < self.PROBE_STEPS or self.count >= self.STALE_ROUNDS:
                self._enter("probe_plain")
            else:
                self._decide()

    def record_plain(self, seconds: float) -> None:
        self.plain.add(1, seconds)
        if self.mode == "probe_plain":
            self.count += 1
            if self.count >= self.PROBE_STEPS:
                self._decide()
        elif self.mode == "off":
            self.count += 1
            if self.count >= self.off_for:
                self.drafting.samples.clear()  # judged on its own rounds now, not on those that lost long ago
                self._enter("probe_draft")

    def record_guess(self, n_right: int) -> None:
        """While off: a free drafter's unverified guess got its first ``n_right`` tokens right. When the
        last guesses would have made rounds faster than plain steps, drafting is tried again now."""
        if self.mode != "off":
            return
        self.guesses.append(n_right)
        del self.guesses[:-self.guess_rounds]  # only the last ones count
        if len(self.guesses) == self.guess_rounds and self._guesses_win():
            self.length = max(1, min(self.max_draft, round(sum(self.guesses) / len(self.guesses))))
            self.guesses.clear()
            self.drafting.samples.clear()
            self.guessed_try = True
            self._enter("probe_draft")

    def _guesses_win(self) -> bool:
        """Whether rounds at the cost measured so far, accepting what the guesses got right, beat plain steps."""
        rounds = self.drafting.samples
        plain = self.plain.per_second
        if not rounds or plain <= 0:
            return False
        round_seconds = sum(s for _, s in rounds) / len(rounds)
        tokens = 1 + sum(self.guesses) / len(self.guesses)
        return tokens / round_seconds > self.GUESS_MARGIN * plain

    def _enter(self, mode: str) -> None:
        self.mode, self.count = mode, 0

    def _decide(self) -> None:
        drafted, plain = self.drafting.per_second, self.plain.per_second
        off = drafted < plain
        if self.mode == "probe_draft" and self.guessed_try:
            self.guess_rounds = min(self.guess_rounds * 2, self.GUESS_ROUNDS_MAX) if off else self.GUESS_ROUNDS
            self.guessed_try = False
        elif off and self.mode == "probe_draft":
            self.reprobe_every *= 2  # it lost again: try less often
        if off:
            slowness = plain / drafted if drafted > 0 else self.SLOWNESS_MAX
            self.off_for = round(self.reprobe_every * min(max(slowness, 1.0), self.SLOWNESS_MAX))
        self.ever_off |= off
        self.reason = (f"drafting measured {drafted:.1f} tok/s against {plain:.1f} tok/s without; "
                       + ("switched off" if off else "kept on"))
        self._enter("off" if off else "draft")
