"""The OpenAI API's request bodies, as typed structs, and what Hearth makes of them.

A body is decoded strictly: a field Hearth does not know is refused as OpenAI refuses it
("Unrecognized request argument supplied: X"), and a known field Hearth cannot honour (the old
``functions``, ``n`` > 1, log-probabilities, penalties, a logit bias) is refused by name
rather than ignored, so no request is silently misread. Fields that change nothing about the answer
(``user``, ``metadata``, ``store``, ``service_tier``) are accepted and ignored, as OpenAI does for
parameters a model does not use. A sampling field the client does not send is the served model's
default (:func:`app.services.sampling_defaults.resolve_sampling`: the GGUF's own sampling keys, else
its family's published values, else Hearth's, which keep the built-in model from looping), as
llama.cpp's server does; ``top_k``, ``min_p``, ``repeat_penalty``, ``repeat_last_n`` and ``dry_multiplier``
may be sent as to llama.cpp's server.

No value reaches the engine unchecked: a number outside its field's range, of the wrong type or too
large to read is refused here (400 ``invalid_request_error``, ``param`` naming the field, the message
its range). The sampling ranges are the protocol's own (:func:`engine.protocol.sampling_problem`, which
the worker applies too); the others are annotations below, explained by :mod:`engine.protocol.command_check`,
the worker's explainer.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from app.surfaces.serve.json_depth import NestedTooDeep, check_depth
from app.services.sampling_defaults import ResolvedSampling, resolve_sampling
from engine.protocol import command_check
from engine import protocol as p

MAX_STOPS = 4  # OpenAI's limit
Temperature = Annotated[float, msgspec.Meta(ge=0, le=2)]  # OpenAI's range
Penalty = Annotated[float, msgspec.Meta(ge=-2, le=2)]  # OpenAI's range (Hearth takes only 0)
TopK = Annotated[int, msgspec.Meta(ge=0, le=p.MAX_TOKENS)]  # more than any vocabulary; llama.cpp's is an int32
TokenCount = Annotated[int, msgspec.Meta(ge=1, le=p.MAX_TOKENS)]


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
    tool_calls: list[dict[str, Any]] | None = None  # an earlier answer's calls (app.surfaces.serve.chat_messages)
    tool_call_id: str | None = None  # the call a ``tool`` message answers


class TemplateKwargs(msgspec.Struct, forbid_unknown_fields=True):
    """``chat_template_kwargs``: what the chat template may be told (llama.cpp's server and vLLM take it)."""

    enable_thinking: bool | None = None


class _Sampling(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    model: str
    temperature: Temperature | None = None
    top_p: float | None = None
    top_k: TopK | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    repeat_last_n: int | None = None  # llama.cpp's server's name: the penalty's window (-1 the whole answer, 0 off)
    dry_multiplier: float | None = None  # llama.cpp's server's name: the sequence penalty (0 off)
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
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    logit_bias: dict[str, float] | None = None


class ChatRequest(_Sampling, kw_only=True):
    messages: list[ChatMessageIn]
    max_tokens: TokenCount | None = None
    max_completion_tokens: TokenCount | None = None
    top_logprobs: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    chat_template_kwargs: TemplateKwargs | None = None
    # Hearth's own: when the conversation is longer than the model can read, "drop-oldest" leaves its
    # oldest exchanges out of what the model reads (the response's ``hearth`` object says how many),
    # "stop" refuses it (400 context_length_exceeded); None: the server's setting (Settings → Chat)
    when_full: p.WhenFull | None = None


class CompletionRequest(_Sampling, kw_only=True):
    prompt: str | list[str]
    max_tokens: TokenCount = 16  # OpenAI's default for completions
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None


def decode_body(data: bytes, kind: type[_Sampling]) -> _Sampling:
    """The body as ``kind``; :class:`RequestRefused` naming the field (and its range) that does not fit,
    or that nests too deep for a decoder to read (:mod:`app.surfaces.serve.json_depth`)."""
    try:
        check_depth(data)
        return msgspec.json.decode(data, type=kind)
    except NestedTooDeep as exc:
        raise RequestRefused(str(exc), exc.field, "nested_too_deep") from None
    except msgspec.ValidationError as exc:
        raise field_refusal(exc, data, kind) from None
    except (msgspec.DecodeError, RecursionError):  # (the depth is checked first: RecursionError is a backstop)
        raise RequestRefused("We could not parse the JSON body of your request: send valid JSON",
                             code="invalid_json") from None


def field_refusal(error: msgspec.ValidationError, data: bytes, kind: type) -> RequestRefused:
    """msgspec's words in OpenAI's: an unknown field is 'Unrecognized request argument supplied', a
    number outside its range names the range."""
    message = str(error)
    if message.startswith("Object contains unknown field"):
        name = message.split("`")[1] if "`" in message else message
        return RequestRefused(f"Unrecognized request argument supplied: {name}", name, "invalid_request")
    field = command_check.error_field(error)
    try:
        raw = msgspec.json.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):  # a number too large to read (1e400)
        raw = None
    explained = command_check.explain(error, raw, kind) if raw is not None else None
    if explained is not None:
        return RequestRefused(f"Invalid '{explained.field}': {explained}", explained.field, "invalid_request")
    if (problem := _sampling_problem(raw, field)) is not None:  # a whole number too large for a float
        return RequestRefused(f"Invalid '{field}': {problem}", field, "invalid_request")
    allowed = command_check.field_range(kind, field) if field is not None else None
    if raw is None and allowed is not None:
        return RequestRefused(f"Invalid '{field}': the number is too large to read; it must be {allowed}", field,
                              "invalid_request")
    what = message.split(" - at ", 1)[0] + (f"; it must be {allowed}" if allowed else "")
    return RequestRefused(f"Invalid '{field}': {what}" if field else f"Invalid request: {what}", field,
                          "invalid_request")


def _sampling_problem(raw: Any, field: str | None) -> str | None:
    """The protocol's words for a sampling field's value that msgspec could not take as a number."""
    value = raw.get(field) if isinstance(raw, dict) and field in p.SamplingSpec.__struct_fields__ else None
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    try:
        return p.sampling_problem(field, value)
    except OverflowError:  # a rule that compares as a float
        return None


def sampling_spec(body: _Sampling, defaults: ResolvedSampling | None = None) -> p.SamplingSpec:
    """The request's sampling over the served model's ``defaults`` (None: the built-in model's), each
    value checked by the protocol's rule (the worker's)."""
    def number(value):
        return None if value is None else float(value)

    resolved = (defaults or resolve_sampling()).with_yours(
        temperature=number(body.temperature), top_k=body.top_k, top_p=number(body.top_p), min_p=number(body.min_p),
        repeat_penalty=number(body.repeat_penalty), repeat_last_n=body.repeat_last_n,
        dry_multiplier=number(body.dry_multiplier))
    spec = resolved.spec(seed=body.seed)
    for name in p.SamplingSpec.__struct_fields__:
        if (problem := p.sampling_problem(name, getattr(spec, name))) is not None:
            raise RequestRefused(f"Invalid '{name}': {problem}", name, "invalid_request")
    return spec


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
        if body.when_full == "summary":  # the client keeps the conversation: there is no new one to continue in
            raise RequestRefused("'when_full': 'summary' continues in a new conversation, which only the Hearth window "
                                 "and `hearth send` keep; send 'drop-oldest' or 'stop'", "when_full")
    elif isinstance(body, CompletionRequest):
        _refuse_completion_only(body)


def _refuse_chat_only(body: ChatRequest) -> None:
    for name, instead in (("functions", "; send them as 'tools'"), ("function_call", "; use 'tool_choice'"),
                          ("top_logprobs", "")):
        if getattr(body, name) not in (None, [], "none"):
            raise RequestRefused(f"'{name}' is not supported{instead}", name)


def _refuse_completion_only(body: CompletionRequest) -> None:
    if body.echo:
        raise RequestRefused("'echo' is not supported", "echo")
    if body.suffix:
        raise RequestRefused("'suffix' (insertion) is not supported", "suffix")
    if body.best_of not in (None, 1):
        raise RequestRefused("'best_of' must be 1", "best_of")


def enable_thinking(body: ChatRequest) -> bool | None:
    return body.chat_template_kwargs.enable_thinking if body.chat_template_kwargs is not None else None


def completion_prompt(body: CompletionRequest) -> str:
    prompts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
    if len(prompts) != 1 or not isinstance(prompts[0], str):
        raise RequestRefused("'prompt' must be one string (token arrays and batches are not supported)", "prompt")
    return prompts[0]


def answer_tokens(body: ChatRequest | CompletionRequest, default: int) -> int:
    if isinstance(body, ChatRequest):
        return body.max_completion_tokens or body.max_tokens or default
    return body.max_tokens


FinishReason = Literal["stop", "length", "tool_calls"]


def finish_reason(engine_reason: str) -> FinishReason:
    return engine_reason if engine_reason in ("length", "tool_calls") else "stop"
