"""Hearth's data folder on a small disk of its own that can be filled to the last byte (a real full
disk: a tmpfs, mounted where the test runs as root and may mount; skipped elsewhere)."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

DISK = "8m"


@pytest.fixture
def full_disk(hearth_home):
    """Hearth's data folder on its own 8 MB disk (a tmpfs), and a function that fills it up."""
    data = hearth_home / "data"
    data.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK},mode=0700", "tmpfs", str(data)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"a small disk of its own cannot be mounted here ({mounted.stderr.strip()}); "
                    "tests/app/test_storage_limits.py covers a full file through HEARTH_TEST_DB_MAX_PAGES")

    def fill() -> int:
        with open(data / "filler", "wb") as filler:
            try:
                while True:
                    filler.write(b"\0" * 65536)
                    filler.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
        for size in (4096, 512, 1):  # the last bytes, down to a partly used block
            with open(data / f"filler-{size}", "wb", buffering=0) as filler:
                try:
                    while filler.write(b"\0" * size):
                        pass
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
        return os.statvfs(data).f_bavail

    yield fill
    subprocess.run(["umount", "-l", str(data)], check=True)
