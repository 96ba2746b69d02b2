"""Loading a document in a window without Qt (app.services.document_flow): a real SQLite store, a real
extraction, the engine's events scripted.

The store's jobs and the extraction run when the test says (:class:`_Store`, :class:`_Extraction`),
as the GUI's threads run them later, so every step can be seen between two others. The engine counts
one token a word (:func:`_measured`, :func:`_too_long`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.engine_clients.client import EngineDead
from app.services.document_flow import DocumentFlow
from app.services.document_screen import LoadedBeforeAnswers, WindowChoices
from app.services.extract import extract_text
from app.services.turn import Writer
from engine import protocol as p
from model_store.conversations import Conversation, ConversationStore
from model_store.db import database_path, open_database
from model_store.documents import DocumentStore
from model_store.writer_lock import holder_of
from tests.helpers.store_jobs import SentCommands, StoreJobs

WINDOW = Writer("a Hearth window")
MODEL = "tiny"
BUDGET = 300  # the tokens a document may have in the context as it is


@dataclass
class _Extraction:
    """The real extraction, run when told, as the GUI's background thread runs it."""

    waiting: list[tuple[Path, Callable[[], bool], Callable, Callable]] = field(default_factory=list)

    def __call__(self, path, cancelled, on_done, on_error) -> None:
        self.waiting.append((path, cancelled, on_done, on_error))

    def finish(self) -> None:
        path, cancelled, on_done, on_error = self.waiting.pop(0)
        try:
            document = extract_text(path, cancelled=cancelled)
        except Exception as error:
            on_error(error)
        else:
            on_done(document)


@dataclass
class _Screen:
    steps: list[tuple[str, Any]] = field(default_factory=list)
    answers: LoadedBeforeAnswers | None = None

    def said(self, kind: str) -> list[Any]:
        return [value for k, value in self.steps if k == kind]

    def window_choices(self) -> WindowChoices:
        return WindowChoices(MODEL, "", None)

    def answering(self) -> bool:
        return False

    def loading_changed(self, loading: bool) -> None:
        self.steps.append(("loading", loading))

    def load_status(self, text: str) -> None:
        self.steps.append(("status", text))

    def load_error(self, text: str) -> None:
        self.steps.append(("error", text))

    def reading_progress(self, processed, total, rate, eta) -> None:
        self.steps.append(("progress", (processed, total, rate, eta)))

    def show_conversation(self, conversation: Conversation | None, rows) -> None:
        self.steps.append(("shown", (conversation.id if conversation else None, rows)))

    def refresh_list(self) -> None:
        self.steps.append(("list", None))

    def show_read(self, conversation_id: str, rows) -> None:
        self.steps.append(("read", (conversation_id, rows)))

    def open_conversation(self, conversation_id: str) -> None:
        self.steps.append(("open", conversation_id))

    def open_in_engine(self, conversation_id: str) -> None:
        self.steps.append(("open in engine", conversation_id))

    def offer_loaded_before(self, document, before, answers: LoadedBeforeAnswers) -> None:
        self.steps.append(("loaded before", before.conversation.id))
        self.answers = answers

    def offer_parts(self, document, path, too_long, *, in_conversation: bool) -> None:
        self.steps.append(("parts", (too_long.tokens, in_conversation)))

    def offer_growing(self, document, path, room, part_tokens) -> None:
        self.steps.append(("growing", room.tokens))


def _measured(command: p.MeasureText) -> p.TextMeasured:
    """The engine's count: a token a word, against the command's budget (``BUDGET`` by default)."""
    words = command.text.split()
    budget = command.budget_tokens or BUDGET
    kept = words[:budget] if command.keep == "first" else words[-budget:] if command.keep == "last" else []
    return p.TextMeasured(request_id=command.request_id, tokens=len(words), budget_tokens=budget,
                          fits=len(words) <= budget, kept_text=" ".join(kept), kept_tokens=len(kept))


def _read(command: p.ReadDocument, finish_reason: str, tokens: int = 0) -> p.DocumentRead:
    return p.DocumentRead(request_id=command.request_id, finish_reason=finish_reason, tokens=tokens,
                          timings=p.Timings(prompt_ms=1500.0))


def _too_long(command: p.ReadDocument, grown_budget: int = BUDGET, held: int = 12) -> p.DocumentRead:
    """The engine measured the rendered conversation: the document (a token a word) does not fit."""
    room = p.DocumentRoom(tokens=len(command.messages[-1].content.split()), held_tokens=held, budget_tokens=BUDGET,
                          grown_budget_tokens=grown_budget)
    return p.DocumentRead(request_id=command.request_id, finish_reason="too_long", tokens=0, timings=p.Timings(),
                          room=room)


def _contents(store: ConversationStore, conversation_id: str) -> list[str]:
    """The rows the screen gets: the contents of the conversation's current branch."""
    return [message.content for message in store.current_branch(conversation_id)]


@dataclass
class _Window:
    store: _Store
    screen: _Screen
    engine: SentCommands
    extraction: _Extraction
    flow: DocumentFlow
    folder: Path

    @property
    def conversations(self) -> ConversationStore:
        return self.store.store

    def attach(self, n_words: int, into: Conversation | None = None, name: str = "notes.txt") -> None:
        path = self.folder / name
        path.write_text(" ".join(f"word{i}" for i in range(n_words)), encoding="utf-8")
        self.flow.attach(path, "all", into)

    def stored_and_sent(self) -> p.ReadDocument:
        """Extract, look for it in other chats, store it and send it to be read: the command."""
        self.extraction.finish()
        self.store.run()
        return self.engine.last(p.ReadDocument)


@pytest.fixture
def window(tmp_path) -> _Window:
    store = StoreJobs(ConversationStore(open_database(database_path(tmp_path))))
    screen, engine, extraction = _Screen(), SentCommands(), _Extraction()
    flow = DocumentFlow(store.submit, engine.send, screen, extract=extraction, transcript=_contents, writer=WINDOW)
    return _Window(store, screen, engine, extraction, flow, tmp_path)


def _a_conversation(window: _Window) -> Conversation:
    store = window.conversations
    conversation = store.create("Earlier", model=MODEL)
    question = store.add_message(conversation.id, "user", "Hello there.", parent_id=None)
    store.add_message(conversation.id, "assistant", "Hi.", parent_id=question.id)
    return store.get(conversation.id)


def test_a_document_that_fits_is_stored_read_and_its_tokens_kept(window):
    window.attach(120)
    assert window.flow.busy and window.screen.steps[:2] == [("loading", True),
                                                            ("status", "Extracting the text of notes.txt…")]
    read = window.stored_and_sent()
    (conversation,) = window.conversations.list()
    assert read.conversation_id == conversation.id and read.messages[-1].content.startswith("Document: notes.txt")
    assert [type(command) for command in window.engine.sent] == [p.ReadDocument], "measured as it is read"
    assert not read.grow, "a document that needs a longer context is the user's choice"
    assert holder_of(window.conversations.db, conversation.id) is not None, "the window writes it while it is read"
    assert window.screen.said("shown") == [(conversation.id, [read.messages[-1].content])]
    assert window.screen.said("status")[-1] == "Reading notes.txt…"

    window.flow.take(p.PromptProgress(request_id=read.request_id, processed=60, total=122, elapsed_ms=500))
    assert window.screen.said("progress") == [(60, 122, 120.0, 62 / 120)]
    window.flow.take(_read(read, "stop", tokens=122))
    assert not window.flow.busy and window.screen.steps[-1] == ("loading", False)
    window.store.run()
    (document,) = DocumentStore(window.conversations.db).for_conversation(conversation.id)
    assert document.tokens == 122 and holder_of(window.conversations.db, conversation.id) is None, "writer let go"
    assert window.screen.said("read") == [(conversation.id, [read.messages[-1].content])]
    assert window.screen.said("status")[-1] == ("Read notes.txt: 122 tokens in 1.5 s. Ask anything about it; every "
                                                "question starts from the saved state.")


def test_a_document_in_an_open_conversation_is_read_after_its_messages_in_one_task(window):
    earlier = _a_conversation(window)
    window.attach(120, into=earlier)
    read = window.stored_and_sent()
    assert [message.content for message in read.messages[:2]] == ["Hello there.", "Hi."]
    assert [type(command) for command in window.engine.sent] == [p.ReadDocument], "the engine measures what it reads"


def test_a_cancelled_read_takes_the_document_back_out_of_the_conversation(window):
    earlier = _a_conversation(window)
    branch_before = window.conversations.current_branch(earlier.id)
    window.attach(120, into=earlier)
    read = window.stored_and_sent()

    window.flow.cancel()
    assert window.engine.sent[-1] == p.Cancel(request_id=read.request_id) and window.flow.busy, "the engine ends it"
    window.flow.take(_read(read, "cancelled"))
    assert not window.flow.busy
    window.store.run()
    assert window.conversations.current_branch(earlier.id) == branch_before
    assert DocumentStore(window.conversations.db).for_conversation(earlier.id) == []
    assert holder_of(window.conversations.db, earlier.id) is None
    assert window.screen.said("shown")[-1] == (earlier.id, ["Hello there.", "Hi."]), "shown as it was"
    assert window.screen.said("status")[-1] == ("Reading notes.txt was cancelled; it was not added to the "
                                                "conversation.")


@pytest.mark.parametrize("end", ["failed", "engine died"])
def test_a_read_into_a_new_chat_that_does_not_end_leaves_no_conversation(window, end):
    window.attach(120)
    read = window.stored_and_sent()
    assert len(window.conversations.list()) == 1
    if end == "failed":
        window.flow.take(p.Error(code="internal", message="an internal error", request_id=read.request_id,
                                 final=False))
        window.flow.take(_read(read, "error"))
    else:
        window.flow.engine_died(EngineDead(exit_code=-9, message="the engine was killed"))
    assert not window.flow.busy
    window.store.run()
    assert window.conversations.list() == []
    assert DocumentStore(window.conversations.db).for_conversation(read.conversation_id) == []
    assert window.screen.said("shown")[-1] == (None, []), "the new chat shown before"
    assert window.screen.said("status")[-1] == "Reading notes.txt did not finish; it was not added to the conversation."
    if end == "failed":
        assert window.screen.said("error") == ["an internal error"]


def test_cancel_before_reading_ends_at_once_and_a_late_result_is_ignored(window):
    window.attach(120)
    window.extraction.finish()
    window.store.run_jobs()  # was it loaded before? The answer is on its way back
    window.flow.cancel()
    assert not window.flow.busy and window.screen.steps[-2:] == [
        ("loading", False), ("status", "Loading notes.txt was cancelled; nothing was added.")]
    steps = list(window.screen.steps)
    window.store.run()
    assert window.screen.steps == steps and window.conversations.list() == []
    assert window.engine.sent == []


def test_a_late_count_of_a_part_is_ignored(window):
    window.attach(10)
    window.extraction.finish()
    document = extract_text(window.folder / "notes.txt")
    window.flow.read_part(document, window.folder / "notes.txt", "first", None)
    measure = window.engine.last(p.MeasureText)
    window.flow.cancel()
    steps = list(window.screen.steps)
    assert not window.flow.take(_measured(measure)), "the count came too late"
    window.store.run()
    assert window.screen.steps == steps and window.conversations.list() == []


def test_cancel_while_extracting_stops_the_extraction_and_drops_its_result(window):
    window.attach(120)
    window.flow.cancel()
    steps = list(window.screen.steps)
    window.extraction.finish()  # its result (or its "cancelled" error) comes after the load ended
    assert window.screen.steps == steps and window.engine.sent == []


def test_a_document_cancelled_while_being_stored_is_taken_back_out_once_it_is(window):
    window.attach(120)
    window.extraction.finish()
    window.store.run_jobs()
    window.store.deliver()  # not loaded before: the document goes to be stored
    window.flow.cancel()
    window.store.run()  # the store's job had begun: the document is stored, then taken back out
    assert window.conversations.list() == []
    assert window.engine.sent == []


def test_a_document_too_long_is_taken_back_out_and_its_parts_are_offered(window):
    window.attach(500)
    read = window.stored_and_sent()
    window.flow.take(_too_long(read))
    assert not window.flow.busy and window.screen.said("parts") == [(502, False)]
    window.store.run()
    assert window.conversations.list() == []

    document = extract_text(window.folder / "notes.txt")
    window.flow.read_part(document, window.folder / "notes.txt", "last", None)
    cut = window.engine.last(p.MeasureText)
    heading = len("Document: notes.txt\n\n")
    assert cut.keep == "last" and cut.budget_tokens == BUDGET - heading - 8, "what the engine's report left"
    window.flow.take(_measured(cut))
    window.store.run()
    read = window.engine.last(p.ReadDocument)
    assert read.grow and read.messages[-1].content == "Document: notes.txt\n\n" + " ".join(
        f"word{i}" for i in range(500 - cut.budget_tokens, 500))


def test_a_document_too_long_for_an_open_conversation_says_what_the_conversation_holds(window):
    earlier = _a_conversation(window)
    window.attach(500, into=earlier)
    read = window.stored_and_sent()
    window.flow.take(_too_long(read, held=40))
    assert window.screen.said("parts") == [(502, True)]
    window.store.run()
    assert window.conversations.current_branch(earlier.id)[-1].content == "Hi.", "taken back out"


def test_a_document_that_fits_once_the_context_grows_is_read_whole_only_when_chosen(window):
    window.attach(500)
    read = window.stored_and_sent()
    window.flow.take(_too_long(read, grown_budget=1000))
    assert not window.flow.busy and window.screen.said("growing") == [502]
    window.store.run()
    assert window.conversations.list() == []

    window.flow.read_part(extract_text(window.folder / "notes.txt"), window.folder / "notes.txt", "all", None)
    window.store.run()
    read = window.engine.last(p.ReadDocument)
    assert read.grow and read.messages[-1].content.endswith("word499"), "all of it, the context growing"


def test_a_text_too_big_to_send_is_counted_in_part_and_refused_whole(window, monkeypatch):
    monkeypatch.setattr("app.services.document_loading.MAX_MEASURE_CHARS", 100)
    window.attach(120)
    window.extraction.finish()
    window.store.run()
    measure = window.engine.last(p.MeasureText)
    assert len(measure.text) == 100 and measure.keep == "all"
    window.flow.take(_measured(measure))
    assert not window.flow.busy and window.screen.said("parts") == [(len(measure.text.split()), False)]
    assert window.conversations.list() == [] and not any(isinstance(c, p.ReadDocument) for c in window.engine.sent)


def test_a_text_loaded_before_is_offered_and_can_be_opened_instead(window):
    window.attach(120)
    read = window.stored_and_sent()
    window.flow.take(_read(read, "stop", tokens=122))
    window.store.run()
    sent = len(window.engine.sent)

    window.attach(120, name="again.txt")
    window.extraction.finish()
    window.store.run()
    assert window.screen.said("loaded before") == [read.conversation_id] and len(window.engine.sent) == sent
    assert window.screen.said("status")[-1] == "again.txt is already loaded."
    window.screen.answers.open_it()
    assert not window.flow.busy and window.screen.said("open") == [read.conversation_id]
    window.screen.answers.read_again()
    assert len(window.engine.sent) == sent, "an answer of a load that ended is dropped"


def test_a_read_the_engine_cannot_start_takes_the_stored_document_back_out(window):
    window.engine.up = False
    window.attach(120)
    window.extraction.finish()
    window.store.run()  # stored, the read not sent, taken back out
    assert not window.flow.busy and window.screen.said("error") == ["the engine is not running"]
    ending = window.screen.steps.index(("loading", False))
    assert window.screen.steps[ending:ending + 3] == [("loading", False), ("status", ""),
                                                      ("error", "the engine is not running")]
    assert window.conversations.list() == [] and window.screen.said("shown")[-1] == (None, [])


def test_a_file_that_is_not_text_is_refused_with_the_extractions_reason(window):
    path = window.folder / "photo.dat"
    path.write_bytes(bytes(range(256)) * 64)
    window.flow.attach(path, "all", None)
    window.extraction.finish()
    (error,) = window.screen.said("error")
    assert "photo.dat looks like a binary file" in error and not window.flow.busy


def test_a_measure_the_engine_refuses_ends_the_load_with_its_message(window):
    window.attach(10)
    window.extraction.finish()
    window.flow.read_part(extract_text(window.folder / "notes.txt"), window.folder / "notes.txt", "first", None)
    window.flow.take(p.Error(code="no_model", message="no model is loaded",
                             request_id=window.engine.last(p.MeasureText).request_id))
    assert not window.flow.busy and window.screen.said("error") == ["no model is loaded"]


def test_events_of_other_requests_are_not_the_flows(window):
    window.attach(120)
    window.stored_and_sent()
    assert not window.flow.take(p.TokenDelta(request_id="answer-1", text="x", n_tokens=1))
    assert not window.flow.take(p.Error(code="internal", message="elsewhere"))
    assert window.flow.busy
