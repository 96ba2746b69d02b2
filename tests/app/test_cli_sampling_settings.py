"""``hearth generate`` and ``hearth send`` sample with the flags, else what the user set in Settings,
else the model's own defaults (issue 51, point 1); a settings.json from the previous version, which
wrote every value (a repeat penalty of 1.0 among them), is migrated so that the untouched values follow
the model. Real CLI processes, a real worker, the embedded SmolLM2."""

from __future__ import annotations

import json

import pytest

from app.services.paths import user_paths
from app.services.settings import settings_path
from tests.helpers.cli import error_line, hearth

pytestmark = [pytest.mark.process]
PROMPT = "Name three colours."
# What the previous version (settings schema 1) wrote: every value, the shipped ones untouched (0.7, 40, 0.95,
# 0.05, penalty 1.0), and this user's own choice of greedy answers.
OLD_FILE = {"schema_version": 1, "model": "default", "temperature": 0.0, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
            "seed": None, "max_tokens": 1024, "draft": "auto", "repeat_penalty": 1.0}


def write_old_settings() -> None:
    path = settings_path(user_paths().ensure().config)
    path.write_text(json.dumps(OLD_FILE), encoding="utf-8")


def generate(*flags: str) -> dict:
    done = hearth("generate", "--max-tokens", "40", "--draft", "off", "--json", *flags, PROMPT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_generate_takes_the_users_setting_and_the_models_penalty_from_an_old_settings_file():
    write_old_settings()
    answer = generate("--seed", "3")  # no sampling flag: the settings' greedy, the model's penalty (not 1.0)
    assert answer["sampling"] == {"temperature": 0.0, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "seed": 3,
                                  "repeat_penalty": 1.1, "repeat_last_n": 64, "dry_multiplier": 0.8}
    greedy = generate("--temperature", "0", "--repeat-penalty", "1.1")
    assert answer["token_ids"] == greedy["token_ids"]  # greedy indeed: the setting reached the engine


def test_a_flag_wins_over_the_setting():
    write_old_settings()
    answer = generate("--temperature", "0.9", "--seed", "5", "--repeat-penalty", "1.0")
    assert (answer["sampling"]["temperature"], answer["sampling"]["repeat_penalty"]) == (0.9, 1.0)


def test_send_samples_as_generate_does_and_says_so_in_its_json():
    write_old_settings()
    sent = hearth("send", "--new", "colours", "--max-tokens", "40", "--draft", "off", "--json", PROMPT)
    assert sent.returncode == 0, sent.stderr
    reply = json.loads(sent.stdout)
    assert (reply["sampling"]["temperature"], reply["sampling"]["repeat_penalty"]) == (0.0, 1.1)
    assert reply["token_ids"] == generate("--temperature", "0")["token_ids"]


# (field, flag, the user's setting, the flag's value): a setting only the user gave is used; the flag wins.
SET_AND_FLAGGED = [("repeat_last_n", "--repeat-last-n", 4, "0"), ("dry_multiplier", "--dry-multiplier", 1.5, "0")]


@pytest.mark.parametrize("field, flag, setting, flagged", SET_AND_FLAGGED, ids=[row[0] for row in SET_AND_FLAGGED])
def test_the_value_set_in_settings_is_used_and_the_flag_wins(field, flag, setting, flagged):
    path = settings_path(user_paths().ensure().config)
    path.write_text(json.dumps({"schema_version": 2, field: setting}), encoding="utf-8")
    assert generate("--max-tokens", "8")["sampling"][field] == setting
    assert generate("--max-tokens", "8", flag, flagged)["sampling"][field] == float(flagged)


# (flag, value, words the one line must hold): the protocol's own rule, in the words the window uses
OUT_OF_RANGE = [("--repeat-last-n", "-2", "-1 (the whole answer), 0 (off)"),
                ("--repeat-last-n", "2147483648", "-1 (the whole answer), 0 (off)"),
                ("--dry-multiplier", "-0.5", "phrase penalty must be between 0 (off) and 5"),
                ("--dry-multiplier", "6", "phrase penalty must be between 0 (off) and 5")]


@pytest.mark.parametrize("flag, value, words", OUT_OF_RANGE)
def test_a_value_out_of_range_is_one_line_saying_the_range(flag, value, words):
    line = error_line(hearth("generate", flag, value, "--max-tokens", "4", "hi"))
    assert words in line, line
