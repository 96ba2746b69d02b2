"""What each ``hearth`` sub-command does, given parsed arguments."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager
from collections.abc import Iterator

import msgspec

from engine.backends.base import ModelLoadError
from engine.chat_template import ChatMessage, ChatTemplateError
from engine.generation import Generation, GenerationSettings, PromptTooLongError
from engine.prompts import chat_prompt_tokens, raw_prompt_tokens
from engine.sampling import SamplingError, SamplingParams
from engine.session import ModelSession, open_session


class UserError(Exception):
    """Something the user can fix; printed as one line, exit status 1."""


_USER_ERRORS = (ModelLoadError, ChatTemplateError, SamplingError, PromptTooLongError, ValueError)


@contextmanager
def _user_errors() -> Iterator[None]:
    try:
        yield
    except _USER_ERRORS as exc:
        raise UserError(str(exc)) from exc


def _open(args: argparse.Namespace) -> ModelSession:
    with _user_errors():
        return open_session(args.model)


def _settings(args: argparse.Namespace) -> GenerationSettings:
    sampling = SamplingParams(
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p, seed=args.seed
    )
    with _user_errors():
        return GenerationSettings(sampling=sampling, max_tokens=args.max_tokens).validate()


def run_generate(args: argparse.Namespace) -> int:
    settings = _settings(args)
    session = _open(args)
    try:
        with _user_errors():
            if args.raw:
                tokens = raw_prompt_tokens(session.model, args.prompt)
            else:
                tokens = chat_prompt_tokens(session.model, [ChatMessage("user", args.prompt)])
            run = Generation(session, tokens, settings)
            for delta in run:
                if not args.json:
                    sys.stdout.write(delta.text)
                    sys.stdout.flush()
    finally:
        session.close()
    if args.json:
        print(json.dumps({
            "text": run.text,
            "token_ids": run.token_ids,
            "finish_reason": run.finish_reason,
            "timings": msgspec.to_builtins(run.timings),
        }, ensure_ascii=False))
    else:
        print()
    return 0


def run_info(args: argparse.Namespace) -> int:
    session = _open(args)
    try:
        facts = msgspec.to_builtins(session.facts)
    finally:
        session.close()
    if args.json:
        print(json.dumps(facts, ensure_ascii=False))
    else:
        width = max(len(key) for key in facts)
        for key, value in facts.items():
            print(f"{key:<{width}}  {value}")
    return 0


def run_chat(args: argparse.Namespace) -> int:
    settings = _settings(args)
    session = _open(args)
    messages: list[ChatMessage] = []
    print(f"Chatting with {session.facts.name}. Ctrl+C stops an answer; Ctrl+D or /exit quits.")
    try:
        while True:
            try:
                line = input("> ").strip()
            except EOFError:
                print()
                return 0
            if line in ("/exit", "/quit"):
                return 0
            if not line:
                continue
            messages.append(ChatMessage("user", line))
            messages.append(ChatMessage("assistant", _chat_turn(session, messages, settings)))
    finally:
        session.close()


def _chat_turn(session: ModelSession, messages: list[ChatMessage], settings: GenerationSettings) -> str:
    with _user_errors():
        run = Generation(session, chat_prompt_tokens(session.model, messages), settings)
    try:
        for delta in run:
            sys.stdout.write(delta.text)
            sys.stdout.flush()
    except KeyboardInterrupt:
        print(" [stopped]", end="")
    print()
    return run.text
