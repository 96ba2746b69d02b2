"""What the server answers, in the OpenAI API's shapes: completions, stream chunks, errors."""

from __future__ import annotations

import time
import uuid

from starlette.responses import JSONResponse

from engine import protocol as p

ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "invalid_request_error",
               404: "invalid_request_error", 415: "invalid_request_error",
               408: "timeout_error", 504: "timeout_error", 413: "invalid_request_error", 429: "rate_limit_error", 500: "server_error",
               503: "server_error"}


class ApiError(Exception):
    """An answer in OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": ERROR_TYPES.get(self.status, "server_error"),
                          "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def completion_id(kind: str) -> str:
    return f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex[:24]}"


class Reply:
    """The parts every response and chunk of one request share."""

    def __init__(self, kind: str, model: str) -> None:
        self.kind = kind  # "chat" | "text"
        self.model = model
        self.id = completion_id(kind)
        self.created = int(time.time())

    def _head(self, object_name: str) -> dict:
        return {"id": self.id, "object": object_name, "created": self.created, "model": self.model,
                "system_fingerprint": "hearth"}

    def whole(self, text: str, finish_reason: str, usage: dict, reasoning: str = "",
              tool_calls: list[p.ToolCall] | None = None) -> dict:
        if self.kind == "chat":
            message = {"role": "assistant", "content": text or (None if tool_calls else ""), "refusal": None}
            if reasoning:  # as llama.cpp's server, vLLM and DeepSeek's API give it
                message["reasoning_content"] = reasoning
            if tool_calls:
                message["tool_calls"] = [_call(call) for call in tool_calls]
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
            return {**self._head("chat.completion"), "choices": [choice], "usage": usage}
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        return {**self._head("text_completion"), "choices": [choice], "usage": usage}

    def chunk(self, text: str | None = None, finish_reason: str | None = None, *, first: bool = False,
              reasoning: str | None = None) -> dict:
        if self.kind == "chat":
            delta: dict = {"role": "assistant", "content": ""} if first else {}
            if reasoning:
                delta["reasoning_content"] = reasoning
            if text is not None:
                delta["content"] = text
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            return {**self._head("chat.completion.chunk"), "choices": [choice]}
        choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish_reason}
        return {**self._head("text_completion"), "choices": [choice]}

    def call_chunks(self, tool_calls: list[p.ToolCall]) -> list[dict]:
        """The answer's calls as stream chunks, in the shape OpenAI streams them: per call, one chunk with
        its index, id, type and name (arguments ""), then one with its arguments."""
        chunks = []
        for index, call in enumerate(tool_calls):
            head = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
            for part in (head, {"index": index, "function": {"arguments": call.arguments}}):
                choice = {"index": 0, "delta": {"tool_calls": [part]}, "logprobs": None, "finish_reason": None}
                chunks.append({**self._head("chat.completion.chunk"), "choices": [choice]})
        return chunks

    def usage_chunk(self, usage: dict) -> dict:
        name = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        return {**self._head(name), "choices": [], "usage": usage}


def _call(call: p.ToolCall) -> dict:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def usage(turn_finished: p.Finished | None, completion_tokens: int) -> dict:
    """OpenAI's ``usage``: the prompt's tokens (restored from a snapshot or read), those restored
    (``prompt_tokens_details.cached_tokens``), and the answer's."""
    snapshot = turn_finished.snapshot if turn_finished is not None else None
    timings = turn_finished.timings if turn_finished is not None else None
    cached = snapshot.restored_tokens if snapshot is not None else 0
    read = snapshot.prefilled_tokens if snapshot is not None else (timings.prompt_n if timings else 0)
    prompt = cached + read
    return {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens, "prompt_tokens_details": {"cached_tokens": cached}}
