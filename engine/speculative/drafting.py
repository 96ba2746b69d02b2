"""Choosing a drafter for a request: parse the user's choice, refuse what cannot work, build it.

``auto`` drafts with the best drafter the loaded model has (an installed EAGLE-3 head the app found
for it, else its own MTP head, else prompt lookup: see :meth:`Drafting._auto`) and lets the auto-off
policy switch drafting off when it measures a loss; ``mtp`` asks for the MTP head, ``model:PATH`` a
small draft model, ``eagle3:PATH`` an EAGLE-3 head made for the target. A hybrid model whose
recurrent state cannot be rolled back (e.g. qwen3next) cannot draft: a checkpoint-and-replay
fallback measured 32 → 6 tok/s upstream, so Hearth refuses instead (``auto`` simply stays off).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from engine.backends import cpu_check
from engine.backends.base import ModelLoadError
from engine.decoding.sampling import SamplingParams
from engine.models.session import ModelSession
from engine.speculative.token_sources import DraftStats, SpeculativeSource
from engine.speculative.tree_source import TreeSource
from engine.speculative.draft_files import held_by
from engine.speculative.draft_model import DraftModel
from engine.speculative.eagle3 import Eagle3Drafter
from engine.speculative.mtp import MtpDrafter, MtpHeadMissing
from engine.speculative.policy import DraftPolicy
from engine.speculative.prompt_lookup import PromptLookup
from engine.speculative.proposer import Proposer
from engine.backends.llama_eagle3 import Eagle3Incompatible
from engine.protocol import MAX_DRAFT, DraftSpec
from engine.protocol.draft_choice import DraftRefused

SourceFactory = Callable[[ModelSession, SamplingParams, np.random.Generator], SpeculativeSource]


class Drafting:
    """The drafters for one loaded target model (a draft model stays loaded between requests)."""

    def __init__(self, session: ModelSession) -> None:
        self.session = session
        self._draft_model: DraftModel | None = None
        self._mtp: MtpDrafter | None = None
        self._eagle3: Eagle3Drafter | None = None
        self._refused_heads: set[Path] = set()  # heads auto found unusable here: not loaded again for each request
        self._policies: dict[tuple, DraftPolicy] = {}  # per drafter: the last request's policy, carried over

    def close(self) -> None:
        if self._draft_model is not None:
            self._draft_model.close()
            self._draft_model = None
        self._close_eagle3()
        if self._mtp is not None:
            self._mtp.close()
            self._mtp = None

    def plan(self, spec: DraftSpec, draft_max: int, auto_off: bool = True) -> tuple[SourceFactory | None, DraftStats]:
        """A token-source factory (None: plain decoding) and the stats to report if drafting is off."""
        if spec.kind == "off":
            return None, DraftStats(kind="off")
        reason = self._cannot_draft()
        if reason and spec.kind == "auto":
            return None, DraftStats(kind="off", auto_off=True, reason=reason)
        if reason:
            raise DraftRefused(reason)
        limit = self._draft_limit(draft_max)
        kind, proposer = self._auto(spec.path) if spec.kind == "auto" else (spec.kind, self._proposer(spec.kind, spec.path))

        paths = self.session.context.settings.n_seq_max - 1  # the model was loaded for a tree of drafts

        def make(session: ModelSession, sampling: SamplingParams, rng: np.random.Generator) -> SpeculativeSource:
            if isinstance(proposer, (DraftModel, MtpDrafter, Eagle3Drafter)):
                proposer.configure(sampling, rng)
            policy = self._policy((kind, spec.path, limit, auto_off, paths), limit, auto_off)
            if paths > 1:
                return TreeSource(session, sampling, rng, proposer, policy, width=paths, max_rows=self.tree_rows())
            return SpeculativeSource(session, sampling, rng, proposer, policy)

        return make, DraftStats(kind=kind)

    def _policy(self, key: tuple, limit: int, auto_off: bool) -> DraftPolicy:
        """A new request's policy: carried over from the last request with the same drafter and limits
        (see :mod:`engine.speculative.policy`), else a fresh one."""
        last = self._policies.get(key)
        policy = last.carried_over() if last is not None else DraftPolicy(limit, auto_off=auto_off)
        self._policies[key] = policy
        return policy

    def forget_speeds(self) -> None:
        """Start every drafter's next request afresh, as after loading the model (the benches use it to
        measure a first answer)."""
        self._policies.clear()

    @staticmethod
    def tree_rows() -> int:
        """Rows one verify batch of a tree may hold and stay bit-exact on this CPU build."""
        choice = cpu_check.active()
        return choice.exact_rows - 1 if choice is not None and choice.exact_rows else MAX_DRAFT + 1

    def _cannot_draft(self) -> str:
        facts = self.session.facts
        if not facts.can_roll_back:
            return (f"drafting is not possible with {facts.arch}: this llama.cpp cannot roll back its recurrent "
                    "state, and re-reading checkpoints is slower than not drafting (32 → 6 tok/s measured upstream)")
        model = self.session.model
        if not model.batch_exact:
            return (f"drafting could change the answer here: this machine's CPU build of llama.cpp computes "
                    f"{model.weight_type} weights differently in a batch than token by token")
        return ""

    def _draft_limit(self, draft_max: int) -> int:
        if draft_max < 1:
            raise DraftRefused(f"the draft length must be at least 1, got {draft_max}")
        choice = cpu_check.active()
        if choice is not None and choice.exact_rows:  # a verify batch (draft + 1) must stay batch-exact
            draft_max = min(draft_max, choice.exact_rows - 2)
        facts = self.session.facts
        if facts.has_recurrent_state:
            return min(draft_max, self.session.context.n_rs_seq)  # rollback depth the context was made with
        return draft_max

    def _auto(self, head: str | None) -> tuple[str, Proposer]:
        """``auto``'s drafter: the EAGLE-3 head at ``head`` (the installed head the app found for this
        model) if it loads and fits, else the model's MTP head if it has one, else prompt lookup.

        The order is the expected acceptance: a head trained on the target's own hidden states guesses
        best, an MTP head was trained with the model, prompt lookup only copies n-grams from the text.
        But a head costs a decode of its own per drafted token whether it helps or not (on this CPU
        build a random-weight head loses, see tests/bench/bench_drafting.py), while lookup is free when
        it has no guess; so ``auto`` is only safe because the auto-off policy measures every drafter
        against plain decoding and switches a losing one off. A head that does not load (another
        model's, a file gone since the app looked) is passed over in silence: ``auto`` never fails.
        """
        path = Path(head).expanduser() if head else None
        if path is not None and path not in self._refused_heads:
            try:
                return "eagle3", self._load_eagle3(path)
            except (DraftRefused, ModelLoadError, RuntimeError):
                self._refused_heads.add(path)
        if self.session.model.has_mtp:
            try:
                return "mtp", self._load_mtp()
            except DraftRefused:
                pass
        return "lookup", PromptLookup()

    def _proposer(self, kind: str, path: str | None) -> Proposer:
        if kind == "lookup":
            return PromptLookup()
        if kind == "model":
            return self._load_draft_model(Path(path).expanduser())
        if kind == "eagle3":
            return self._load_eagle3(Path(path).expanduser())
        return self._load_mtp()

    def _load_eagle3(self, path: Path) -> Eagle3Drafter:
        """The EAGLE-3 head at ``path`` for this target (kept loaded while the same head is asked for)."""
        if self._eagle3 is not None and self._eagle3.path == path:
            return self._eagle3
        self._close_eagle3()
        try:
            self._eagle3 = Eagle3Drafter(path, self.session, sampling=SamplingParams(), rng=np.random.default_rng())
        except Eagle3Incompatible as exc:
            raise DraftRefused(f"{exc}; use an EAGLE-3 head made for this model, or another drafting choice") from exc
        return self._eagle3

    def _close_eagle3(self) -> None:
        if self._eagle3 is not None:
            self._eagle3.close()
            self._eagle3 = None

    def _load_mtp(self) -> MtpDrafter:
        if self._mtp is None:
            try:
                self._mtp = MtpDrafter(self.session, sampling=SamplingParams(), rng=np.random.default_rng())
            except MtpHeadMissing as exc:
                raise DraftRefused(str(exc)) from exc
        return self._mtp

    def _load_draft_model(self, path: Path) -> DraftModel:
        if self._draft_model is not None and self._draft_model.path == path:
            return self._draft_model
        self.close()
        settings = self.session.context.settings
        self._draft_model = DraftModel(path, self.session.model, n_ctx=self.session.n_ctx,
                                       n_threads=settings.n_threads, sampling=SamplingParams(),
                                       rng=np.random.default_rng(), held_bytes=held_by(self.session))
        self._draft_model.context.thread_budget = self.session.context.thread_budget  # gives cores up with the target
        return self._draft_model
