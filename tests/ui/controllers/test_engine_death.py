"""The worker dying under the window, on the scripted engine: the answer being written is kept,
marked interrupted with what happened, and a fresh worker loads the model again."""

from __future__ import annotations

import signal

from engine import protocol as p
from engine.protocol.deaths import engine_dead
from tests.fakes.engine_client import hold
from tests.helpers.gui import stored, watch_notices


def test_a_death_mid_answer_keeps_it_interrupted_and_the_engine_comes_back(start_scripted, engine):
    engine.script(p.AnswerTurn, hold("Half", " an answer"))
    app = start_scripted()
    notices = watch_notices(app)
    assert app.controller.send("Tell me everything.")
    app.wait(lambda: [r.message.content for r in app.controller.messages.rows()][-1:] == ["Half an answer"])

    engine.die(-signal.SIGKILL)
    turn = app.wait_turn()

    killed = engine_dead(-signal.SIGKILL).message
    (answer_row,) = [m for m in stored(app, lambda s: s.current_branch(turn.conversation_id)) if m.role == "assistant"]
    assert (answer_row.content, answer_row.status) == ("Half an answer", "interrupted")
    assert answer_row.stats["interrupted_by"] == killed
    warnings = [text for kind, text in notices if kind == "warning"]
    assert len(warnings) == 1 and warnings[0].startswith(killed[:1].upper() + killed[1:])
    assert "marked interrupted" in warnings[0]

    app.wait_loaded()  # a fresh worker, the model loaded again, the conversation reopened in it
    assert engine.starts == 2 and len(engine.sent(p.LoadModel)) == 2
    app.wait(lambda: any(text.startswith("The engine restarted.") for _, text in notices))
    assert [c.conversation_id for c in engine.sent(p.OpenConversation)] == [turn.conversation_id]
    engine.script(p.AnswerTurn, hold("Again"))
    assert app.controller.send("Go on.")
    app.wait(lambda: engine.holding is not None)
    assert [m.content for m in engine.sent(p.AnswerTurn)[-1].messages] == [
        "Tell me everything.", "Half an answer", "Go on."], "the interrupted answer is part of the conversation"
