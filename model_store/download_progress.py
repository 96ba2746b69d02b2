"""Progress and cancel for a transfer: the file object huggingface_hub's ``http_get`` writes to.

``http_get`` writes each chunk it receives with ``file.write`` and, only when a server ignores a
Range request, rewinds with ``seek``/``truncate`` to start over. :class:`PartialFile` wraps the
partial download opened for appending and, on every write:

* counts the bytes (``position`` = bytes on disk, ``transferred`` = bytes written by this call);
* reports :class:`DownloadProgress` at most every ``REPORT_INTERVAL_S`` (10 a second), with the
  speed over the last ``SPEED_WINDOW_S`` seconds and the ETA it implies;
* raises :class:`~model_store.download_errors.DownloadCancelled` once the chunk is written if the
  cancel event is set, so nothing received is lost and the next attempt resumes exactly there.

:class:`NoBar` replaces tqdm so the library prints nothing.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from model_store.download_errors import DownloadCancelled

REPORT_INTERVAL_S = 0.1
SPEED_WINDOW_S = 3.0


@dataclass(frozen=True)
class DownloadProgress:
    """How far a download is; ``downloaded_bytes`` includes bytes kept from an earlier attempt."""

    filename: str
    downloaded_bytes: int
    total_bytes: int
    bytes_per_second: float
    eta_seconds: float | None


class NoBar:
    """Stands in for tqdm inside ``http_get`` so nothing is printed."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __enter__(self) -> NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, n: float | None = 1) -> None:
        pass


class PartialFile:
    """The file ``http_get`` writes to: appends to the partial download, reports, honours cancel."""

    def __init__(
        self,
        f: BinaryIO,
        filename: str,
        total: int,
        on_progress: Callable[[DownloadProgress], None] | None,
        cancel: threading.Event | None,
    ):
        self._f = f
        self._filename = filename
        self._total = total
        self._on_progress = on_progress
        self._cancel = cancel
        self.position = f.tell()  # append mode: the bytes kept from earlier attempts
        self.transferred = 0
        self._samples: deque[tuple[float, int]] = deque([(time.monotonic(), 0)])
        self._last_report = float("-inf")

    def write(self, chunk: bytes) -> int:
        n = self._f.write(chunk)
        self.position += n
        self.transferred += n
        self.report()
        self.check_cancel()
        return n

    def tell(self) -> int:
        return self._f.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def truncate(self, size: int | None = None) -> int:
        """Called by ``http_get`` when the server ignored the Range header: start over."""
        result = self._f.truncate(size)
        self.position = self._f.tell() if size is None else size
        return result

    def check_cancel(self) -> None:
        if self._cancel is not None and self._cancel.is_set():
            self._f.flush()
            raise DownloadCancelled(self._filename, self.position, self._total)

    def report(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._on_progress is None or (not force and now - self._last_report < REPORT_INTERVAL_S):
            return
        self._last_report = now
        speed = self._speed(now)
        remaining = max(self._total - self.position, 0)
        eta = remaining / speed if speed > 0 else (0.0 if remaining == 0 else None)
        self._on_progress(DownloadProgress(self._filename, self.position, self._total, speed, eta))

    def _speed(self, now: float) -> float:
        """Bytes per second over the last few seconds of this call."""
        self._samples.append((now, self.transferred))
        while len(self._samples) > 2 and now - self._samples[1][0] >= SPEED_WINDOW_S:
            self._samples.popleft()
        t0, b0 = self._samples[0]
        return (self.transferred - b0) / (now - t0) if now > t0 else 0.0
