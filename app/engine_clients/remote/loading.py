"""Choosing a remote engine's model and describing it as the worker describes a loaded model.

The model is the one asked for (a server's model id), else the engine's own choice, else the
first the server lists. Its context is what the user set for the engine, else what the server
says, else :data:`~app.engine_clients.remote.spec.DEFAULT_CONTEXT`. A remote model's facts say only what is
known on this computer: the rest is 0, and its devices are the engine.
"""

from __future__ import annotations

from engine import protocol as p
from engine.protocol import ModelFacts
from app.engine_clients.remote.api import ServerModel
from app.engine_clients.remote.errors import RemoteError
from app.engine_clients.remote.redact import redact
from app.engine_clients.remote.spec import DEFAULT_CONTEXT, REMOTE_PREFIX, RemoteEngine


def pick_model(engine: RemoteEngine, listed: list[ServerModel], asked: str = "") -> tuple[str, int]:
    """``(model id, context tokens)``; :class:`RemoteError` when the server has no such model."""
    wanted = "" if asked in ("", "default") or asked.startswith(REMOTE_PREFIX) else asked
    wanted = wanted or engine.model
    if not listed:
        raise RemoteError("remote_model", f"the engine {engine.name} lists no models; load one on the server first")
    found = next((m for m in listed if m.id == wanted), None) if wanted else listed[0]
    if found is None:
        names = redact(", ".join(m.id for m in listed[:10]), engine.api_key)
        raise RemoteError("remote_model", f"the engine {engine.name} has no model {wanted!r}; it has: {names}")
    return found.id, engine.context or found.context or DEFAULT_CONTEXT


def remote_plan(engine: RemoteEngine) -> p.DevicePlan:
    phase = p.PhaseDevice("remote", f"remote engine {engine.name}")
    return p.DevicePlan(prefill=phase, decode=phase, draft=p.PhaseDevice("off", "drafting does not apply to a "
                                                                                "remote engine"))


def model_loaded(engine: RemoteEngine, request_id: str, model: str, context: int) -> p.ModelLoaded:
    facts = ModelFacts(path=f"{REMOTE_PREFIX}{engine.name}", file_bytes=0, arch="remote", name=model,
                       description=f"{model} on the remote engine {engine.name} ({engine.url})", n_params=0,
                       size_bytes=0, n_ctx_train=context, n_embd=0, n_layer=0, n_layer_mtp=0, n_vocab=0,
                       is_recurrent=False, is_hybrid=False, supports_rollback=False, has_chat_template=True,
                       backend_version="remote")
    report = p.ContextReport(n_ctx=context, n_ctx_train=context, mode="fixed", kv_type="f16", kv_bytes=0,
                             estimated_bytes=0, available_bytes=0, budget_bytes=0, max_n_ctx=context)
    return p.ModelLoaded(request_id=request_id, facts=facts, n_ctx=context, context=report,
                         devices=remote_plan(engine))
