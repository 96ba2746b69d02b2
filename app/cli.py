"""The ``hearth`` command line: generate, info, chat, send, conversations, doc load, models and devices.

Scripts outside the repository depend on the flags and JSON keys here; change them only by adding.
"""

from __future__ import annotations

import argparse
import json
import sys

from app import commands, conversation_commands, device_commands, doctor, document_commands, model_commands
from engine.client import InvalidRequest
from engine.sampling import SamplingParams


def _add_model_flag(parser: argparse.ArgumentParser, *, default: str | None = "default") -> None:
    parser.add_argument("--model", default=default,
                        help="'default' (the embedded SmolLM2-135M-Instruct), an installed model's id "
                             "(`hearth models list`) or a path to a .gguf file")


def _add_sampling_flags(parser: argparse.ArgumentParser) -> None:
    defaults = SamplingParams()
    parser.add_argument("--max-tokens", type=int, default=512, help="stop after this many tokens (default 512)")
    parser.add_argument("--temperature", type=float, default=defaults.temperature, help="0 = greedy")
    parser.add_argument("--top-k", type=int, default=defaults.top_k, help="0 = off")
    parser.add_argument("--top-p", type=float, default=defaults.top_p, help="1 = off")
    parser.add_argument("--min-p", type=float, default=defaults.min_p, help="0 = off")
    parser.add_argument("--seed", type=int, default=None, help="fixed seed for reproducible sampling")
    parser.add_argument("--draft", default="auto", metavar="SPEC",
                        help="speculative drafting: auto (default), off, lookup, mtp or model:PATH|ID; never changes the output")
    parser.add_argument("--draft-max", type=int, default=4, metavar="N", help="longest draft (default 4)")
    parser.add_argument("--prefill-device", choices=("auto", "cpu", "npu"), default="auto",
                        help="where the input is read: auto (the NPU for long inputs when one is present), "
                             "cpu, or npu (the emulator where there is no NPU; slow)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hearth", description="A private, offline local assistant.")
    sub = parser.add_subparsers(dest="command", required=True)

    generate = sub.add_parser("generate", help="write a reply to one prompt")
    _add_model_flag(generate)
    generate.add_argument("--raw", action="store_true", help="feed PROMPT as plain text, without the chat template")
    _add_sampling_flags(generate)
    generate.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")
    generate.add_argument("prompt", metavar="PROMPT")
    generate.set_defaults(run=commands.run_generate)

    info = sub.add_parser("info", help="describe a model")
    _add_model_flag(info)
    info.add_argument("--json", action="store_true")
    info.set_defaults(run=commands.run_info)

    chat = sub.add_parser("chat", help="chat in the terminal")
    _add_model_flag(chat)
    _add_sampling_flags(chat)
    chat.set_defaults(run=commands.run_chat)

    send = sub.add_parser("send", help="send one message in a saved conversation")
    which = send.add_mutually_exclusive_group()
    which.add_argument("--conversation", metavar="ID", help="continue this conversation")
    which.add_argument("--new", metavar="TITLE", help="start a new conversation with this title")
    send.add_argument("--reply-to", metavar="MESSAGE_ID",
                      help="answer from this message instead of the newest one (edit or regenerate)")
    _add_model_flag(send, default=None)
    _add_sampling_flags(send)
    send.add_argument("--json", action="store_true")
    send.add_argument("message", metavar="MESSAGE")
    send.set_defaults(run=conversation_commands.run_send)

    doc = sub.add_parser("doc", help="documents")
    doc_sub = doc.add_subparsers(dest="doc_command", required=True)
    load = doc_sub.add_parser("load", help="read a document into a new conversation (ask with `hearth send`)")
    _add_model_flag(load)
    load.add_argument("--part", choices=("all", "first", "last"), default="all",
                      help="read all of it (default; refused if it does not fit), or only its first or last part")
    load.add_argument("--again", action="store_true",
                      help="read it into a new conversation even if the same text is already loaded in one")
    load.add_argument("--json", action="store_true")
    load.add_argument("file", metavar="FILE")
    load.set_defaults(run=document_commands.run_doc_load)

    _add_models_commands(sub)
    _add_devices_commands(sub)

    check = sub.add_parser("doctor", help="check this machine and Hearth's installation; a report to paste "
                                          "into a bug report (exit status 1 when something is broken)")
    check.add_argument("--json", action="store_true")
    check.set_defaults(run=doctor.run_doctor)

    conversations = sub.add_parser("conversations", help="list saved conversations")
    conversations.add_argument("--search", default=None, help="only those whose title or messages match")
    conversations.add_argument("--json", action="store_true")
    conversations.set_defaults(run=conversation_commands.run_conversations)
    _add_db_commands(sub)
    return parser


def _add_db_commands(sub) -> None:
    from app import db_commands

    db = sub.add_parser("db", help="the conversation database")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    recover = db_sub.add_parser("recover", help="copy what can still be read out of a damaged database into a new "
                                                "one; the damaged file is kept aside (close Hearth first)")
    recover.add_argument("--json", action="store_true")
    recover.set_defaults(run=db_commands.run_recover)


def _add_models_commands(sub) -> None:
    models = sub.add_parser("models", help="the model catalogue, downloads and imports")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    listing = models_sub.add_parser("list", help="the catalogue with memory-fit advice, and the installed models")
    listing.add_argument("--context", type=int, default=None, metavar="TOKENS",
                         help="context length the memory advice assumes (default 8192, capped per model)")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=model_commands.run_list)
    pull = models_sub.add_parser("pull", help="download a catalogue model into the Hugging Face cache")
    pull.add_argument("ref", metavar="ID[:QUANT]", help="a catalogue id, optionally with a quantization")
    pull.add_argument("--json", action="store_true", help="JSON lines: progress, then installed or error")
    pull.set_defaults(run=model_commands.run_pull)
    imported = models_sub.add_parser("import", help="check a local GGUF file and add it to the installed models")
    imported.add_argument("path", metavar="PATH")
    imported.add_argument("--json", action="store_true")
    imported.set_defaults(run=model_commands.run_import)
    remove = models_sub.add_parser("rm", help="remove an installed model (a download's file is deleted)")
    remove.add_argument("id", metavar="ID")
    remove.add_argument("--keep-file", action="store_true", help="only unregister; keep a downloaded file")
    remove.set_defaults(run=model_commands.run_rm)
    search = models_sub.add_parser("search", help="search Hugging Face for GGUF repositories (needs a connection)")
    search.add_argument("query", metavar="WORDS")
    search.add_argument("--limit", type=int, default=20)
    search.add_argument("--json", action="store_true")
    search.set_defaults(run=model_commands.run_search)


def _add_devices_commands(sub) -> None:
    devices = sub.add_parser("devices", help="the devices that can run models here, and their calibration")
    devices.add_argument("--json", action="store_true")
    devices.set_defaults(run=device_commands.run_devices)
    devices_sub = devices.add_subparsers(dest="devices_command")
    calibrate = devices_sub.add_parser("calibrate", help="measure prefill speed per device and store it")
    _add_model_flag(calibrate, default=None)
    calibrate.add_argument("--lengths", default="", metavar="N,N,...", help="input lengths to time")
    calibrate.add_argument("--include-emulator", action="store_true",
                           help="also time the NPU emulator (slow; never chosen automatically)")
    calibrate.add_argument("--json", action="store_true")
    calibrate.set_defaults(run=device_commands.run_calibrate)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except InvalidRequest as exc:  # a value out of range, refused as the command sent it
        return _report(args, commands.invalid_value(exc.invalid))
    except commands.UserError as exc:
        return _report(args, exc)
    except KeyboardInterrupt:
        return 130


def _report(args: argparse.Namespace, error: commands.UserError) -> int:
    """One line on stderr (and the ``error`` object with ``--json``); exit status 1."""
    print(f"hearth: error: {error}", file=sys.stderr)
    if getattr(args, "json", False) and error.details:
        print(json.dumps({"error": {**error.details, "message": str(error)}}, ensure_ascii=False))
    return 1


if __name__ == "__main__":
    sys.exit(main())
