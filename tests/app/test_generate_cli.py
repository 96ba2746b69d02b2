"""``hearth generate`` in this process: the text it streams, its JSON keys, a bad flag in one line."""

import json

from app.surfaces.cli.main import main


def test_generate_cli_streams_text_and_json_has_the_documented_keys(capsys, hybrid_tiny):
    """The same seeded request twice, once as JSON: the streamed text is the JSON's. Without drafting: a
    sampled answer's tokens then depend on the seed alone, not on when auto-off switched a drafter off."""
    assert main(["generate", "--model", str(hybrid_tiny), "--max-tokens", "8", "--seed", "1", "--draft", "off",
                 "--json", "hi"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"text", "reasoning", "token_ids", "finish_reason", "timings", "draft", "devices", "n_ctx", "cut_off",
                        "sampling"}
    assert set(out["devices"]) == {"prefill", "decode", "prefill_reason", "decode_reason"}
    assert set(out["timings"]) == {"prompt_n", "prompt_ms", "gen_n", "gen_ms", "ttft_ms"}
    assert set(out["draft"]) == {"kind", "rounds", "drafted", "accepted", "mean_accepted_len", "auto_off", "reason",
                                 "tree_rounds", "side_wins"}
    assert main(["generate", "--model", str(hybrid_tiny), "--max-tokens", "8", "--seed", "1", "--draft", "off", "hi"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == out["text"]


def test_invalid_sampling_flag_is_a_clear_error(capsys, hybrid_tiny):
    assert main(["generate", "--model", str(hybrid_tiny), "--top-p", "0", "hi"]) == 1
    assert "top-p" in capsys.readouterr().err
