"""``hearth serve``: the OpenAI-compatible API on one model, in one worker, for other programs.

It binds 127.0.0.1 unless told otherwise, and another address only with a key (``--api-key`` or
``HEARTH_API_KEY``, which keeps the key out of the process list). The worker's folder is one of the
address served (:mod:`app.surfaces.serve.server_folder`): the API's conversations and their
snapshots never mix with the app's, and a server restarted on the same address continues them; on
``--port 0`` they go when the server stops. The first line on stdout says where it listens
(``--port 0`` picks a free port).
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import socket
import sys
import threading
import time

import psutil
import uvicorn

from app.surfaces.serve import schema
from app.surfaces.serve.connections import connection_limits, guarded_protocol
from app.surfaces.serve.api_conversations import ApiConversations
from app.surfaces.serve.guard import is_loopback_name
from app.surfaces.serve.routes import Api, ServeConfig
from app.surfaces.serve.runner import RUN_LIMIT_S, WAIT_LIMIT_S, EngineRunner, Job
from app.surfaces.serve.server_folder import FolderRefused, server_folder
from app.surfaces.serve.models import ModelRefused, model_table
from app.surfaces.serve.chat_messages import api_messages
from app.surfaces.serve.response_format import output_constraint
from app.surfaces.serve.tool_fields import offered_tools, tool_choice
from app.services.draft_heads import resolve_draft_files, with_head_from
from app.services.model_refs import ModelRefError, model_file
from app.services.settings import app_data_dir, current_settings, snapshot_budget_bytes
from app.services.sampling_defaults import ResolvedSampling, resolve_sampling
from app.services.paths import user_paths
from app.services.serve_contract import CANNOT_LISTEN, KEY_ENV, NOTICE_PREFIX, PARENT_ENV, listening_line
from app.services.pending_turn import PendingTurn
from app.services.turn import TurnOptions
from engine import protocol as p
from app.engine_clients.client import EngineClient, EngineError, new_request_id
from app.engine_clients.process_client import ProcessClient
from engine.protocol.draft_choice import DraftRefused, parse_draft_spec
from model_store.after_crash import open_conversation_store
from model_store.db import database_path

PARENT_POLL_S = 1.0
LIMITS_TEST_ENV = "HEARTH_TEST_SERVE_LIMITS"  # "WAIT,RUN" seconds: tests reach the limits in seconds


def serve_limits() -> tuple[float, float]:
    """How long a request may wait in the queue, and write (a test may shorten both)."""
    wait, _, run = os.environ.get(LIMITS_TEST_ENV, "").partition(",")
    try:
        return float(wait), float(run)
    except ValueError:
        return WAIT_LIMIT_S, RUN_LIMIT_S


class ServeRefused(Exception):
    """The server cannot start as asked: one line saying what to do."""


def check_exposure(host: str, api_key: str | None) -> None:
    if not is_loopback_name(host) and not api_key:
        raise ServeRefused(f"binding to {host} lets other computers connect: set a key with --api-key KEY "
                           f"(or {KEY_ENV}), or bind 127.0.0.1")


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, reuse_port=False)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)  # (create_server adds the address to strerror)
        raise ServeRefused(f"{CANNOT_LISTEN} {host}:{port} ({reason}): "
                           f"{what_to_do_when_unable_to_listen(exc.errno, port)}") from None


def what_to_do_when_unable_to_listen(code: int | None, port: int) -> str:
    """The advice for a failed bind: a port in use, a port only an administrator may open, or an
    address this computer does not have."""
    if code == errno.EADDRINUSE:
        return f"another program is using port {port}; stop it, or choose another --port"
    if code in (errno.EACCES, errno.EPERM):
        if 0 < port < 1024:
            return "ports below 1024 need administrator rights; choose a --port of 1024 or more (the default is 8089)"
        return "this system does not allow Hearth to open it; choose another --port"
    if code == errno.EADDRNOTAVAIL:
        return "this computer has no such address; use --host 127.0.0.1, or one of its own addresses"
    return "choose another --port, or check --host"


def end_with_parent(parent_pid: int) -> None:
    """Stop (as SIGTERM would) once the process that started this server has gone (the same
    process: its start time is checked, so a new process given the same id does not count)."""
    def started(pid: int) -> float | None:
        try:
            return psutil.Process(pid).create_time()
        except psutil.Error:
            return None

    born = started(parent_pid)

    def watch() -> None:
        while born is not None and started(parent_pid) == born:
            time.sleep(PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _stop_on_sigterm(signum, frame) -> None:
    """A SIGTERM while the model loads ends the run through its cleanup (once uvicorn is made, it
    only asks uvicorn to stop: see Server.run)."""
    raise SystemExit(0)


class Server:
    """The parts of one run: the worker's folder, the runner and the routes."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.api_key = args.api_key or os.environ.get(KEY_ENV) or None
        check_exposure(args.host, self.api_key)
        try:
            self.draft = parse_draft_spec(resolve_draft_files(args.draft, app_data_dir()))
        except (DraftRefused, ModelRefError) as exc:
            raise ServeRefused(f"--draft {args.draft}: {exc}") from None
        try:
            self.models = model_table(args.model, args.allow_switch)
        except ModelRefused as exc:
            raise ServeRefused(str(exc)) from None
        self.model_id = next(iter(self.models))
        self._sampling: dict[tuple[str, bool], ResolvedSampling] = {}
        self.wait_s, self.run_s = serve_limits()
        self.settings = current_settings()
        try:
            self.folder = server_folder(user_paths().ensure(), args.host, args.port)
        except FolderRefused as exc:
            raise ServeRefused(str(exc)) from None
        self._conversations: ApiConversations | None = None
        client = ProcessClient(data_dir=self.folder.path)
        client.snapshot_budget_bytes = snapshot_budget_bytes(self.settings)
        self.runner = EngineRunner(client, self._load, self.model_id, max_queue=args.max_queue)
        self.runner.on_restart = lambda text: print(f"{NOTICE_PREFIX}{text}", file=sys.stderr, flush=True)

    def _load(self, client: EngineClient, model_id: str) -> p.ModelLoaded:
        """Load ``model_id`` (the served model with ``--context``; another with its own setting)."""
        settings, path = self.settings, self.models[model_id]
        file = model_file(path)
        chosen = self.args.context if model_id == self.model_id else None
        n_ctx = chosen if chosen is not None else (settings.context_for(file) if file else 0)
        return client.load_model(path, n_ctx=n_ctx, draft_max=self.args.draft_max, draft_paths=self.args.draft_paths,
                                 kv_type=settings.kv_type,
                                 memory_percent=settings.memory_budget_percent,
                                 calibration=settings.device_calibration)

    def conversations(self) -> ApiConversations:
        """Opened on the runner's thread, where its SQLite connection is used."""
        if self._conversations is None:
            store = open_conversation_store(database_path(self.folder.path))
            self._conversations = ApiConversations(store)
        return self._conversations

    def chat_job(self, body: schema.ChatRequest) -> Job:
        messages, stop, tools = api_messages(body), schema.stop_strings(body), offered_tools(body)
        options = TurnOptions(sampling=schema.sampling_spec(body, self.sampling_defaults(body)),
                              max_tokens=schema.answer_tokens(body, p.MAX_TOKENS),
                              draft=self.args.draft, draft_max=self.args.draft_max,
                              enable_thinking=schema.enable_thinking(body),
                              when_full=body.when_full or self.settings.when_full,
                              constraint=output_constraint(body.response_format),
                              tools=tools, tool_choice=tool_choice(body, tools))
        holder: list[PendingTurn] = []

        def prepare() -> p.Command:
            holder.append(self.conversations().begin(messages, options, stop, self.runner.model))
            holder[0].command = self.with_head(holder[0].command)
            job.left_out = self.conversations().left_out(holder[0])
            return holder[0].outgoing()

        def finish(events) -> None:
            for event in events:
                holder[0].feed(event)
            self.conversations().finish(holder[0])

        job = Job(prepare=prepare, finish=finish, wait_limit_s=self.wait_s, run_limit_s=self.run_s)
        return job

    def completion_job(self, body: schema.CompletionRequest) -> Job:
        command = p.Complete(request_id=new_request_id("api"), prompt=schema.completion_prompt(body),
                             sampling=schema.sampling_spec(body, self.sampling_defaults(body)),
                             max_tokens=body.max_tokens,
                             stop=schema.stop_strings(body), draft=self.draft, draft_max=self.args.draft_max)
        return Job(prepare=lambda: self.with_head(command), wait_limit_s=self.wait_s, run_limit_s=self.run_s)

    def sampling_defaults(self, body: schema._Sampling) -> ResolvedSampling:
        """The sampling of the model the request names, for the fields it does not set (read once per
        model and thinking mode)."""
        thinking = bool(isinstance(body, schema.ChatRequest) and schema.enable_thinking(body))
        key = (self.models.get(body.model, self.models[self.model_id]), thinking)
        if key not in self._sampling:
            self._sampling[key] = resolve_sampling(key[0], thinking=thinking)
        return self._sampling[key]

    def with_head(self, command: p.Answer) -> p.Answer:
        """``auto`` drafts with an installed EAGLE-3 head that fits the model now served (asked on the
        runner's thread, after any switch of model)."""
        loaded = self.runner.loaded
        return with_head_from(command, loaded.facts, app_data_dir()) if loaded is not None else command

    def run(self) -> int:
        listening = bind(self.args.host, self.args.port)
        try:
            loaded = self.runner.start()
        except EngineError as exc:
            listening.close()
            raise ServeRefused(f"the model did not load: {exc}") from None
        host, port = listening.getsockname()[:2]
        limits = connection_limits()
        api = Api(ServeConfig(list(self.models), self.api_key, self.args.cors, bound_host=host, limits=limits),
                  self.runner, self.chat_job, self.completion_job)
        shown = f"[{host}]" if ":" in host else host
        n_ctx = loaded.context.n_ctx if loaded.context else None
        # Made before the line that tells the app and scripts it is up, and from then on a SIGTERM only
        # asks uvicorn to stop (it takes the signal over while it runs): a SIGTERM sent at once must not
        # raise inside logging's configuration or asyncio's start, whose locks it would leave broken.
        # uvicorn's own lines stay out of the log (errors only): each request has ours, in one line.
        server = uvicorn.Server(uvicorn.Config(api.app(), http=guarded_protocol(limits, api.log_refused),
                                               log_level="error", access_log=False, lifespan="off"))
        signal.signal(signal.SIGTERM, lambda signum, frame: setattr(server, "should_exit", True))
        print(listening_line(f"http://{shown}:{port}/v1", self.model_id, n_ctx), flush=True)
        server.run(sockets=[listening])
        return 0

    def close(self) -> None:
        self.runner.stop()
        self.folder.close()


def run_serve(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    if (parent := os.environ.get(PARENT_ENV, "")).isdigit():
        end_with_parent(int(parent))
    server = None
    try:
        server = Server(args)
        return server.run()  # a ServeRefused goes up to the command line, which prints its line escaped
    finally:
        if server is not None:
            server.close()
