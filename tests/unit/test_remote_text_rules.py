"""Engine addresses, names and model ids refuse control characters and text-direction overrides
(issue 32, point 12): a CR/LF in an address would add a header to every request."""

from __future__ import annotations

import pytest

from app.engine_clients.remote.spec import UrlProblem, check_url, control_problem, engine_name_problem

BAD = ["\r", "\n", "\x00", "\x1b", "\x7f", "\x85", "\x9b", "\u202e", "\u2066", "\u200f"]


@pytest.mark.parametrize("char", BAD)
def test_every_control_character_and_bidi_override_is_refused_in_one_sentence(char):
    problem = control_problem("model id", f"qwen{char}3")
    assert problem is not None and problem.count(". ") == 0 and "model id" in problem
    assert f"U+{ord(char):04X}" in problem
    assert engine_name_problem(f"gpu{char}") is not None


def test_an_address_with_crlf_is_refused_and_plain_text_passes():
    with pytest.raises(UrlProblem, match="control characters"):
        check_url("http://127.0.0.1:9/v1\r\nX-Injected: 1")
    assert control_problem("model id", "Qwen/Qwen3-8B:q4_k_m — ok") is None
    assert check_url("http://127.0.0.1:9/v1")[0] == "http://127.0.0.1:9/v1"
