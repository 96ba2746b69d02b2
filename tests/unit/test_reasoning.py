"""Reasoning told from the answer as text streams in, whatever way it is cut into pieces."""

import pytest

from engine.decoding.reasoning import ReasoningSplitter, reasoning_start

QWEN35_CUE = "<|im_start|>assistant\n<think>\n"


def split(start, pieces, spans=None):
    splitter = ReasoningSplitter(start)
    reasoning, answer, answer_spans = "", "", []
    for index, piece in enumerate(pieces):
        r, a, s = splitter.feed(piece, spans[index] if spans else [])
        reasoning, answer, answer_spans = reasoning + r, answer + a, answer_spans + s
    r, a, s = splitter.flush()
    return reasoning + r, answer + a, answer_spans + s


def test_the_cue_says_whether_the_answer_starts_in_reasoning():
    assert reasoning_start(QWEN35_CUE) == "open"
    assert reasoning_start("<|im_start|>assistant\n<think>\n\n</think>\n\n") == "detect"  # enable_thinking=false
    assert reasoning_start("<|im_start|>assistant\n") == "detect"


@pytest.mark.parametrize("cut", range(1, 12))
def test_an_opened_block_is_reasoning_until_its_end_however_the_text_is_cut(cut):
    text = "Let me think.\n</think>\n\nHello there!"
    pieces = [text[i:i + cut] for i in range(0, len(text), cut)]
    assert split("open", pieces)[:2] == ("Let me think.\n", "Hello there!")


@pytest.mark.parametrize("cut", range(1, 9))
def test_a_block_the_answer_opens_itself_is_found(cut):
    text = "\n<think>plan</think>Answer"
    pieces = [text[i:i + cut] for i in range(0, len(text), cut)]
    assert split("detect", pieces)[:2] == ("plan", "Answer")


def test_think_later_in_an_answer_is_answer_text():
    assert split("detect", ["Use the ", "<think> tag", " like </think> this"])[:2] == (
        "", "Use the <think> tag like </think> this")
    assert split("detect", ["<thin", "g>"])[:2] == ("", "<thing>")


def test_no_reasoning_when_off_and_an_unclosed_block_stays_reasoning():
    assert split("off", ["<think>x</think>y"])[:2] == ("", "<think>x</think>y")
    assert split("open", ["still thinking </thi"])[:2] == ("still thinking </thi", "")


def test_draft_spans_cover_the_answer_alone():
    reasoning, answer, spans = split("open", ["ab</think>\n\ncd", "ef"], spans=[[[4, True], [10, False]], [[2, True]]])
    assert (reasoning, answer) == ("ab", "cdef")
    assert spans == [[2, False], [2, True]]
