"""The OpenAI API's request bodies, as typed structs, and what Hearth makes of them.

A body is decoded strictly: a field Hearth does not know is refused as OpenAI refuses it
("Unrecognized request argument supplied: X"), and a known field Hearth cannot honour (tools,
``n`` > 1, log-probabilities, penalties, a logit bias, a JSON response format) is refused by name
rather than ignored, so no request is silently misread. Fields that change nothing about the answer
(``user``, ``metadata``, ``store``, ``service_tier``) are accepted and ignored, as OpenAI does for
parameters a model does not use. Sampling follows OpenAI's defaults where the client sends
nothing: temperature 1 and top-p 1, with llama.cpp's top-k and min-p off.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from engine import protocol as p

ROLES = ("system", "developer", "user", "assistant")
MAX_STOPS = 4  # OpenAI's limit
Temperature = Annotated[float, msgspec.Meta(ge=0, le=2)]
TopP = Annotated[float, msgspec.Meta(ge=0, le=1)]
Tokens = Annotated[int, msgspec.Meta(ge=1, le=p.MAX_TOKENS)]


class RequestRefused(Exception):
    """A body Hearth will not run: ``param`` names the field, the message says why and what to do."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


class StreamOptions(msgspec.Struct, forbid_unknown_fields=True):
    include_usage: bool = False


class TextPart(msgspec.Struct, tag_field="type", tag="text", forbid_unknown_fields=True):
    text: str


class ChatMessageIn(msgspec.Struct, forbid_unknown_fields=True):
    role: str
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    reasoning_content: str | None = None  # an earlier answer's reasoning, as llama.cpp's server and vLLM return it


class TemplateKwargs(msgspec.Struct, forbid_unknown_fields=True):
    """``chat_template_kwargs``: what the chat template may be told (llama.cpp's server and vLLM take it)."""

    enable_thinking: bool | None = None


class _Sampling(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    model: str
    temperature: Temperature | None = None
    top_p: TopP | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    n: int = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    # accepted and ignored: they change nothing about the answer
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    # refused unless left at what they are when not sent
    logprobs: bool | int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None


class ChatRequest(_Sampling, kw_only=True):
    messages: list[ChatMessageIn]
    max_tokens: Tokens | None = None
    max_completion_tokens: Tokens | None = None
    top_logprobs: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    chat_template_kwargs: TemplateKwargs | None = None


class CompletionRequest(_Sampling, kw_only=True):
    prompt: str | list[str]
    max_tokens: Tokens = 16  # OpenAI's default for completions
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None


def sampling_spec(body: _Sampling) -> p.SamplingSpec:
    temperature = 1.0 if body.temperature is None else float(body.temperature)
    top_p = 1.0 if body.top_p is None else float(body.top_p)
    return p.SamplingSpec(temperature=temperature, top_k=0, top_p=top_p, min_p=0.0, seed=body.seed)


def stop_strings(body: _Sampling) -> list[str]:
    stops = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    if len(stops) > MAX_STOPS:
        raise RequestRefused(f"'stop' takes at most {MAX_STOPS} sequences, got {len(stops)}", "stop")
    if any(not s for s in stops):
        raise RequestRefused("a 'stop' sequence is empty", "stop")
    return stops


def refuse_unsupported(body: _Sampling) -> None:
    """Fields Hearth knows but cannot honour, refused by name."""
    if body.n != 1:
        raise RequestRefused("'n' must be 1: Hearth writes one answer per request", "n")
    if body.logprobs not in (None, False, 0):
        raise RequestRefused("log-probabilities are not available from Hearth's engine", "logprobs")
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(body, name) not in (None, 0, 0.0):
            raise RequestRefused(f"'{name}' is not supported: leave it out or send 0", name)
    if body.logit_bias:
        raise RequestRefused("'logit_bias' is not supported", "logit_bias")
    if isinstance(body, ChatRequest):
        _refuse_chat_only(body)
    elif isinstance(body, CompletionRequest):
        _refuse_completion_only(body)


def _refuse_chat_only(body: ChatRequest) -> None:
    for name in ("tools", "functions", "tool_choice", "function_call", "parallel_tool_calls", "top_logprobs"):
        if getattr(body, name) not in (None, [], "none"):
            raise RequestRefused(f"'{name}' is not supported: Hearth's local models answer in text", name)
    if body.response_format is not None and body.response_format.get("type", "text") != "text":
        raise RequestRefused("only the 'text' response format is supported", "response_format")


def _refuse_completion_only(body: CompletionRequest) -> None:
    if body.echo:
        raise RequestRefused("'echo' is not supported", "echo")
    if body.suffix:
        raise RequestRefused("'suffix' (insertion) is not supported", "suffix")
    if body.best_of not in (None, 1):
        raise RequestRefused("'best_of' must be 1", "best_of")


class Turn(msgspec.Struct, frozen=True):
    """One message of a request, as Hearth stores it."""

    role: str
    text: str
    reasoning: str = ""


def enable_thinking(body: ChatRequest) -> bool | None:
    return body.chat_template_kwargs.enable_thinking if body.chat_template_kwargs is not None else None


def chat_turns(body: ChatRequest) -> list[Turn]:
    """Each message; ``developer`` is the system role of newer OpenAI models."""
    if not body.messages:
        raise RequestRefused("'messages' is empty: send at least one message", "messages")
    turns = []
    for index, message in enumerate(body.messages):
        if message.role not in ROLES:
            raise RequestRefused(f"messages[{index}].role '{message.role}' is not one of {', '.join(ROLES)} "
                                 "(tool messages are not supported)", f"messages[{index}].role")
        role = "system" if message.role == "developer" else message.role
        reasoning = (message.reasoning_content or "").strip() if role == "assistant" else ""
        turns.append(Turn(role, message_text(message.content, index), reasoning))
    if turns[-1].role == "assistant":
        raise RequestRefused("the last message is the assistant's: end with a user message to answer",
                             "messages")
    return turns


def message_text(content: str | list[dict[str, Any]] | None, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        try:
            texts.append(msgspec.convert(part, TextPart).text)
        except msgspec.ValidationError:
            kind = part.get("type", "?") if isinstance(part, dict) else "?"
            raise RequestRefused(f"messages[{index}] has a '{kind}' part: only text parts are supported",
                                 f"messages[{index}].content") from None
    return "".join(texts)


def completion_prompt(body: CompletionRequest) -> str:
    prompts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
    if len(prompts) != 1 or not isinstance(prompts[0], str):
        raise RequestRefused("'prompt' must be one string (token arrays and batches are not supported)", "prompt")
    return prompts[0]


def answer_tokens(body: ChatRequest | CompletionRequest, default: int) -> int:
    if isinstance(body, ChatRequest):
        return body.max_completion_tokens or body.max_tokens or default
    return body.max_tokens


FinishReason = Literal["stop", "length"]


def finish_reason(engine_reason: str) -> FinishReason:
    return "length" if engine_reason == "length" else "stop"
