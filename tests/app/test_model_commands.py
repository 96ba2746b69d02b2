"""``hearth models import|list|rm`` and ``--model ID``, through the real CLI entry function."""

import json
import shutil

import pytest

from app.surfaces.cli.main import main
from model_store.catalogue import load_catalogue
from model_store.fit import AVAILABLE_MEMORY_ENV, headroom


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def local_gguf(hybrid_tiny, tmp_path):
    path = tmp_path / "My Tiny Model.gguf"
    shutil.copy(hybrid_tiny, path)
    return path


def test_import_registers_a_valid_gguf_that_then_answers_by_id(capsys, local_gguf):
    code, out, err = run(capsys, "models", "import", "--json", str(local_gguf))
    assert code == 0, err
    imported = json.loads(out)
    assert imported["architecture"] == "qwen35" and imported["size_bytes"] == local_gguf.stat().st_size
    code, out, _ = run(capsys, "models", "list", "--json")
    installed = json.loads(out)["installed"]
    assert [m["id"] for m in installed] == [imported["id"]] and installed[0]["source"] == "import"
    by_id = run(capsys, "generate", "--model", imported["id"], "--temperature", "0", "--max-tokens", "5", "--json", "hi")
    by_path = run(capsys, "generate", "--model", str(local_gguf), "--temperature", "0", "--max-tokens", "5", "--json", "hi")
    assert by_id[0] == by_path[0] == 0
    assert json.loads(by_id[1])["token_ids"] == json.loads(by_path[1])["token_ids"]


def test_import_refuses_a_file_that_is_not_gguf_and_registers_nothing(capsys, tmp_path):
    bogus = tmp_path / "notes.gguf"
    bogus.write_bytes(b"PK\x03\x04 this is a zip file, not a model" * 10)
    code, _, err = run(capsys, "models", "import", str(bogus))
    assert code == 1 and "notes.gguf" in err and "GGUF" in err
    assert json.loads(run(capsys, "models", "list", "--json")[1])["installed"] == []


def test_rm_of_an_import_unregisters_and_keeps_the_file(capsys, local_gguf):
    imported = json.loads(run(capsys, "models", "import", "--json", str(local_gguf))[1])
    code, out, _ = run(capsys, "models", "rm", imported["id"])
    assert code == 0 and "left where it is" in out
    assert local_gguf.exists()
    assert json.loads(run(capsys, "models", "list", "--json")[1])["installed"] == []
    code, _, err = run(capsys, "generate", "--model", imported["id"], "--max-tokens", "2", "hi")
    assert code == 1 and "neither a model file nor an installed or catalogue model's id" in err, err
    assert "hearth models pull" not in err, "an imported model's id is not in the catalogue to download"


def test_list_gives_fit_advice_for_every_catalogue_variant(capsys):
    code, out, _ = run(capsys, "models", "list", "--json", "--context", "4096")
    listing = json.loads(out)
    assert code == 0 and listing["available_memory_bytes"] > 0
    entries = listing["catalogue"]
    assert entries and entries[0]["architecture"] in ("qwen35", "lfm2", "granitehybrid", "nemotron_h")
    for entry in entries:
        assert entry["context_tokens"] == min(4096, entry["context_length"])
        assert all(v["fit"] in ("fits", "tight", "too_big") for v in entry["variants"])
        assert sum(v["recommended"] for v in entry["variants"]) <= 1
        for v in entry["variants"]:
            assert v["needed_bytes"] > v["size_bytes"]  # the state and the runtime come on top of the file


VARIANT_KEYS = {"quant", "filename", "size_bytes", "size_estimated", "fit", "needed_bytes", "recommended",
                "installed_id", "max_context_tokens", "transformer_max_context_tokens",  # kept as they were spelled
                "memory_context_tokens", "transformer_memory_context_tokens"}  # issue 30: the memory figures


def list_on(capsys, monkeypatch, gib: int, *flags: str) -> tuple[int, str]:
    monkeypatch.setenv(AVAILABLE_MEMORY_ENV, str(gib << 30))
    code, out, err = run(capsys, "models", "list", *flags)
    assert code == 0, err
    return code, out


def test_list_never_gives_more_context_than_trained_and_says_the_rest_is_headroom(capsys, monkeypatch):
    listing = json.loads(list_on(capsys, monkeypatch, 24, "--json")[1])
    entry = next(e for e in listing["catalogue"] if e["id"] == "qwen3.5-0.8b")
    catalogued = load_catalogue().get("qwen3.5-0.8b")
    for v in entry["variants"]:
        assert set(v) == VARIANT_KEYS
        memory, transformer = headroom(catalogued, v["size_bytes"], 24 << 30)
        assert (v["memory_context_tokens"], v["transformer_memory_context_tokens"]) == (memory, transformer)
        assert v["memory_context_tokens"] > 1_000_000 > 262_144 == entry["context_length"], "the issue's case"
        assert v["max_context_tokens"] == 262_144, "capped at the trained length"
        assert v["transformer_max_context_tokens"] == min(transformer, 262_144)
    for e in listing["catalogue"]:
        for v in e["variants"]:
            assert v["max_context_tokens"] == min(v["memory_context_tokens"], e["context_length"])
            assert v["transformer_max_context_tokens"] == min(v["transformer_memory_context_tokens"],
                                                              e["context_length"])
    text = list_on(capsys, monkeypatch, 24)[1]
    q4 = next(line for line in text.splitlines() if "qwen3.5-0.8b:Q4_K_M" in line)
    memory = next(v for v in entry["variants"] if v["quant"] == "Q4_K_M")["memory_context_tokens"]
    assert q4.lstrip(" *").split()[4] == "262,144+", "its trained maximum; memory would hold more (issue 51)"
    assert f"{memory:,}" not in q4, "the memory figure is never given as the context"


def test_list_shows_no_headroom_where_memory_is_the_limit(capsys, monkeypatch):
    listing = json.loads(list_on(capsys, monkeypatch, 2, "--json")[1])
    entry = next(e for e in listing["catalogue"] if e["id"] == "qwen3.5-2b")
    q4 = next(v for v in entry["variants"] if v["quant"] == "Q4_K_M")
    assert 0 < q4["max_context_tokens"] == q4["memory_context_tokens"] < entry["context_length"]
    assert q4["transformer_max_context_tokens"] == q4["transformer_memory_context_tokens"] < q4["max_context_tokens"]
    line = next(line for line in list_on(capsys, monkeypatch, 2)[1].splitlines() if "qwen3.5-2b:Q4_K_M" in line)
    shown = [f"{q4['max_context_tokens']:,}", f"{q4['transformer_max_context_tokens']:,}"]
    assert line.lstrip(" *").split()[4:6] == shown, line
    assert "+" not in line


def test_unknown_catalogue_id_for_pull_is_a_clear_error(capsys):
    code, _, err = run(capsys, "models", "pull", "no-such-model")
    assert code == 1 and "no-such-model" in err and "hearth models list" in err


def test_draft_model_accepts_an_installed_id(capsys, local_gguf, hybrid_tiny):
    imported = json.loads(run(capsys, "models", "import", "--json", str(local_gguf))[1])
    code, out, err = run(capsys, "generate", "--model", str(hybrid_tiny), "--draft", f"model:{imported['id']}",
                         "--temperature", "0", "--max-tokens", "8", "--json", "hi")
    assert code == 0, err
    assert json.loads(out)["draft"]["kind"] == "model"
    code, _, err = run(capsys, "generate", "--draft", "model:nothing-here", "--max-tokens", "2", "hi")
    assert code == 1 and "--draft model:nothing-here" in err and "neither a model file nor" in err


@pytest.mark.parametrize("policy, prefill, expected", [
    ("auto", "cpu", "CPU: only the NPU emulator"), ("cpu", "cpu", "policy is CPU"),
    ("npu", "npu-emulator", "emulated, slow")])
def test_generate_json_says_which_device_ran_each_phase_and_why(capsys, hybrid_tiny, policy, prefill, expected):
    code, out, err = run(capsys, "generate", "--model", str(hybrid_tiny), "--prefill-device", policy,
                         "--temperature", "0", "--max-tokens", "3", "--json", "hi")
    assert code == 0, err
    devices = json.loads(out)["devices"]
    assert devices["prefill"] == prefill and devices["decode"] == "cpu"
    assert expected in devices["prefill_reason"] and devices["decode_reason"]
    assert ("warning: prefill runs on npu-emulator" in err) == (policy == "npu")
