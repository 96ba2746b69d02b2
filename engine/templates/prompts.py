"""Turning what the user wrote into prompt tokens: raw text, or chat messages through the template.

Only the chat template's own text may produce control tokens. Raw prompts, and the messages'
text inside a rendered chat (its content spans, see :class:`engine.templates.chat_template.RenderedChat`),
are read as plain text: ``<|im_start|>`` typed by a user or found in a document stays those
twelve characters. A rendered prompt whose messages contain no control-token text is tokenized in
one call exactly as before; otherwise the control tokens the template wrote are cut out and
everything between them is read as plain text, as llama.cpp itself reads the text between
special tokens.
"""

from __future__ import annotations

import functools
import re

from engine.backends.backend import ModelBackend
from engine.backends.base import ModelLoadError
from engine.templates.chat_template import (ChatMessage, ChatTemplateError, ChatTemplateTooCostly, RenderedChat, RenderOptions,
                                  render_chat)
from engine.decoding.reasoning import ReasoningStart, reasoning_start

# A small conversation every chat template must render within budget, checked when a model loads.
SAMPLE_CONVERSATION = [ChatMessage("system", "You are helpful."), ChatMessage("user", "Hello"),
                       ChatMessage("assistant", "Hi! How can I help?"), ChatMessage("user", "Tell me a story.")]


def raw_prompt_tokens(model: ModelBackend, text: str) -> list[int]:
    """Plain text as the model's tokenizer reads it (BOS added if the model wants one)."""
    return model.tokenize(text, add_special=True, parse_special=False)


def render_for(model: ModelBackend, messages: list[ChatMessage], *, answer: bool = True,
               options: RenderOptions = RenderOptions()) -> RenderedChat:
    """``messages`` rendered with the model's own chat template (``answer``: cue the assistant)."""
    return render_chat(model.chat_template(), messages, bos_token=model.token_text(model.bos),
                       eos_token=model.token_text(model.eos), add_generation_prompt=answer,
                       model_name=f"'{model.path.name}'", options=options)


def answer_cue(model: ModelBackend, messages: list[ChatMessage], options: RenderOptions = RenderOptions()) -> str:
    """The text the template writes after the messages to cue the answer ("" when the rendering
    with the cue does not start with the one without: the cue cannot be told apart)."""
    closed = render_for(model, messages, answer=False, options=options).text
    cued = render_for(model, messages, answer=True, options=options).text
    return _cue(cued, closed)


def _cue(cued: str, closed: str) -> str:
    return cued[len(closed):] if cued.startswith(closed) else ""


def chat_prompt(model: ModelBackend, messages: list[ChatMessage], options: RenderOptions = RenderOptions()
                ) -> tuple[list[int], ReasoningStart]:
    """The tokens an answer to ``messages`` reads, and whether that answer starts inside a reasoning
    block: the conversation rendered once with the answer's cue and once without."""
    cued = render_for(model, messages, options=options)
    closed = render_for(model, messages, answer=False, options=options).text
    return rendered_tokens(model, cued, bos=True), reasoning_start(_cue(cued.text, closed))


def answer_reasoning(model: ModelBackend, messages: list[ChatMessage], options: RenderOptions) -> ReasoningStart:
    """Whether an answer to ``messages`` starts inside a reasoning block (see engine.decoding.reasoning)."""
    return reasoning_start(answer_cue(model, messages, options))


def check_chat_template(model: ModelBackend) -> tuple[bool, bool]:
    """Refuse a model whose chat template goes over budget on a small conversation; else return
    (whether its answers start in a reasoning block by default, whether ``enable_thinking`` switches it).

    Such a template would on every turn; one that merely refuses this conversation (some do not
    take a system message) is reported per turn instead, when it happens.
    """
    try:
        render_for(model, SAMPLE_CONVERSATION)
        thinks = answer_reasoning(model, SAMPLE_CONVERSATION, RenderOptions()) == "open"
        on, off = (answer_cue(model, SAMPLE_CONVERSATION, RenderOptions(enable_thinking=v)) for v in (True, False))
        return thinks, on != off
    except ChatTemplateTooCostly as exc:
        raise ModelLoadError(model.path, f"its chat template is too costly to run ({exc.reason}); the file may "
                                         "be damaged or made to cause harm: use another model") from exc
    except ChatTemplateError:
        return False, False


def chat_prompt_tokens(model: ModelBackend, messages: list[ChatMessage], options: RenderOptions = RenderOptions()
                       ) -> list[int]:
    """Messages rendered with the model's own chat template, ready for the assistant's turn."""
    return rendered_tokens(model, render_for(model, messages, options=options), bos=True)


def rendered_tokens(model: ModelBackend, rendered: RenderedChat, *, bos: bool) -> list[int]:
    """Tokens of a rendered prompt: control tokens only where the template wrote them.

    ``bos``: start with BOS if the model wants one (once, also when the template wrote it).
    """
    pieces = _template_control_tokens(model, rendered)
    if pieces is None:
        tokens = model.tokenize(rendered.text, add_special=False, parse_special=True)
    else:
        tokens = []
        position = 0
        for start, end, token in pieces:
            tokens += _plain(model, rendered.text[position:start])
            tokens.append(token)
            position = end
        tokens += _plain(model, rendered.text[position:])
    if bos and model.adds_bos and not (tokens and tokens[0] == model.bos):
        tokens.insert(0, model.bos)
    return tokens


def _plain(model: ModelBackend, text: str) -> list[int]:
    return model.tokenize(text, add_special=False, parse_special=False) if text else []


def _template_control_tokens(model: ModelBackend, rendered: RenderedChat) -> list[tuple[int, int, int]] | None:
    """(start, end, token) of each control token the template wrote; None when the messages hold none."""
    control = model.control_tokens()
    if not control:
        return None
    matches = list(_control_pattern(tuple(control)).finditer(rendered.text))
    kept = [m for m in matches if not _overlaps(m.start(), m.end(), rendered.content_spans)]
    if len(kept) == len(matches):
        return None
    return [(m.start(), m.end(), control[m.group()]) for m in kept]


@functools.lru_cache(maxsize=8)
def _control_pattern(texts: tuple[str, ...]) -> re.Pattern:
    """Longest text first, so ``<|im_start|>`` is never read as a shorter token inside it."""
    return re.compile("|".join(re.escape(t) for t in sorted(texts, key=len, reverse=True)))


def _overlaps(start: int, end: int, spans: tuple[tuple[int, int], ...]) -> bool:
    return any(start < span_end and span_start < end for span_start, span_end in spans)
