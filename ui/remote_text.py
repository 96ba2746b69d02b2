"""What the window says about remote engines: pure functions from names, stats and probe results to
text, so every view words them the same way and tests read them without a display.

An engine is named by a model reference ``engine:NAME`` (:data:`app.engine_clients.remote.spec.REMOTE_PREFIX`);
every other reference is a model on this computer. An answer's stats name the engine that wrote it
(``stats["engine"]``, absent or ``"local"`` for this computer), the model (``stats["model"]``) and,
for a remote engine, what the server reported (``stats["remote"]``, a
:class:`engine.protocol.RemoteReport` as JSON). Stats are read back from old messages too, so every
lookup tolerates a missing key or a value of the wrong type.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.engine_clients.remote.spec import LOCAL_ENGINE, REMOTE_PREFIX
from ui.formatting import model_name

THIS_COMPUTER = "This computer"
NOT_REMOTE = "not used on a remote engine"  # a measurement of this computer's engine that does not apply
NOT_MEASURED = "not measured on a remote engine"  # done by the server, which does not report it


def engine_ref(name: str) -> str:
    """The model reference that loads the remote engine ``name``."""
    return REMOTE_PREFIX + name


def remote_name(ref: str | None) -> str | None:
    """The remote engine a model reference names, or None for a model on this computer."""
    if ref and ref.startswith(REMOTE_PREFIX) and len(ref) > len(REMOTE_PREFIX):
        return ref[len(REMOTE_PREFIX):]
    return None


def answering_model(ref: str, loaded: Any) -> str:
    """The name of the model writing an answer: a remote engine's model id as its server names it
    (``loaded``: the :class:`~engine.protocol.ModelLoaded` of the engine), else the local model's."""
    if remote_name(ref) is not None and loaded is not None and loaded.facts.name:
        return loaded.facts.name
    return model_name(ref)


def picker_label(name: str, model: str) -> str:
    """How the model picker lists a remote engine: ``"gpu-box — llama-70b (remote)"``."""
    return f"{name} — {model or 'its first model'} (remote)"


def engine_heading(name: str, model: str) -> str:
    """The telemetry panel's title for a loaded remote engine: ``"llama-70b on gpu-box (remote)"``."""
    return f"{model} on {name} (remote)" if model else f"{name} (remote)"


def remote_engine_text(name: str) -> str:
    """Where a device or memory would be: the remote engine that does the work."""
    return f"remote engine {name}"


def answer_engine(stats: Any) -> str | None:
    """The remote engine that wrote an answer, from its stats; None for this computer (or unknown)."""
    engine = stats.get("engine") if isinstance(stats, dict) else None
    return engine if isinstance(engine, str) and engine and engine != LOCAL_ENGINE else None


def engines_used(stats_of_messages: Iterable[Any]) -> list[str]:
    """The remote engines that answered any of these messages, in the order they first did."""
    names: list[str] = []
    for stats in stats_of_messages:
        name = answer_engine(stats)
        if name is not None and name not in names:
            names.append(name)
    return names


def marker_text(names: list[str]) -> str:
    """The line above the chat of a conversation answered remotely; "" when none is."""
    if not names:
        return ""
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"answered on {listed}: messages leave this computer"


def answered_by_line(stats: Any) -> str:
    """The first line of an answer's hover: who answered it (``"gpu-box · llama-70b"``, ``"this
    computer · SmolLM2"``), with the prompt tokens a remote server reused when it said; "" when
    the stats name neither an engine nor a model (answers written before engines were recorded)."""
    if not isinstance(stats, dict):
        return ""
    model = stats.get("model") if isinstance(stats.get("model"), str) else ""
    engine = answer_engine(stats)
    if engine is None:
        return f"this computer · {model}" if model else ""
    line = f"{engine} · {model}" if model else engine
    remote = stats.get("remote")
    cached = remote.get("cached_tokens") if isinstance(remote, dict) else None
    if isinstance(cached, int) and not isinstance(cached, bool):
        line += f"\n{cached:,} prompt tokens reused from the server's cache"
    return line


def consent_question(name: str, url: str) -> str:
    """What is asked before the messages of a conversation go to a remote engine for the first time."""
    return f"Messages of this conversation will be sent to {name} ({url}). Continue?"


def probe_text(result: Any) -> str:
    """A test's outcome (a :class:`~app.engine_clients.remote.probe.ProbeResult`) in a line: ``"Works: 85 ms to
    list the models, 41.2 tok/s, 3 models."`` (with the address's warning), or the error."""
    if not result.ok:
        return sentence(result.error or "the engine did not answer")
    parts = [f"{result.latency_ms:,.0f} ms to list the models"] if result.latency_ms is not None else []
    if result.tok_s:
        parts.append(f"{result.tok_s:,.1f} tok/s")
    parts.append(f"{len(result.models)} model" + ("" if len(result.models) == 1 else "s"))
    text = "Works: " + ", ".join(parts) + "."
    return f"{text} {sentence(result.warning)}" if result.warning else text


def sentence(text: str) -> str:
    """A message of the engine layer ("the engine gpu refused the API key …") as a sentence."""
    text = text.strip()
    if not text:
        return text
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else text + "."
