"""A new user's first hour, third round (issue 51, points 2 and 9), through the real ``hearth``
command: ``hearth`` alone opens the window or, with no display or in a script, prints a short help;
the window starts quietly without a locale; ``send`` says it resumed; ``models list`` fits 100
columns and explains its ``*``; the too-long message gives one number; ``make_models.py --only NAME
OUTDIR`` builds into OUTDIR."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import pytest

from model_store.fit import AVAILABLE_MEMORY_ENV
from tests.helpers.cli import HEARTH, ROOT, installed_hearth
from tests.helpers.documents import write_document

DISPLAY_VARIABLES = ("DISPLAY", "WAYLAND_DISPLAY")
LOCALE_VARIABLES = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES")
SELF_CHECK_CUT_SHORT = {"QT_QPA_PLATFORM": "offscreen", "HEARTH_SELF_CHECK_QUESTION": "Hello?",
                        "HEARTH_SELF_CHECK_TIMEOUT_S": "1"}  # the window opens, then closes after 1 s


def environment(*, without: tuple[str, ...] = (), **env: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k not in without}, **env}


# -- 2. `hearth` on its own ------------------------------------------------------------------------

def run_hearth_alone(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(HEARTH)], capture_output=True, text=True, timeout=120, env=env,
                          stdin=subprocess.DEVNULL)


def assert_first_help(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    opening = next(i for i, line in enumerate(lines) if "hearth app" in line)
    assert lines[opening].startswith("Open the window:"), lines
    commands = [line.split()[1] for line in lines[opening + 1:] if line.startswith("  hearth ")]
    assert commands == ["chat", "send", "doc", "conversations", "models"], lines
    assert "usage:" not in done.stderr and "error" not in done.stderr


def test_hearth_alone_without_a_display_prints_how_to_open_the_window_and_the_commands_used_most():
    done = run_hearth_alone(environment(without=DISPLAY_VARIABLES))
    assert_first_help(done)
    assert "no display" in done.stdout


def test_hearth_alone_in_a_script_prints_the_help_even_with_a_display():
    done = run_hearth_alone(environment(DISPLAY=":99", **SELF_CHECK_CUT_SHORT))  # stdout is a pipe here
    assert_first_help(done)
    assert "window_shown_ms" not in done.stdout, "no window was opened"


@pytest.mark.process
def test_hearth_alone_at_a_terminal_with_a_display_opens_the_window():
    primary, secondary = pty.openpty()  # stdout a terminal, as for a person who types `hearth`
    opened = subprocess.Popen([str(HEARTH)], stdout=secondary, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              env=environment(DISPLAY=":99", **SELF_CHECK_CUT_SHORT))
    os.close(secondary)
    said = b""
    try:
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the terminal's other end closed: the command ended
                break
            if not chunk:
                break
            said += chunk
        _, err = opened.communicate(timeout=120)
    finally:
        opened.kill()
        os.close(primary)
    report = json.loads(said.decode().strip().splitlines()[-1])  # the window's self-check, cut short
    assert report["window_shown_ms"] > 0, err
    assert b"Traceback" not in err


@pytest.mark.process
@pytest.mark.parametrize("locale", [{"PYTHONCOERCECLOCALE": "0"}, {"LC_ALL": "C"}],
                         ids=["no-locale-set", "LC_ALL=C"])
def test_the_window_opens_without_a_locale_warning_where_no_locale_is_set(locale):
    # PYTHONCOERCECLOCALE=0: Python leaves the C locale as it is, as the bundle's embedded Python does
    opened = subprocess.run([str(HEARTH), "app"], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL,
                            env=environment(without=LOCALE_VARIABLES, **SELF_CHECK_CUT_SHORT, **locale))
    report = json.loads(opened.stdout.strip().splitlines()[-1])
    assert report["window_shown_ms"] > 0, opened.stderr
    assert "locale" not in opened.stderr.lower() and "UTF-8" not in opened.stderr, opened.stderr


# -- 9. The CLI's wording --------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.process
def test_send_says_on_stderr_that_it_resumed_from_the_snapshot_and_json_keeps_it_in_its_object():
    first = installed_hearth("send", "--new", "Resume", "--max-tokens", "4", "--temperature", "0", "Hello there")
    assert first.returncode == 0, first.stderr
    assert "resumed" not in first.stderr.lower(), "a new conversation has nothing to resume"
    conversation = re.search(r"saved as conversation (\w+)", first.stderr).group(1)

    again = installed_hearth("send", "--conversation", conversation, "--max-tokens", "4", "--temperature", "0",
                             "And again")
    assert again.returncode == 0, again.stderr
    (said,) = [line for line in again.stderr.splitlines() if "resumed" in line]
    restored = int(re.search(r"snapshot\): ([\d,]+) tokens not read again", said).group(1).replace(",", ""))
    assert restored > 0 and said.startswith("hearth: resumed from the conversation's saved state"), said
    assert "resumed" not in again.stdout

    as_json = installed_hearth("send", "--conversation", conversation, "--max-tokens", "4", "--temperature", "0",
                               "--json", "Once more")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["snapshot"]["restored"] is True
    assert "resumed" not in as_json.stderr.lower(), "--json says it in its object only"


def test_models_list_fits_100_columns_and_explains_its_star():
    listed = installed_hearth("models", "list", **{AVAILABLE_MEMORY_ENV: str(24 << 30)})
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert max(map(len, lines)) <= 100, [line for line in lines if len(line) > 100]
    legend = " ".join(line.strip() for line in lines[1:lines.index("")])
    assert "* marks the file to pick on this computer" in legend, legend
    starred = [line for line in lines if line.startswith("  * ")]
    recommended = [f"{e['id']}:{v['quant']}" for e in json.loads(installed_hearth(
        "models", "list", "--json", **{AVAILABLE_MEMORY_ENV: str(24 << 30)}).stdout)["catalogue"]
                   for v in e["variants"] if v["recommended"]]
    assert [line.split()[1] for line in starred] == recommended


@pytest.mark.process
def test_a_document_too_long_is_told_with_one_number_explained(tmp_path):
    text = write_document(tmp_path / "long notes.txt", 12_000)  # more tokens than SmolLM2's 8,192
    done = installed_hearth("doc", "load", str(text), **{AVAILABLE_MEMORY_ENV: str(22 << 30)})
    assert done.returncode == 1
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("hearth: error:")]
    room = re.search(r"leaves room for ([\d,]+) \(([\d,]+) too many\)", line)
    assert room and "(the rest of the context is kept free for questions and answers)" in line, line
    counts = {n for n in re.findall(r"\b\d{1,3}(?:,\d{3})+\b", line)}  # the token counts of the message
    assert counts <= {room.group(1), room.group(2), "8,192", "32,768", "262,144"} | set(
        re.findall(r"has ([\d,]+) tokens", line)), (counts, line)
    assert line.endswith("or read only as much of its beginning or its end as fits (--part first / --part last)")


# -- make_models.py: the folder is never taken for a model ------------------------------------------

@pytest.mark.parametrize("order", ["only-first", "folder-first"])
def test_make_models_builds_into_the_folder_wherever_only_is_given(tmp_path, order):
    folder = tmp_path / "models"
    argv = ["--only", "hybrid-tiny", str(folder)] if order == "only-first" else [str(folder), "--only", "hybrid-tiny"]
    done = subprocess.run([sys.executable, "-m", "tests.fixtures.make_models", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["hybrid-tiny", str(folder / "hybrid-tiny.gguf")]
    assert (folder / "hybrid-tiny.gguf").stat().st_size > 0


def test_make_models_names_an_unknown_model_and_where_the_folder_goes(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tests.fixtures.make_models", str(tmp_path), "--only", "hybrid-tiny",
                           "no-such-model"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "no model called no-such-model" in done.stderr and "OUTDIR --only NAME" in done.stderr
    assert not list(tmp_path.iterdir()), "nothing built"
