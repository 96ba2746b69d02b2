"""The llama-cpp-python adapter: loaded models, the backend's set-up and the quantizer. Only this
module, :mod:`engine.backends.llama_context`, :mod:`engine.backends.llama_grammar` and the heads'
adapters import ``llama_cpp``.

It uses the low-level C API (the high-level ``Llama`` class cannot roll back hybrid models'
recurrent state). A :class:`LlamaModel` is a loaded GGUF plus its vocabulary; an inference context
over it is :class:`engine.backends.llama_context.LlamaContext`. Here too: the backend's one-time
set-up (this machine's CPU build, see :mod:`engine.backends.cpu_check`) and llama.cpp's quantizer.
llama.cpp's log is captured so that a load failure can say *why* (unknown architecture, truncated
tensor data, ...).
"""

from __future__ import annotations

import ctypes
import re
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

import llama_cpp

from engine.backends import cpu_check
from engine.backends.base import ModelLoadError
from engine.protocol import ModelFacts
from engine.backends.cpu_variants import CpuBackendError, load_library
from engine.backends.faults import crash_if_injected, injected_signal
from engine.backends.llama_grammar import LlamaGrammar
from engine.models.model_files import weight_type

log = logging.getLogger(__name__)

LIBRARY_ENV = "HEARTH_CPU_LIBRARY"  # benchmarks only: a CPU backend file used as it is, without a canary
BACKEND_VERSION = f"llama-cpp-python {llama_cpp.__version__}"


def build_info() -> str:
    """llama.cpp's description of how it was built (CPU features, llamafile, ...)."""
    _init_backend()
    return llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()


class _LlamaLog:
    """Keeps llama.cpp's recent log lines (for error messages) and forwards warnings to logging."""

    def __init__(self, keep: int = 200) -> None:
        self.lines: deque[str] = deque(maxlen=keep)
        self._partial = ""
        self._lock = threading.Lock()
        self._callback = llama_cpp.llama_log_callback(self._on_log)  # kept alive by self
        self.watcher: Callable[[str], None] | None = None  # also given every whole line (quantizer progress)
        llama_cpp.llama_log_set(self._callback, ctypes.c_void_p(0))

    def _on_log(self, level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        message = text.decode("utf-8", errors="replace")
        with self._lock:
            self._partial += message
            if not self._partial.endswith("\n"):
                return
            line, self._partial = self._partial.rstrip("\n"), ""
            self.lines.append(line)
            watcher = self.watcher
        if watcher is not None:
            try:
                watcher(line)
            except Exception:  # noqa: BLE001 - an exception cannot cross into C
                log.exception("a watcher of llama.cpp's log failed")
        if level == 2 and line.strip():  # GGML_LOG_LEVEL_ERROR
            log.debug("llama.cpp: %s", line)

    def mark(self) -> int:
        with self._lock:
            self.lines.append("\x00mark")
            return len(self.lines)

    def since_mark(self) -> list[str]:
        with self._lock:
            lines = list(self.lines)
        last = max((i for i, line in enumerate(lines) if line == "\x00mark"), default=-1)
        return [line for line in lines[last + 1 :] if line.strip()]


_LOG: _LlamaLog | None = None
_INIT_LOCK = threading.Lock()


def init_backend(data_dir: Path | None = None, cpu_variant: str = "") -> cpu_check.CpuChoice:
    """llama.cpp's one-time set-up: the log capture, this machine's CPU build (see
    :mod:`engine.backends.cpu_check`; ``cpu_variant`` as there), then ``llama_backend_init``.
    The worker calls it at the handshake; anything else gets the default choice at first use.
    Raises :class:`CpuBackendError` when no CPU build runs here."""
    global _LOG, _DECODE_FAULT
    with _INIT_LOCK:
        if _LOG is None:
            logbook = _LlamaLog()
            library = os.environ.get(LIBRARY_ENV)
            if library:
                cpu_check.adopt(load_library(Path(library)), f"{LIBRARY_ENV} (used as it is, no canary)")
            choice = cpu_check.ensure_cpu_backend(data_dir, cpu_variant)
            _DECODE_FAULT = injected_signal("decode", choice.variant) is not None
            llama_cpp.llama_backend_init()
            _LOG = logbook
        return cpu_check.active()


def _init_backend() -> _LlamaLog:
    init_backend()
    return _LOG


_DECODE_FAULT = False  # test-only: the first decode dies (engine.backends.faults)


def decode_fault_armed() -> bool:
    """Test-only: whether the first decode is to die (HEARTH_TEST_CPU_FAULT names "decode")."""
    return _DECODE_FAULT


_TENSOR_DONE = re.compile(r"^\[\s*(\d+)/\s*(\d+)\]")  # the quantizer's "[  12/ 272] name - ..." lines


def quantize(source: Path, target: Path, weight_type: str, metadata: dict[str, str] | None = None, *,
             requantize: bool = False, threads: int = 1, on_progress: Callable[[float], None] | None = None) -> Path:
    """``source`` converted by llama.cpp's own quantizer; ``weight_type`` as in ``LLAMA_FTYPE_MOSTLY_<type>``,
    ``metadata`` string keys set on the output (``general.name``, ...). ``requantize``: the source may
    itself be quantized (its tensors are dequantized first, as ``llama-quantize --allow-requantize``).
    ``on_progress``: the share of tensors converted, from the quantizer's log, as it goes."""
    logbook = _init_backend()
    if on_progress is not None:
        def watch(line: str) -> None:
            if (found := _TENSOR_DONE.match(line)) is not None:
                on_progress(int(found[1]) / max(1, int(found[2])))
        logbook.watcher = watch
    try:
        return _quantize(source, target, weight_type, metadata, requantize, threads)
    finally:
        logbook.watcher = None


def _quantize(source: Path, target: Path, weight_type: str, metadata: dict[str, str] | None, requantize: bool,
              threads: int) -> Path:
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{weight_type}")
    params.nthread = threads
    params.allow_requantize = requantize
    overrides = (llama_cpp.llama_model_kv_override * (len(metadata or {}) + 1))()  # zeroed end marker
    for slot, (key, value) in zip(overrides, (metadata or {}).items()):
        slot.tag = llama_cpp.LLAMA_KV_OVERRIDE_TYPE_STR
        slot.key = key.encode()
        slot.value.val_str = value.encode()
    params.kv_overrides = ctypes.cast(overrides, ctypes.POINTER(llama_cpp.llama_model_kv_override))
    status = llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params))
    if status != 0:
        raise ModelLoadError(source, f"llama.cpp could not convert it to {weight_type} (status {status})")
    return target


def _explain_load_failure(path: Path, lines: list[str]) -> str:
    text = "\n".join(lines)
    if "unknown model architecture" in text:
        arch = text.split("unknown model architecture:", 1)[1].split("\n", 1)[0].strip(" '")
        return f"its architecture {arch!r} is not supported by this version of llama.cpp"
    for hint, reason in (
        ("not within the file bounds", "the file is truncated (tensor data is missing); download it again"),
        ("failed to read", "the file is truncated or unreadable; download it again"),
        ("invalid magic", "it is not a GGUF file"),
        ("wrong number of tensors", "its tensors do not match its architecture"),
        ("missing tensor", "a tensor the architecture needs is missing"),
    ):
        if hint in text:
            return reason
    errors = [line for line in lines if "error" in line.lower() or "failed" in line.lower()]
    return (errors[-1] if errors else "llama.cpp could not load it").strip()


def _meta_string(model: llama_cpp.llama_model_p, key: str) -> str | None:
    buf = ctypes.create_string_buffer(4096)
    n = llama_cpp.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    return buf.value.decode("utf-8", errors="replace") if n >= 0 else None


class LlamaModel:
    """A loaded GGUF model (weights memory-mapped) and its vocabulary."""

    def __init__(
        self, path: Path, *, load_mtp: bool = False, on_progress: Callable[[float], None] | None = None,
        repack: bool | None = None,
    ) -> None:
        try:
            logbook = _init_backend()
        except CpuBackendError as exc:
            raise ModelLoadError(path, str(exc)) from exc
        choice = cpu_check.active()
        crash_if_injected("load", choice.variant)
        self.weight_type = weight_type(path)
        # ggml's repacked weight layouts (and AMX) only where this CPU build's canary found them
        # batch-exact for this weight type: exact drafting needs a verify batch to equal single tokens.
        default_repack, self.batch_exact = choice.kernels_for(self.weight_type)
        self.repacked = default_repack if repack is None else repack
        params = llama_cpp.llama_model_default_params()
        params.load_mtp = load_mtp
        params.use_extra_bufts = self.repacked
        if on_progress is not None:
            callback = llama_cpp.llama_progress_callback(lambda fraction, _user: on_progress(fraction) or True)
            params.progress_callback = callback  # referenced by `callback` until the load returns
        logbook.mark()
        handle = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not handle:
            raise ModelLoadError(path, _explain_load_failure(path, logbook.since_mark()))
        self.path = path
        self.handle = handle
        self.vocab = llama_cpp.llama_model_get_vocab(handle)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.n_embd = int(llama_cpp.llama_model_n_embd(handle))
        self.has_mtp = load_mtp and int(llama_cpp.llama_model_n_layer_nextn(handle)) > 0
        self._pieces: dict[int, bytes] = {}
        self._control: dict[str, int] | None = None
        self._rollback_probe: int | None = None

    def close(self) -> None:
        if self.handle:
            llama_cpp.llama_model_free(self.handle)
            self.handle = None

    # -- vocabulary ------------------------------------------------------------------------------

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buf = (llama_cpp.llama_token * capacity)()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, capacity, add_special, parse_special)
        if n < 0:
            capacity = -n
            buf = (llama_cpp.llama_token * capacity)()
            n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, capacity, add_special, parse_special)
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        """The bytes of one token as it appears in text (control tokens render as nothing)."""
        cached = self._pieces.get(token)
        if cached is None:
            buf = ctypes.create_string_buffer(64)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, False)
            cached = self._pieces[token] = buf.raw[:n]
        return cached

    def token_text(self, token: int) -> str:
        """The token's text including control tokens (e.g. ``<|im_end|>``), for templates."""
        if token < 0:
            return ""
        raw = llama_cpp.llama_vocab_get_text(self.vocab, token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    def control_tokens(self) -> dict[str, int]:
        """Text → id of the tokens only ``parse_special`` reads from text (control and unknown)."""
        if self._control is None:
            wanted = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
            found = (t for t in range(self.n_vocab) if llama_cpp.llama_vocab_get_attr(self.vocab, t) & wanted)
            self._control = {text: t for t in found if (text := self.token_text(t))}
        return self._control

    def grammar(self, text: str, root: str) -> LlamaGrammar:
        """llama.cpp's grammar ``text`` (GBNF, starting at ``root``) over this vocabulary, as a mask
        (engine.backends.llama_grammar); ConstraintRefused when llama.cpp cannot read it."""
        return LlamaGrammar(self.vocab, self.n_vocab, text, root)

    @property
    def adds_bos(self) -> bool:
        """Whether the tokenizer starts a prompt with BOS (``add_special``)."""
        return bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    @property
    def bos(self) -> int:
        return llama_cpp.llama_vocab_bos(self.vocab)

    @property
    def eos(self) -> int:
        return llama_cpp.llama_vocab_eos(self.vocab)

    @property
    def n_ctx_train(self) -> int:
        return int(llama_cpp.llama_model_n_ctx_train(self.handle))

    def chat_template(self) -> str | None:
        raw = llama_cpp.llama_model_chat_template(self.handle, None)
        return raw.decode("utf-8", errors="replace") if raw else None

    # -- facts -----------------------------------------------------------------------------------

    def supports_rollback(self) -> bool:
        """Whether this build can roll back the recurrent state (``n_rs_seq``) for this arch."""
        if self._rollback_probe is None:  # a small context asking for one plane: llama.cpp clamps it to 0 if not
            params = llama_cpp.llama_context_default_params()
            params.n_ctx, params.n_batch, params.n_ubatch, params.n_rs_seq = 64, 8, 8, 1
            params.n_threads = params.n_threads_batch = 1
            params.no_perf = True
            probe = llama_cpp.llama_init_from_model(self.handle, params)
            if not probe:
                raise ModelLoadError(self.path, "llama.cpp could not create a small context for this model")
            self._rollback_probe = int(llama_cpp.llama_n_rs_seq(probe))
            llama_cpp.llama_free(probe)
        return self._rollback_probe > 0

    def facts(self) -> ModelFacts:
        handle = self.handle
        recurrent = bool(llama_cpp.llama_model_is_recurrent(handle))
        hybrid = bool(llama_cpp.llama_model_is_hybrid(handle))
        desc = ctypes.create_string_buffer(256)
        llama_cpp.llama_model_desc(handle, desc, len(desc))
        return ModelFacts(
            path=str(self.path),
            file_bytes=self.path.stat().st_size,
            arch=_meta_string(handle, "general.architecture") or "unknown",
            name=_meta_string(handle, "general.name") or self.path.stem,
            description=desc.value.decode("utf-8", errors="replace"),
            n_params=int(llama_cpp.llama_model_n_params(handle)),
            size_bytes=int(llama_cpp.llama_model_size(handle)),
            n_ctx_train=self.n_ctx_train,
            n_embd=self.n_embd,
            n_layer=int(llama_cpp.llama_model_n_layer(handle)),
            n_layer_mtp=int(llama_cpp.llama_model_n_layer_nextn(handle)),
            n_vocab=self.n_vocab,
            is_recurrent=recurrent,
            is_hybrid=hybrid,
            supports_rollback=(recurrent or hybrid) and self.supports_rollback(),
            has_chat_template=self.chat_template() is not None,
            backend_version=BACKEND_VERSION,
        )
