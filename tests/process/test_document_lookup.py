"""Questions about a loaded document draft from the document itself, also when its state is restored.

Prompt lookup drafts from n-grams of everything the model holds: the document, the conversation and
the answer so far (``ModelSession.tokens``, which a restored snapshot sets to the whole history it
stands for). The built-in model (real weights) answers a question whose words share nothing with the
document's sentences, on a fresh engine that restores the document's snapshot: its quote is drafted
from the document, and the answer is token for token the one plain decoding gives.
"""

from __future__ import annotations

import msgspec
import pytest

from app.services.extract import ExtractedDocument
from app.services.turn import PROGRAM, TurnOptions, Writer, run_answer, start_turn
from engine import protocol as p
from tests.process.test_documents import Library

DOCUMENT = (
    "The lighthouse at Port Ellen was built in 1832 to guide ships through the narrow channel between the "
    "island and the mainland. Its keeper, Margaret Hale, kept a daily log of the weather, the ships that "
    "passed and the state of the lamp. In the winter of 1847 a storm destroyed the jetty and cut the island "
    "off for eleven days; the log records that the lamp was never allowed to go dark.\n\n"
    "The museum is open from April to October, every day except Monday, from ten in the morning until five "
    "in the afternoon. Visitors can climb the 112 steps to the lamp room and see the brass clockwork that "
    "once turned the lens."
)
QUESTION = "Quote the first sentence of the document."


@pytest.fixture
def library(tmp_path, smollm2):
    lib = Library(tmp_path / "data", smollm2)
    yield lib
    lib.close()


def ask(lib: Library, client, conversation_id: str, after: str, draft: str):
    options = TurnOptions(p.SamplingSpec(temperature=0), max_tokens=96, draft=draft, draft_max=4)
    _, turn = start_turn(lib.store, conversation_id, QUESTION, options, Writer(PROGRAM), reply_to=after)
    turn.command = msgspec.structs.replace(turn.command, draft_auto_off=False)  # every round drafts
    return run_answer(lib.store, client, turn)


def test_a_restored_document_is_what_lookup_drafts_from(library):
    client = library.engine()
    stored, events = library.load(client, ExtractedDocument("notes.txt", "text", DOCUMENT, None, "utf-8", 0))
    assert [e for e in events if isinstance(e, p.DocumentRead)][0].finish_reason == "stop"
    client.close(mode="abort")
    fresh = library.engine()  # nothing in memory: the question restores the document's snapshot
    conversation, document = stored.conversation.id, stored.message.id
    answer = ask(library, fresh, conversation, document, "lookup")
    drafted, plain = answer.finished, ask(library, fresh, conversation, document, "off").finished

    assert drafted.snapshot.restored and drafted.snapshot.prefilled_tokens < 40
    assert drafted.token_ids == plain.token_ids
    assert drafted.draft.kind == "lookup"
    # the answer quotes the document; the question shares no run of its words with it, so the accepted
    # guesses came from the restored document's tokens (measured: 19 of 24 drafted, in a 31-token answer)
    assert "built in 1832 to guide ships through the narrow channel" in answer.text, answer.text
    assert drafted.draft.accepted >= 0.4 * len(drafted.token_ids), drafted.draft
    assert drafted.draft.accepted >= 0.6 * drafted.draft.drafted, drafted.draft
