"""A context that grows, in the real window with a real worker (issue 19): the model starts with a
short context from the settings, a long message makes the worker load a longer one, the banner says
so once, the picker shows the new size, and the next message stands on the grown turn's snapshot."""

from __future__ import annotations

from app.services.settings import context_key
from tests.helpers.gui import write_settings

LONG_MESSAGE = "Please remember these words: " + " ".join(f"item{i}" for i in range(180))


def test_a_long_message_grows_the_context_says_so_and_the_next_one_stands_on_it(start_app, hybrid_tiny):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=8, draft="off",
                   contexts={context_key(str(hybrid_tiny)): 256})
    app = start_app()
    app.wait_loaded()
    assert app.controller.loaded.n_ctx == 256 and "256 tokens at once" in app.window.model_picker.state.text() \
        and "256 tokens (fixed" in app.window.model_picker.state.toolTip()

    first = app.send_and_wait(LONG_MESSAGE)
    assert first.finished.finish_reason in ("stop", "length")
    grown = app.controller.loaded.n_ctx
    assert grown > 256 and f"{grown:,} tokens at once" in app.window.model_picker.state.text()
    assert app.window.banner.text().startswith(f"The context grew from 256 to {grown:,} tokens")

    second = app.send_and_wait("Which came first?")
    assert second.finished.snapshot.restored and second.finished.snapshot.prefilled_tokens < 30
    now = app.controller.loaded.n_ctx  # a turn at the new context's edge grows it again, from its snapshot
    assert now == grown or app.window.banner.text().startswith(f"The context grew from {grown:,} to {now:,} tokens")
