"""Document records: stored with their conversation, found by message, gone with it."""

import pytest

from model_store.documents import DocumentStore, text_sha256


def test_documents_are_found_by_message_and_deleted_with_their_conversation(db, convs):
    documents = DocumentStore(db)
    conversation = convs.create("doc")
    message = convs.add_message(conversation.id, "user", "Document: a.txt\n\nhello", parent_id=None)
    doc = documents.add(conversation_id=conversation.id, message_id=message.id, title="a.txt", kind="text",
                        text="hello", source_path="/tmp/a.txt", source_bytes=5, pages=None, tokens=2, part="all")
    assert documents.for_message(message.id) == doc == documents.get(doc.id)
    assert doc.content_sha256 == text_sha256("hello") and documents.for_conversation(conversation.id) == [doc]
    other = convs.create("copy")
    copy_message = convs.add_message(other.id, "user", message.content, parent_id=None)
    copy = documents.copy_to(doc, other.id, copy_message.id)
    assert (copy.title, copy.tokens, copy.content_sha256) == (doc.title, doc.tokens, doc.content_sha256)
    convs.delete(conversation.id)
    assert documents.for_message(message.id) is None and documents.for_message(copy_message.id) == copy


def test_a_part_must_be_all_first_or_last(db, convs):
    conversation = convs.create("doc")
    message = convs.add_message(conversation.id, "user", "x", parent_id=None)
    with pytest.raises(ValueError, match="part must be"):
        DocumentStore(db).add(conversation_id=conversation.id, message_id=message.id, title="x", kind="text",
                              text="x", source_path=None, source_bytes=1, pages=None, tokens=1, part="middle")


def test_removing_a_document_deletes_its_message_and_record_and_restores_the_leaf(db, convs):
    documents = DocumentStore(db)
    conversation = convs.create("doc")
    question = convs.add_message(conversation.id, "user", "hi", parent_id=None)
    answer = convs.add_message(conversation.id, "assistant", "hello", parent_id=question.id)
    before = convs.get(conversation.id)
    message = convs.add_message(conversation.id, "user", "Document: a.txt\n\nhello", parent_id=answer.id)
    doc = documents.add(conversation_id=conversation.id, message_id=message.id, title="a.txt", kind="text",
                        text="hello", source_path=None, source_bytes=5, pages=None, tokens=2, part="all")
    documents.remove(doc, leaf_id=before.leaf_id, updated_at=before.updated_at)
    assert convs.get(conversation.id) == before
    assert [m.id for m in convs.current_branch(conversation.id)] == [question.id, answer.id]
    assert documents.for_conversation(conversation.id) == [] and convs.children(answer.id) == []
