"""Documents read once, snapshotted, and every question forked from that state."""

from __future__ import annotations

import random

import pytest

from app.services.document_loading import (
    check_fit, fit_command, fits_once_grown, keep_if_read, part_budget, read_command, store_document, too_long,
)
from app.services.turn import send_turn
from engine import protocol as p
from app.engine_clients.inproc_client import InprocClient
from model_store.conversations import ConversationStore
from model_store.db import StoreError, database_path, open_database
from model_store.documents import DocumentStore, text_sha256
from app.services.extract import ExtractedDocument
from model_store.snapshots import SnapshotStore

GREEDY = p.SamplingSpec(temperature=0)
WORDS = "river stone light house garden winter market letter window music paper forest bridge candle".split()


def document(n_words: int, seed: int = 1) -> ExtractedDocument:
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(n_words // 12)]
    return ExtractedDocument("notes.txt", "text", "\n".join(lines), None, "utf-8", 0)


class Library:
    """A data folder with its store, and engines started on it."""

    def __init__(self, folder, model):
        self.folder, self.model = folder, model
        self.store = ConversationStore(open_database(database_path(folder)))
        self.documents = DocumentStore(self.store.db)
        self.clients: list[InprocClient] = []

    def engine(self, n_ctx: int = 4096) -> InprocClient:
        client = InprocClient(telemetry_interval_ms=0, data_dir=self.folder)
        client.start()
        client.load_model(str(self.model), n_ctx=n_ctx)
        self.clients.append(client)
        return client

    def load(self, client, extracted, part="all", conversation_id=None, *, grow=True, budget=0):
        """Store the document (all of it, or the part the engine cuts to ``budget``) and start its read."""
        text, tokens = extracted.text, 0
        if part != "all":
            measured = events_of(client, fit_command(extracted.text, part, budget), p.TextMeasured)[0]
            text, tokens = check_fit(extracted, measured, part), measured.kept_tokens
        stored = store_document(self.store, self.documents, extracted, text, tokens, part, model="tiny",
                                source_path=None, conversation_id=conversation_id)
        return stored, client.stream(read_command(self.store, stored.conversation.id, stored.message.id, grow=grow))

    def ask(self, client, conversation_id, question, after):
        return send_turn(self.store, client, conversation_id, question, reply_to=after, sampling=GREEDY,
                         max_tokens=24)

    def close(self):
        for client in self.clients:
            client.close(mode="abort")


def events_of(client, command, kind):
    return [e for e in client.stream(command) if isinstance(e, kind)]


@pytest.fixture
def libraries(tmp_path, hybrid_tiny):
    made = []

    def make(name):
        made.append(Library(tmp_path / name, hybrid_tiny))
        return made[-1]

    yield make
    for library in made:
        library.close()


def test_questions_forked_from_the_document_snapshot_equal_uninterrupted_runs(libraries):
    doc = document(500)
    lib = libraries("forked")
    client = lib.engine()
    stored, events = lib.load(client, doc)
    events = list(events)
    read = [e for e in events if isinstance(e, p.DocumentRead)][0]
    assert read.finish_reason == "stop" and read.tokens > 1000 and read.snapshot.saved_bytes > 0
    progress = [e.processed for e in events if isinstance(e, p.PromptProgress) and not e.estimated]
    assert len(progress) >= 3 and progress == sorted(progress) and progress[-1] == read.tokens
    conversation, doc_message = stored.conversation.id, stored.message.id
    first = lib.ask(client, conversation, "Which word comes first?", doc_message)
    client.close(mode="abort")
    fork = lib.engine()  # a fresh engine: the second question restores the document's snapshot
    second = lib.ask(fork, conversation, "Which word comes last?", doc_message)
    again = lib.ask(fork, conversation, "Which word comes first?", doc_message)

    assert second.finished.snapshot.restored and again.finished.snapshot.restored
    assert second.finished.snapshot.prefilled_tokens < 40, "a question reads only its own tokens"
    assert again.finished.token_ids == first.finished.token_ids
    reference = libraries("uninterrupted")
    ref_client = reference.engine()
    ref_stored, ref_events = reference.load(ref_client, doc)
    list(ref_events)
    uninterrupted = reference.ask(ref_client, ref_stored.conversation.id, "Which word comes last?",
                                  ref_stored.message.id)
    assert second.finished.token_ids == uninterrupted.finished.token_ids
    assert second.finished.token_ids != first.finished.token_ids, "two questions, two answers"
    recorded = lib.documents.for_message(doc_message)
    assert recorded.content_sha256 == text_sha256(doc.text)


def measured_tokens(lib, doc) -> int:
    client = lib.clients[-1]
    return events_of(client, fit_command(doc.text, "all"), p.TextMeasured)[0].tokens


def read_and_cancel_at_first_progress(client, events) -> p.DocumentRead:
    cancelled = False
    for event in events:
        if isinstance(event, p.PromptProgress) and not cancelled:
            client.send(p.Cancel(request_id=event.request_id))
            cancelled = True
        if isinstance(event, p.DocumentRead):
            return event
    raise AssertionError("the read ended without DocumentRead")


def test_a_cancelled_read_saves_nothing_and_leaves_the_conversation_as_it_was(libraries):
    lib = libraries("cancel")
    client = lib.engine()
    conversation = lib.store.create("chat", model="tiny")
    earlier = lib.ask(client, conversation.id, "Hello there.", None)
    before = lib.store.get(conversation.id)
    branch_before = lib.store.current_branch(conversation.id)

    stored, events = lib.load(client, document(700), conversation_id=conversation.id)
    assert lib.store.current_branch(conversation.id)[-1].id == stored.message.id
    read = read_and_cancel_at_first_progress(client, events)
    assert read.finish_reason == "cancelled" and read.snapshot.snapshot_id is None and not read.snapshot.saved_bytes
    assert 0 < read.timings.prompt_n < measured_tokens(lib, document(700))
    assert not keep_if_read(lib.store, lib.documents, stored, read.finish_reason)

    assert lib.store.get(conversation.id) == before
    assert lib.store.current_branch(conversation.id) == branch_before
    assert lib.documents.for_conversation(conversation.id) == []
    assert SnapshotStore(lib.store.db).for_message(stored.message.id) == []
    answer = lib.ask(client, conversation.id, "Still there?", None)
    assert answer.user.parent_id == earlier.answer.id, "the next question follows the earlier answer"
    assert answer.finished.snapshot.restored and answer.finished.snapshot.prefilled_tokens < 40, \
        "the question started from the earlier answer's snapshot, without the document"


def test_a_cancelled_read_into_a_new_conversation_removes_that_conversation(libraries):
    lib = libraries("cancel-new")
    client = lib.engine()
    stored, events = lib.load(client, document(700))
    read = read_and_cancel_at_first_progress(client, events)
    assert read.finish_reason == "cancelled"
    assert not keep_if_read(lib.store, lib.documents, stored, read.finish_reason)
    assert lib.store.list() == [] and lib.documents.for_message(stored.message.id) is None
    with pytest.raises(StoreError):
        lib.store.get(stored.conversation.id)


def test_a_document_read_to_the_end_is_kept(libraries):
    lib = libraries("kept")
    client = lib.engine()
    stored, events = lib.load(client, document(100))
    read = [e for e in events if isinstance(e, p.DocumentRead)][0]
    assert keep_if_read(lib.store, lib.documents, stored, read.finish_reason)
    assert lib.documents.for_conversation(stored.conversation.id) == [stored.document]


def _read_end(events) -> p.DocumentRead:
    return [e for e in events if isinstance(e, p.DocumentRead)][0]


def test_a_document_longer_than_the_context_is_refused_with_the_numbers_or_cut_as_asked(libraries):
    lib = libraries("long")
    client = lib.engine()
    doc = document(6000)
    stored, events = lib.load(client, doc)
    events = list(events)
    read = _read_end(events)
    assert read.finish_reason == "too_long" and read.tokens == 0 and not any(
        isinstance(e, (p.PromptProgress, p.ContextGrown)) for e in events), "measured, not read"
    room = read.room
    assert room.tokens > room.grown_budget_tokens == room.budget_tokens + 8192 - 4096, "it could grow to the trained 8k"
    assert room.held_tokens > 0, "the chat template's markers around it, counted on the rendered conversation"
    assert room.budget_tokens == 4096 - 1024 - room.held_tokens
    assert f"{room.tokens - room.grown_budget_tokens:,} too many" in str(too_long(doc.title, room))
    assert not keep_if_read(lib.store, lib.documents, stored, read.finish_reason)
    assert lib.store.list() == [], "taken back out"
    for part in ("first", "last"):
        stored, events = lib.load(client, doc, part, budget=part_budget(doc.title, room))
        events = list(events)
        assert _read_end(events).finish_reason == "stop", "the part the report left room for fits"
        assert not any(isinstance(e, p.ContextGrown) for e in events), "in the context as it is"
        kept = stored.message.content.removeprefix(f"Document: {doc.title}\n\n")
        assert doc.text.startswith(kept[:200]) if part == "first" else doc.text.endswith(kept[-200:])
        assert len(kept) < len(doc.text)


def test_the_budget_leaves_out_what_the_conversation_already_holds(libraries):
    lib = libraries("room")
    client = lib.engine(n_ctx=8192)  # the trained length: it cannot grow
    stored, events = lib.load(client, document(300))
    assert _read_end(events).finish_reason == "stop"
    conversation = stored.conversation.id
    before = lib.store.current_branch(conversation)
    second = document(1800, seed=2)
    alone = events_of(client, fit_command(second.text, "all"), p.TextMeasured)[0]
    assert alone.fits, "the second document fits an empty context"

    more, events = lib.load(client, second, conversation_id=conversation)
    read = _read_end(events)
    room = read.room
    assert read.finish_reason == "too_long" and room.held_tokens > stored.document.tokens
    assert room.budget_tokens == room.grown_budget_tokens == 8192 - 1024 - room.held_tokens
    assert f"after the {room.held_tokens:,} tokens already in this conversation" in str(
        too_long(second.title, room, in_conversation=True))
    keep_if_read(lib.store, lib.documents, more, read.finish_reason)
    assert lib.store.current_branch(conversation) == before

    more, events = lib.load(client, second, "last", conversation_id=conversation, budget=part_budget(second.title, room))
    read = _read_end(events)
    assert read.finish_reason == "stop", "both documents fit the context"
    assert second.text.endswith(more.message.content[-200:])
    answer = lib.ask(client, conversation, "Which word comes last?", more.message.id)
    assert answer.finished.finish_reason in ("stop", "length") and answer.finished.snapshot.restored


def test_a_document_longer_than_the_context_is_read_whole_in_a_longer_one(libraries):
    lib = libraries("grows")
    client = lib.engine(n_ctx=2048)
    doc = document(1200)
    stored, events = lib.load(client, doc, grow=False)
    read = _read_end(events)
    assert read.finish_reason == "too_long" and fits_once_grown(read.room), "the user chooses a longer context"
    keep_if_read(lib.store, lib.documents, stored, read.finish_reason)
    stored, events = lib.load(client, doc)
    events = list(events)
    (grown,) = [e for e in events if isinstance(e, p.ContextGrown)]
    read = _read_end(events)
    assert grown.previous_n_ctx == 2048 and grown.context.n_ctx > read.tokens > 1200
    answer = lib.ask(client, stored.conversation.id, "Which word comes last?", stored.message.id)
    assert answer.finished.snapshot.restored and answer.finished.snapshot.prefilled_tokens < 40


def test_chunks_are_the_batch_size_and_a_replay_feeds_the_same_chunks(libraries):
    lib = libraries("chunks")
    client = lib.engine()
    stored, events = lib.load(client, document(300))
    progress = [e.processed for e in events if isinstance(e, p.PromptProgress) and not e.estimated]
    record = SnapshotStore(lib.store.db).for_message(stored.message.id)[0]
    chunks = record.layout["prefill_chunks"]
    assert len(chunks) > 1 and set(chunks[:-1]) == {512} and 0 < chunks[-1] <= 512  # the last is the remainder
    assert [sum(chunks[: i + 1]) for i in range(len(chunks))] == progress
    live = lib.ask(client, stored.conversation.id, "Which word?", stored.message.id)
    client.close(mode="abort")
    files = SnapshotStore(lib.store.db).files
    for part in ("kv", "recurrent"):  # zeroed on the disk
        path = files.path(record.checksums[part])
        path.write_bytes(bytes(path.stat().st_size))
    replayed = lib.ask(lib.engine(), stored.conversation.id, "Which word?", stored.message.id)
    assert any("rebuilt" in note for note in replayed.finished.snapshot.notes), replayed.finished.snapshot.notes
    assert replayed.finished.token_ids == live.finished.token_ids
