"""The engine in a child process (``python -m engine.worker``), talked to over its stdin/stdout.

A reader thread turns frames into events and hands them on (:mod:`app.engine_clients.outlet`). When the stream ends without the app having
asked for it, the worker died: one :class:`~app.engine_clients.client.EngineDead` event says so, with the exit
status or the signal that killed it.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import IO

import msgspec

from engine import protocol as p
from engine.protocol.child_command import WORKER, module_command
from app.engine_clients.client import EngineClient, EngineError, checked
from app.engine_clients.outlet import EventOutlet
from engine.protocol.deaths import describe_exit, engine_dead
from engine.protocol.framing import FrameError, frame, read_frames
from engine.protocol.pipe_transcripts import SentTranscripts
from model_store.private_files import make_private_folder, open_private


class ProcessClient(EngineClient):
    def __init__(
        self, *, data_dir: Path | None = None, log_path: Path | None = None, env: dict[str, str] | None = None
    ) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.env = env
        self.process: subprocess.Popen | None = None
        self._events = EventOutlet()
        self._send_lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self._closing = False
        self._sent = SentTranscripts()  # what this worker was sent: branches go once (engine.protocol.pipe_transcripts)
        self.sent_bytes = 0  # frames written to the current worker

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def _launch(self) -> None:
        self._closing = False
        events = self._new_outlet()
        self._sent, self.sent_bytes = SentTranscripts(), 0  # a new worker was sent nothing
        stderr: IO | None = None
        if self.log_path is not None:
            make_private_folder(self.log_path.parent)
            stderr = open_private(self.log_path, "ab")  # 0600, like every file Hearth keeps
        self.process = subprocess.Popen(
            module_command(WORKER),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            env={**os.environ, **(self.env or {})}, bufsize=0,
        )
        if stderr is not None:
            stderr.close()
        self._reader = threading.Thread(target=self._read, args=(self.process, events),
                                        name="engine-reader", daemon=True)
        self._reader.start()

    def _read(self, process: subprocess.Popen, events: EventOutlet) -> None:
        try:
            self._read_events(process.stdout, events)
        except (OSError, ValueError):
            pass  # the pipe was closed under the read (close() gave up waiting): the stream has ended
        code = process.wait()
        if not self._closing:
            ready = self.ready
            events.put(engine_dead(code, ready.cpu.variant if ready is not None and ready.cpu is not None else ""))

    @staticmethod
    def _read_events(stream, events: EventOutlet) -> None:
        for item in read_frames(stream):
            if isinstance(item, FrameError):
                events.put(p.Error(code="bad_frame", message=f"the engine sent a bad frame: {item}"))
                continue
            try:
                events.put(p.decode_event(item))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                events.put(p.Error(code="bad_message", message=f"the engine sent an unreadable event: {exc}"))

    def send(self, command: p.Command) -> None:
        process = self.process
        if process is None or process.stdin is None:
            raise EngineError("not_started", "the engine is not running; start it first")
        if process.poll() is not None:
            raise EngineError("engine_dead", describe_exit(process.returncode))
        command = checked(command)
        with self._send_lock:  # shortened in the order written: the worker reads them in that order
            data = frame(p.encode(self._sent.shorten(command)))
            self.sent_bytes += len(data)
            try:
                process.stdin.write(data)
            except (BrokenPipeError, OSError, ValueError):
                pass  # the reader reports the death

    def send_raw(self, data: bytes) -> None:
        """Bytes straight onto the pipe (tests use it to send malformed frames)."""
        with self._send_lock:
            self.process.stdin.write(data)

    def close(self, mode: str = "drain", timeout: float = 10.0) -> None:
        process = self.process
        if process is None:
            return
        self._closing = True
        if process.poll() is None:
            try:
                self.send(p.Shutdown(mode="abort" if mode == "abort" else "drain"))
            except EngineError:
                pass  # it died just now
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # The reader reads stdout to its end (the worker has exited) before the pipe is closed: closed
        # under a read, it failed with "Bad file descriptor" in the reader thread, about 1 load in 20.
        self._close_pipe(process.stdin)
        if self._reader is not None:
            self._reader.join(2.0)
        self._close_pipe(process.stdout)
        self.process = None

    @staticmethod
    def _close_pipe(pipe: IO | None) -> None:
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass
