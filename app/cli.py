"""The ``hearth`` command line: ``generate``, ``info`` and ``chat``.

Scripts outside the repository depend on the flags and JSON keys here; change them only by adding.
"""

from __future__ import annotations

import argparse
import sys

from app import commands
from engine.sampling import SamplingParams


def _add_model_flag(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    parser.add_argument("--model", default=None if required else "default", required=required,
                        help="'default' (the embedded SmolLM2-135M-Instruct) or a path to a .gguf file")


def _add_sampling_flags(parser: argparse.ArgumentParser) -> None:
    defaults = SamplingParams()
    parser.add_argument("--max-tokens", type=int, default=512, help="stop after this many tokens (default 512)")
    parser.add_argument("--temperature", type=float, default=defaults.temperature, help="0 = greedy")
    parser.add_argument("--top-k", type=int, default=defaults.top_k, help="0 = off")
    parser.add_argument("--top-p", type=float, default=defaults.top_p, help="1 = off")
    parser.add_argument("--min-p", type=float, default=defaults.min_p, help="0 = off")
    parser.add_argument("--seed", type=int, default=None, help="fixed seed for reproducible sampling")


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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except commands.UserError as exc:
        print(f"hearth: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
