"""Context size on the command line (issue 19): ``--context N|auto``, the ``context`` object of
``hearth info --json``, ``n_ctx`` in ``generate --json``, and a context that grows on demand: the
conversation goes on in a longer context, standing on its snapshot, with exactly the tokens an
uninterrupted run in a long context writes; where memory does not allow it, one line says what
would help and nothing is lost."""

from __future__ import annotations

import json

import pytest

from engine.context.context_memory import model_memory
from engine.models.model_files import check_model_file
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.fit import AVAILABLE_MEMORY_ENV
from tests.helpers.cli import installed_hearth
from tests.helpers.documents import write_document
from tests.helpers.gui import write_settings

GREEDY = ("--temperature", "0", "--draft", "off", "--max-tokens", "12")
LONG_MESSAGE = "Please remember these words: " + " ".join(f"item{i}" for i in range(180))  # ~550 tokens
CONTEXT_KEYS = {"n_ctx", "n_ctx_train", "mode", "kv_bytes", "estimated_bytes"}


def send(*args: str, **env: str) -> tuple[dict, str]:
    done = installed_hearth("send", *GREEDY, "--json", *args, **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def grown_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("hearth: the context grew from ")]


@pytest.mark.parametrize("flag, mode", [("auto", "auto"), ("4096", "fixed")])
def test_info_json_says_the_context_and_its_memory(hearth_home, flag, mode):
    done = installed_hearth("info", "--context", flag, "--json")
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)["context"]
    assert CONTEXT_KEYS <= set(context) and context["mode"] == mode
    assert context["n_ctx"] == (context["n_ctx_train"] if flag == "auto" else 4096)
    assert 0 < context["kv_bytes"] < context["estimated_bytes"]


def test_generate_json_says_the_context_it_ran_in(hearth_home):
    done = installed_hearth("generate", "--context", "512", *GREEDY, "--json", "Hello")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["n_ctx"] == 512 and not grown_lines(done.stderr)


def test_a_bad_context_flag_is_one_usage_line(hearth_home):
    done = installed_hearth("info", "--context", "lots")
    assert done.returncode == 2 and "--context: expected a number of tokens or 'auto'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_conversation_outgrowing_its_context_goes_on_exactly_as_in_a_long_one(hearth_home, tmp_path):
    first, err = send("--context", "256", "--new", "Growing", LONG_MESSAGE)
    (line,) = grown_lines(err)
    assert "from 256 to " in line and first["n_ctx"] > 256 and first["finish_reason"] in ("stop", "length")
    conversation = first["conversation_id"]
    second, err = send("--context", "256", "--conversation", conversation, "Which word came first?")
    assert len(grown_lines(err)) == 1, "a new worker starts at 256 and grows again"
    assert second["snapshot"]["restored"] and second["snapshot"]["prefilled_tokens"] < 30, \
        "it stood on the first turn's snapshot in the longer context"

    elsewhere = {"HEARTH_HOME": str(tmp_path / "elsewhere")}
    long_first, err = send("--context", "8192", "--new", "Growing", LONG_MESSAGE, **elsewhere)
    long_second, _ = send("--context", "8192", "--conversation", long_first["conversation_id"],
                          "Which word came first?", **elsewhere)
    assert not grown_lines(err)
    assert (first["token_ids"], second["token_ids"]) == (long_first["token_ids"], long_second["token_ids"])


def test_when_memory_does_not_allow_a_longer_context_one_line_says_what_would_help(hearth_home, smollm2):
    memory = model_memory(smollm2, check_model_file(smollm2))
    small_machine = {AVAILABLE_MEMORY_ENV: str(-(-memory.total_bytes(512) * 100 // 70))}  # auto: 512 tokens
    done = installed_hearth("send", *GREEDY, "--new", "Too long", LONG_MESSAGE + " more" * 200, **small_machine)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("hearth: error:")]
    assert "tokens of context, but the memory available now holds 512 tokens" in line
    assert "close other programs" in line and "8-bit KV cache" in line
    store = ConversationStore(open_database(database_path(hearth_home / "data")))
    (conversation,) = store.list()
    user, answer = store.current_branch(conversation.id)
    assert user.content.startswith("Please remember") and answer.status == "error", "the message is kept"


def test_a_document_longer_than_the_context_is_read_whole_and_questions_stand_on_it(hearth_home, tmp_path):
    notes = write_document(tmp_path / "notes.txt", 600)
    loaded = installed_hearth("doc", "load", "--context", "512", "--json", str(notes))
    assert loaded.returncode == 0, loaded.stderr
    document = json.loads(loaded.stdout)
    assert len(grown_lines(loaded.stderr)) == 1 and document["tokens"] > 512
    asked, _ = send("--context", "512", "--conversation", document["conversation_id"], "What is it about?")
    assert asked["snapshot"]["restored_tokens"] >= document["tokens"] and asked["snapshot"]["prefilled_tokens"] < 30


def test_the_8_bit_cache_setting_is_used_and_its_snapshots_are_not_mixed_with_16_bit_ones(hearth_home, smollm2):
    write_settings(kv_cache_8bit=True)
    info = json.loads(installed_hearth("info", "--json").stdout)["context"]
    f16_bytes = model_memory(smollm2, check_model_file(smollm2)).kv_bytes(info["n_ctx"])
    assert info["kv_type"] == "q8_0" and info["kv_bytes"] == f16_bytes * 17 // 32
    first, _ = send("--new", "Eight bits", "Name a colour.")
    write_settings(kv_cache_8bit=False)
    second, _ = send("--conversation", first["conversation_id"], "And another?")
    assert not second["snapshot"]["restored"], "a q8_0 state is never restored into an f16 cache"
    assert second["snapshot"]["prefilled_tokens"] > first["timings"]["prompt_n"], "the conversation was read again"


def test_models_list_gives_each_variant_the_context_this_machine_holds_next_to_a_transformers(hearth_home):
    eight_gib = {AVAILABLE_MEMORY_ENV: str(8 << 30)}

    def listing() -> list[dict]:
        done = installed_hearth("models", "list", "--json", **eight_gib)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["catalogue"]

    entries = listing()
    for entry in entries:
        sizes = [(v["size_bytes"], v["memory_context_tokens"]) for v in entry["variants"]]
        assert [tokens for _, tokens in sorted(sizes)] == sorted((t for _, t in sizes), reverse=True), \
            f"{entry['id']}: a bigger file leaves room for less context"
        for variant in entry["variants"]:
            memory, transformer = variant["memory_context_tokens"], variant["transformer_memory_context_tokens"]
            if entry["architecture"] == "qwen35" and transformer:  # 3 of 4 layers recurrent
                assert memory >= 3 * transformer, entry["id"]
            assert variant["max_context_tokens"] == min(memory, entry["context_length"]), "never past the training"
            assert variant["transformer_max_context_tokens"] == min(transformer, entry["context_length"])
    write_settings(memory_budget_percent=35)
    halved = listing()
    assert all(h["memory_context_tokens"] < v["memory_context_tokens"] or v["memory_context_tokens"] == 0
               for e, f in zip(entries, halved) for v, h in zip(e["variants"], f["variants"]))
