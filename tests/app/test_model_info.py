"""``hearth info`` reports what a model is."""

import json

from app.surfaces.cli.main import main


def info(capsys, model) -> dict:
    assert main(["info", "--model", str(model), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_hybrid_model_facts(capsys, hybrid_tiny):
    facts = info(capsys, hybrid_tiny)
    assert facts["arch"] == "qwen35"
    assert facts["is_hybrid"] and facts["supports_rollback"]
    assert facts["n_layer"] == 4 and facts["n_layer_mtp"] == 1
    assert facts["has_chat_template"]
    assert facts["file_bytes"] == hybrid_tiny.stat().st_size
    assert facts["n_params"] > 0 and facts["n_ctx_train"] > 0


def test_default_is_the_embedded_transformer(capsys, smollm2):
    facts = info(capsys, "default")
    assert facts["path"] == str(smollm2)
    assert facts["arch"] == "llama"
    assert not facts["is_hybrid"] and not facts["is_recurrent"] and not facts["supports_rollback"]
    assert facts["n_vocab"] == 49152
    assert 100e6 < facts["n_params"] < 200e6


def test_info_without_json_is_readable(capsys, hybrid_tiny):
    assert main(["info", "--model", str(hybrid_tiny)]) == 0
    out = capsys.readouterr().out
    assert "qwen35" in out and "supports_rollback" in out
