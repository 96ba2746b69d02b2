"""``hearth engines add|list|rm|test``, and opening a remote engine for ``--engine NAME``.

The registry (:mod:`app.services.engines`) keeps the engines and says where each API key went;
these commands only read flags and print. A key reaches Hearth through an environment variable
(``--api-key-env VAR``), never a flag's value (which every user of the computer could read in the
process list), and is never printed.
"""

from __future__ import annotations

import argparse
import os
import sys

import msgspec

from app.surfaces.cli.remote_engine import engine_error, open_registry, remote_engine
from app.surfaces.cli.terminal_text import json_text, visible
from app.surfaces.cli.user_error import UserError
from app.services.engines import EngineEntry, EngineProblem, entry_json
from app.engine_clients.remote.probe import ProbeResult, probe
from app.engine_clients.remote.spec import UrlProblem, check_url

# -- hearth engines ... ----------------------------------------------------------------------------


def _key_from(variable: str | None) -> str | None:
    if variable is None:
        return None
    key = os.environ.get(variable, "")
    if not key:
        raise UserError(f"the environment variable {variable} is not set; set it to the engine's API key "
                        "(or leave out --api-key-env for an engine without a key)", kind="engine")
    return key


def run_add(args: argparse.Namespace) -> int:
    key = _key_from(args.api_key_env)
    try:
        _url, warning = check_url(args.url)
    except UrlProblem as exc:
        raise UserError(str(exc), kind="engine") from exc
    entry = EngineEntry(args.name, args.url, model=args.model or "", context=args.context,
                        key_env=args.api_key_env or "")
    registry = open_registry()
    try:
        said = registry.add(entry, key, key_in_file=args.key_file, replace=args.replace)
        added = registry.get(args.name)
    except EngineProblem as exc:
        raise engine_error(exc) from exc
    if warning:
        print(f"hearth: warning: {visible(warning)}", file=sys.stderr)
    name = visible(added.name)
    print(f"added the engine {name} at {visible(added.url)}; check it with `hearth engines test {name}`")
    if key is not None:
        print(said)
    return 0


def _key_words(entry: EngineEntry) -> str:
    return {"none": "no key", "keyring": "key in the secret store", "file": "key in a private file",
            "env": f"key from ${entry.key_env}", "session": "key for this session"}.get(entry.key_kind, entry.key_kind)


def run_list(args: argparse.Namespace) -> int:
    entries = open_registry().entries()
    if args.json:
        print(json_text([entry_json(entry) for entry in entries]))
        return 0
    for entry in entries:
        model = visible(entry.model) or "the server's first model"
        context = f", {entry.context:,} tokens" if entry.context else ""
        print(f"{visible(entry.name):<16} {visible(entry.url)}  ({model}{context}; {visible(_key_words(entry))})")
    if not entries:
        print("no remote engines yet; add one with `hearth engines add NAME --url URL`")
    return 0


def run_rm(args: argparse.Namespace) -> int:
    try:
        removed = open_registry().remove(args.name)
    except EngineProblem as exc:
        raise engine_error(exc) from exc
    key = "" if removed.key_kind in ("none", "env") else " and its API key"
    print(f"removed the engine {visible(removed.name)}{key}")
    return 0


def run_test(args: argparse.Namespace) -> int:
    """Reach the engine, list its models, time one short answer; exit status 1 when it does not work."""
    result = probe(remote_engine(args.name))
    if args.json:
        print(json_text(msgspec.to_builtins(result)))
    else:
        _print_probe(args.name, result)
    if not result.ok:
        raise UserError(result.error or f"the engine {args.name} does not work")
    return 0


def _print_probe(name: str, result: ProbeResult) -> None:
    """The probe's findings; the server's model ids and words are shown, never acted on by the terminal."""
    print(f"{visible(name)}: {'works' if result.ok else 'does not work'}")
    if result.latency_ms is not None:
        print(f"  reached in {result.latency_ms:,.0f} ms; models: {visible(', '.join(result.models)) or 'none'}")
    if result.tok_s is not None:
        print(f"  a short answer from {visible(result.model)}: {result.tok_s:,.1f} tokens/s")
    if result.warning:
        print(f"  note: {visible(result.warning)}")
