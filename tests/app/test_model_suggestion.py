"""A document longer than the built-in model was trained on (issue 31, point 7): what limits it (the
trained length, not memory) and the catalogue model that reads it whole on this machine, chosen in one
place (app.services.model_suggestion) from the real catalogue; ``hearth doc load`` says both, with the
commands that get it and read the document with it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from app.surfaces.cli.main import main
from app.services.model_suggestion import MEMORY, TRAINED, needed_tokens, suggest_model, what_limits
from engine import protocol as p
from model_store.catalogue import load_catalogue
from model_store.fit import AVAILABLE_MEMORY_ENV
from model_store.installed import InstalledModel
from tests.helpers.documents import write_document

GIB = 1 << 30


def report(n_ctx_train: int) -> p.ContextReport:
    return p.ContextReport(n_ctx=n_ctx_train, n_ctx_train=n_ctx_train, mode="auto", kv_type="f16", kv_bytes=0,
                           estimated_bytes=0, available_bytes=22 * GIB, budget_bytes=15 * GIB, max_n_ctx=n_ctx_train)


def test_the_trained_length_is_the_limit_when_the_document_needs_more_than_it_whatever_the_memory():
    needed = needed_tokens(13_523)
    assert needed > 13_523, "room for a question and its answer after the document"
    assert what_limits(report(8192), needed) == TRAINED
    assert what_limits(report(32_768), needed) == MEMORY
    assert what_limits(report(8192), needed_tokens(6000, held_tokens=2000)) == TRAINED, "the conversation's too"


def test_the_smallest_download_that_reads_it_whole_here_is_suggested():
    catalogue = load_catalogue()
    chosen = suggest_model(catalogue, needed_tokens(13_523), 22 * GIB)
    assert (chosen.entry.id, chosen.file.quant, chosen.ref) == ("lfm2-350m", "Q4_K_M", "lfm2-350m")
    assert chosen.download_bytes == chosen.file.size_bytes and chosen.context_tokens >= needed_tokens(13_523)
    assert chosen.reads_whole() == ("LFM2 350M reads it whole on this machine (trained on 32,768 tokens; a 218.7 MiB "
                                    "download)")

    longer = suggest_model(catalogue, 200_000, 22 * GIB)  # past LFM2's 32k and Granite's 128k
    assert (longer.entry.id, longer.file.quant) == ("qwen3.5-0.8b", "Q4_K_M") and longer.context_tokens >= 200_000
    assert longer.ref == "qwen3.5-0.8b:Q4_K_M", "a quantization other than the recommended one is named"
    assert suggest_model(catalogue, 10**7, 22 * GIB) is None, "no catalogue model was trained on that much"
    assert suggest_model(catalogue, needed_tokens(13_523), 64 << 20) is None, "nothing fits in 64 MiB"


def test_a_model_already_installed_is_suggested_before_any_download():
    granite = InstalledModel("Granite 4.0 H 1B Q4_K_M", Path("/models/granite.gguf"), 1, id="granite-4.0-h-1b-q4_k_m",
                             source="download", catalogue_id="granite-4.0-h-1b", quant="Q4_K_M")
    chosen = suggest_model(load_catalogue(), needed_tokens(13_523), 22 * GIB, installed=[granite])
    assert chosen.installed_id == "granite-4.0-h-1b-q4_k_m" and chosen.model_ref == "granite-4.0-h-1b-q4_k_m"
    assert chosen.download_bytes == 0 and "installed already" in chosen.reads_whole()


def test_doc_load_of_a_text_longer_than_smollm2_was_trained_on_says_so_and_how_to_read_it_whole(
        hearth_home, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(AVAILABLE_MEMORY_ENV, str(22 * GIB))  # as on the machine of the report: memory is plenty
    text = write_document(tmp_path / "long notes.txt", 12_000)  # ~62 KB, more tokens than SmolLM2's 8,192
    assert main(["doc", "load", "--json", str(text)]) == 1
    captured = capsys.readouterr()
    (line,) = [line for line in captured.err.splitlines() if line.startswith("hearth: error:")]
    assert "SmolLM2 135M Instruct was trained on 8,192 tokens at most (the model's limit, not the memory's)" in line
    assert "free some memory" not in line
    same = shlex.join(["hearth", "doc", "load", "--model", "lfm2-350m", "--json", str(text)])
    assert f"LFM2 350M reads it whole on this machine (trained on 32,768 tokens; a 218.7 MiB download): " \
           f"`hearth models pull lfm2-350m`, then `{same}`" in line
    assert "'" in same, "a path with a space is quoted for the shell"
    error = json.loads(captured.out)["error"]
    assert (error["kind"], error["limit"], error["suggested_model"]) == ("too_long", "trained", "lfm2-350m")
    assert error["commands"] == ["hearth models pull lfm2-350m", same] and error["download_bytes"] > 200 << 20
