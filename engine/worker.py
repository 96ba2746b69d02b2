"""The worker process: ``python -m engine.worker``. Frames in on stdin, frames out on stdout.

The process owns the model, so the GUI survives whatever happens here. It never outlives the app:
stdin reaching EOF means the app is gone (on every OS), and on Linux the kernel also sends SIGKILL
when the parent dies (``PR_SET_PDEATHSIG``). The protocol stream is moved off file descriptor 1
first, so a stray ``printf`` in a C library lands on stderr instead of corrupting a frame.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from typing import BinaryIO

import msgspec

from engine import protocol as p
from engine.state.allocator import keep_freed_state_memory
from engine.protocol.framing import FrameError, frame, read_frames
from engine.requests.command_inbox import CommandInbox
from engine.worker_loop import WorkerLoop
from engine.protocol.pipe_transcripts import ReceivedTranscripts, UnknownTranscript

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Linux: have the kernel kill us when the parent dies (other OSes rely on stdin EOF)."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def take_protocol_stdout() -> BinaryIO:
    """A private duplicate of stdout for frames; fd 1 then points at stderr."""
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol_out


def read_commands(stream: BinaryIO, inbox: CommandInbox) -> None:
    """Decode frames into commands until EOF; bad frames are answered, never fatal."""
    transcripts = ReceivedTranscripts()
    for item in read_frames(stream):
        if isinstance(item, FrameError):
            inbox.report_bad_input("bad_frame", str(item))
            continue
        try:
            command = p.decode_command(item)
        except p.InvalidCommand as exc:
            inbox.refuse(exc.request_id, exc.kind, str(exc))
            continue
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            inbox.report_bad_input("bad_message", f"a message could not be read: {exc}")
            continue
        try:
            command = transcripts.complete(command)
        except UnknownTranscript as exc:
            inbox.refuse(command.request_id, command.__struct_config__.tag, str(exc))
            continue
        inbox.submit(command)
    inbox.stop(abort=True)  # EOF: the app is gone or closed the pipe


def main() -> None:
    die_with_parent()
    keep_freed_state_memory()
    # Ctrl+C in a terminal reaches the whole process group; the app decides what it means (a
    # Cancel), the worker must not die of it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = take_protocol_stdout()

    def send(event: p.Event) -> None:
        try:
            out.write(frame(p.encode(event)))
        except (BrokenPipeError, OSError, ValueError):  # ValueError: the stream is already closed
            os._exit(0)  # nobody is listening any more

    loop = WorkerLoop(send)
    reader = threading.Thread(target=read_commands, args=(sys.stdin.buffer, loop.inbox), name="commands",
                              daemon=True)
    reader.start()
    loop.run()
    out.close()
    os._exit(0)  # the reader thread may still block on stdin; a normal exit would wait on it


if __name__ == "__main__":
    main()
