from engine.speculative.policy import DraftPolicy


def drive(policy, draft_s_per_token, plain_s, steps=400, accept=2):
    """Simulate a workload: drafting rounds produce accept+1 tokens; returns rounds and plain steps."""
    rounds = plain = 0
    for _ in range(steps):
        k = policy.draft_length()
        if k:
            policy.record_round(k, min(accept, k), min(accept, k) + 1, draft_s_per_token * (min(accept, k) + 1))
            rounds += 1
        else:
            policy.record_plain(plain_s)
            plain += 1
    return rounds, plain


def test_a_losing_drafter_is_switched_off_with_the_numbers():
    policy = DraftPolicy(max_draft=4)
    rounds, plain = drive(policy, draft_s_per_token=0.02, plain_s=0.01)
    assert policy.off and policy.ever_off
    assert "switched off" in policy.reason and "tok/s" in policy.reason
    assert rounds < 20 and plain > 350  # a few probes, then plain decoding


def test_a_winning_drafter_stays_on():
    policy = DraftPolicy(max_draft=4)
    rounds, plain = drive(policy, draft_s_per_token=0.004, plain_s=0.01)
    assert not policy.off and not policy.ever_off
    assert rounds > 300 and "kept on" in policy.reason


def test_draft_length_adapts_to_acceptance():
    policy = DraftPolicy(max_draft=6, auto_off=False)
    for _ in range(10):
        policy.record_round(policy.length, policy.length, policy.length + 1, 0.01)
    assert policy.length == 6
    for _ in range(10):
        policy.record_round(policy.length, 0, 1, 0.01)
    assert policy.length == 1


def test_without_auto_off_drafting_never_stops():
    policy = DraftPolicy(max_draft=4, auto_off=False)
    rounds, plain = drive(policy, draft_s_per_token=0.05, plain_s=0.01)
    assert rounds == 400 and not policy.off


def test_a_drafter_that_lost_starts_the_next_answer_switched_off_and_says_why():
    first = DraftPolicy(max_draft=4)
    drive(first, draft_s_per_token=0.02, plain_s=0.01, steps=40)
    assert first.off
    following = first.carried_over()
    assert following.off and following.ever_off and following.draft_length() == 0
    assert following.reason == first.reason and "switched off" in following.reason
    rounds, _ = drive(following, draft_s_per_token=0.02, plain_s=0.01, steps=40)
    assert rounds == 0  # no warm-up rounds paid again


def test_the_re_probe_count_goes_on_across_answers():
    policy = DraftPolicy(max_draft=4)
    drive(policy, draft_s_per_token=0.02, plain_s=0.01, steps=40)
    assert policy.off_for == 2 * DraftPolicy.REPROBE_EVERY  # it ran at half the speed: it waits twice as long
    rounds = 0
    for _ in range(2 * DraftPolicy.REPROBE_EVERY // 40 + 2):  # answers of 40 tokens each
        policy = policy.carried_over()
        rounds += drive(policy, draft_s_per_token=0.004, plain_s=0.01, steps=40)[0]
    assert rounds > 0 and not policy.off  # drafting got fast: the re-probe found it and it is back on


def test_a_drafter_that_won_goes_on_at_its_length_without_probing_plain_again():
    first = DraftPolicy(max_draft=4)
    drive(first, draft_s_per_token=0.004, plain_s=0.01, steps=40)
    following = first.carried_over()
    assert not following.off and not following.ever_off and following.length == first.length == 3
    rounds, plain = drive(following, draft_s_per_token=0.004, plain_s=0.01, steps=20)
    assert rounds == 20 and plain == 0


def switched_off(round_s: float = 0.03, plain_s: float = 0.01) -> DraftPolicy:
    """A policy whose two rounds (two tokens each, ``round_s`` a round) lost to plain steps of ``plain_s``."""
    policy = DraftPolicy(max_draft=4)
    drive(policy, draft_s_per_token=round_s / 2, plain_s=plain_s, steps=5, accept=1)
    assert policy.mode == "off"
    return policy


def test_guesses_that_would_win_bring_drafting_back_at_once():
    policy = switched_off(round_s=0.025)  # rounds of 25 ms against 10 ms plain steps
    for right in (3, 4, 3, 4):  # 4.5 tokens a round: 180 tok/s against 100
        policy.record_guess(right)
    assert policy.mode == "probe_draft" and policy.draft_length() == 4  # the length the guesses got right
    assert not policy.guesses and not policy.drafting.samples  # the probe is judged on its own rounds


def test_guesses_that_would_win_only_narrowly_leave_drafting_off():
    policy = switched_off(round_s=0.025)
    for right in (1, 2, 1, 1, 2, 1, 1, 1):
        policy.record_guess(right)  # at most 2.5 tokens a round of 25 ms: 100 tok/s, within the margin
    assert policy.mode == "off" and policy.draft_length() == 0


def test_a_try_the_guesses_started_that_loses_doubles_the_guesses_the_next_one_needs():
    policy = switched_off(round_s=0.025)
    for right in (4, 4, 4, 4):
        policy.record_guess(right)
    assert policy.mode == "probe_draft"
    for _ in range(DraftPolicy.REPROBE_ROUNDS):
        policy.record_round(4, 0, 1, 0.03)  # the rounds lose after all
    assert policy.mode == "off" and policy.guess_rounds == 2 * DraftPolicy.GUESS_ROUNDS
    assert policy.reprobe_every == DraftPolicy.REPROBE_EVERY  # the periodic re-try keeps its pace
    for right in (4, 4, 4, 4):
        policy.record_guess(right)
    assert policy.mode == "off"  # four guesses are no longer enough
    for right in (4, 4, 4, 4):
        policy.record_guess(right)
    assert policy.mode == "probe_draft"
    for _ in range(DraftPolicy.REPROBE_ROUNDS):
        policy.record_round(4, 4, 5, 0.02)  # this time they win
    assert policy.mode == "draft" and policy.guess_rounds == DraftPolicy.GUESS_ROUNDS


def test_guesses_count_only_while_off():
    policy = DraftPolicy(max_draft=4)
    for _ in range(5):
        policy.record_guess(4)
    assert policy.mode == "draft" and not policy.guesses


def test_the_guesses_a_try_needs_stop_doubling_at_a_bound():
    policy = switched_off(round_s=0.025)
    for _ in range(12):  # twelve tries in a row lose
        for _ in range(policy.guess_rounds):
            policy.record_guess(4)
        assert policy.mode == "probe_draft"
        for _ in range(DraftPolicy.REPROBE_ROUNDS):
            policy.record_round(4, 0, 1, 0.03)
        assert len(policy.guesses) == 0
    assert policy.guess_rounds == DraftPolicy.GUESS_ROUNDS_MAX


def test_a_drafter_that_lost_badly_is_tried_again_later_so_a_try_costs_at_most_its_rounds_tokens():
    """A try costs its rounds' tokens times the drafter's slowness beyond plain steps; the wait grows with
    that slowness, so however badly it lost, the tries cost no more than their rounds' tokens every
    REPROBE_EVERY plain steps (before, a drafter at 1/8 the speed cost 7 times that)."""
    bound = DraftPolicy.REPROBE_ROUNDS / DraftPolicy.REPROBE_EVERY  # one token a round
    for slowness in (1.25, 3.5, 8.0):
        policy = DraftPolicy(max_draft=4)
        plain_s = 0.01
        drive(policy, draft_s_per_token=plain_s * slowness, plain_s=plain_s, steps=40, accept=0)  # the warm-up
        rounds, plain = drive(policy, draft_s_per_token=plain_s * slowness, plain_s=plain_s, steps=5000, accept=0)
        lost = rounds * (slowness - 1)  # in plain steps: what the rounds cost beyond plain steps for their tokens
        assert rounds > 0 and policy.off
        assert lost / (rounds + plain) <= bound, (slowness, rounds, lost / (rounds + plain), bound)
