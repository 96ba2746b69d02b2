"""A window's turn opens no database connection of its own: the look-up of an installed EAGLE-3 head
(``auto`` drafting) reads the registry over the store's connection, as the turn's other steps do.

Every ``sqlite3.connect`` between the window's Send and the stored answer is counted, with a head
registered that fits the model, so the look-up really runs (the command carries the head's file)."""

from __future__ import annotations

import sqlite3

import msgspec

from app.services.turn import TurnOptions, Writer
from app.services.turn_flow import TurnFlow
from app.services.turn_start import Answering, NewMessage
from engine import protocol as p
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.eagle3_heads import HeadTarget
from model_store.installed import ModelLibrary
from tests.fakes.engine_client import _facts
from tests.helpers.store_jobs import SentCommands, StoreJobs

HIDDEN, LAYERS = 64, 4


def test_a_window_turn_with_an_installed_head_opens_no_second_connection(tmp_path, monkeypatch):
    db = open_database(database_path(tmp_path))
    head = tmp_path / "head.gguf"
    head.write_bytes(b"GGUF")
    ModelLibrary(db).add(name="head", path=head, size_bytes=4, source="import", head=HeadTarget(HIDDEN, (1, 2, 3)))
    store, engine = StoreJobs(ConversationStore(db)), SentCommands()
    flow = TurnFlow(store.submit, engine, _Screen(), Writer("a Hearth window"), lambda store, cid: "rows")
    facts = msgspec.structs.replace(_facts("tiny.gguf", 4096), n_embd=HIDDEN, n_layer=LAYERS)
    opened: list[str] = []
    real_connect = sqlite3.connect

    def counted(*args, **kwargs):
        opened.append(str(args[0]) if args else "")
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counted)
    flow.begin(NewMessage("Hello", None, TurnOptions(draft="auto")), Answering("tiny", facts))
    store.run()
    (command,) = engine.sent
    assert command.draft == p.DraftSpec("auto", str(head)), "the head was looked up and sent"
    flow.take(p.Finished(request_id=command.request_id, finish_reason="stop", timings=p.Timings(gen_n=1)))
    store.run()
    assert opened == [], f"a turn opened {len(opened)} connection(s): {opened}"
    assert [m.status for m in store.store.current_branch(command.conversation_id)] == ["done", "done"]


class _Screen:
    def turn_started(self, conversation, turn, shown) -> None: ...

    def turn_event(self, turn, event) -> None: ...

    def turn_stored(self, turn, problem="") -> None: ...

    def turn_refused(self, busy, text) -> None: ...

    def turn_not_saved(self, message, text) -> None: ...
