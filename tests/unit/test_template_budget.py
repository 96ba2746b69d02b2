"""A chat template cannot take the worker's time or memory: each way to try is refused, quickly."""

import subprocess
import sys
import textwrap
import time

import pytest

from engine.chat_template import CHATML_TEMPLATE, ChatMessage, ChatTemplateTooCostly, render_chat

COSTLY = {
    "string-times-int": "{{ strftime_now('%Y' * 10000000) }}",
    "list-times-int": "{{ ([1] * 100000000) | length }}",
    "doubling-loop": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}",
    "power": "{{ 10 ** (10 ** 8) }}",
    "big-int-product": "{% set ns = namespace(n=7) %}{% for i in range(40) %}{% set ns.n = ns.n * ns.n %}{% endfor %}{{ ns.n }}",
    "printf-width": "{{ '%900000000s' % 'x' }}",
    "format-filter-width": "{{ '%900000000s' | format('x') }}",
    "str-format-width": "{{ '{:>900000000}'.format('x') }}",
    "center-method": "{{ 'x'.center(900000000) }}",
    "center-filter": "{{ 'x' | center(900000000) }}",
    "indent-filter": "{{ 'a\nb' | indent(900000000) }}",
    "silent-loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "printing-loops": "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxx{% endfor %}{% endfor %}",
    "long-strftime": "{{ strftime_now('%Y' * 5000) }}",
}


@pytest.mark.parametrize("name", sorted(COSTLY))
def test_a_costly_template_is_refused_quickly_naming_the_model(name):
    started = time.monotonic()
    with pytest.raises(ChatTemplateTooCostly, match="chat template of 'evil.gguf' is too costly"):
        render_chat(COSTLY[name], [ChatMessage("user", "hi")], model_name="'evil.gguf'")
    assert time.monotonic() - started < 30  # the budget is 2 s; the machine is shared and noisy


def test_ordinary_templates_and_long_messages_stay_within_budget():
    document = "word " * 400_000  # 2 MB, a long document
    rendered = render_chat(CHATML_TEMPLATE, [ChatMessage("user", document), ChatMessage("assistant", "ok")])
    assert document in rendered.text
    assert render_chat("{{ '%5s|%-3d' % ('a', 7) }}{{ 'x'.center(9) }}{{ strftime_now('%Y') }}",
                       [ChatMessage("user", "hi")]).text.startswith("    a|7  ")


def test_the_budget_holds_under_a_memory_limit_in_a_fresh_process():
    """The original report: the process aborted (std::bad_alloc) under a memory limit."""
    script = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from engine.chat_template import ChatMessage, ChatTemplateTooCostly, render_chat
        try:
            render_chat("{{ strftime_now('%Y' * 10000000) }}", [ChatMessage("user", "hi")])
        except ChatTemplateTooCostly as exc:
            print("refused:", exc)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused: the chat template of this model is too costly")
