"""The ways a model download can fail, each with a message that says what to do next.

All of them derive from :class:`DownloadError` (itself a :class:`~model_store.db.StoreError`), so
the command line and the GUI can catch one type and show ``str(error)`` as it is. The subclasses
exist for the cases a caller treats differently: offer "Try again" after a cancel, hide the
download buttons while offline, point at the disk settings when space runs out.
"""

from __future__ import annotations

from pathlib import Path

from model_store.db import StoreError


class DownloadError(StoreError):
    """A download failed; the message says what happened and what to do."""


class NotEnoughSpace(DownloadError):
    """The cache's disk has too little free space for the file plus a safety margin."""

    def __init__(self, filename: str, needed_bytes: int, free_bytes: int, folder: Path):
        self.needed_bytes = needed_bytes
        self.free_bytes = free_bytes
        self.folder = folder
        super().__init__(
            f"not enough disk space to download {filename}: it needs {format_bytes(needed_bytes)}"
            f" free in {folder} and only {format_bytes(free_bytes)} is available;"
            " free some space or move the Hugging Face cache (HF_HOME) to a larger disk"
        )


class ChecksumMismatch(DownloadError):
    """The downloaded bytes do not hash to the checksum the hub published; the file was deleted."""

    def __init__(self, filename: str, expected: str, actual: str):
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"{filename} is damaged: its checksum is {actual} but the hub says {expected};"
            " the file was deleted, download it again"
        )


class HubOffline(DownloadError):
    """Hugging Face cannot be reached: offline mode, no network, or no answer in time."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(
            f"cannot reach Hugging Face ({reason}): downloads need an internet connection;"
            " installed models still work"
        )


class UnsafeFilename(DownloadError):
    """A file or folder name would land outside the cache folder, so it is refused."""

    def __init__(self, name: str, why: str):
        self.name = name
        super().__init__(
            f"refusing the file name {name!r}: {why}, so it could be written outside the model cache"
        )


class DownloadCancelled(DownloadError):
    """The download was stopped on request; the bytes fetched so far are kept for a resume."""

    def __init__(self, filename: str, kept_bytes: int, total_bytes: int):
        self.kept_bytes = kept_bytes
        self.total_bytes = total_bytes
        super().__init__(
            f"download of {filename} cancelled at {format_bytes(kept_bytes)} of"
            f" {format_bytes(total_bytes)}; the part already fetched is kept and the next download"
            " resumes from there"
        )


def format_bytes(n: int) -> str:
    """Return ``n`` bytes in binary units for messages, e.g. ``"1.5 GiB"``."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, exponent = float(n), 0
    while abs(value) >= 1024 and exponent < len(units) - 1:
        value /= 1024
        exponent += 1
    return f"{n} B" if exponent == 0 else f"{value:.1f} {units[exponent]}"
