"""An API conversation continued after ``hearth serve`` restarts stands on the state it saved, and
answers exactly as the server that was not restarted did (real server, real worker, SmolLM2)."""

from __future__ import annotations

import socket
import stat

import pytest

from tests.helpers.serve import serving

pytestmark = [pytest.mark.slow, pytest.mark.process]
GREEDY = {"model": "default", "temperature": 0, "max_tokens": 12}
FIRST = [{"role": "system", "content": "You answer in one short sentence."},
         {"role": "user", "content": "What is the capital of France?"}]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ask(server, messages) -> tuple[str, int, int]:
    """(answer, prompt tokens, of them restored from a snapshot)."""
    reply = server.client().chat.completions.create(messages=messages, **GREEDY)
    return reply.choices[0].message.content, reply.usage.prompt_tokens, reply.usage.prompt_tokens_details.cached_tokens


def test_a_conversation_continued_after_a_restart_stands_on_its_saved_state(tmp_path):
    home, port = tmp_path / "home", str(free_port())
    with serving(home, "--port", port) as server:
        answer, first_prompt, _ = ask(server, FIRST)
        later = [*FIRST, {"role": "assistant", "content": answer}, {"role": "user", "content": "And of Italy?"}]
        uninterrupted = ask(server, later)
    assert uninterrupted[2] >= first_prompt  # the first turn came back from its snapshot, not read again

    with serving(home, "--port", port) as server:  # the same address: its conversations are kept
        assert ask(server, later) == uninterrupted
    folder = home / "data" / "api" / f"127.0.0.1-{port}"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and (folder / "hearth.db").is_file()

    with serving(home) as server:  # --port 0 keeps nothing: read from the start
        text, prompt, restored = ask(server, later)
    assert (text, prompt, restored) == (uninterrupted[0], uninterrupted[1], 0)
