"""The ``hearth`` command line: app (the window), generate, info, chat, send, conversations, doc load, models,
devices and engines.

Scripts outside the repository depend on the flags and JSON keys here; change them only by adding.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable

from app.surfaces.cli import flag_types
from app.surfaces.cli.arg_parser import HearthParser
from app.surfaces.cli.conversation_ids import conversation_flag, message_flag
from app.surfaces.cli.json_schema_flag import add_json_schema_flag
from app.surfaces.cli.store_parsers import add_db_commands, add_models_commands
from app.surfaces.cli.terminal_text import show_log_lines_visibly
from app.surfaces.cli.thinking import add_thinking_flag
from app.services.about import version_line
from engine.protocol import DEFAULTS, DRY_MULTIPLIER_RANGE, MAX_DRAFT_PATHS, WHEN_FULL_CHOICES

DRAFT_CHOICES = "auto, off, lookup, mtp, model:PATH|ID or eagle3:PATH|ID"  # ID: an installed model or head


def _add_model_flag(parser: argparse.ArgumentParser, *, default: str | None = "default") -> None:
    parser.add_argument("--model", default=default,
                        help="'default' (the embedded SmolLM2-135M-Instruct), an installed model's id "
                             "(`hearth models list`) or a path to a .gguf file")


def context_tokens(text: str) -> int:
    """``--context``: a number of tokens, or ``auto`` (0)."""
    if text.strip().lower() == "auto":
        return 0
    try:
        tokens = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of tokens or 'auto', got {text!r}") from None
    if not 1 <= tokens <= 2**31 - 1:
        raise argparse.ArgumentTypeError(f"a context is 1 to 2147483647 tokens or 'auto', got {text}")
    return tokens


def _add_context_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--context", type=context_tokens, default=None, metavar="N|auto",
                        help="tokens of context: a number, or auto (the longest that fits the memory budget, up to "
                             "what the model was trained on); default: the model's setting, auto unless changed. "
                             "It grows when a conversation needs more and memory allows")


def _add_engine_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", default=None, metavar="NAME",
                        help="answer on the remote engine NAME (`hearth engines list`) instead of this computer; "
                             "--model then picks one of the server's models (default: the engine's)")


MODEL_DEFAULT = "as set in Settings, else the model's own"


def _add_sampling_flags(parser: argparse.ArgumentParser) -> None:
    sampling = DEFAULTS.sampling
    parser.add_argument("--max-tokens", type=flag_types.max_tokens, default=DEFAULTS.max_tokens,
                        help=f"stop after this many tokens (default {DEFAULTS.max_tokens})")
    # Sampling flags left out are None: the value set in Settings, else the model's own (app.surfaces.cli.sampling_flags)
    parser.add_argument("--temperature", type=float, default=None,
                        help=f"0 = greedy (default: {MODEL_DEFAULT}, else {sampling.temperature})")
    parser.add_argument("--top-k", type=flag_types.top_k, default=None,
                        help=f"0 = off (default: {MODEL_DEFAULT}, else {sampling.top_k})")
    parser.add_argument("--top-p", type=float, default=None,
                        help=f"1 = off (default: {MODEL_DEFAULT}, else {sampling.top_p})")
    parser.add_argument("--min-p", type=float, default=None,
                        help=f"0 = off (default: {MODEL_DEFAULT}, else {sampling.min_p})")
    parser.add_argument("--seed", type=flag_types.seed, default=sampling.seed,
                        help="fixed seed for reproducible sampling")
    parser.add_argument("--repeat-penalty", type=float, default=None, metavar="X",
                        help="make words of the answer's last --repeat-last-n tokens less likely: 1 = off, at most 2 "
                             f"(default: {MODEL_DEFAULT}, else {sampling.repeat_penalty}, which keeps the "
                             "built-in model from looping)")
    parser.add_argument("--repeat-last-n", type=flag_types.repeat_last_n, default=None, metavar="N",
                        help="how many of the answer's last tokens the repeat penalty looks at: -1 = the whole "
                             f"answer, 0 = off (default: {MODEL_DEFAULT}, else {sampling.repeat_last_n})")
    parser.add_argument("--dry-multiplier", type=float, default=None, metavar="X",
                        help="the phrase penalty: make writing again a run of words the answer already wrote less likely "
                             "(llama.cpp's DRY): "
                             f"0 = off, at most {DRY_MULTIPLIER_RANGE[1]:g} (default: {MODEL_DEFAULT}, else "
                             f"{sampling.dry_multiplier})")
    parser.add_argument("--draft", default=DEFAULTS.draft, metavar="SPEC",
                        help=f"speculative drafting: {DRAFT_CHOICES} (default {DEFAULTS.draft}); never changes the output")
    parser.add_argument("--draft-max", type=flag_types.draft_max, default=DEFAULTS.draft_max, metavar="N",
                        help=f"longest draft (default {DEFAULTS.draft_max})")
    _add_draft_paths_flag(parser)
    parser.add_argument("--prefill-device", choices=("auto", "cpu", "npu"), default="auto",
                        help="where the input is read: auto (the NPU for long inputs when one is present), "
                             "cpu, or npu (the emulator where there is no NPU; slow)")
    add_thinking_flag(parser)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def _add_serve_command(sub) -> None:
    serve = sub.add_parser("serve", help="an OpenAI-compatible API on one model for other programs "
                                         "(http://127.0.0.1:8089/v1)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1: this computer only; another needs a key)")
    serve.add_argument("--port", type=flag_types.port, default=8089, help="port (default 8089; 0 picks a free one)")
    _add_model_flag(serve)
    _add_context_flag(serve)
    serve.add_argument("--api-key", default=None, metavar="KEY",
                       help="require 'Authorization: Bearer KEY' (or set HEARTH_API_KEY, kept out of the process list)")
    serve.add_argument("--draft", default=DEFAULTS.draft, metavar="SPEC",
                       help=f"speculative drafting: {DRAFT_CHOICES} (default {DEFAULTS.draft})")
    _add_draft_paths_flag(serve)
    serve.add_argument("--cors", default=None, metavar="ORIGIN", help="let web pages from ORIGIN call the API")
    serve.add_argument("--max-queue", type=_positive, default=16, metavar="N",
                       help="requests that may wait for the engine; more are refused with 429 (default 16)")
    serve.add_argument("--allow-switch", action="store_true",
                       help="answer for every installed model (GET /v1/models lists them); a request naming "
                            "another loads it in place of the current one")
    serve.set_defaults(run="app.surfaces.cli.serve_command:run_serve", draft_max=DEFAULTS.draft_max)


def _add_when_full_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--when-full", choices=WHEN_FULL_CHOICES, default=None,
                        help="when the conversation is longer than the model can read: drop-oldest leaves its oldest "
                             "messages out of what the model reads (they stay saved), summary continues in a new "
                             "conversation that starts with a summary of it, stop refuses with the reason "
                             f"(default: the window's Settings → Chat choice, at first {DEFAULTS.when_full})")


def _add_draft_paths_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--draft-paths", type=flag_types.draft_paths, default=DEFAULTS.draft_paths, metavar="N",
                        help=f"draft paths checked at once: 1 = a chain (default), 2-{MAX_DRAFT_PATHS} = a tree "
                             "(each path costs the model one more copy of its recurrent state)")


DESCRIPTION = ("A private, offline local assistant. Run `hearth app` to open the window (`hearth` alone does too, "
               "at a terminal with a display); the other commands work in the terminal.")


def build_parser() -> argparse.ArgumentParser:
    parser = HearthParser(prog="hearth", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", required=True)

    window = sub.add_parser("app", help="open the Hearth window (the desktop app)",
                            description="Open the Hearth window, as the desktop's menu entry and `python -m app` do.")
    window.set_defaults(run="app.surfaces.cli.main:_window_is_opened_by_the_entry_point")

    generate = sub.add_parser("generate", help="write a reply to one prompt")
    _add_model_flag(generate)
    _add_context_flag(generate)
    _add_engine_flag(generate)
    generate.add_argument("--raw", action="store_true", help="feed PROMPT as plain text, without the chat template")
    _add_sampling_flags(generate)
    generate.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")
    add_json_schema_flag(generate)
    generate.add_argument("prompt", metavar="PROMPT")
    generate.set_defaults(run="app.surfaces.cli.commands:run_generate")

    info = sub.add_parser("info", help="describe a model")
    _add_model_flag(info)
    _add_context_flag(info)
    info.add_argument("--json", action="store_true")
    info.set_defaults(run="app.surfaces.cli.commands:run_info")

    chat = sub.add_parser("chat", help="chat in the terminal; saved like the window's conversations")
    _add_conversation_flags(chat, new="start a new conversation with this title (default: from the first message)")
    _add_model_flag(chat, default=None)
    _add_context_flag(chat)
    _add_engine_flag(chat)
    _add_sampling_flags(chat)
    _add_when_full_flag(chat)
    chat.set_defaults(run="app.surfaces.cli.chat_command:run_chat")

    send = sub.add_parser("send", help="send one message in a saved conversation")
    _add_conversation_flags(send, new="start a new conversation with this title")
    send.add_argument("--reply-to", metavar="MESSAGE_ID", type=message_flag,
                      help="answer from this message instead of the newest one (edit or regenerate)")
    _add_model_flag(send, default=None)
    _add_context_flag(send)
    _add_engine_flag(send)
    _add_sampling_flags(send)
    _add_when_full_flag(send)
    send.add_argument("--json", action="store_true")
    add_json_schema_flag(send)
    send.add_argument("message", metavar="MESSAGE")
    send.set_defaults(run="app.surfaces.cli.conversation_commands:run_send")

    doc = sub.add_parser("doc", help="documents")
    doc_sub = doc.add_subparsers(dest="doc_command", required=True)
    load = doc_sub.add_parser("load", help="read a document into a new conversation (ask with `hearth send`)")
    _add_model_flag(load)
    _add_context_flag(load)
    _add_engine_flag(load)
    load.add_argument("--part", choices=("all", "first", "last"), default="all",
                      help="read all of it (default; refused if it does not fit), or only its first or last part")
    load.add_argument("--again", action="store_true",
                      help="read it into a new conversation even if the same text is already loaded in one")
    load.add_argument("--json", action="store_true")
    load.add_argument("file", metavar="FILE")
    load.set_defaults(run="app.surfaces.cli.document_commands:run_doc_load")

    add_models_commands(sub)
    _add_devices_commands(sub)
    _add_engines_commands(sub)

    check = sub.add_parser("doctor", help="check this machine and Hearth's installation; a report to paste "
                                          "into a bug report (exit status 1 when something is broken)")
    check.add_argument("--json", action="store_true")
    check.set_defaults(run="app.surfaces.cli.doctor:run_doctor")

    _add_serve_command(sub)

    conversations = sub.add_parser("conversations", help="list saved conversations")
    conversations.add_argument("--search", default=None, help="only those whose title or messages match")
    conversations.add_argument("--json", action="store_true")
    conversations.set_defaults(run="app.surfaces.cli.conversation_commands:run_conversations")
    add_db_commands(sub)
    return parser


def _add_conversation_flags(parser: argparse.ArgumentParser, *, new: str) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--conversation", metavar="ID", type=conversation_flag,
                       help="continue this conversation (`hearth conversations` lists them; the id's first "
                            "characters are enough)")
    which.add_argument("--new", metavar="TITLE", help=new)


def _add_engines_commands(sub) -> None:
    engines = sub.add_parser("engines", help="remote OpenAI-compatible engines (vLLM, llama.cpp server, Ollama, "
                                             "another Hearth) to answer on with --engine NAME")
    engines_sub = engines.add_subparsers(dest="engines_command", required=True)
    add = engines_sub.add_parser("add", help="add a remote engine (its API key goes to the system's secret store)")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--url", required=True, help="the API's base address, like https://gpu.example.com/v1 "
                                                  "(plain http:// only to this computer or a private network)")
    add.add_argument("--api-key-env", default=None, metavar="VAR",
                     help="read the API key from the environment variable VAR (a key is never given as a flag)")
    add.add_argument("--model", default=None, metavar="ID", help="the server's model to use (default: its first)")
    add.add_argument("--context", type=context_tokens, default=0, metavar="N",
                     help="the model's context in tokens (default: what the server says)")
    add.add_argument("--key-file", action="store_true",
                     help="where the system has no secret store, keep the key in a file only you can read")
    add.add_argument("--replace", action="store_true", help="replace an engine of the same name")
    add.set_defaults(run="app.surfaces.cli.engine_commands:run_add")
    listing = engines_sub.add_parser("list", help="the remote engines (never their keys)")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run="app.surfaces.cli.engine_commands:run_list")
    remove = engines_sub.add_parser("rm", help="remove a remote engine and its API key")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(run="app.surfaces.cli.engine_commands:run_rm")
    test = engines_sub.add_parser("test", help="check that an engine answers: reachable, key accepted, its models, "
                                               "latency and tokens/s (exit status 1 when it does not work)")
    test.add_argument("name", metavar="NAME")
    test.add_argument("--json", action="store_true")
    test.set_defaults(run="app.surfaces.cli.engine_commands:run_test")


def _add_devices_commands(sub) -> None:
    devices = sub.add_parser("devices", help="the devices that can run models here, and their calibration")
    devices.add_argument("--json", action="store_true")
    devices.set_defaults(run="app.surfaces.cli.device_commands:run_devices")
    devices_sub = devices.add_subparsers(dest="devices_command")
    calibrate = devices_sub.add_parser("calibrate", help="measure prefill speed per device and store it")
    _add_model_flag(calibrate, default=None)
    calibrate.add_argument("--lengths", default="", metavar="N,N,...", help="input lengths to time")
    calibrate.add_argument("--include-emulator", action="store_true",
                           help="also time the NPU emulator (slow; never chosen automatically)")
    calibrate.add_argument("--json", action="store_true")
    calibrate.set_defaults(run="app.surfaces.cli.device_commands:run_calibrate")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # --help and bad flags end here, before the engine stack is imported
    show_log_lines_visibly()  # a path a module's warning names is shown, never acted on
    run = _command(args.run)
    from app.surfaces.cli.commands import UserError, invalid_value
    from app.engine_clients.client import InvalidRequest
    from model_store.storage_problems import StoreError
    try:
        return run(args)
    except InvalidRequest as exc:  # a value out of range, refused as the command sent it
        return _report(args, invalid_value(exc.invalid))
    except UserError as exc:
        return _report(args, exc)
    except StoreError as exc:  # e.g. a settings or engines file that is not the user's own (model_store.own_files)
        from app.surfaces.cli.store_access import user_error
        return _report(args, user_error(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `hearth models list | head`: the reader has gone, which is no error of ours
        _quiet_stdout()
        return 0


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so Python's flush at exit does not fail on the closed pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _window_is_opened_by_the_entry_point(_args: argparse.Namespace) -> int:
    """``hearth app`` reaches the window through :mod:`app.surfaces.entry` (the CLI never imports Qt); a
    caller of this module's ``main`` directly is told where the window is."""
    print("hearth: error: the window opens with `hearth app` or `python -m app`", file=sys.stderr)
    return 1


def _command(where: str) -> Callable[[argparse.Namespace], int]:
    """The function a sub-command runs, named ``module:function``; imported only once it is chosen, so
    ``hearth --help`` loads no engine. Every name is resolved by tests/unit/test_cli_command_table.py."""
    module, _, function = where.partition(":")
    return getattr(importlib.import_module(module), function)


def _report(args: argparse.Namespace, error) -> int:
    """One line on stderr (and the ``error`` object with ``--json``); exit status 1. The ids, paths and
    engine's words an error echoes are made visible, never acted on by the terminal."""
    from app.surfaces.cli.terminal_text import json_text, visible
    print(f"hearth: error: {visible(str(error))}", file=sys.stderr)
    if getattr(args, "json", False) and error.details:
        print(json_text({"error": {**error.details, "message": str(error)}}))
    return 1


if __name__ == "__main__":
    sys.exit(main())
