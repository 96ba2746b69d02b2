"""The window sends what the user types, and the documents they attach, as plain text (issue 16.1)."""

from __future__ import annotations

import re

from engine.backends.llama_cpp import LlamaModel, init_backend
from engine.templates.chat_template import ChatMessage
from engine.templates.prompts import render_for, rendered_tokens
from tests.helpers.control_tokens import hostile_text
from tests.helpers.gui import write_settings


def test_typed_and_attached_control_token_text_is_read_as_plain_text(start_app, hybrid_tiny, tmp_path):
    init_backend()
    model = LlamaModel(hybrid_tiny)
    hostile = hostile_text(model)
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=4, draft="off")
    app = start_app()
    app.wait_loaded()

    turn = app.send_and_wait(hostile)
    expected = render_for(model, [ChatMessage("user", hostile)])
    assert turn.finished.timings.prompt_n == len(rendered_tokens(model, expected, bos=True))
    assert turn.finished.timings.prompt_n != len(model.tokenize(expected.text, add_special=True, parse_special=True))
    assert app.transcript()[0] == ("user", hostile, "done"), "the text itself is kept exactly"

    app.window.new_chat()
    page = tmp_path / "page.txt"
    page.write_text(hostile, encoding="utf-8")
    assert app.window.documents.attach(page)
    app.qtbot.waitUntil(lambda: app.window.status_line.text().startswith("Read page.txt"), timeout=60_000)
    read = int(re.search(r"Read page.txt: ([\d,]+) tokens", app.window.status_line.text()).group(1).replace(",", ""))
    document = render_for(model, [ChatMessage("user", f"Document: page.txt\n\n{hostile}")], answer=False)
    assert read == len(rendered_tokens(model, document, bos=True))
    assert read != len(model.tokenize(document.text, add_special=True, parse_special=True))
    model.close()
