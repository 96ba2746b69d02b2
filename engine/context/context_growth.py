"""Growing a model's context when a request needs more of it.

A conversation or document that reaches the end of the context is not cut. Before a request reads,
the tokens it needs (those already in the state, its new ones, and room for the answer: up to
:data:`ANSWER_ROOM`) are compared with the context. When they do not fit, the worker loads the model
again with a longer context (engine.requests.core) and the request begins again there: a conversation's turn
stands on its deepest snapshot, whose recurrent part does not depend on the context's size and whose
KV cells are placed into the new, longer cache; a request without snapshots reads its prompt again.

How long: at least twice the old context (so a conversation that keeps growing reloads a handful of
times, not every turn), at least what the request needs, and at most the longest context the memory
budget holds now (counting the memory this worker gives back when it lets the old context go),
capped at the trained length. When even the request's own tokens do not fit there, it is refused
with the limit and what would help.
"""

from __future__ import annotations

import msgspec

from engine import protocol as p
from engine.protocol.context_cut import choose_cut, cut_budget, cut_report, kept_messages
from engine.context.context_memory import CONTEXT_STEP, UNKNOWN_TRAINED_CONTEXT
from engine.protocol.document_room import ANSWER_ROOM
from engine.templates.prompts import render_for, rendered_tokens
from engine.templates.request_chat import chat_messages, render_options
from engine.models.session import ModelSession
from model_store.fit import RUNTIME_OVERHEAD_BYTES, available_memory, longest_context, memory_budget


class ContextLimit(ValueError):
    """A request needs more context than the model can have here; the message says why and what helps."""


def context_report(session: ModelSession, mode: str | None = None) -> p.ContextReport:
    """What ``ModelLoaded`` and ``ContextGrown`` say about the session's context."""
    plan, memory = session.plan, session.memory
    kv_type = session.context.settings.kv_type
    if plan is None or memory is None:  # a session made without open_session (tests): the context alone
        return p.ContextReport(n_ctx=session.n_ctx, n_ctx_train=session.facts.n_ctx_train, mode="fixed",
                               kv_type=kv_type, kv_bytes=0, estimated_bytes=0, available_bytes=0, budget_bytes=0,
                               max_n_ctx=session.n_ctx)
    return p.ContextReport(n_ctx=session.n_ctx, n_ctx_train=memory.n_ctx_train, mode=mode or plan.mode,
                           kv_type=kv_type, kv_bytes=plan.kv_bytes, estimated_bytes=plan.estimated_bytes,
                           available_bytes=plan.available_bytes, budget_bytes=plan.budget_bytes,
                           max_n_ctx=max(plan.max_n_ctx, session.n_ctx))


def answer_room(max_tokens: int) -> int:
    """Room a request keeps free after its prompt for the answer (a document's: for what follows it)."""
    return min(max_tokens, ANSWER_ROOM) if max_tokens else ANSWER_ROOM


def longest_possible(session: ModelSession, available: int | None = None) -> int:
    """The longest context this session's model could have now, if the worker let its own go first."""
    plan, memory = session.plan, session.memory
    if plan is None or memory is None:
        return session.n_ctx
    held = plan.estimated_bytes - RUNTIME_OVERHEAD_BYTES  # given back when the worker lets its context go
    free = (available_memory(held) if available is None else available) + held
    kv_type, planes = session.context.settings.kv_type, 1 + session.context.n_rs_seq

    def total(n_ctx: int) -> int:
        return memory.total_bytes(n_ctx, kv_type, planes)

    cap = max(memory.n_ctx_train or UNKNOWN_TRAINED_CONTEXT, session.n_ctx)
    return max(session.n_ctx, longest_context(total, memory_budget(free, session.memory_percent), cap))


def grown_size(session: ModelSession, prompt_end: int, room: int, available: int | None = None) -> int:
    """The context to grow to so tokens up to ``prompt_end`` and ``room`` more fit; 0: it fits already.

    Raises:
        ContextLimit: Not even ``prompt_end`` tokens (and the first answer token) fit in any context
            this model can have now.
    """
    wanted = prompt_end + room
    if wanted < session.n_ctx:
        return 0
    longest = longest_possible(session, available)
    if prompt_end + 1 > longest - 1:  # generation needs n_past + 1 < n_ctx
        raise ContextLimit(_limit_message(session, prompt_end, longest))
    target = max(2 * session.n_ctx, -(-(wanted + 1) // CONTEXT_STEP) * CONTEXT_STEP)
    return min(target, longest) if min(target, longest) > session.n_ctx else 0


def cut_to_fit(session: ModelSession, command: p.AnswerTurn | p.Chat,
               prompt_end: int) -> tuple[p.AnswerTurn | p.Chat, p.ContextCut | None]:
    """``command`` as the model reads it when its prompt (ending at ``prompt_end``) and its answer's
    room would not fit the longest context possible: with its oldest exchanges left out for
    ``when_full="drop-oldest"`` (engine.protocol.context_cut), and where they were cut.

    Raises:
        ContextLimit: For ``when_full="summary"``, so the app continues in a new conversation.
    """
    room = answer_room(command.max_tokens)
    if command.when_full == "stop" or prompt_end + room < session.n_ctx:
        return command, None
    longest = longest_possible(session)
    if prompt_end + room < longest:
        return command, None
    if command.when_full == "summary":
        raise ContextLimit(_limit_message(session, prompt_end + room, longest))
    pinned = command.pinned if isinstance(command, p.AnswerTurn) else []
    options = render_options(command.template)

    def measure(messages: list[p.WireMessage]) -> int:
        chat = chat_messages(messages)
        return len(rendered_tokens(session.model, render_for(session.model, chat, options=options), bos=True))

    first = choose_cut(command.messages, pinned, measure, cut_budget(longest, room), longest - 1 - room)
    if first is None:  # not even the newest exchange fits: refused as it always was (grown_size)
        return command, None
    kept = kept_messages(command.messages, pinned, first)
    return msgspec.structs.replace(command, messages=kept), cut_report(command.messages, kept, first)


def _limit_message(session: ModelSession, needed: int, longest: int) -> str:
    memory = session.memory
    trained = memory.n_ctx_train if memory is not None else 0
    if trained and longest >= trained:
        why = f"{session.name or 'this model'} was trained on {trained:,} tokens at most"
        helps = "start a new conversation, or load a shorter part of the document"
    else:
        why = f"the memory available now holds {longest:,} tokens of context for this model"
        helps = ("close other programs, choose a smaller quantization, turn on the 8-bit KV cache, or raise the "
                 "memory budget in Settings")
    return f"this needs {needed:,} tokens of context, but {why}; {helps}"
