"""``hearth send`` and ``hearth conversations``: persisted conversations from the command line."""

from __future__ import annotations

import argparse
import sys
import time

from app.surfaces.cli.thinking import ThinkingEcho, enable_thinking
from app.surfaces.cli.commands import (
    UserError, draft_options, engine_for, generation_json, ran_devices, require_text, sampling_from_args,
    say_after_answer, say_waiting, warn_about_devices, warn_about_fallback,
)
from app.services.draft_heads import with_installed_head
from app.services.model_refs import model_display_name
from app.services.settings import app_data_dir, current_settings
from app.surfaces.cli.conversation_ids import find_conversation, find_message
from app.surfaces.cli.json_schema_flag import constraint_from_args
from app.surfaces.cli.store_access import command_writer, open_conversations, store_errors
from app.surfaces.cli.terminal_text import json_text, visible
from app.services.context_cut import cut_notice, standing_left_out
from app.services.context_summary import continue_with_summary
from app.services.turn import PendingTurn, TurnOptions, pinned_messages, run_answer, start_turn
from engine import protocol as p
from model_store.conversation_titles import title_of
from model_store.conversations import Conversation
from model_store.installed import ModelLibrary
from model_store.db import read_only_problem

SEND_WHO = "a `hearth send` command"


def title_from(message: str) -> str:
    return title_of(message)


def taker(codes: list[str], *, echo: ThinkingEcho | None):
    """What ``send`` does with each event: the answer (and its reasoning) to ``echo``, errors' codes kept."""
    def take(event) -> None:
        if isinstance(event, p.TokenDelta) and echo is not None:
            echo.reasoning(event.reasoning)
            echo.answer(event.text)
        elif isinstance(event, p.Error):
            codes.append(event.code)
        elif isinstance(event, p.RemoteWaiting):
            say_waiting(event)
    return take


def answering_ref(args: argparse.Namespace, conversation: Conversation | None) -> str:
    """The model to answer with: ``--model``; else, on this computer, the conversation's (else the
    default); on a remote engine, the engine's own."""
    if args.model or args.engine is not None:
        return args.model or ""
    return (conversation.model if conversation else None) or "default"


def conversation_model(args: argparse.Namespace) -> str:
    """The model a new conversation is made with (a server's model id is no local model)."""
    return args.model if args.model and args.engine is None else "default"


def turn_options(args: argparse.Namespace, model: str | None = None, thinks: bool = False) -> TurnOptions:
    """The sampling, drafting and thinking flags of ``send`` and ``chat`` (out-of-range values refused here),
    sampling as :func:`app.surfaces.cli.commands.sampling_from_args` says for the answering ``model``; a
    conversation they create starts with the default system prompt from Settings, as in the window."""
    return TurnOptions(sampling_from_args(args, model, thinks), args.max_tokens, **draft_options(args),
                       enable_thinking=enable_thinking(args), system_prompt=current_settings().system_prompt,
                       when_full=getattr(args, "when_full", None) or current_settings().when_full,
                       constraint=constraint_from_args(args))


def answer_model_name(args: argparse.Namespace, model: str, loaded: p.ModelLoaded) -> str:
    """The name an answer keeps as its model (the window shows it): a local model's name, or the
    server's model id on a remote engine."""
    return model_display_name(model, app_data_dir()) if args.engine is None else loaded.facts.name


def say_saved(conversation: Conversation, *, then: str = "") -> None:
    """One stderr line with a new conversation's id (stdout keeps only the answer)."""
    print(f"hearth: saved as conversation {conversation.id}{then}", file=sys.stderr, flush=True)


def say_resumed(snapshot: p.SnapshotReport | None) -> None:
    """One stderr line when the answer stood on the conversation's saved state, as the window's
    "Resumed from snapshot, N tokens not re-read"."""
    if snapshot is not None and snapshot.restored and snapshot.restored_tokens:
        print(f"hearth: resumed from the conversation's saved state (snapshot): {snapshot.restored_tokens:,} tokens "
              f"not read again, {snapshot.prefilled_tokens:,} new ones read", file=sys.stderr, flush=True)


def run_send(args: argparse.Namespace) -> int:
    """Send one message; a new conversation (``--new``) is created with it, atomically. Another
    window or command answering in the conversation is waited for (see :mod:`app.surfaces.cli.store_access`).
    Ctrl+C stops the answer: what was written is stored (marked stopped) with its snapshot, so the
    next message continues from it; exit status 130."""
    require_text(args.message, "message")
    options = turn_options(args)
    store = open_conversations()
    with store_errors(store):
        conversation = find_conversation(store, args.conversation) if args.conversation is not None else None
        reply_to = _reply_to(store, conversation, args.reply_to)
        model = answering_ref(args, conversation)
        codes: list[str] = []
        with engine_for(model, data_dir=app_data_dir(), draft_max=args.draft_max, draft_paths=args.draft_paths,
                        device_policy=args.prefill_device,
                        context=args.context, engine=args.engine) as (client, loaded):
            warn_about_devices(args, loaded.devices)
            options = turn_options(args, model, loaded.facts.thinks)  # the answering model's own sampling
            conversation, turn = start_turn(
                store, conversation.id if conversation else None, args.message, options, command_writer(SEND_WHO),
                title=args.new or title_from(args.message), model=conversation_model(args), reply_to=reply_to)
            turn.model = answer_model_name(args, model, loaded)
            if args.engine is None:  # auto drafts with an installed EAGLE-3 head that fits the model
                turn.command = with_installed_head(turn.command, loaded.facts, ModelLibrary(store.db))
            echo = None if args.json else ThinkingEcho(args.thinking)
            result = run_answer(store, client, turn, on_event=taker(codes, echo=echo))
            if "context_full" in codes and options.when_full == "summary":
                codes.clear()
                conversation, result = continue_with_summary(
                    store, client, conversation, args.message, options, command_writer(SEND_WHO),
                    model=conversation_model(args), on_event=taker(codes, echo=echo))
                say_continued(conversation)
            if echo is not None:
                echo.close_reasoning()
            n_ctx = client.context.n_ctx
            left_out = turn_left_out(store, result)
    if result.errors or result.finished is None:
        raise UserError("; ".join(result.errors) or "the engine stopped before answering",
                        **({"kind": codes[0]} if codes else {}))
    finished = result.finished
    ran = ran_devices(finished, loaded)
    warn_about_fallback(args, loaded.devices, ran)
    if args.json:
        print(json_text({**send_json(result, conversation, ran, n_ctx), **cut_json(finished, left_out)}))
    else:
        print()
        if args.conversation is None:  # (--json has it as conversation_id)
            say_saved(conversation)
        say_resumed(finished.snapshot)  # (--json has it as snapshot.restored)
    say_cut(finished, left_out)
    say_after_answer(finished, n_ctx)
    return 130 if finished.finish_reason == "cancelled" else 0  # the shell's code for a command stopped by Ctrl+C


def turn_left_out(store, turn: PendingTurn) -> int:
    """How many of the branch's messages the model did not read for this answer (0: it read them all)."""
    history = store.branch(turn.answer.id)
    return standing_left_out(history, pinned_messages(store, turn.conversation_id))


def say_cut(finished: p.Finished, left_out: int) -> None:
    """One stderr line when the turn left the oldest messages out, as the window's notice."""
    if finished.context_cut is not None:
        print(f"hearth: {cut_notice(left_out)}", file=sys.stderr, flush=True)


def say_continued(conversation: Conversation) -> None:
    print(f"hearth: the conversation was longer than the model can read, so it continues in a new conversation, "
          f"{conversation.id}, that starts with a summary of it", file=sys.stderr, flush=True)


def cut_json(finished: p.Finished, left_out: int) -> dict:
    """``send --json``'s ``context``: whether the oldest messages were left out of what the model read."""
    return {"context": {"cut": finished.context_cut is not None, "messages_left_out": left_out}}


def _reply_to(store, conversation: Conversation | None, typed: str | None) -> str | None:
    """``--reply-to``: a message of ``--conversation`` (its id, or the id's first characters)."""
    if typed is None:
        return None
    if conversation is None:
        raise UserError("--reply-to answers from a message of a saved conversation; name it with --conversation ID")
    return find_message(store, conversation.id, typed).id


def send_json(result: PendingTurn, conversation: Conversation, ran: p.DevicePlan, n_ctx: int) -> dict:
    """The object ``send --json`` prints: ``generate --json``'s keys and the stored turn's."""
    snapshot = result.finished.snapshot or p.SnapshotReport()
    return {
        **generation_json(result.answer.content, result.finished, ran, n_ctx, result.answer.reasoning,
                          result.command.sampling),
        "conversation_id": conversation.id,
        "message_id": result.answer.id,
        "status": result.answer.status,
        "snapshot": {"restored": snapshot.restored, "restored_tokens": snapshot.restored_tokens,
                     "prefilled_tokens": snapshot.prefilled_tokens, "saved_bytes": snapshot.saved_bytes},
    }


def run_conversations(args: argparse.Namespace) -> int:
    store = open_conversations(read_only_ok=True)
    read_only = read_only_problem(store.db)
    if read_only is not None:
        print(f"hearth: warning: {visible(str(read_only))}", file=sys.stderr)  # names the file
    with store_errors(store):
        conversations = store.list(args.search)
    if args.json:
        print(json_text([_as_dict(c) for c in conversations]))
        return 0
    if not conversations:
        print(_none_saved(args.search), file=sys.stderr)
    for c in conversations:
        print(f"{c.id}  {time.strftime('%Y-%m-%d %H:%M', time.localtime(c.updated_at))}  {visible(c.title)}")
    return 0


def _none_saved(search: str | None) -> str:
    if search:
        return f"No saved conversation matches '{visible(search)}'."
    return "No saved conversations yet. Start one with `hearth chat`, or `hearth send --new TITLE MESSAGE`."


def _as_dict(c: Conversation) -> dict:
    return {"id": c.id, "title": c.title, "model": c.model, "created_at": c.created_at,
            "updated_at": c.updated_at, "leaf_id": c.leaf_id}
