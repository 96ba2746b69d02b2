"""Every sub-command of ``hearth`` names (``module:function``, imported only when it is chosen, so
start-up stays quick) a function that exists in the command line's own package: a typo, a renamed
function or a moved module is found here, not by the user who types the command."""

from __future__ import annotations

import argparse
import inspect

from app.surfaces.cli.main import _command, build_parser


def _runs(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], str]:
    found = {path: parser.get_default("run")} if parser.get_default("run") else {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _runs(sub, (*path, name))
    return found


def test_every_sub_command_names_a_function_of_the_command_line_that_takes_its_arguments():
    runs = _runs(build_parser())
    assert len(runs) >= 20, sorted(runs)  # every command and sub-command was walked
    for path, where in runs.items():
        module = where.partition(":")[0]
        assert module.startswith("app.surfaces.cli."), f"hearth {' '.join(path)}: {where} is outside app.surfaces.cli"
        run = _command(where)
        assert callable(run) and len(inspect.signature(run).parameters) == 1, f"hearth {' '.join(path)}: {where}"


def test_a_name_that_is_not_there_fails_loudly():
    try:
        _command("app.surfaces.cli.commands:run_nothing")
    except AttributeError:
        return
    raise AssertionError("a missing function was not noticed")
