"""A conversation's settings changed after it was created (a remote engine's consent, kept per conversation)."""

from __future__ import annotations

import pytest

from model_store.db import StoreError


def test_update_settings_sets_the_given_keys_and_keeps_the_others(convs):
    conv = convs.create("Trip", settings={"temperature": 0.2})
    updated = convs.update_settings(conv.id, {"remote_ok": ["gpu"]})
    assert updated.settings == {"temperature": 0.2, "remote_ok": ["gpu"]}
    assert convs.get(conv.id) == updated
    assert convs.update_settings(conv.id, {"remote_ok": ["gpu", "box"]}).settings["remote_ok"] == ["gpu", "box"]
    assert updated.updated_at == conv.updated_at, "a setting is not a new message: the list order stays"


def test_update_settings_of_a_missing_conversation_says_so(convs):
    with pytest.raises(StoreError, match="no conversation"):
        convs.update_settings("nope", {"remote_ok": []})
