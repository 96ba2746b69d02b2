"""Downloading model files from Hugging Face: resumable, verified, into the shared HF cache.

One call, :func:`download_file`, runs these steps in order, each of which can stop it early:

1. **Names** (:func:`check_filename`, repository id): refused before any request if they could
   write outside the cache.
2. **Metadata** (:func:`remote_file_info`): size, sha256 and commit from the hub. Offline mode,
   no network or no answer within ``timeout`` raise :class:`HubOffline` here, quickly.
3. **Lock**: huggingface_hub's own lock for the blob, so Hearth and another tool (or a second
   Hearth window) never write the same partial file; a held lock is an error, not a wait.
4. **Already there?** A verified blob or snapshot file is reused: nothing is transferred.
5. **Disk space**: the bytes still missing plus ``margin_bytes`` must be free, else
   :class:`NotEnoughSpace` before any transfer.
6. **Transfer** (:func:`model_store.hub_transfer.fetch`): appends to ``blobs/<etag>.incomplete``
   from where an earlier attempt stopped, reporting progress and honouring ``cancel``.
7. **Verify**: the file's sha256 (read in 8 MiB blocks) must equal the hub's LFS sha256 and the
   catalogue's ``expected_sha256``; small git files are checked against their git blob sha1. A
   mismatch deletes the file and raises :class:`ChecksumMismatch`.
8. **Publish** (:mod:`model_store.hub_cache`): the partial file becomes the blob, the snapshot
   link and the branch ref are written, exactly as huggingface_hub lays out its cache.

Everything a caller needs is importable from here; the work is split across
:mod:`~model_store.download_errors`, :mod:`~model_store.hub_cache` (the cache layout),
:mod:`~model_store.hub_transfer` (metadata and transfer with huggingface_hub) and
:mod:`~model_store.download_progress` (progress and cancel during a transfer).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import Timeout as LockTimeout
from huggingface_hub.utils import WeakFileLock

from model_store.download_errors import (
    ChecksumMismatch,
    DownloadCancelled,
    DownloadError,
    HubOffline,
    NotEnoughSpace,
    UnsafeFilename,
)
from model_store.file_hashes import READ_BYTES, hash_file
from model_store.hub_cache import RepoCache, cache_root, cached_file, check_filename, delete_cached_file
from model_store.hub_cache import publish, write_ref
from model_store.download_progress import DownloadProgress
from model_store.hub_transfer import RemoteFile, fetch, remote_file_info

__all__ = [
    "ChecksumMismatch",
    "DownloadCancelled",
    "DownloadError",
    "DownloadProgress",
    "DownloadResult",
    "HubOffline",
    "NotEnoughSpace",
    "RemoteFile",
    "UnsafeFilename",
    "cached_file",
    "check_filename",
    "delete_cached_file",
    "download_file",
    "remote_file_info",
]

DEFAULT_MARGIN_BYTES = 256 << 20
LOCK_WAIT_S = 1.0
GIT_SHA1_HEX = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class DownloadResult:
    """A verified file in the cache."""

    path: Path  # the file in the HF cache snapshot folder
    sha256: str
    size_bytes: int
    commit: str
    transferred_bytes: int  # fetched by this call; less than size_bytes when it resumed


def download_file(
    repo_id: str,
    filename: str,
    *,
    revision: str = "main",
    cache_dir: str | Path | None = None,
    endpoint: str | None = None,
    on_progress: Callable[[DownloadProgress], None] | None = None,
    cancel: threading.Event | None = None,
    margin_bytes: int = DEFAULT_MARGIN_BYTES,
    free_space: Callable[[Path], int] | None = None,
    expected_sha256: str | None = None,
    token: str | bool | None = None,
    timeout: float = 10.0,
) -> DownloadResult:
    """Download one repository file into the Hugging Face cache, resuming and verifying it.

    Args:
        repo_id: The repository, e.g. ``"org/name-GGUF"``.
        filename: The file inside the repository.
        revision: A branch, tag or commit.
        cache_dir: The Hugging Face cache folder; huggingface_hub's default (``HF_HUB_CACHE``,
            ``HF_HOME``) when None.
        endpoint: The hub address; ``HF_ENDPOINT`` or huggingface.co when None.
        on_progress: Called with :class:`DownloadProgress` at most 10 times a second (and at the
            start and end), on the calling thread.
        cancel: Set it from another thread to stop promptly; the partial file is kept.
        margin_bytes: Free space to leave on the disk beyond the file.
        free_space: Returns the free bytes for a folder (for tests); ``shutil.disk_usage`` when None.
        expected_sha256: The catalogue's sha256, checked as well as the hub's.
        token: A hub token; None uses the one saved by ``hf auth login``, if any.
        timeout: Seconds to wait for the hub's metadata answer.

    Returns:
        The verified file.

    Raises:
        UnsafeFilename, HubOffline, NotEnoughSpace, DownloadCancelled, ChecksumMismatch: see the
            classes; DownloadError for anything else (missing repository or file, lost
            connection, hub errors). Every message says what to do next.
    """
    check_filename(filename)
    cache = RepoCache.open(repo_id, cache_dir)
    remote = remote_file_info(
        repo_id, filename, revision=revision, endpoint=endpoint, token=token, timeout=timeout
    )
    wanted = _wanted_sha256(remote, expected_sha256, filename)
    pointer = cache.pointer(remote.commit, filename)
    with _blob_lock(cache, remote.etag, filename):
        existing = _existing_copy(cache, remote, pointer)
        transferred = 0
        if existing is None:
            missing = remote.size_bytes - _kept_bytes(cache.partial(remote.etag), remote.size_bytes)
            _check_space(cache_root(cache_dir), filename, missing, margin_bytes, free_space)
            transferred = fetch(
                remote, cache.partial(remote.etag), filename=filename, endpoint=endpoint,
                token=token, on_progress=on_progress, cancel=cancel,
            )  # fmt: skip
        digest = _verify(existing or cache.partial(remote.etag), remote, wanted, filename, pointer)
        if existing == pointer:  # a plain copy in the snapshot (a cache without symlinks)
            write_ref(cache, revision, remote.commit)
        else:
            publish(cache, remote.etag, remote.commit, filename, revision)
    if existing is not None and on_progress is not None:
        on_progress(DownloadProgress(filename, remote.size_bytes, remote.size_bytes, 0.0, 0.0))
    return DownloadResult(pointer, digest, remote.size_bytes, remote.commit, transferred)


def _wanted_sha256(remote: RemoteFile, expected: str | None, filename: str) -> str | None:
    """The sha256 the file must have; refuses a hub file that differs from the catalogue's."""
    expected = expected.lower() if expected else None
    if expected and remote.sha256 and expected != remote.sha256:
        raise DownloadError(
            f"the hub's {filename} (sha256 {remote.sha256}) is not the file the catalogue names"
            f" (sha256 {expected}); nothing was downloaded. Update the catalogue, or pick the"
            " revision the catalogue was written for"
        )
    return expected or remote.sha256


@contextmanager
def _blob_lock(cache: RepoCache, etag: str, filename: str) -> Iterator[None]:
    path = cache.lock(etag)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with WeakFileLock(path, timeout=LOCK_WAIT_S):
            yield
    except LockTimeout:
        raise DownloadError(
            f"{filename} is already being downloaded by another window or program;"
            " wait for it to finish, then try again"
        ) from None


def _existing_copy(cache: RepoCache, remote: RemoteFile, pointer: Path) -> Path | None:
    """A complete copy already in the cache: the blob, or a plain file in the snapshot."""
    if pointer.is_file() and not pointer.is_symlink():
        return pointer
    blob = cache.blob(remote.etag)
    return blob if blob.is_file() else None


def _kept_bytes(partial: Path, size: int) -> int:
    """Bytes of an earlier attempt to resume from; a partial file longer than the file is dropped."""
    kept = partial.stat().st_size if partial.exists() else 0
    if kept > size:
        partial.unlink()
        return 0
    return kept


def _check_space(
    folder: Path, filename: str, missing: int, margin: int, free_space: Callable[[Path], int] | None
) -> None:
    probe = next((p for p in (folder, *folder.parents) if p.exists()), Path("/"))
    free = (free_space or _disk_free)(probe)
    if free < missing + margin:
        raise NotEnoughSpace(filename, missing + margin, free, folder)


def _disk_free(folder: Path) -> int:
    return shutil.disk_usage(folder).free


def _verify(path: Path, remote: RemoteFile, wanted: str | None, filename: str, pointer: Path) -> str:
    """Return the file's sha256 if it matches the published checksum; else delete it and raise."""
    digest = hash_file(path)
    if wanted is not None:
        expected, actual = wanted, digest
    elif GIT_SHA1_HEX.fullmatch(remote.etag):  # a small file kept in git, not LFS
        expected, actual = remote.etag, _git_blob_sha1(path)
    else:
        _discard(path, pointer)
        raise DownloadError(
            f"the hub published no checksum for {filename}, so it cannot be verified; the file"
            " was deleted. Add its sha256 to the catalogue to download it"
        )
    if actual != expected:
        _discard(path, pointer)
        raise ChecksumMismatch(filename, expected, actual)
    return digest


def _git_blob_sha1(path: Path) -> str:
    """The git object id of a file (the ETag the hub gives files stored in git, not LFS)."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as f:
        while block := f.read(READ_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _discard(path: Path, pointer: Path) -> None:
    """Delete a bad file, and the snapshot link that would point at it."""
    path.unlink(missing_ok=True)
    if pointer.is_symlink():
        pointer.unlink()
