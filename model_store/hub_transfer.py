"""Talking to the Hugging Face hub: a file's metadata, and its bytes into a resumable partial file.

**Metadata** is one ``HEAD /{repo}/resolve/{revision}/{filename}`` made by huggingface_hub's
``get_hf_file_metadata``: it follows redirects that stay on the hub and stops at the redirect to
the CDN, whose headers carry the commit (``X-Repo-Commit``), the LFS sha256 (``X-Linked-Etag``),
the size (``X-Linked-Size``) and the CDN address (``Location``).

**Transfer** is huggingface_hub's ``file_download.http_get``, not ``hf_hub_download``: since 2.x
``hf_hub_download`` writes to a process-unique temporary file opened with ``"wb"`` and deletes it
on failure, so an interrupted download always starts again from zero (huggingface_hub issue
#4196). ``http_get`` still resumes: given ``resume_size`` it sends ``Range: bytes=N-``, starts
over if the server answers 200 instead of 206, and after a dropped connection retries by itself
(up to 5 times, 1 s apart) from the bytes received. We hand it a
:class:`~model_store.download_progress.PartialFile` that appends to ``blobs/<etag>.incomplete``,
reports progress and honours the cancel event after each chunk is on disk, so the partial file
always holds a clean prefix of the file, which the next call resumes from (after a restart too).

Caveats of huggingface_hub 2.4 handled here:

* ``http_get`` reads the body in ``constants.DOWNLOAD_CHUNK_SIZE`` pieces (10 MiB): progress and
  cancel act once per piece, and the unfinished piece is lost when the connection drops. We lower
  it to 256 KiB for the process (harmless to other callers), so a cancel takes effect within a
  quarter of a second at 1 MB/s.
* Xet: hub GGUF files are Xet-backed and ``hf_hub_download`` would fetch them with ``hf_xet``,
  which recovers only from its own chunk cache, never from a partial file. We always GET the
  plain HTTP location (the CDN bridge serves it with Range support) and ignore the Xet headers.
* ``HF_HUB_OFFLINE`` is read by huggingface_hub once, at import; :func:`offline_mode` also reads
  the environment at call time. No network (refused, DNS failure, timeout) is :class:`HubOffline`.
  Metadata waits ``timeout`` seconds; a stalled transfer ``HF_HUB_DOWNLOAD_TIMEOUT`` (10 s).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx2
from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.file_download import http_get
from huggingface_hub.utils import OfflineModeIsEnabled, build_hf_headers

from model_store.download_errors import DownloadError, HubOffline, format_bytes
from model_store.download_progress import DownloadProgress, NoBar, PartialFile
from model_store.hub_cache import check_component, check_filename, check_repo_id

CHUNK_BYTES = 256 << 10
SHA256_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class RemoteFile:
    """What the hub says about one file, before any byte of it is fetched."""

    size_bytes: int
    sha256: str | None  # None for small files kept in git: their ETag is the git blob sha1
    commit: str
    etag: str
    url: str = ""  # where the bytes are (the CDN address for LFS files)


def offline_mode() -> bool:
    """Whether hub access is switched off (``HF_HUB_OFFLINE``, now or at huggingface_hub's import)."""
    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    switched_on = any(f.strip().upper() in constants.ENV_VARS_TRUE_VALUES for f in flags if f)
    return switched_on or constants.is_offline_mode()


def remote_file_info(
    repo_id: str,
    filename: str,
    *,
    revision: str = "main",
    endpoint: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
) -> RemoteFile:
    """Ask the hub for a file's size, checksum and commit (metadata only, no file bytes).

    Args:
        repo_id: The repository, e.g. ``"org/name-GGUF"``.
        filename: The file inside the repository.
        revision: A branch, tag or commit.
        endpoint: The hub address; ``HF_ENDPOINT`` or huggingface.co when None.
        token: A hub token; None uses the one saved by ``hf auth login``, if any.
        timeout: Seconds to wait for the hub's answer; None: the hub client's own metadata
            timeout (``HF_HUB_ETAG_TIMEOUT``, 10 s unless set).

    Raises:
        UnsafeFilename: Before any request, for a name that could escape the cache.
        HubOffline: Offline mode, no network or no answer within ``timeout``.
        DownloadError: The repository, revision or file does not exist, or the hub failed.
    """
    check_filename(filename)
    check_repo_id(repo_id)
    if offline_mode():
        raise HubOffline("offline mode is on: HF_HUB_OFFLINE is set")
    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint)
    try:
        meta = get_hf_file_metadata(url, token=token, timeout=timeout or constants.HF_HUB_ETAG_TIMEOUT,
                                    endpoint=endpoint)
    except Exception as error:
        raise hub_error(error, repo_id=repo_id, filename=filename, revision=revision) from error
    if meta.commit_hash is None or meta.etag is None or meta.size is None:
        raise DownloadError(
            f"{url} did not answer like a Hugging Face hub (no commit, ETag or size);"
            " check HF_ENDPOINT and any proxy settings"
        )
    etag = check_component(meta.etag, "ETag")
    return RemoteFile(
        size_bytes=meta.size,
        sha256=etag if SHA256_HEX.fullmatch(etag) else None,
        commit=check_component(meta.commit_hash, "commit"),
        etag=etag,
        url=urljoin(url, meta.location),
    )


def hub_error(error: Exception, *, repo_id: str, filename: str, revision: str) -> DownloadError:
    """Translate a huggingface_hub or network exception into a DownloadError that says what to do."""
    if isinstance(error, DownloadError):
        return error
    if isinstance(error, OfflineModeIsEnabled):
        return HubOffline("offline mode is on: HF_HUB_OFFLINE is set")
    if isinstance(error, httpx2.TimeoutException):
        return HubOffline("no answer in time")
    if isinstance(error, httpx2.TransportError):
        return HubOffline(f"no connection: {error}")
    if isinstance(error, GatedRepoError):
        return DownloadError(
            f"{repo_id} is gated: accept its terms on huggingface.co, then log in with `hf auth login`"
        )
    if isinstance(error, RepositoryNotFoundError):
        return DownloadError(f"the hub has no repository {repo_id} (or it is private: log in first)")
    if isinstance(error, RevisionNotFoundError):
        return DownloadError(f"{repo_id} has no branch, tag or commit {revision!r}")
    if isinstance(error, RemoteEntryNotFoundError):
        return DownloadError(f"{repo_id} has no file {filename} at {revision!r}")
    if isinstance(error, HfHubHTTPError):
        return DownloadError(
            f"the hub answered HTTP {error.response.status_code} for {filename}; try again later"
        )
    return DownloadError(f"could not get {filename} from {repo_id}: {error}")


def fetch(
    remote: RemoteFile,
    partial: Path,
    *,
    filename: str,
    endpoint: str | None = None,
    token: str | bool | None = None,
    on_progress: Callable[[DownloadProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> int:
    """Append the rest of ``remote`` to ``partial`` (resuming from its length).

    Args:
        remote: The file, from :func:`remote_file_info`.
        partial: ``blobs/<etag>.incomplete``; created if missing.
        filename: The name shown in progress reports and messages.
        endpoint: The hub address; the token is sent only there.
        token: A hub token; None uses the saved one.
        on_progress: Called at most 10 times a second, and once at the start and the end.
        cancel: Set it from any thread to stop after the chunk in flight.

    Returns:
        The bytes written by this call.

    Raises:
        DownloadCancelled: ``cancel`` was set; the partial file is kept.
        DownloadError: The connection or the hub failed; the partial file is kept.
    """
    constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, CHUNK_BYTES)
    partial.parent.mkdir(parents=True, exist_ok=True)
    with open(partial, "ab") as f:
        sink = PartialFile(f, filename, remote.size_bytes, on_progress, cancel)
        sink.report(force=True)  # where a resumed download starts
        sink.check_cancel()
        try:
            http_get(
                remote.url,
                sink,  # type: ignore[arg-type]  # file-like: write, tell, seek, truncate
                resume_size=sink.position,
                headers=_headers(remote.url, endpoint, token),
                expected_size=remote.size_bytes,
                displayed_filename=filename,
                tqdm_class=NoBar,  # type: ignore[arg-type]  # progress comes from PartialFile
            )
        except (httpx2.HTTPError, OSError, ValueError) as error:
            raise _transfer_error(error, filename, sink.position, remote.size_bytes) from error
        sink.report(force=True)
    return sink.transferred


def _headers(url: str, endpoint: str | None, token: str | bool | None) -> dict[str, str]:
    """The hub's headers; the token only goes to the hub, never to a CDN on another host."""
    headers = build_hf_headers(token=token)
    if urlsplit(url).netloc != urlsplit(endpoint or constants.ENDPOINT).netloc:
        headers.pop("authorization", None)
    return headers


def _transfer_error(error: Exception, filename: str, kept: int, total: int) -> DownloadError:
    if isinstance(error, OfflineModeIsEnabled):
        return HubOffline("offline mode is on: HF_HUB_OFFLINE is set")
    if isinstance(error, HfHubHTTPError):
        cause = f"the hub answered HTTP {error.response.status_code}"
    elif isinstance(error, httpx2.TransportError):
        cause = f"the connection was lost ({error})"
    elif isinstance(error, OSError) and error.errno is not None:
        cause = f"the file could not be written ({error.strerror})"
    else:
        cause = str(error)
    return DownloadError(
        f"download of {filename} stopped at {format_bytes(kept)} of {format_bytes(total)}: {cause};"
        " the part already fetched is kept, try again to resume"
    )
