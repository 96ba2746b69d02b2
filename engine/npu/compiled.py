"""The compiled prefill graph, cached on disk as a QNN EP-context model.

Compiling the graph for the HTP costs seconds (0.5–1.7 s for the tiny test model on the emulator,
far more for a real model, since graph preparation runs on the host CPU); loading the compiled
form written with ``ep.context_enable=1`` takes milliseconds (``qnn-htp.md`` §0.8). So the first
load of a model compiles and writes ``prefill.onnx`` (a two-kilobyte EPContext model) and the QNN
binary beside it (``embed_mode`` 0: the binary stays a separate file, which loads faster than one
embedded in the ONNX); every later load reads them.

A compiled graph is only valid for the exact graph and the exact compiler, so the cache key
(:class:`GraphKey`) holds everything the binary depends on: the model file's SHA-256, the chunk
length and KV positions (static shapes), the SoC, the onnxruntime/onnxruntime-qnn versions and a
digest of the exporter's own source (a changed exporter builds a different graph from the same
file). A folder per key is written under a temporary name and renamed into place, so a crash
mid-compile or two workers compiling at once never leave a half-written entry; an entry that
fails to load is removed and compiled again.

The cache is private like the rest of Hearth's data (:mod:`model_store.private_files`): folders
0700, files 0600 (what QNN writes is tightened before the entry is renamed into place, and an
older Hearth's looser entries when they are used). A cache folder that is a symlink is not used
(the graph is compiled in memory), and an entry that is, or holds, a symlink is removed, never read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.backends import qnn
from model_store.private_files import make_private_folder, repair, repair_folder, write_private

log = logging.getLogger(__name__)

CONTEXT_FILE = "prefill.onnx"  # QNN writes the binary beside it as prefill_qnn.bin
KEY_FILE = "key.json"
# The modules whose code decides the graph's contents; editing any of them invalidates the cache.
EXPORTER_MODULES = ("graph_shape.py", "gguf_weights.py", "onnx_ops.py", "gdn_chunk.py", "deltanet_layer.py",
                    "attention_layer.py", "qwen35_graph.py")


def exporter_digest() -> str:
    digest = hashlib.blake2b(digest_size=8)
    for name in EXPORTER_MODULES:
        digest.update((Path(__file__).with_name(name)).read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class GraphKey:
    """What a compiled prefill graph depends on."""

    model_sha256: str
    chunk: int
    max_ctx: int
    soc_model: str  # "" on a real NPU: QNN reads the SoC from the device
    runtime: str  # "onnxruntime X / onnxruntime-qnn Y"
    exporter: str  # :func:`exporter_digest`

    def folder_name(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return f"qwen35-c{self.chunk}-{hashlib.blake2b(text.encode(), digest_size=12).hexdigest()}"


def current_key(model_sha256: str, chunk: int, max_ctx: int) -> GraphKey:
    """The key of this process's HTP for a model file (registers the QNN provider)."""
    versions = qnn.runtime_versions()
    runtime = " / ".join(f"{name} {version}" for name, version in versions.items())
    return GraphKey(model_sha256, chunk, max_ctx, qnn.htp_soc_model(), runtime, exporter_digest())


@dataclass
class CompiledGraph:
    session: object  # an onnxruntime InferenceSession on the HTP (only engine.backends.qnn knows the type)
    cached: bool  # loaded from the cache rather than compiled
    seconds: float  # to export + compile, or to load the cached binary
    folder: Path | None  # the cache entry; None when there is no cache folder

    def run(self, feeds: dict) -> dict:
        return qnn.run(self.session, feeds)


def prepare(key: GraphKey | None, cache_root: Path | None, export: Callable[[], bytes]) -> CompiledGraph:
    """The graph for ``key``: loaded from ``cache_root`` if compiled before, else exported and compiled
    (and written there). Without a cache (``key`` or ``cache_root`` None) it is compiled in memory.
    Raises :class:`~engine.backends.qnn.QnnUnavailable` when the HTP refuses the graph."""
    started = time.perf_counter()
    if key is None or cache_root is None or not _private_root(cache_root):
        return CompiledGraph(qnn.htp_session(export()), False, time.perf_counter() - started, None)
    folder = cache_root / key.folder_name()
    session = _load(folder, key)
    if session is not None:
        return CompiledGraph(session, True, time.perf_counter() - started, folder)
    session = _compile_into(folder, key, export())
    return CompiledGraph(session, False, time.perf_counter() - started, folder)


def _private_root(cache_root: Path) -> bool:
    """Whether ``cache_root`` can hold the cache: made (0700) if missing, tightened if looser; a
    symlink, or a folder that cannot be made (a read-only data folder), is not used."""
    try:
        make_private_folder(cache_root)
    except OSError:
        return False
    if cache_root.is_symlink():
        log.warning("hearth: %s is a symlink, so the NPU graph is not cached there (compiled at each load); "
                    "remove the link to cache it", cache_root)
        return False
    repair([cache_root])
    return True


def _load(folder: Path, key: GraphKey):
    """The cached session, or None (absent, another key, a symlink, or unloadable: then the entry is
    removed)."""
    try:
        if folder.is_symlink() or any(entry.is_symlink() for entry in os.scandir(folder)):
            raise ValueError("the entry is or holds a symlink")
        if json.loads((folder / KEY_FILE).read_text()) != asdict(key):
            raise ValueError("the entry was written for another key")
        session = qnn.htp_session(str(folder / CONTEXT_FILE))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, qnn.QnnUnavailable):
        _remove(folder)
        return None
    repair_folder(folder)  # an entry an older Hearth wrote 0755/0644
    return session


def _remove(path: Path) -> None:
    """Remove a cache entry: a symlink itself (never what it points to), or a folder."""
    if path.is_symlink():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _compile_into(folder: Path, key: GraphKey, model: bytes):
    """Compile ``model``, writing the EP context to a temporary folder renamed to ``folder`` at the end."""
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    _remove(tmp)
    try:
        os.mkdir(tmp, 0o700)
        repair([tmp])
    except OSError:  # a read-only data folder: the graph still works, it is just compiled every load
        return qnn.htp_session(model)
    try:
        session = qnn.htp_session(model, context_file=str(tmp / CONTEXT_FILE))
        write_private(tmp / KEY_FILE, json.dumps(asdict(key), indent=1))
        repair_folder(tmp)  # QNN wrote its files with the umask's mode (0644)
    except BaseException:
        _remove(tmp)
        raise
    try:
        os.replace(tmp, folder)
    except OSError:  # another worker put the same entry in place first; ours is not needed
        _remove(tmp)
    return session
