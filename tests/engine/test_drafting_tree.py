"""Tree drafting changes no token (issue 33): several draft paths verified in one batch, one sequence
(and one recurrent state) per path, on the hybrid fixture and on SmolLM2 (a transformer).

The paths come from a test drafter that knows plain decoding's answer and spoils it on purpose, round
by round at different depths, so every case of a tree round happens: the first path accepted whole or
in part, another path winning (its cells moved to the trunk, earlier paths' cells parked), nothing
accepted, and a round that starts while a rollback is still pending on the trunk (its copies then get
the trunk's state through a recurrent-only blob). Greedy output must be plain decoding's, token for
token; sampled output must keep the target's distribution.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.llama_cpp import quantize
from engine.decoding.generation import GenerationSettings
from engine.templates.prompts import raw_prompt_tokens
from engine.decoding.sampling import GREEDY, SamplingParams
from engine.models.session import open_session
from engine.speculative.draft_model import DraftModel
from engine.speculative.eagle3 import Eagle3Drafter
from engine.speculative.mtp import MtpDrafter
from engine.speculative.proposer import Draft, Proposer
from engine.speculative.tree_source import TreeSource
from tests.engine.test_drafting import SAMPLING_CONFIGS, first_tokens, prompts, run
from tests.engine.test_drafting_eagle3 import WEIGHT_TYPES, followed_and_at_once, long_prompt
from tests.helpers.eagle3_acceptance import FullChains
from tests.stats import chi2_critical, two_sample_chi2

WIDTH = 3


class SpoiledAnswers(Proposer):
    """Paths from a known answer, spoiled in a pattern that turns with the round: path 0 and path 1
    wrong at the same depth (the first path wins in part, leaving a rollback pending on the trunk for
    the next round's copies), path 1 right for longer (another path wins), path 0 right (all of it
    accepted), everything wrong at once (nothing accepted); path 2 is always wrong."""

    kind = "tree-test"

    def __init__(self, answer_after: dict[tuple[int, ...], list[int]], n_vocab: int) -> None:
        self.answer_after, self.n_vocab, self.round = answer_after, n_vocab, 0

    def propose(self, history, k):
        return self.propose_paths(history, k, 1)[0]

    def propose_paths(self, history, k, width):
        truth = self._truth(history, k)
        if len(truth) < k:
            return [Draft(truth, [None] * len(truth))] if truth else []
        self.round += 1
        depth = (self.round // 4) % k
        first, second = {0: (depth, depth), 1: (depth, depth + 1), 2: (k, k), 3: (0, 0)}[self.round % 4]
        paths = [self._spoil(truth, first, 1), self._spoil(truth, second, 2), [(t + 7) % self.n_vocab for t in truth]]
        return [Draft(p, [None] * k) for p in paths[:width]]

    def _truth(self, history, k):
        for prefix, answer in self.answer_after.items():
            if tuple(history[:len(prefix)]) == prefix:
                done = len(history) - len(prefix)
                return answer[done:done + k]
        return []

    def _spoil(self, truth, depth, by):
        return [(t + by) % self.n_vocab if i == depth else t for i, t in enumerate(truth)]


def tree_source(proposer, draft_max=4, width=WIDTH):
    def make(session, sampling, rng):
        return TreeSource(session, sampling, rng, proposer,
                          FullChains(draft_max), width=width, max_rows=15)

    return make


@pytest.fixture(scope="module")
def tiny_pair(hybrid_tiny):
    """hybrid-tiny loaded for a tree of WIDTH paths, and loaded plainly (what the answers must match)."""
    pair = [open_session(str(hybrid_tiny), n_ctx=1024, n_threads=1, draft_max=4, draft_width=width)
            for width in (WIDTH, 1)]
    yield pair
    for session in pair:
        session.close()


@pytest.fixture(scope="module")
def tiny(tiny_pair):
    return tiny_pair[0]


@pytest.fixture(scope="module")
def plain_tiny(tiny_pair):
    return tiny_pair[1]


def greedy_tree_is_identical(session, plain_session, texts, max_tokens=40, sampling=GREEDY) -> dict[str, int]:
    settings = GenerationSettings(sampling, max_tokens=max_tokens)
    answers = {}
    for text in texts:
        plain = run(plain_session, text, settings)
        answers[tuple(raw_prompt_tokens(session.model, text))] = list(plain.token_ids)
    proposer = SpoiledAnswers(answers, session.model.n_vocab)
    totals = {"tree_rounds": 0, "side_wins": 0, "accepted": 0, "drafted": 0, "rollbacks": 0}
    for text, answer in zip(texts, answers.values()):
        drafted = run(session, text, settings, tree_source(proposer))
        assert drafted.token_ids == answer, text
        assert drafted.source.tree.parked == 0, "parked cells are freed when the request ends"
        for key in totals:
            totals[key] += getattr(drafted.source.stats, key)
    return totals


def test_greedy_tree_drafting_on_the_hybrid_model_is_plain_decoding(tiny, plain_tiny):
    totals = greedy_tree_is_identical(tiny, plain_tiny, prompts(6))
    assert totals["tree_rounds"] > 30 and totals["side_wins"] > 5, totals
    assert 0 < totals["accepted"] < totals["drafted"] and totals["rollbacks"] > 5, totals


@pytest.mark.parametrize("window", [8, -1])
def test_greedy_tree_drafting_with_a_repeat_window_is_plain_decoding(tiny, plain_tiny, window):
    """Each node is judged with the penalty over its own window of the answer (repeat_last_n)."""
    windowed = SamplingParams(temperature=0.0, repeat_penalty=1.3, repeat_last_n=window)
    totals = greedy_tree_is_identical(tiny, plain_tiny, prompts(4), max_tokens=80, sampling=windowed)
    assert totals["tree_rounds"] > 20 and totals["side_wins"] > 2, totals


def test_greedy_tree_drafting_past_512_tokens_is_plain_decoding(tiny, plain_tiny):
    text = long_prompt(tiny, 520)
    totals = greedy_tree_is_identical(tiny, plain_tiny, [text, text + " the"], max_tokens=60)
    assert totals["tree_rounds"] > 10 and totals["side_wins"] > 2, totals


def test_greedy_tree_drafting_on_a_transformer_is_plain_decoding(smollm2):
    tree = open_session(str(smollm2), n_ctx=1024, draft_max=4, draft_width=WIDTH)
    plain = open_session(str(smollm2), n_ctx=1024, draft_max=4)
    try:
        totals = greedy_tree_is_identical(tree, plain, prompts(3), max_tokens=32)
    finally:
        tree.close()
        plain.close()
    assert totals["tree_rounds"] > 10 and totals["side_wins"] > 2, totals


class TopCandidates(Proposer):
    """The same paths every time: the tokens plain sampling gave most often at depths 1 and 2."""

    kind = "tree-test"

    def __init__(self, paths: list[list[int]]) -> None:
        self.paths = paths

    def propose(self, history, k):
        return self.propose_paths(history, k, 1)[0]

    def propose_paths(self, history, k, width):
        return [Draft(p[:k], [None] * min(k, len(p))) for p in self.paths[:width]]


@pytest.mark.parametrize("params", SAMPLING_CONFIGS[:2], ids=["cfg0", "cfg1"])
def test_sampled_tree_drafting_keeps_the_target_distribution(tiny, params):
    tokens = raw_prompt_tokens(tiny.model, "the cat sat on the mat and the dog")
    tiny.reset()
    tiny.feed(tokens[:-1])
    blob = tiny.context.state_get(0)
    plain = first_tokens(tiny, blob, tokens[:-1], tokens[-1], params, range(600))
    by_first = {}
    for a, b in plain:
        by_first.setdefault(a, []).append(b)
    common = sorted(by_first, key=lambda a: -len(by_first[a]))[:WIDTH]
    paths = [[a, max(set(by_first[a]), key=by_first[a].count)] for a in common]
    drafted = first_tokens(tiny, blob, tokens[:-1], tokens[-1], params, range(10_000, 10_600),
                           tree_source(TopCandidates(paths), draft_max=2))
    assert first_tokens.accepted > 60 and first_tokens.rejected > 60, (first_tokens.accepted, first_tokens.rejected)
    for position in (0, 1):
        statistic, df = two_sample_chi2([t[position] for t in plain], [t[position] for t in drafted])
        assert df >= 2 and statistic < chi2_critical(df), (position, statistic, df)


def model_drafter(kind, session, test_models, eagle3_tiny):
    if kind == "eagle3":
        return Eagle3Drafter(eagle3_tiny, session, sampling=GREEDY, rng=np.random.default_rng(0), p_min=0.0)
    if kind == "mtp":
        return MtpDrafter(session, sampling=GREEDY, rng=np.random.default_rng(0), p_min=0.0)
    return DraftModel(test_models["hybrid-draft"], session.model, n_ctx=session.n_ctx, n_threads=1,
                      sampling=GREEDY, rng=np.random.default_rng(0), p_min=0.0)


@pytest.mark.parametrize("kind", ["eagle3", "mtp", "model"])
def test_greedy_tree_drafting_with_each_model_drafter_is_plain_decoding(tiny, plain_tiny, test_models,
                                                                        eagle3_tiny, kind):
    """Each drafter's tree: its three likeliest first guesses, each with its greedy chain."""
    proposer = model_drafter(kind, tiny, test_models, eagle3_tiny)
    settings = GenerationSettings(GREEDY, max_tokens=40)
    stats = []
    try:
        for text in prompts(4):
            plain = run(plain_tiny, text, settings)
            drafted = run(tiny, text, settings, tree_source(proposer))
            assert drafted.token_ids == plain.token_ids, text
            stats.append(drafted.source.stats)
    finally:
        proposer.close()
    assert sum(s.tree_rounds for s in stats) > 20, stats
    if kind == "model":  # the draft model shares most of the target's units; the random heads guess blindly
        assert sum(s.accepted for s in stats) > 0 and sum(s.side_wins for s in stats) > 0, stats


def test_an_eagle3_head_that_followed_tree_rounds_guesses_as_one_that_read_the_history_at_once(
        tiny, plain_tiny, eagle3_tiny):
    """After tree rounds whose paths win first, second or not at all (the winning path's rows read from
    the middle of the batch), rollbacks and plain steps, the head's rows are those of one catch-up over
    the whole history. The paths come from a known answer, so other paths win often."""
    settings = GenerationSettings(GREEDY, max_tokens=30)
    texts = prompts(4)
    answers = {tuple(raw_prompt_tokens(tiny.model, t)): list(run(plain_tiny, t, settings).token_ids) for t in texts}
    spoiled = SpoiledAnswers(answers, tiny.model.n_vocab)
    proposer = Eagle3Drafter(eagle3_tiny, tiny, sampling=GREEDY, rng=np.random.default_rng(0), p_min=0.0)
    proposer.propose_paths = spoiled.propose_paths  # the head only follows
    side_wins = 0
    try:
        for text in texts:
            drafted = run(tiny, text, settings, tree_source(proposer))
            side_wins += drafted.source.stats.side_wins
            followed, at_once = followed_and_at_once(tiny, proposer, drafted.pending_token)
            assert len(followed) == 4 and followed == at_once, text
    finally:
        proposer.close()
    assert side_wins > 3


@pytest.mark.parametrize("weight_type", WEIGHT_TYPES)
def test_greedy_tree_drafting_is_plain_decoding_in_each_weight_type(test_models, tmp_path, weight_type):
    """hybrid-tiny converted by llama.cpp's quantizer: 15-row tree batches (3 paths of 5) give each path's
    rows as a chain would, in every weight type drafting is allowed for on this machine."""
    path = (test_models["hybrid-tiny-q8"] if weight_type == "Q8_0"
            else quantize(test_models["hybrid-tiny"], tmp_path / f"hybrid-tiny-{weight_type}.gguf", weight_type))
    tree = open_session(str(path), n_ctx=512, n_threads=1, draft_max=4, draft_width=WIDTH)
    plain = open_session(str(path), n_ctx=512, n_threads=1, draft_max=4)
    try:
        assert tree.model.weight_type == weight_type
        if not tree.model.batch_exact:
            pytest.skip(f"drafting is refused for {weight_type} on this machine (not batch-exact)")
        totals = greedy_tree_is_identical(tree, plain, prompts(3), max_tokens=30)
    finally:
        tree.close()
        plain.close()
    assert totals["tree_rounds"] > 10 and totals["side_wins"] > 2, totals
