"""A new conversation's title from its first message: one rule for the window, the CLI and the API."""

from __future__ import annotations

from model_store.conversation_titles import TITLE_LENGTH, title_of

LONG = "Write a short Python function that checks whether a word is a palindrome, and explain it."


def test_a_long_first_line_is_cut_at_a_word_with_no_trailing_space():
    title = title_of(LONG)
    assert title == "Write a short Python function that checks whether a word is"
    assert len(title) <= TITLE_LENGTH and not title.endswith(" ")
    assert f"{title} — Hearth".count("  ") == 0  # the window's title bar had a double space here


def test_the_first_line_with_text_counts_and_its_spaces_are_made_one():
    assert title_of("\n\n  Hello \t  there  \nsecond line") == "Hello there"


def test_a_text_of_blanks_gets_the_fallback():
    assert title_of(" \n\t") == "New chat"
    assert title_of("", fallback="API request") == "API request"


def test_one_word_longer_than_a_title_is_cut_at_the_length():
    assert title_of("x" * 100) == "x" * TITLE_LENGTH
