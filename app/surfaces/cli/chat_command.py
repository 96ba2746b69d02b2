"""``hearth chat``: a conversation in the terminal, saved as the window saves one.

Each line typed is a turn of :mod:`app.services.turn`, as in the window and ``hearth send``: the
question and its answer are stored in the conversation store (a new conversation, titled by
``--new`` or the first line, or the one ``--conversation ID`` names), the engine snapshots each
turn's end, and the next turn, in this chat or later, starts from that snapshot. ``hearth
conversations`` lists the chat; the window opens it.
"""

from __future__ import annotations

import argparse
import sys

from app.surfaces.cli.commands import UserError, answering_model, crash_error, engine_for, say_after_answer, warn_about_devices
from app.surfaces.cli.conversation_commands import (
    answer_model_name, answering_ref, conversation_model, say_continued, say_cut, say_saved, taker, title_from,
    turn_left_out, turn_options,
)
from app.surfaces.cli.conversation_ids import find_conversation, short_id
from app.surfaces.cli.store_access import command_writer, open_conversations, store_errors
from app.surfaces.cli.terminal_text import visible
from app.surfaces.cli.thinking import ThinkingEcho
from app.services.context_summary import continue_with_summary
from app.services.draft_heads import with_installed_head
from app.services.settings import app_data_dir
from app.services.turn import PendingTurn, TurnOptions, run_answer, start_turn
from engine.protocol import ModelFacts
from app.engine_clients.client import EngineClient
from model_store.conversations import Conversation, ConversationStore
from model_store.installed import ModelLibrary

CHAT_WHO = "a `hearth chat` command"


class ChatSession:
    """One terminal chat: the conversation it writes to (None until the first line is sent) and how it answers."""

    def __init__(self, store: ConversationStore, client: EngineClient, args: argparse.Namespace,
                 conversation: Conversation | None, model_name: str, facts: ModelFacts | None = None,
                 model: str | None = None) -> None:
        self.store, self.client, self.args = store, client, args
        self.facts = facts  # the loaded model's, for the EAGLE-3 head auto drafts with
        self.conversation = conversation
        self.model_name = model_name  # what each answer keeps as its model (the window shows it)
        self.options: TurnOptions = turn_options(args, model, facts is not None and facts.thinks)

    def answer(self, line: str) -> PendingTurn:
        """Store ``line`` and an answer to it, streamed to the terminal as it is written."""
        self.conversation, turn = start_turn(
            self.store, self.conversation.id if self.conversation else None, line, self.options,
            command_writer(CHAT_WHO), title=self.args.new or title_from(line), model=conversation_model(self.args))
        turn.model = self.model_name
        if self.args.engine is None and self.facts is not None:  # auto drafts with an installed EAGLE-3 head
            turn.command = with_installed_head(turn.command, self.facts, ModelLibrary(self.store.db))
        echo, codes = ThinkingEcho(self.args.thinking), []
        result = run_answer(self.store, self.client, turn, on_event=taker(codes, echo=echo))
        if "context_full" in codes and self.options.when_full == "summary":  # go on in a new conversation
            self.conversation, result = continue_with_summary(
                self.store, self.client, self.conversation, line, self.options, command_writer(CHAT_WHO),
                model=conversation_model(self.args), on_event=taker([], echo=echo))
            say_continued(self.conversation)
        echo.close_reasoning()
        print(" [stopped]" if result.status == "stopped" else "")
        for error in result.errors:
            print(f"hearth: {visible(error)}", file=sys.stderr)
        if result.finished is None:  # the engine has gone: no later line could be answered
            raise crash_error(result.dead, "writing the answer") if result.dead else \
                UserError("the engine stopped before answering")
        say_cut(result.finished, turn_left_out(self.store, result))
        say_after_answer(result.finished, self.client.context.n_ctx if self.client.context else 0)
        return result

    def say_saved(self) -> None:
        if self.conversation is not None:
            say_saved(self.conversation, then=f"; `hearth chat --conversation {short_id(self.conversation.id)}` "
                                              "continues it")


def run_chat(args: argparse.Namespace) -> int:
    turn_options(args)  # out-of-range flags are refused before anything starts
    store = open_conversations()
    with store_errors(store):
        conversation = find_conversation(store, args.conversation) if args.conversation is not None else None
        model = answering_ref(args, conversation)
        with engine_for(model, data_dir=app_data_dir(), draft_max=args.draft_max, draft_paths=args.draft_paths,
                        device_policy=args.prefill_device,
                        context=args.context, engine=args.engine) as (client, loaded):
            warn_about_devices(args, loaded.devices)
            session = ChatSession(store, client, args, conversation, answer_model_name(args, model, loaded), loaded.facts,
                                  model=model)
            _greet(store, conversation, visible(answering_model(model, loaded, args.engine)))
            try:
                while (line := _read_line()) is not None:
                    if line:
                        session.answer(line)
            finally:
                session.say_saved()
    return 0


def _greet(store: ConversationStore, conversation: Conversation | None, model: str) -> None:
    if conversation is not None:
        said = len(store.current_branch(conversation.id))
        print(f"Continuing “{visible(conversation.title)}” ({said} messages so far).")
    print(f"Chatting with {model}. Ctrl+C stops an answer; Ctrl+D or /exit quits.")


def _read_line() -> str | None:
    try:
        line = input("> ").strip()
    except EOFError:
        print()
        return None
    return None if line in ("/exit", "/quit") else line
