"""One conversation turn, the same for the CLI and the GUI.

A turn has three steps, so a caller can run them blocking (the CLI: :func:`start_turn` then :func:`run_answer`) or spread
over events (the GUI: store calls on its store thread, events from its engine bridge):

1. :func:`start_turn` (or :func:`start_regeneration`) becomes the conversation's one writer
   (:mod:`model_store.writer_lock`: another window or command answering in it is waited for, or
   refused), then stores the user's message and an empty assistant message under it in one
   transaction (:func:`begin_answer`) and builds the ``AnswerTurn`` command that asks the engine to
   answer from the conversation's snapshots and to snapshot the turn end under the answer's id;
2. :meth:`PendingTurn.feed` takes the request's events, collecting the text;
3. the worker stores the answer when its request ends (``AnswerTurn.keep``, :mod:`engine.requests.answer_keeper`)
   and lets the next writer in; :func:`end_answer` keeps what this side made of the same events.
   Where the worker did not (a remote engine, a worker that died, a store it could not write),
   :func:`end_answer` stores it from those events: marked ``stopped`` if the user stopped it, ``interrupted`` if the engine died
   (``interrupted_by`` in its stats says how) or the app closed first.

The prompt is the branch without the empty answers a stopped turn left (:func:`prompt_turns`), after
the conversation's system prompt (:func:`conversation_turns`). A new conversation is made with the
user's default (:attr:`TurnOptions.system_prompt`); a change applies from the next message: the
rendering then starts differently, so the engine finds no saved state it can stand on and reads the
conversation once (``engine.state.snapshot_cursor``), and the turns after that stand on saved state again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from app.services.context_cut import cut_branch
from app.services.pending_turn import PendingTurn
from engine import protocol as p
from app.engine_clients.client import ClientEvent, EngineClient, EngineDead, new_request_id
from engine.protocol.draft_choice import parse_draft_spec
from model_store.conversations import Conversation, ConversationStore, Message
from model_store.db import write_transaction
from model_store.documents import DocumentStore
from model_store.message_identity import message_identity
from model_store.writer_lock import Holder, WriterLock, take_writer_lock

# What the engine is not shown: an answer that was stopped (or whose writer was killed) before it wrote anything.
UNFINISHED = ("generating", "stopped", "interrupted", "error")
T = TypeVar("T")


THINKING_SETTING = "enable_thinking"  # a conversation's "Think before answering" (absent: the model's default)
CLOCK_SETTING = "template_clock"  # the time its template sees, when not its start (a copied document's)


@dataclass
class TurnOptions:
    sampling: p.SamplingSpec = field(default_factory=p.SamplingSpec)
    max_tokens: int = p.DEFAULTS.max_tokens
    draft: str = p.DEFAULTS.draft
    draft_max: int = p.DEFAULTS.draft_max
    enable_thinking: bool | None = None  # None: the conversation's setting, else the model's default
    system_prompt: str = ""  # a conversation this turn creates starts with it (Settings.system_prompt)
    when_full: p.WhenFull = p.DEFAULTS.when_full  # a branch longer than the model can read (app.services.context_cut)
    constraint: p.OutputConstraint | None = None  # the shape the answer must have (a JSON schema); None: any text
    tools: tuple[p.ToolSpec, ...] = ()  # the functions the model may call (the template writes them)
    tool_choice: p.ToolChoice | None = None  # how the answer may call them; None: calls it writes stay text


def prompt_turns(history: list[Message]) -> list[p.WireMessage]:
    """The messages the engine reads: the branch without empty answers that never finished, and
    without a question whose answer failed before writing anything (the engine refused it: a paste
    longer than the context, say), so one refused message does not refuse every later one."""
    refused = {m.parent_id for m in history if m.role == "assistant" and not m.content and m.status == "error"}
    return [_wire_message(m) for m in history
            if m.id not in refused and not (m.role == "assistant" and not m.content and m.status in UNFINISHED)]


def _wire_message(message: Message) -> p.WireMessage:
    calls, call_id = p.calls_of(message.tool_part)
    return p.WireMessage(message.role, message.content, message.id, message.reasoning, calls, call_id)


def conversation_turns(history: list[Message], conversation: Conversation) -> list[p.WireMessage]:
    """What the engine reads of a branch: the conversation's system prompt as a leading system message
    (where it has one and the branch has messages; some templates require it first), then
    :func:`prompt_turns`. A branch that starts with a system message of its own (an API client's) is
    sent as it is."""
    turns = prompt_turns(history)
    if not turns or not conversation.system_prompt or turns[0].role == "system":
        return turns
    return [p.WireMessage("system", conversation.system_prompt), *turns]


def template_spec(conversation: Conversation, enable_thinking: bool | None = None,
                  tools: tuple[p.ToolSpec, ...] = ()) -> p.TemplateSpec:
    """How the conversation's messages are rendered: with its own clock (a template that writes the
    date writes the day it started, so its saved state stays usable), its thinking switch and the
    tools the model is offered."""
    if enable_thinking is None:
        setting = conversation.settings.get(THINKING_SETTING)
        enable_thinking = setting if isinstance(setting, bool) else None
    return p.TemplateSpec(now=template_clock(conversation), enable_thinking=enable_thinking, tools=tools)


def template_clock(conversation: Conversation) -> float:
    clock = conversation.settings.get(CLOCK_SETTING)
    return float(clock) if isinstance(clock, (int, float)) else conversation.created_at


def answer_turn_command(history: list[Message], conversation: Conversation, answer_id: str,
                        options: TurnOptions, pinned: list[str] | None = None,
                        request_id: str | None = None) -> p.AnswerTurn:
    """The engine's request for this turn: the branch as far as the model still reads it, ``pinned``
    (documents) always, under ``request_id`` (None: a new one). Raises :class:`DraftRefused` for a
    drafting choice that is not one."""
    pinned = pinned or []
    return p.AnswerTurn(
        request_id=request_id or new_request_id("turn"), conversation_id=conversation.id, answer_id=answer_id,
        messages=cut_branch(conversation_turns(history, conversation), history, pinned),
        sampling=options.sampling, max_tokens=options.max_tokens, draft=parse_draft_spec(options.draft),
        draft_max=options.draft_max, template=template_spec(conversation, options.enable_thinking, options.tools),
        when_full=options.when_full, pinned=pinned, constraint=options.constraint, tool_choice=options.tool_choice,
    )


def pinned_messages(store: ConversationStore, conversation_id: str) -> list[str]:
    """The conversation's messages a cut never leaves out: its documents."""
    return [document.message_id for document in DocumentStore(store.db).for_conversation(conversation_id)]


def add_user_message(store: ConversationStore, conversation_id: str, text: str, *,
                     reply_to: str | None = None, from_start: bool = False) -> list[Message]:
    """Store a user message and return the history it ends.

    It follows the conversation's newest message, or ``reply_to`` (an edit answers from there), or
    nothing at all when ``from_start`` (an edit of the first message).
    """
    if from_start:
        history: list[Message] = []
    else:
        history = store.branch(reply_to) if reply_to else store.current_branch(conversation_id)
    user = store.add_message(conversation_id, "user", text, parent_id=history[-1].id if history else None)
    return [*history, user]


def begin_answer(store: ConversationStore, conversation_id: str, history: list[Message],
                 options: TurnOptions, writer: WriterLock | None = None, request_id: str | None = None) -> PendingTurn:
    """Store an empty answer to the last message of ``history`` and build the engine's command
    (under ``request_id``, when the caller made it already)."""
    user = history[-1]
    answer = store.add_message(conversation_id, "assistant", "", parent_id=user.id, status="generating")
    command = answer_turn_command(history, store.get(conversation_id), answer.id, options,
                                  pinned_messages(store, conversation_id), request_id)
    return PendingTurn(conversation_id, user, answer, command, writer=writer)


@dataclass(frozen=True)
class Writer:
    """Who takes a conversation for a turn, and how long it waits for another writer to finish."""

    who: str  # for the other writers' messages: "a `hearth send` command", "a Hearth window"
    wait_s: float = 0.0  # 0: refuse at once (the GUI never blocks)
    on_wait: Callable[[Holder], None] | None = None  # said once, about a second into a wait


def hold_conversation(store: ConversationStore, conversation_id: str | None, writer: Writer | None,
                      fill: Callable[[str], T], *, title: str = "", model: str = "default",
                      system_prompt: str = "") -> tuple[Conversation, T, WriterLock | None]:
    """Become the conversation's one writer, then run ``fill(conversation_id)`` in one transaction.

    With ``conversation_id`` None, a conversation titled ``title`` (with ``system_prompt``) is created in that same
    transaction, so a crash leaves it with what ``fill`` stored, or leaves nothing. With ``writer``
    None no lock is taken (a caller that is the only writer, such as a test or a benchmark).

    Returns:
        The conversation as stored afterwards, what ``fill`` returned, and the lock to release.

    Raises:
        ConversationBusy: If another writer still holds the conversation after ``writer.wait_s``.
    """
    lock = None
    if conversation_id is not None and writer is not None:  # waits outside any transaction (SQLite's write lock)
        lock = take_writer_lock(store.db, conversation_id, writer.who, wait_s=writer.wait_s, on_wait=writer.on_wait)
    try:
        with write_transaction(store.db):
            if conversation_id is None:
                conversation_id = store.create(title, model=model, system_prompt=system_prompt).id
                if writer is not None:
                    lock = take_writer_lock(store.db, conversation_id, writer.who)  # new: nobody else holds it
            elif writer is not None:  # an answer still "generating" here is a writer's that is gone
                store.mark_unfinished_interrupted(only=conversation_id)
            filled = fill(conversation_id)
            return store.get(conversation_id), filled, lock
    except BaseException:
        if lock is not None:
            lock.release(store.db)
        raise


def start_turn(store: ConversationStore, conversation_id: str | None, text: str, options: TurnOptions,
               writer: Writer, *, title: str = "", model: str = "default", reply_to: str | None = None,
               from_start: bool = False, request_id: str | None = None) -> tuple[Conversation, PendingTurn]:
    """Take the conversation (a new one titled ``title`` when ``conversation_id`` is None), then store
    the user's message and an empty answer in one transaction: a crash leaves all of it or none.
    ``request_id``: the engine request's id, when the caller made it already (the window).

    Raises:
        ConversationBusy: If another writer holds the conversation after ``writer.wait_s``.
    """
    def fill(held_id: str) -> PendingTurn:
        history = add_user_message(store, held_id, text, reply_to=reply_to, from_start=from_start)
        return begin_answer(store, held_id, history, options, request_id=request_id)

    conversation, turn, lock = hold_conversation(store, conversation_id, writer, fill, title=title, model=model,
                                                 system_prompt=options.system_prompt)
    turn.writer = lock
    return conversation, turn


def start_regeneration(store: ConversationStore, conversation_id: str, user_message_id: str, options: TurnOptions,
                       writer: Writer, request_id: str | None = None) -> PendingTurn:
    """Take the conversation, then store an empty new answer to an existing user message."""
    _, turn, lock = hold_conversation(
        store, conversation_id, writer,
        lambda held_id: begin_answer(store, held_id, store.branch(user_message_id), options, request_id=request_id))
    turn.writer = lock
    return turn


def end_answer(store: ConversationStore, turn: PendingTurn) -> PendingTurn:
    """Store what the engine wrote, with its status and statistics; then let the next writer in. A
    worker that stored the answer itself (:attr:`PendingTurn.stored_by_engine`) did both: the answer
    is then what this side made of the same events (:class:`engine.protocol.answer_record.AnswerRecord`), not
    read back.

    Raises:
        WriterLockLost: If the turn's writer no longer holds the conversation (it was taken over
            while this process was stopped): nothing is stored, so two writers never interleave.
    """
    if turn.stored_by_engine:  # the worker stored it and let the next writer in (engine.requests.answer_keeper)
        if turn.writer is not None:
            turn.writer.let_go()
            turn.writer = None
        fields = turn.stored_fields()
        identity = message_identity(turn.user.identity, "assistant", fields["content"], fields["reasoning"],
                                    fields["tool_part"])
        turn.answer = replace(turn.answer, **fields, identity=identity)  # as the worker's row now says
        return turn
    try:
        with write_transaction(store.db):
            if turn.writer is not None:
                turn.writer.confirm(store.db)
            turn.answer = store.update_message(turn.answer.id, **turn.stored_fields())
    finally:
        release_writer(store, turn)
    return turn


def release_writer(store: ConversationStore, turn: PendingTurn) -> None:
    """Let the next writer into the turn's conversation (once; never raises)."""
    if turn.writer is not None:
        turn.writer.release(store.db)
        turn.writer = None


def run_answer(store: ConversationStore, client: EngineClient, turn: PendingTurn,
               on_event: Callable[[ClientEvent], None] | None = None) -> PendingTurn:
    """Stream the turn's request to its end, blocking, then store the answer. Ctrl+C stops the
    answer: what was written is stored, marked stopped, and the engine saves the turn end's snapshot
    as after any answer. If streaming fails (the engine cannot be reached, a second Ctrl+C), the
    conversation is let go; the empty answer is marked interrupted when a store is next opened."""
    def take(event: ClientEvent) -> None:
        if on_event is not None:
            on_event(event)
        turn.feed(event)

    try:
        client.follow(turn.outgoing(), take)
    except BaseException:
        release_writer(store, turn)
        raise
    return end_answer(store, turn)


PROGRAM = "a program using Hearth's store"  # send_turn / regenerate_turn callers other than the CLI and GUI


def _options(sampling: p.SamplingSpec | None, max_tokens: int, draft: str, draft_max: int) -> TurnOptions:
    return TurnOptions(sampling or p.SamplingSpec(), max_tokens, draft, draft_max)


def send_turn(
    store: ConversationStore, client: EngineClient, conversation_id: str, text: str, *,
    reply_to: str | None = None, sampling: p.SamplingSpec | None = None, max_tokens: int = p.DEFAULTS.max_tokens,
    draft: str = p.DEFAULTS.draft, draft_max: int = p.DEFAULTS.draft_max, on_event: Callable[[ClientEvent], None] | None = None,
) -> PendingTurn:
    """Add a user message and answer it; ``reply_to`` answers from an earlier message (an edit)."""
    _, turn = start_turn(store, conversation_id, text, _options(sampling, max_tokens, draft, draft_max),
                         Writer(PROGRAM), reply_to=reply_to)
    return run_answer(store, client, turn, on_event)


def regenerate_turn(
    store: ConversationStore, client: EngineClient, conversation_id: str, user_message_id: str, *,
    sampling: p.SamplingSpec | None = None, max_tokens: int = p.DEFAULTS.max_tokens,
    draft: str = p.DEFAULTS.draft, draft_max: int = p.DEFAULTS.draft_max,
    on_event: Callable[[ClientEvent], None] | None = None,
) -> PendingTurn:
    """A new answer to an existing user message; the earlier answers stay as other branches."""
    turn = start_regeneration(store, conversation_id, user_message_id,
                              _options(sampling, max_tokens, draft, draft_max), Writer(PROGRAM))
    return run_answer(store, client, turn, on_event)


def answer_turn(
    store: ConversationStore, client: EngineClient, conversation_id: str, history: list[Message], *,
    sampling: p.SamplingSpec | None = None, max_tokens: int = p.DEFAULTS.max_tokens,
    draft: str = p.DEFAULTS.draft, draft_max: int = p.DEFAULTS.draft_max,
    on_event: Callable[[ClientEvent], None] | None = None,
) -> PendingTurn:
    """Answer the last message of ``history`` (a user message) and store the answer as its child."""
    turn = begin_answer(store, conversation_id, history, _options(sampling, max_tokens, draft, draft_max))
    return run_answer(store, client, turn, on_event)


def open_conversation_command(store: ConversationStore, conversation_id: str) -> p.OpenConversation:
    history, conversation = store.current_branch(conversation_id), store.get(conversation_id)
    return p.OpenConversation(request_id=new_request_id("open"), conversation_id=conversation_id,
                              messages=conversation_turns(history, conversation), template=template_spec(conversation))


def open_conversation(store: ConversationStore, client: EngineClient, conversation_id: str) -> p.SnapshotReport:
    """Have the engine restore the conversation's newest snapshot before the next message is typed."""
    for event in client.stream(open_conversation_command(store, conversation_id)):
        if isinstance(event, p.ConversationOpened):
            return event.snapshot
        if isinstance(event, (p.Error, EngineDead)):
            return p.SnapshotReport(notes=[event.message])
    return p.SnapshotReport()
