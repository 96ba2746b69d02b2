"""What each ``hearth`` sub-command does. They all go through an :class:`EngineClient`, the same
path the GUI uses, with the engine in a worker process as in the GUI: a crash inside llama.cpp
(an instruction this CPU does not run, say) then ends that process, not the command, and the
command says what happened and what to do instead of dying with a bare signal."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from app.services.context_info import context_details, context_json, grown_line
from app.services.draft_heads import resolve_draft_files, with_head_from
from app.services.model_refs import ModelRefError, model_display_name, model_file, resolve_model_ref
from app.services.settings import app_data_dir, current_settings
from engine.protocol.answer_record import CUT_OFF
from app.surfaces.cli.json_schema_flag import constraint_from_args
from app.surfaces.cli.sampling_flags import sampling_for
from app.surfaces.cli.terminal_text import json_text, visible
from app.surfaces.cli.thinking import ThinkingEcho, enable_thinking
from app.surfaces.cli.user_error import UserError
from engine import protocol as p
from app.engine_clients.client import EngineClient, EngineDead, EngineError, InvalidRequest, checked, new_request_id
from engine.protocol.command_check import shown
from engine.protocol.deaths import engine_dead
from app.engine_clients.process_client import ProcessClient
from app.engine_clients.remote.limits import OVERRUN_WORDS
from engine.protocol.draft_choice import SPEC_HELP, DraftRefused, parse_draft_spec
from model_store.installed import EMBEDDED_ID, EMBEDDED_NAME


def model_label(path: str) -> str:
    return f"the embedded model {EMBEDDED_NAME}" if path == EMBEDDED_ID else Path(path).name


def crash_error(dead: EngineDead, doing: str) -> UserError:
    """An engine death as the one line a user reads, and the JSON ``error`` object scripts read."""
    if not dead.crashed:
        return UserError(f"{dead.message} while {doing}", kind="engine_died", signal=dead.signal)
    safer = "" if dead.cpu_variant in ("", "built-in") else \
        " (or try again with HEARTH_CPU_VARIANT=safe, the safest CPU build)"
    message = (f"{dead.message} while {doing}. Run `hearth doctor` to check this machine{safer}; "
               "if it keeps happening, report what the doctor prints")
    return UserError(message, kind="engine_crashed", signal=dead.signal)


# Protocol fields the CLI sets from a flag: an out-of-range value is reported under the flag's name.
FLAGS = {"max_tokens": "--max-tokens", "draft_max": "--draft-max", "draft_paths": "--draft-paths", "lengths": "--lengths",
         "temperature": "--temperature", "top_k": "--top-k", "top_p": "--top-p", "min_p": "--min-p", "seed": "--seed",
         "repeat_penalty": "--repeat-penalty", "repeat_last_n": "--repeat-last-n",
         "dry_multiplier": "--dry-multiplier"}


def invalid_value(invalid: p.InvalidCommand) -> UserError:
    """A value outside its field's range as one line naming the flag that set it
    (``--draft-max must be between 1 and 14; got 1000``); ``--json`` adds the field and the range."""
    name = invalid.field.split("[", 1)[0].rsplit(".", 1)[-1]
    flag = FLAGS.get(name)
    if flag is None or invalid.allowed is None:
        message = str(invalid)
    else:
        subject = f"each {flag} value" if "[" in invalid.field else flag
        message = f"{subject} must be {invalid.allowed}; got {shown(invalid.value)}"
    return UserError(message, kind="invalid_value", field=invalid.field, allowed=invalid.allowed or "")


def check_options(command: p.Command) -> None:
    """Refuse a command's out-of-range values before any engine starts (the engine would refuse them)."""
    try:
        checked(command)
    except InvalidRequest as exc:
        raise invalid_value(exc.invalid) from None


def _context(settings, path: str) -> int:
    """The context the settings keep for the model at ``path`` (``default`` or a file); 0: auto."""
    file = model_file(path)
    return settings.context_for(file) if file is not None else 0


def say_context_grown(grown: p.ContextGrown) -> None:
    print(f"hearth: {grown_line(grown)}", file=sys.stderr, flush=True)


@contextmanager
def engine_for(model: str, data_dir: Path | None = None, draft_max: int = p.DEFAULTS.draft_max,
               draft_paths: int = p.DEFAULTS.draft_paths, device_policy: str = "auto", context: int | None = None,
               engine: str | None = None) -> Iterator[tuple[EngineClient, p.ModelLoaded]]:
    """A worker with ``model`` loaded; ``context`` tokens (0: auto; None: the model's setting).
    ``engine``: the remote engine of that name instead, ``model`` one of its server's models (no
    worker starts here)."""
    if engine is not None:
        from app.surfaces.cli.remote_engine import remote_engine_for  # (the registry and keyring only when asked for)
        with remote_engine_for(engine, model, context) as opened:
            yield opened
        return
    data_dir = data_dir or app_data_dir()  # also where the device probe and compiled NPU graphs are cached
    try:
        path = resolve_model_ref(model, data_dir)
    except ModelRefError as exc:
        raise UserError(str(exc)) from exc
    settings = current_settings()
    client = ProcessClient(data_dir=data_dir)
    client.on_context_grown = say_context_grown
    try:
        client.start()
        client.send(p.SetTelemetry(interval_ms=0))
        loaded = client.load_model(path, draft_max=draft_max, draft_paths=draft_paths, device_policy=device_policy,
                                   calibration=settings.device_calibration, kv_type=settings.kv_type,
                                   memory_percent=settings.memory_budget_percent,
                                   n_ctx=_context(settings, path) if context is None else context,
                                   name=model_display_name(path, data_dir))
    except InvalidRequest as exc:
        client.close(mode="abort")
        raise invalid_value(exc.invalid) from None
    except EngineError as exc:
        client.close(mode="abort")
        if exc.dead is not None:
            raise crash_error(exc.dead, f"loading {model_label(path)}") from exc
        raise UserError(str(exc), kind=exc.code) from exc
    try:
        yield client, loaded
        dead = death_of(client)
        if dead is not None:  # the command saw the request end, but not why (send, doc load)
            raise crash_error(dead, f"running {model_label(path)}")
    finally:
        client.close(mode="abort")


def death_of(client: ProcessClient) -> EngineDead | None:
    """How the worker died, if a signal ended it while the command used it."""
    process = client.process
    code = process.poll() if process is not None else None
    if code is None or code >= 0:
        return None
    cpu = client.ready.cpu if client.ready is not None else None
    return engine_dead(code, cpu.variant if cpu is not None else "")


def require_text(text: str, what: str) -> None:
    """Refuse an empty or whitespace-only message before anything starts (the window does the same)."""
    if not text.strip():
        raise UserError(f"the {what} is empty; write something for the model to answer", kind="empty_message")


def sampling_from_args(args: argparse.Namespace, model: str | None = None, thinks: bool = False) -> p.SamplingSpec:
    """The flags over the user's settings over the model's own defaults (:mod:`app.surfaces.cli.sampling_flags`);
    ``model``: the answering model's ref (None: only the flags are checked, on Hearth's defaults);
    ``thinks``: the loaded model thinks by default. Out-of-range flags are refused here."""
    settings = current_settings()
    seed = args.seed if args.seed is not None else settings.seed
    spec = sampling_for(args, settings, model, thinks).spec(seed=seed)
    check_options(p.Chat(request_id="cli-check", messages=[], sampling=spec, max_tokens=args.max_tokens))
    return spec


@dataclass
class Reply:
    text: str = ""
    reasoning: str = ""
    finished: p.Finished | None = None
    errors: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)  # the errors' codes (remote_auth, ...)
    interrupted: bool = False  # Ctrl+C stopped it

    def error(self) -> UserError:
        """The errors as the one line the command prints (``kind``: the first error's code)."""
        return UserError("; ".join(self.errors), **({"kind": self.codes[0]} if self.codes else {}))


def run_request(client: EngineClient, command: p.Answer, *, echo: ThinkingEcho | None) -> Reply:
    """Stream one generation (written to ``echo`` as it comes, if given); Ctrl+C cancels it and still
    waits for its end (see :meth:`EngineClient.follow`)."""
    reply = Reply()
    reply.interrupted = client.follow(command, lambda event: take_event(reply, event, command.request_id, echo))
    if echo is not None:
        echo.close_reasoning()
    return reply


def say_waiting(waiting: p.RemoteWaiting) -> None:
    """A busy remote engine, told on stderr while the request waits to be sent again."""
    print(f"hearth: {visible(waiting.message)}", file=sys.stderr, flush=True)


def take_event(reply: Reply, event, request_id: str, echo: ThinkingEcho | None) -> None:
    if isinstance(event, EngineDead):
        raise crash_error(event, "writing the answer")
    if getattr(event, "request_id", None) != request_id:
        return
    if isinstance(event, p.RemoteWaiting):
        say_waiting(event)
    elif isinstance(event, p.TokenDelta):
        reply.reasoning += event.reasoning
        reply.text += event.text
        if echo is not None:
            echo.reasoning(event.reasoning)
            echo.answer(event.text)
    elif isinstance(event, p.Error):
        reply.errors.append(event.message)
        reply.codes.append(event.code)
    elif isinstance(event, p.Finished):
        reply.finished = event


def _generate_command(args: argparse.Namespace, messages: list[p.WireMessage] | None = None) -> p.Complete | p.Chat:
    """``--raw``: the prompt as plain text; otherwise the conversation so far (the prompt alone by default)."""
    drafting = draft_options(args)
    options = dict(sampling=sampling_from_args(args), max_tokens=args.max_tokens,
                   draft=parse_draft_spec(drafting["draft"]), draft_max=drafting["draft_max"],
                   constraint=constraint_from_args(args))
    if messages is None:
        require_text(args.prompt, "prompt")
    if getattr(args, "raw", False):
        return p.Complete(request_id=new_request_id("cli"), prompt=args.prompt, **options)
    return p.Chat(request_id=new_request_id("cli"), messages=messages or [p.WireMessage("user", args.prompt)],
                  template=p.TemplateSpec(enable_thinking=enable_thinking(args)), **options)


def draft_options(args: argparse.Namespace) -> dict:
    """``--draft`` (as text, an installed model's id resolved to its path) and ``--draft-max``."""
    check_options(p.Chat(request_id="cli-check", messages=[], draft_max=args.draft_max))
    draft = args.draft
    try:
        parse_draft_spec(draft)  # refused here, before a conversation is made for the message
    except DraftRefused as exc:
        raise UserError(f"--draft: {exc}", kind="invalid_value", field="draft", allowed=SPEC_HELP) from None
    try:  # an installed model's id works here as in --model, and an installed head's id as eagle3:ID
        draft = resolve_draft_files(draft, app_data_dir())
    except ModelRefError as exc:
        raise UserError(f"--draft {args.draft}: {exc}") from exc
    return {"draft": draft, "draft_max": args.draft_max}


def generation_json(text: str, finished: p.Finished, ran: p.DevicePlan, n_ctx: int, reasoning: str = "",
                    sampling: p.SamplingSpec | None = None) -> dict:
    """The keys of ``generate --json``; ``send --json`` adds its own to the same ones. ``n_ctx``:
    the context the request ran in (after growing, if it grew); ``reasoning``: what a reasoning
    model thought before the answer ("" when it did not); ``sampling``: what the answer sampled with
    (the flags, else the settings, else the model's own defaults)."""
    result = {"text": text, "reasoning": reasoning.strip(), "token_ids": finished.token_ids, "finish_reason": finished.finish_reason,
              "timings": msgspec.to_builtins(finished.timings), "draft": draft_json(finished.draft),
              "devices": devices_json(ran), "n_ctx": n_ctx, "cut_off": finished.cut_by == "context"}
    if sampling is not None:
        result["sampling"] = msgspec.to_builtins(sampling)
    if finished.remote is not None:  # the engine and model that answered, and the prompt tokens it reused
        result["remote"] = msgspec.to_builtins(finished.remote)
    return result


def say_after_answer(finished: p.Finished, n_ctx: int) -> None:
    """What a finished answer leaves to say on stderr, one line each: that it was cut off, and what
    happened to the turn's saved state (a snapshot that could not be saved or was refused)."""
    say_if_cut_off(finished, n_ctx)
    for note in finished.snapshot.notes if finished.snapshot is not None else []:
        print(f"hearth: note: {visible(note)}", file=sys.stderr)


def say_if_cut_off(finished: p.Finished, n_ctx: int) -> None:
    """One stderr line when the full context ended the answer (``--json``: ``"cut_off": true``), or
    Hearth closed a remote engine's answer that went past its limit (``remote.closed_by_hearth``)."""
    remote = finished.remote
    if remote is not None and remote.closed_by_hearth:
        print(f"hearth: the engine {visible(remote.engine)} {OVERRUN_WORDS[remote.closed_by_hearth]}, so Hearth "
              "closed its answer there: the answer is cut off", file=sys.stderr)
    if finished.cut_by == "context":
        print(f"hearth: {CUT_OFF} ({n_ctx:,} tokens), so the answer ends unfinished; a new conversation, or a "
              "model with a longer context, has room for more", file=sys.stderr)


def draft_json(stats: p.DraftStats | None) -> dict:
    stats = stats or p.DraftStats()
    return {"kind": stats.kind, "rounds": stats.rounds, "drafted": stats.drafted, "accepted": stats.accepted,
            "mean_accepted_len": round(stats.mean_accepted_len, 4), "auto_off": stats.auto_off,
            "reason": stats.reason, "tree_rounds": stats.tree_rounds, "side_wins": stats.side_wins}


def devices_json(plan: p.DevicePlan) -> dict:
    """The ``devices`` key of ``generate --json`` and ``send --json``."""
    return {"prefill": plan.prefill.device, "decode": plan.decode.device,
            "prefill_reason": plan.prefill.reason, "decode_reason": plan.decode.reason}


def ran_devices(finished: p.Finished, loaded: p.ModelLoaded) -> p.DevicePlan:
    """The devices that ran the request (the load-time plan if the engine did not say)."""
    return finished.devices or loaded.devices


def warn_about_devices(args: argparse.Namespace, plan: p.DevicePlan) -> None:
    """``--prefill-device npu`` that is not honoured as asked is said, once, on stderr."""
    if args.prefill_device == "npu" and plan.prefill.device != "npu":
        print(f"hearth: warning: prefill runs on {plan.prefill.device}: {visible(plan.prefill.reason)}", file=sys.stderr)


def warn_about_fallback(args: argparse.Namespace, plan: p.DevicePlan, ran: p.DevicePlan) -> None:
    """A forced NPU prefill that fell back to the CPU during the request is said on stderr."""
    if args.prefill_device == "npu" and ran.prefill.device != plan.prefill.device:
        print(f"hearth: warning: prefill ran on {ran.prefill.device}: {visible(ran.prefill.reason)}", file=sys.stderr)


def run_generate(args: argparse.Namespace) -> int:
    command = _generate_command(args)
    with engine_for(args.model, draft_max=args.draft_max, draft_paths=args.draft_paths, device_policy=args.prefill_device,
                    context=args.context, engine=args.engine) as (client, loaded):
        warn_about_devices(args, loaded.devices)
        command = msgspec.structs.replace(command, sampling=sampling_from_args(args, args.model, loaded.facts.thinks))
        if args.engine is None:  # auto drafts with an installed EAGLE-3 head that fits the model
            command = with_head_from(command, loaded.facts, app_data_dir())
        reply = run_request(client, command, echo=None if args.json else ThinkingEcho(args.thinking))
        n_ctx = client.context.n_ctx
    if reply.errors:
        raise reply.error()
    finished = reply.finished
    ran = ran_devices(finished, loaded)
    warn_about_fallback(args, loaded.devices, ran)
    if args.json:
        print(json_text(generation_json(reply.text, finished, ran, n_ctx, reply.reasoning, command.sampling)))
    else:
        print()
    say_if_cut_off(finished, n_ctx)
    return 130 if reply.interrupted else 0  # the shell's code for a command stopped by Ctrl+C


def run_info(args: argparse.Namespace) -> int:
    with engine_for(args.model, context=args.context) as (_client, loaded):
        facts = msgspec.to_builtins(loaded.facts)
    name = model_display_name(args.model, app_data_dir(), general_name=loaded.facts.name)
    if args.json:  # "name" stays the file's own general.name; "display_name" is what Hearth calls it
        print(json_text({**facts, "display_name": name, "context": context_json(loaded.context)}))
    else:
        width = max(len(key) for key in facts)
        for key, value in {**facts, "name": name}.items():
            print(f"{key:<{width}}  {visible(str(value))}")
        print(f"{'context':<{width}}  {context_details(loaded.context)}")
    return 0


def answering_model(model: str, loaded: p.ModelLoaded, engine: str | None) -> str:
    """The model's name as the user reads it: a local model's, or the server's id on the engine."""
    return model_display_name(model, app_data_dir()) if engine is None else f"{loaded.facts.name} on {engine}"
