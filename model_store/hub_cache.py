"""Where downloaded models live: the standard Hugging Face cache, shared with every other tool.

Layout (what ``huggingface_hub`` itself writes, so ``hf_hub_download``, ``hf cache ls`` and other
apps see Hearth's downloads and Hearth sees theirs)::

    <cache>/models--<org>--<name>/
        blobs/<etag>                    the bytes, named by the hub ETag (the sha256 for LFS files)
        blobs/<etag>.incomplete         Hearth's download in progress, kept so the next try resumes
        snapshots/<commit>/<filename>   relative symlink to ../../blobs/<etag> (a plain file where
                                        the disk has no symlinks, as huggingface_hub does)
        refs/<revision>                 the commit a branch or tag named when last resolved
    <cache>/.locks/models--<org>--<name>/<etag>.lock   the lock huggingface_hub takes for that blob

The cache folder is ``cache_dir`` when given, otherwise ``huggingface_hub.constants.HF_HUB_CACHE``
(``HF_HUB_CACHE``, else ``HF_HOME``/hub, as read when huggingface_hub was imported). Nothing here
touches the network. Every name that becomes a path (file names from the hub or the catalogue,
ETags, commits) is checked first, so a hostile hub or catalogue cannot write outside the cache.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import constants, try_to_load_from_cache
from huggingface_hub.errors import HFValidationError
from huggingface_hub.file_download import repo_folder_name
from huggingface_hub.utils import validate_repo_id

from model_store.download_errors import UnsafeFilename

SAFE_COMPONENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_filename(name: str) -> str:
    """Return ``name`` if it is a safe path inside a repository, else raise.

    Refused: empty names, absolute paths, backslashes, ``..`` or ``.`` parts, empty parts
    (``a//b``, a trailing ``/``), drive letters or other ``:`` and NUL characters.

    Raises:
        UnsafeFilename: With the reason.
    """
    if not isinstance(name, str) or not name:
        raise UnsafeFilename(str(name), "the name is empty")
    if name.startswith("/"):
        raise UnsafeFilename(name, "it is an absolute path")
    for char, what in (("\\", "a backslash"), (":", "a ':' (drive letter)"), ("\0", "a NUL byte")):
        if char in name:
            raise UnsafeFilename(name, f"it contains {what}")
    for part in name.split("/"):
        if part in (".", ".."):
            raise UnsafeFilename(name, f"it has a {part!r} path part")
        if not part:
            raise UnsafeFilename(name, "it has an empty path part")
    return name


def check_component(value: str, what: str) -> str:
    """Return ``value`` if it can be one folder or file name (an ETag, a commit), else raise."""
    if not isinstance(value, str) or not SAFE_COMPONENT.fullmatch(value):
        raise UnsafeFilename(str(value), f"the hub sent it as a {what}, which must be one plain name")
    return value


def check_repo_id(repo_id: str) -> str:
    """Return ``repo_id`` if it is a valid hub repository id (``org/name``), else raise UnsafeFilename."""
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise UnsafeFilename(str(repo_id), f"it is not a valid repository id ({error})") from None
    return repo_id


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """Return the Hugging Face cache folder: ``cache_dir`` or huggingface_hub's default."""
    return Path(cache_dir if cache_dir is not None else constants.HF_HUB_CACHE).expanduser()


@dataclass(frozen=True)
class RepoCache:
    """The paths of one model repository inside the cache (nothing is created on construction)."""

    folder: Path
    locks: Path

    @classmethod
    def open(cls, repo_id: str, cache_dir: str | Path | None = None) -> RepoCache:
        """Return the cache paths of ``repo_id``; an invalid repository id raises UnsafeFilename."""
        check_repo_id(repo_id)
        root = cache_root(cache_dir)
        name = repo_folder_name(repo_id=repo_id, repo_type="model")
        return cls(folder=root / name, locks=root / ".locks" / name)

    def blob(self, etag: str) -> Path:
        return self.folder / "blobs" / check_component(etag, "ETag")

    def partial(self, etag: str) -> Path:
        return self.blob(etag).with_name(f"{etag}.incomplete")

    def lock(self, etag: str) -> Path:
        return self.locks / f"{check_component(etag, 'ETag')}.lock"

    def pointer(self, commit: str, filename: str) -> Path:
        return self.folder / "snapshots" / check_component(commit, "commit") / check_filename(filename)

    def ref(self, revision: str) -> Path:
        return self.folder / "refs" / check_filename(revision)

    def commit_for(self, revision: str) -> str | None:
        """Return the commit ``revision`` resolved to when last downloaded, or None (offline)."""
        if re.fullmatch(r"[0-9a-f]{40}", revision):
            return revision
        try:
            return self.ref(revision).read_text().strip() or None
        except OSError:
            return None


def publish(cache: RepoCache, etag: str, commit: str, filename: str, revision: str) -> Path:
    """Make a verified ``blobs/<etag>.incomplete`` the blob, link it into the snapshot, record the ref.

    Returns:
        The snapshot path of the file.
    """
    blob = cache.blob(etag)
    partial = cache.partial(etag)
    if partial.exists():
        os.replace(partial, blob)
    pointer = link_snapshot(blob, cache.pointer(commit, filename))
    write_ref(cache, revision, commit)
    return pointer


def link_snapshot(blob: Path, pointer: Path) -> Path:
    """Point ``pointer`` at ``blob`` with a relative symlink, or move the blob there without symlinks."""
    pointer.parent.mkdir(parents=True, exist_ok=True)
    if pointer.is_symlink() or pointer.exists():
        pointer.unlink()
    try:
        os.symlink(os.path.relpath(blob, pointer.parent), pointer)
    except OSError:  # no symlinks on this disk (e.g. Windows without developer mode)
        os.replace(blob, pointer)
    return pointer


def write_ref(cache: RepoCache, revision: str, commit: str) -> None:
    """Record that ``revision`` (a branch or tag) named ``commit``; a commit needs no ref."""
    if revision == commit:
        return
    ref = cache.ref(revision)
    ref.parent.mkdir(parents=True, exist_ok=True)
    tmp = ref.with_name(f".{ref.name}.{os.getpid()}.tmp")
    tmp.write_text(commit)
    os.replace(tmp, ref)


def cached_file(
    repo_id: str, filename: str, *, revision: str = "main", cache_dir: str | Path | None = None
) -> Path | None:
    """Return the cached copy of a repository file, without any network access.

    Args:
        repo_id: The repository, e.g. ``"org/name-GGUF"``.
        filename: The file inside the repository.
        revision: A branch, tag or commit; a branch or tag resolves to the commit it named when the
            file was downloaded.
        cache_dir: The Hugging Face cache folder; huggingface_hub's default when None.

    Returns:
        The snapshot path, or None when the file is not in the cache.

    Raises:
        UnsafeFilename: If ``filename`` or ``repo_id`` could escape the cache.
    """
    check_repo_id(repo_id)
    found = try_to_load_from_cache(
        repo_id, check_filename(filename), cache_dir=str(cache_root(cache_dir)), revision=revision
    )
    return Path(found) if isinstance(found, str) and os.path.exists(found) else None


def delete_cached_file(
    repo_id: str, filename: str, *, revision: str = "main", cache_dir: str | Path | None = None
) -> int:
    """Remove a file from the cache: its snapshot link, and its blob when nothing else links to it.

    Returns:
        The bytes freed on disk (0 when the file was not cached, or its blob is still used by
        another snapshot of the repository).

    Raises:
        UnsafeFilename: If ``filename`` or ``repo_id`` could escape the cache.
    """
    check_filename(filename)
    cache = RepoCache.open(repo_id, cache_dir)
    commit = cache.commit_for(revision)
    pointer = cache.pointer(commit, filename) if commit else None
    if pointer is None or not (pointer.is_symlink() or pointer.exists()):
        return 0
    if not pointer.is_symlink():  # a plain file (cache without symlinks)
        size = pointer.stat().st_size
        pointer.unlink()
        return size
    blob = Path(os.path.realpath(pointer))
    pointer.unlink()
    _remove_empty_parents(pointer.parent, stop=cache.folder / "snapshots")
    if not blob.is_file() or _links_to(blob, cache.folder / "snapshots"):
        return 0
    size = blob.stat().st_size
    blob.unlink()
    return size


def _links_to(blob: Path, snapshots: Path) -> bool:
    """Whether any symlink under ``snapshots`` still resolves to ``blob``."""
    for folder, _dirs, files in os.walk(snapshots):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.islink(path) and Path(os.path.realpath(path)) == blob:
                return True
    return False


def _remove_empty_parents(folder: Path, *, stop: Path) -> None:
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:  # not empty
            return
        folder = folder.parent
