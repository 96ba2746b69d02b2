"""engine.requests.core.EngineCore on the fake backend (tests/fakes/fake_backend.py): loading, answering,
cancelling, snapshots in a real SQLite database, documents, measuring and unloading, through the
core's real code, in milliseconds and without llama.cpp.

The core is driven as the worker drives it (engine.worker_loop): each command begun, handled and
ended through engine.protocol.request_lifecycle.Requests, so the events checked are the ones a client gets.
The fake parrot answers a chat with ``You said: <last message> (message <N>)``; see its module.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest

from engine import protocol as p
from engine.backends.backend import ContextBackend, ModelBackend
from engine.backends.llama_context import LlamaContext
from engine.backends.llama_cpp import LlamaModel
from engine.requests.core import EngineCore
from engine.protocol.devices import CpuInfo, ProbedDevices
from engine.decoding.request_events import ReadingRequest
from engine.protocol.request_lifecycle import Requests
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from tests.fakes.fake_backend import STORY, FakeContext, FakeModel, FakeOpener, fake_model_file, reply

GREEDY = p.SamplingSpec(temperature=0, dry_multiplier=0.0)  # the fake echoes bytes: runs the phrase penalty would break
NO_DRAFT = p.DraftSpec("off")
PROBED = ProbedDevices(CpuInfo("test CPU", "x86_64", 2))
Request = p.LoadModel | p.UnloadModel | p.MeasureText | ReadingRequest  # the commands these tests send
HYBRID = pytest.mark.parametrize("hybrid", [False, True], ids=["attention", "hybrid"])


class Worker:
    """An EngineCore over the fake backend, with the worker's request bookkeeping around it."""

    def __init__(self, model_file: Path, *, data_dir: Path | None = None, hybrid: bool = False) -> None:
        self.model_file = model_file
        self.sent: list[p.Event] = []
        self.cancelled: set[str] = set()
        self.cancel_at_poll: dict[str, int] = {}  # request id -> the is_cancelled call that turns true
        self.cancel_on_first_delta = False
        self.requests = Requests(self._send)
        self.opener = FakeOpener(hybrid=hybrid)
        self.core = EngineCore(self.requests.emit, self._is_cancelled, probed=lambda: PROBED,
                               open_model=self.opener)
        if data_dir is not None:
            self.core.configure(p.Hello(protocol_version=p.PROTOCOL_VERSION, user_dir=str(data_dir)))

    def _send(self, event: p.Event) -> None:
        self.sent.append(event)
        if self.cancel_on_first_delta and isinstance(event, p.TokenDelta):
            self.cancelled.add(event.request_id)

    def _is_cancelled(self, rid: str) -> bool:
        if rid in self.cancel_at_poll:
            self.cancel_at_poll[rid] -= 1
            if self.cancel_at_poll[rid] == 0:
                self.cancelled.add(rid)
        return rid in self.cancelled

    def run(self, command: Request) -> list[p.Event]:
        """Handle ``command`` as engine.worker_loop does; the events of its request."""
        start = len(self.sent)
        self.requests.begin(command)
        try:
            self.core.handle(command)
        finally:
            self.requests.end(command, "cancelled" if command.request_id in self.cancelled else "error")
        return [e for e in self.sent[start:] if getattr(e, "request_id", None) == command.request_id]

    def load(self) -> p.ModelLoaded:
        events = self.run(p.LoadModel(request_id="load", model=str(self.model_file)))
        assert isinstance(events[-1], p.ModelLoaded), events
        return events[-1]

    @property
    def context(self) -> FakeContext:
        return self.opener.context


class Conversation:
    """A conversation stored as the app stores it, turned into the engine's commands."""

    def __init__(self, data_dir: Path) -> None:
        self.store = ConversationStore(open_database(database_path(data_dir)))
        self.id = self.store.create("fake").id
        self.branch: list[p.WireMessage] = []

    def _add(self, role: str, content: str) -> str:
        parent = self.branch[-1].id if self.branch else None
        message = self.store.add_message(self.id, role, content, parent_id=parent)
        self.branch.append(p.WireMessage(role, content, message.id))
        return message.id

    def ask(self, rid: str, text: str) -> p.AnswerTurn:
        """Store ``text`` and an empty answer; the command that writes it (after :meth:`answered`)."""
        self._add("user", text)
        answer_id = self.store.add_message(self.id, "assistant", "", parent_id=self.branch[-1].id,
                                           status="generating").id
        return p.AnswerTurn(request_id=rid, conversation_id=self.id, answer_id=answer_id, messages=list(self.branch),
                            sampling=GREEDY, draft=NO_DRAFT)

    def answered(self, command: p.AnswerTurn, text: str) -> None:
        self.store.update_message(command.answer_id, content=text, status="done")
        self.branch.append(p.WireMessage("assistant", text, command.answer_id))

    def read_document(self, rid: str, text: str) -> p.ReadDocument:
        self._add("user", text)
        return p.ReadDocument(request_id=rid, conversation_id=self.id, messages=list(self.branch))


def ends_once(events: list[p.Event]) -> bool:
    """Exactly one event ends the request, and it is the last."""
    return [p.ends_request(e) for e in events] == [False] * (len(events) - 1) + [True]


def text_of(events: list[p.Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, p.TokenDelta))


def chat(rid: str, text: str, **options) -> p.Chat:
    return p.Chat(request_id=rid, messages=[p.WireMessage("user", text)], sampling=GREEDY, **options)


def finished(events: list[p.Event]) -> p.Finished:
    assert ends_once(events) and isinstance(events[-1], p.Finished), events
    assert not [e for e in events if isinstance(e, p.Error)], events
    return events[-1]


def answer(worker: Worker, command: p.Answer) -> tuple[str, p.Finished]:
    events = worker.run(command)
    return text_of(events), finished(events)


@pytest.fixture
def model_file(tmp_path) -> Path:
    return fake_model_file(tmp_path)


@pytest.fixture
def make_worker(model_file) -> Iterator[Callable[..., Worker]]:
    """Workers over the fake model file (``data_dir``, ``hybrid`` as :class:`Worker`'s), closed at the end."""
    made: list[Worker] = []

    def make(**options) -> Worker:
        made.append(Worker(model_file, **options))
        return made[-1]

    yield make
    for worker in made:
        worker.core.close()


@pytest.fixture
def worker(make_worker) -> Worker:
    return make_worker()


# -- loading ---------------------------------------------------------------------------------------


def test_load_model_reports_loading_and_ends_with_model_loaded(worker):
    events = worker.run(p.LoadModel(request_id="load", model=str(worker.model_file), n_ctx=1024))
    assert ends_once(events) and isinstance(events[0], p.ModelLoading)
    loaded = events[-1]
    assert isinstance(loaded, p.ModelLoaded)
    assert (loaded.facts.arch, loaded.n_ctx, loaded.context.n_ctx) == ("parrot", 1024, 1024)
    assert loaded.devices.prefill.device == "cpu"


def test_a_model_that_cannot_be_loaded_ends_with_one_error(worker, tmp_path):
    events = worker.run(p.LoadModel(request_id="load", model=str(tmp_path / "missing.gguf")))
    assert ends_once(events) and events[-1].code == "model_load_failed" and "no such file" in events[-1].message
    assert worker.core.session is None


@pytest.mark.parametrize("command", [
    chat("r", "Hello"),
    p.Complete(request_id="r", prompt="Once"),
    p.ReadDocument(request_id="r", conversation_id="c", messages=[p.WireMessage("user", "Doc", "m1")]),
    p.MeasureText(request_id="r", text="some text"),
], ids=["chat", "complete", "read_document", "measure_text"])
def test_a_command_before_any_model_is_loaded_gets_a_clear_error_and_one_end(worker, command):
    events = worker.run(command)
    errors = [e for e in events if isinstance(e, p.Error)]
    assert ends_once(events) and len(errors) == 1
    assert errors[0].code == "no_model" and "load one first" in errors[0].message
    if isinstance(command, (p.Chat, p.Complete, p.ReadDocument)):
        assert events[-1].finish_reason == "error"


def test_unload_closes_the_model_and_later_requests_need_a_new_load(worker):
    worker.load()
    model, context = worker.core.session.model, worker.context
    events = worker.run(p.UnloadModel(request_id="unload"))
    assert ends_once(events) and isinstance(events[-1], p.ModelUnloaded)
    assert isinstance(model, FakeModel) and model.closed and context.closed
    assert worker.run(chat("r", "Hello"))[0].code == "no_model"


# -- answering -------------------------------------------------------------------------------------


@pytest.mark.parametrize("message", ["Hello", "Grüße, 世界 🦜"])
def test_chat_streams_the_models_answer_and_ends_with_one_finished(worker, message):
    worker.load()
    text, done = answer(worker, chat("r", message, draft=NO_DRAFT))
    assert text == reply(message, 1)
    assert done.finish_reason == "stop" and len(done.token_ids) == len(text.encode())
    assert done.timings.gen_n == len(done.token_ids) and done.timings.prompt_n > 0


@pytest.mark.parametrize("prompt, continuation", [("Once upon", STORY[len("Once upon"):]), ("Hi. ", STORY)])
def test_complete_continues_plain_text(worker, prompt, continuation):
    worker.load()
    text, done = answer(worker, p.Complete(request_id="r", prompt=prompt, sampling=GREEDY, draft=NO_DRAFT))
    assert text == continuation and done.finish_reason == "stop"


def test_max_tokens_cuts_the_answer(worker):
    worker.load()
    text, done = answer(worker, p.Complete(request_id="r", prompt="x", sampling=GREEDY, max_tokens=5))
    assert text == STORY[:5] and (done.finish_reason, done.cut_by) == ("length", "max_tokens")


def test_prompt_lookup_drafting_writes_the_same_answer(worker):
    """The default drafter on a batch-exact model is prompt lookup; it never changes the answer."""
    worker.load()
    message = "Hello Hello Hello"
    plain, _ = answer(worker, chat("plain", message, draft=NO_DRAFT))
    drafted, done = answer(worker, chat("drafted", message))
    assert drafted == plain == reply(message, 1)
    assert done.draft.kind == "lookup" and done.draft.accepted > 0


def test_a_users_control_token_text_is_read_as_plain_text(worker):
    worker.load()
    text, _ = answer(worker, chat("r", "say <|im_end|> now", draft=NO_DRAFT))
    assert text == reply("say <|im_end|> now", 1)


# -- cancelling ------------------------------------------------------------------------------------


def test_a_request_cancelled_before_it_runs_ends_cancelled_at_once(worker):
    worker.load()
    worker.cancelled.add("r")
    events = worker.run(chat("r", "Hello"))
    assert ends_once(events) and len(events) == 1 and events[0].finish_reason == "cancelled"


def test_a_request_cancelled_while_writing_stops_with_one_end(worker):
    worker.load()
    worker.cancel_on_first_delta = True
    events = worker.run(chat("r", "Hello", draft=NO_DRAFT))
    done = finished(events)
    text, full = text_of(events), reply("Hello", 1)
    assert done.finish_reason == "cancelled" and full.startswith(text) and len(text) < len(full)
    worker.cancel_on_first_delta = False
    assert answer(worker, chat("next", "Bye", draft=NO_DRAFT))[0] == reply("Bye", 1)


@HYBRID
def test_a_cancel_inside_a_prefill_decode_leaves_the_context_as_the_session_says(make_worker, hybrid):
    """Polls of the request: before it runs, before the first chunk, then one per micro-batch: the
    fourth comes after the first micro-batch of the first chunk, inside a decode."""
    worker = make_worker(hybrid=hybrid)
    worker.load()
    worker.cancel_at_poll["r"] = 4
    events = worker.run(chat("r", "A question long enough to need several chunks", draft=NO_DRAFT))
    assert finished(events).finish_reason == "cancelled" and text_of(events) == ""
    session = worker.core.session
    assert worker.context.decoded == session.context.settings.n_ubatch  # the decode was stopped inside
    assert worker.context.tokens == session.tokens == []
    assert answer(worker, chat("next", "Bye", draft=NO_DRAFT))[0] == reply("Bye", 1)


# -- snapshots -------------------------------------------------------------------------------------


@HYBRID
def test_a_second_turn_stands_on_the_first_turns_snapshot(make_worker, tmp_path, hybrid):
    worker = make_worker(data_dir=tmp_path, hybrid=hybrid)
    worker.load()
    conversation = Conversation(tmp_path)
    first = conversation.ask("t1", "Hello")
    text, done = answer(worker, first)
    assert text == reply("Hello", 1) and not done.snapshot.restored and done.snapshot.snapshot_id
    conversation.answered(first, text)
    held = len(worker.core.session.tokens)
    decoded_before = worker.context.decoded

    second = conversation.ask("t2", "Bye")
    text, done = answer(worker, second)
    assert text == reply("Bye", 2)
    report = done.snapshot
    assert report.restored and report.restored_tokens == held and report.notes == []
    # read: the new tokens, the answer and its <|im_end|> (decoded for the snapshot); nothing held before
    assert worker.context.decoded - decoded_before == report.prefilled_tokens + len(done.token_ids) + 1
    assert report.prefilled_tokens < held


@HYBRID
def test_a_restarted_engine_restores_the_snapshot_from_the_database_exactly(make_worker, tmp_path, hybrid):
    """The state restored from SQLite after a restart (two snapshots: a turn's cells stand on its
    parent's) is the uninterrupted one, byte for byte, and answers the same."""
    steady = make_worker(data_dir=tmp_path, hybrid=hybrid)
    steady.load()
    conversation = Conversation(tmp_path)
    for rid, message in (("t1", "Hello"), ("t2", "How are you?")):
        command = conversation.ask(rid, message)
        conversation.answered(command, answer(steady, command)[0])
    third = conversation.ask("t3", "Bye")
    uninterrupted, _ = answer(steady, third)

    restarted = make_worker(data_dir=tmp_path, hybrid=hybrid)
    restarted.load()
    sibling = conversation.store.add_message(conversation.id, "assistant", "", parent_id=third.messages[-1].id)
    text, done = answer(restarted, msgspec.structs.replace(third, request_id="t3-again", answer_id=sibling.id))
    assert text == uninterrupted == reply("Bye", 3)
    assert done.snapshot.restored and done.snapshot.notes == [] and restarted.context.refused == []
    assert restarted.context.decoded == done.snapshot.prefilled_tokens + len(done.token_ids) + 1  # none replayed
    assert restarted.context.state_get(0) == steady.context.state_get(0)


def test_a_document_read_ends_with_document_read_and_a_question_stands_on_it(make_worker, tmp_path):
    worker = make_worker(data_dir=tmp_path)
    worker.load()
    conversation = Conversation(tmp_path)
    events = worker.run(conversation.read_document("doc", "Document: the sky is green."))
    read = events[-1]
    assert ends_once(events) and isinstance(read, p.DocumentRead) and not text_of(events)
    assert read.finish_reason == "stop" and read.tokens == len(worker.core.session.tokens)
    assert read.snapshot.snapshot_id

    text, done = answer(worker, conversation.ask("q", "What colour is the sky?"))
    assert text == reply("What colour is the sky?", 2)
    assert done.snapshot.restored and done.snapshot.restored_tokens == read.tokens


def test_a_document_that_leaves_no_room_for_questions_is_measured_and_not_read(make_worker, tmp_path):
    worker = make_worker(data_dir=tmp_path)
    worker.load()
    n_ctx = worker.core.session.n_ctx
    conversation = Conversation(tmp_path)
    events = worker.run(conversation.read_document("doc", "x" * (n_ctx - 1024)))  # a byte a token
    read = events[-1]
    assert ends_once(events) and read.finish_reason == "too_long" and read.tokens == 0
    assert not any(isinstance(event, p.PromptProgress) for event in events) and worker.core.session.n_past == 0
    held = read.room.held_tokens
    assert read.room == p.DocumentRoom(tokens=n_ctx - 1024, held_tokens=held, budget_tokens=n_ctx - 1024 - held,
                                       grown_budget_tokens=n_ctx - 1024 - held)
    assert 0 < held < 32, "the template's markers around it"


# -- measuring -------------------------------------------------------------------------------------


def test_measure_text_counts_tokens_and_keeps_what_fits(worker):
    worker.load()
    events = worker.run(p.MeasureText(request_id="m", text="abc" * 10, keep="last", budget_tokens=8))
    measured = events[-1]
    assert ends_once(events) and isinstance(measured, p.TextMeasured)
    assert (measured.tokens, measured.fits, measured.kept_tokens, measured.kept_text) == (30, False, 8, "bcabcabc")


# -- the protocol ----------------------------------------------------------------------------------


def _members(protocol: type) -> dict[str, object]:
    return {name: value for name, value in vars(protocol).items()
            if not name.startswith("_") and (callable(value) or isinstance(value, property))}


def _has_data_member(cls: type, name: str) -> bool:
    """A property of the class, or an attribute its __init__ sets."""
    init = inspect.getsource(vars(cls)["__init__"])
    return isinstance(getattr(cls, name, None), property) or f"self.{name} =" in init


@pytest.mark.parametrize("protocol, classes", [(ModelBackend, (LlamaModel, FakeModel)),
                                               (ContextBackend, (LlamaContext, FakeContext))],
                         ids=["model", "context"])
def test_the_llama_cpp_adapter_and_the_fake_have_the_protocols_members(protocol, classes):
    """Methods by name and parameters, data members by name (no model is loaded to look)."""
    for name, member in _members(protocol).items():
        for cls in classes:
            if isinstance(member, property):
                assert _has_data_member(cls, name), (cls.__name__, name)
            else:
                wanted = list(inspect.signature(member).parameters)
                assert list(inspect.signature(getattr(cls, name)).parameters) == wanted, (cls.__name__, name)
