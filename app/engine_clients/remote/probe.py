"""Checking a remote engine before it is used (``hearth engines test``, the Test button): it is
reached, takes the key, lists its models, and writes a short answer; with the latency of the model
list and the speed of that answer."""

from __future__ import annotations

import threading
import time

import msgspec

from engine import protocol as p
from app.engine_clients.remote.answer import AnswerStream
from app.engine_clients.remote.api import OpenAIApi, ServerModel
from app.engine_clients.remote.errors import RemoteError
from app.engine_clients.remote.loading import pick_model
from app.engine_clients.remote.retry import RetryPolicy
from app.engine_clients.remote.spec import RemoteEngine, UrlProblem, check_url

PROBE_PROMPT = "Count from one to ten."
PROBE_TOKENS = 16


class ProbeResult(msgspec.Struct):
    ok: bool
    latency_ms: float | None = None  # the model list's round trip
    models: list[str] = []
    tok_s: float | None = None  # the short answer's decode speed
    error: str | None = None
    warning: str = ""  # plain http, say
    context: int = 0  # what the server says of the chosen model's context; 0: it does not say
    model: str = ""  # the model the short answer came from


def list_models(engine: RemoteEngine) -> list[ServerModel]:
    """The server's models; :class:`RemoteError` if it cannot be asked."""
    api = OpenAIApi(engine)
    try:
        return api.models()
    finally:
        api.close()


def probe(engine: RemoteEngine, timeout: float = 30.0) -> ProbeResult:
    try:
        url, warning = check_url(engine.url)
    except UrlProblem as problem:
        return ProbeResult(ok=False, error=str(problem))
    engine = msgspec.structs.replace(engine, url=url)
    api = OpenAIApi(engine)
    result = ProbeResult(ok=False, warning=warning)
    try:
        started = time.perf_counter()
        listed = api.models()
        result.latency_ms = round((time.perf_counter() - started) * 1000, 1)
        result.models = [m.id for m in listed]
        result.model, _ = pick_model(engine, listed)
        result.context = next((m.context for m in listed if m.id == result.model), 0)
        result.tok_s, result.error = _short_answer(api, result.model, timeout)
        result.ok = result.error is None
    except RemoteError as error:
        result.error = str(error)
    finally:
        api.close()
    return result


def _short_answer(api: OpenAIApi, model: str, timeout: float) -> tuple[float | None, str | None]:
    """The decode speed of a short greedy answer, or the sentence saying why there was none."""
    events: list[p.Event] = []
    stream = AnswerStream(api, model, RetryPolicy(attempts=1), events.append)
    timer = threading.Timer(timeout, stream.stop)
    timer.start()
    try:
        stream.run(p.Chat(request_id="probe", messages=[p.WireMessage("user", PROBE_PROMPT)],
                          sampling=p.SamplingSpec(temperature=0.0), max_tokens=PROBE_TOKENS))
    finally:
        timer.cancel()
    errors = [e.message for e in events if isinstance(e, p.Error)]
    if errors:
        return None, errors[0]
    if stream.stopped.is_set():
        return None, f"the engine {api.engine.name} wrote nothing within {timeout:.0f} s"
    if not stream.n_pieces:
        return None, f"the engine {api.engine.name} answered with no text"
    finished = next(e for e in events if isinstance(e, p.Finished))
    seconds = finished.timings.gen_ms / 1000
    return (round((finished.timings.gen_n - 1) / seconds, 1) if seconds > 0 and finished.timings.gen_n > 1
            else None), None
