"""A deterministic stand-in for llama.cpp: a model and a context that satisfy
:mod:`engine.backends.backend`, so :class:`engine.requests.core.EngineCore` runs its real paths in milliseconds.

Load it through the core's one injection point::

    opener = FakeOpener()
    core = EngineCore(emit, is_cancelled, probed=..., open_model=opener)
    core.handle(p.LoadModel(request_id="load", model=str(fake_model_file(tmp_path))))

**The vocabulary** is byte-level: the control tokens ``<|im_end|>`` (the end of a turn and of an
answer), ``<|im_start|>`` and ``<s>`` (BOS, which the model wants), then one token per byte. The
chat template is ChatML, rendered by the engine's own :mod:`engine.templates.chat_template`.

**The model** is a parrot, and its logits are a function of the tokens in the context alone, so its
greedy answer is known in advance. After a chat it answers the last message it read (the text of the
last ``<|im_start|>role\\n...<|im_end|>``) with ``You said: <that text> (message <N>)``, N the user
messages read so far, then ``<|im_end|>``; after plain text it continues :data:`STORY` from however
much of its beginning the text ends with (``"Once upon"`` → ``" a time, there was a parrot."``).
It picks up where its answer stands (the longest end of what it wrote that begins the answer), so a
cut-off answer is continued, not restarted. A state that lost or garbled tokens answers differently
(another count, another subject), and a restored state answers exactly as the uninterrupted one.

**The context** holds sequence 0's tokens as attention cells and, for a hybrid model
(``FakeOpener(hybrid=True)``), a recurrent part: a running hash of those tokens. Its state blobs
have llama.cpp's per-sequence layout (:mod:`engine.state.seq_state`), written and read by code
of its own (:mod:`tests.fakes.fake_state`); a blob that is not exactly what it would write is refused (``state_set`` returns False,
the reason kept in ``FakeContext.refused``). A recurrent part that does not match the cells (a
wrong snapshot, a torn abort) makes the model write :data:`GARBLED` bytes, as a real hybrid's wrong
state writes nonsense. ``decode`` checks positions, the batch size and the context's length as
llama.cpp does, polls ``abort`` before every micro-batch and keeps the micro-batches finished
before it (and tears a recurrent part), and counts every token it computes (``decoded``), so a test
can tell a turn that stood on a snapshot from one that read everything.

Not modelled: more than one sequence (a tree of drafts is refused at load), the drafting heads, the
NPU, a context that must be grown for want of memory (there is no memory plan).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import msgspec
import numpy as np

from engine.backends.base import ContextSettings, ModelLoadError
from engine.backends.llama_context import STATE_PARTIAL_ONLY, DecodeAborted
from engine.templates.chat_template import CHATML_TEMPLATE
from engine.templates.prompts import check_chat_template
from engine.protocol import ModelFacts
from engine.models.session import ModelSession
from tests.fakes.fake_state import (
    N_LAYER, TORN, BlobRefused, decode_partial, decode_state, encode_partial, encode_state, recurrent_of,
    recurrent_step,
)

# -- vocabulary ------------------------------------------------------------------------------------

END, START, BOS = 0, 1, 2  # <|im_end|> (end of a turn; the EOS), <|im_start|>, <s>
CONTROL = {"<|im_end|>": END, "<|im_start|>": START, "<s>": BOS}
BYTE_BASE = 3  # token BYTE_BASE + b is the byte b
N_VOCAB = BYTE_BASE + 256
_CONTROL_PATTERN = re.compile("|".join(re.escape(text) for text in sorted(CONTROL, key=len, reverse=True)))

# -- what the model writes -------------------------------------------------------------------------

STORY = "Once upon a time, there was a parrot."
GARBLED = "#"  # what a state whose recurrent part does not match its cells writes, again and again
TOP_LOGIT, RUNNER_UP_LOGIT = 12.0, 2.0  # the runner-up is far below min-p: sampling still picks the top

def reply(subject: str, user_messages: int) -> str:
    """The parrot's answer to a conversation whose last message says ``subject``."""
    return f"You said: {subject} (message {user_messages})"


def fake_model_file(folder: Path, name: str = "parrot.gguf") -> Path:
    """A model file for :class:`FakeOpener` to load (its bytes only identify it: snapshots hash them)."""
    path = folder / name
    path.write_bytes(b"fake model: " + name.encode())
    return path


# -- the model's mind: tokens in, the next token out -----------------------------------------------


@dataclass
class _Reading:
    """What the parrot makes of the tokens in its context."""

    user_messages: int = 0
    last_message: bytes | None = None  # the content of the last message closed by <|im_end|>
    open_text: bytearray = field(default_factory=bytearray)  # bytes since the last control token
    in_message: bool = False  # the open text follows <|im_start|> (a role line, then the message)

    @classmethod
    def of(cls, tokens: list[int]) -> _Reading:
        reading = cls()
        for token in tokens:
            reading._read(token)
        return reading

    def _read(self, token: int) -> None:
        if token == START:
            self.open_text, self.in_message = bytearray(), True
        elif token == END:
            if self.in_message:
                role, _, content = bytes(self.open_text).partition(b"\n")
                self.last_message = content
                self.user_messages += role == b"user"
            self.open_text, self.in_message = bytearray(), False
        elif token != BOS:
            self.open_text.append(token - BYTE_BASE)

    def target(self) -> bytes:
        if self.last_message is None:
            return STORY.encode()
        return reply(self.last_message.decode("utf-8", errors="replace"), self.user_messages).encode()

    def written(self) -> bytes:
        """What the model has written of its answer (after the role line of an open message)."""
        text = bytes(self.open_text)
        return text.partition(b"\n")[2] if self.in_message else text


def next_token(tokens: list[int]) -> int:
    """The token the parrot writes after ``tokens``: the next byte of its answer, or <|im_end|>."""
    reading = _Reading.of(tokens)
    target, written = reading.target(), reading.written()
    done = next(n for n in range(min(len(written), len(target)), -1, -1) if written.endswith(target[:n]))
    return END if done == len(target) else BYTE_BASE + target[done]


def _byte_tokens(text: str) -> list[int]:
    return [BYTE_BASE + b for b in text.encode("utf-8")]


def _with_control_tokens(text: str) -> list[int]:
    """``text`` with the control tokens' texts read as those tokens (llama.cpp's ``parse_special``)."""
    tokens, position = [], 0
    for match in _CONTROL_PATTERN.finditer(text):
        tokens += _byte_tokens(text[position:match.start()]) + [CONTROL[match.group()]]
        position = match.end()
    return tokens + _byte_tokens(text[position:])


def _logits(top: int) -> np.ndarray:
    row = np.zeros(N_VOCAB, dtype=np.float32)
    row[(top * 7 + 3) % N_VOCAB] = RUNNER_UP_LOGIT
    row[top] = TOP_LOGIT
    return row


class FakeModel:
    """The parrot's vocabulary, template and facts (:class:`engine.backends.backend.ModelBackend`)."""

    def __init__(self, path: Path, *, hybrid: bool = False) -> None:
        self.path = path
        self.hybrid = hybrid
        self.batch_exact = True
        self.weight_type = "F32"
        self.has_mtp = False
        self.closed = False

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        bos = [BOS] if add_special and self.adds_bos else []
        return bos + (_with_control_tokens(text) if parse_special else _byte_tokens(text))

    def piece(self, token: int) -> bytes:
        return bytes([token - BYTE_BASE]) if token >= BYTE_BASE else b""

    def token_text(self, token: int) -> str:
        if token < 0:
            return ""
        control = {t: text for text, t in CONTROL.items()}
        return control.get(token) or self.piece(token).decode("utf-8", errors="replace")

    def control_tokens(self) -> dict[str, int]:
        return dict(CONTROL)

    def is_eog(self, token: int) -> bool:
        return token == END

    @property
    def adds_bos(self) -> bool:
        return True

    @property
    def bos(self) -> int:
        return BOS

    @property
    def eos(self) -> int:
        return END

    def chat_template(self) -> str | None:
        return CHATML_TEMPLATE

    def grammar(self, text: str, root: str):
        """The parrot holds no answer to a grammar: a request with a constraint is a bad request."""
        raise ValueError("the fake backend cannot hold an answer to a grammar")

    def facts(self) -> ModelFacts:
        size = self.path.stat().st_size
        return ModelFacts(path=str(self.path), file_bytes=size, arch="parrot", name="Fake parrot",
                          description="deterministic fake backend (tests/fakes/fake_backend.py)", n_params=0,
                          size_bytes=size, n_ctx_train=4096, n_embd=8, n_layer=N_LAYER, n_layer_mtp=0,
                          n_vocab=N_VOCAB, is_recurrent=False, is_hybrid=self.hybrid, supports_rollback=self.hybrid,
                          has_chat_template=True, backend_version="fake 1")

    def close(self) -> None:
        self.closed = True


class FakeContext:
    """Sequence 0 of the parrot (:class:`engine.backends.backend.ContextBackend`)."""

    def __init__(self, model: FakeModel, settings: ContextSettings) -> None:
        if settings.n_seq_max != 1:
            raise ModelLoadError(model.path, "the fake backend has one sequence (no tree of drafts)")
        self.model = model
        self.settings = replace(settings, n_batch=min(settings.n_batch, settings.n_ctx),
                                n_ubatch=min(settings.n_ubatch, settings.n_batch, settings.n_ctx))
        self.n_ctx = settings.n_ctx
        self.n_rs_seq = settings.n_rs_seq if model.hybrid else 0
        self.tokens: list[int] = []  # the attention cells, in position order
        self.recurrent = recurrent_of([]) if model.hybrid else b""
        self.decoded = 0  # tokens computed by decode, over the context's life
        self.refused: list[str] = []  # why state_set refused each blob it refused
        self.closed = False
        self._outputs: dict[int, np.ndarray] = {}

    # -- decoding --------------------------------------------------------------------------------

    def decode(self, tokens: list[int] | np.ndarray, start_pos: int, *, all_logits: bool = False, seq_id: int = 0,
               abort: Callable[[], bool] | None = None, prune: bool = False, logits: bool = True,
               prompt: bool = False) -> None:
        batch = [int(t) for t in tokens]
        self._check_decode(batch, start_pos, seq_id)
        self._outputs = {}  # pruned or not, a decode's last row has its logits (llama.cpp computes output rows)
        healthy = self._healthy()
        step = self.settings.n_ubatch
        for begin in range(0, len(batch), step):
            if abort is not None and abort():
                self._tear()
                raise DecodeAborted()
            for token in batch[begin:begin + step]:
                self._append(token)
        rows = range(len(batch)) if all_logits else [len(batch) - 1] if logits or not prune else []
        for row in rows:
            top = next_token(self.tokens[:start_pos + row + 1]) if healthy else BYTE_BASE + ord(GARBLED)
            self._outputs[row] = _logits(top)
        if rows:
            self._outputs[-1] = self._outputs[len(batch) - 1]

    def _check_decode(self, batch: list[int], start_pos: int, seq_id: int) -> None:
        if self.closed:
            raise RuntimeError("the fake context is closed")
        if seq_id != 0:
            raise ValueError(f"the fake context has sequence 0 only, not {seq_id}")
        if not 0 < len(batch) <= self.settings.n_batch:
            raise ValueError(f"a batch holds 1..{self.settings.n_batch} tokens, got {len(batch)}")
        if start_pos != len(self.tokens):
            raise RuntimeError(f"decode at position {start_pos}, but the sequence holds {len(self.tokens)} tokens")
        if start_pos + len(batch) > self.n_ctx:
            raise RuntimeError(f"the context is full ({start_pos + len(batch)} of {self.n_ctx} tokens)")
        if any(not 0 <= t < N_VOCAB for t in batch):
            raise ValueError("a token is outside the vocabulary")

    def _append(self, token: int) -> None:
        self.tokens.append(token)
        if self.model.hybrid:
            self.recurrent = recurrent_step(self.recurrent, token)
        self.decoded += 1

    def _healthy(self) -> bool:
        return not self.model.hybrid or self.recurrent == recurrent_of(self.tokens)

    def _tear(self) -> None:
        if self.model.hybrid:
            self.recurrent = TORN

    def logits(self, row: int = -1) -> np.ndarray:
        if row not in self._outputs:
            raise IndexError(f"row {row} of the last decode has no logits")
        return self._outputs[row]

    # -- memory and state ------------------------------------------------------------------------

    def clear(self) -> None:
        self.tokens = []
        self.recurrent = recurrent_of([]) if self.model.hybrid else b""
        self._outputs = {}

    def seq_rm(self, seq_id: int, p0: int, p1: int = -1) -> bool:
        self._check_seq(seq_id)
        if p1 >= 0:
            raise NotImplementedError("the fake context removes only a sequence's tail")
        keep = max(p0, 0)
        if keep >= len(self.tokens):
            return True
        if self.model.hybrid and keep > 0 and len(self.tokens) - keep > self.n_rs_seq:
            return False  # llama.cpp cannot roll a recurrent state back further than its planes
        del self.tokens[keep:]
        if self.model.hybrid:
            self.recurrent = recurrent_of(self.tokens)
        return True

    def rewind(self, seq_id: int, n_tokens: int, recurrent_blob: bytes | None) -> bool:
        self._check_seq(seq_id)
        if recurrent_blob is not None and not self.state_set(recurrent_blob, seq_id, STATE_PARTIAL_ONLY):
            return False
        del self.tokens[n_tokens:]
        return True

    def state_size(self, seq_id: int = 0, flags: int = 0) -> int:
        return len(self.state_get(seq_id, flags))

    def state_get(self, seq_id: int = 0, flags: int = 0) -> bytes:
        self._check_seq(seq_id)
        if flags & STATE_PARTIAL_ONLY:
            return encode_partial(seq_id, self.recurrent)
        return encode_state(seq_id, self.tokens, self.recurrent)

    def state_set(self, blob: bytes | bytearray | np.ndarray, seq_id: int = 0, flags: int = 0) -> bool:
        self._check_seq(seq_id)
        data = np.asarray(blob, dtype=np.uint8).tobytes() if isinstance(blob, np.ndarray) else bytes(blob)
        try:
            if flags & STATE_PARTIAL_ONLY:
                self.recurrent = decode_partial(data, seq_id, len(self.recurrent))
            else:
                self.tokens, self.recurrent = decode_state(data, seq_id, len(self.recurrent), N_VOCAB)
        except BlobRefused as exc:
            self.refused.append(str(exc))
            return False
        return True

    @staticmethod
    def _check_seq(seq_id: int) -> None:
        if seq_id != 0:
            raise ValueError(f"the fake context has sequence 0 only, not {seq_id}")

    def close(self) -> None:
        self.closed = True


class FakeOpener:
    """Opens the parrot where :func:`engine.models.session.open_session` would open a GGUF (the same
    arguments): ``EngineCore(open_model=FakeOpener())``. Batches are short (``n_batch``, ``n_ubatch``)
    so that a prompt of a few dozen tokens is read in several chunks and micro-batches."""

    def __init__(self, *, hybrid: bool = False, n_batch: int = 16, n_ubatch: int = 8,
                 default_n_ctx: int = 2048) -> None:
        self.hybrid = hybrid
        self.n_batch, self.n_ubatch, self.default_n_ctx = n_batch, n_ubatch, default_n_ctx
        self.sessions: list[ModelSession] = []  # every session opened, the last one live

    def __call__(self, ref: str, *, n_ctx: int | None = None, n_threads: int | None = None,
                 on_progress: Callable[[float], None] | None = None, draft_max: int = 0, draft_width: int = 1,
                 kv_type: str = "f16", memory_percent: int = 0, available: int | None = None) -> ModelSession:
        path = Path(ref)
        if not path.is_file():
            raise ModelLoadError(path, "there is no such file")
        model = FakeModel(path, hybrid=self.hybrid)
        thinks, thinking_switch = check_chat_template(model)
        facts = msgspec.structs.replace(model.facts(), thinks=thinks, thinking_switch=thinking_switch)
        settings = ContextSettings(n_ctx=n_ctx or self.default_n_ctx, n_batch=self.n_batch, n_ubatch=self.n_ubatch,
                                   n_seq_max=draft_width + 1 if draft_width > 1 else 1,
                                   n_rs_seq=draft_max if self.hybrid else 0, n_threads=n_threads or 1, kv_type=kv_type)
        context = FakeContext(model, settings)
        if on_progress is not None:
            on_progress(1.0)
        session = ModelSession(model, context.settings, facts, context=context)
        self.sessions.append(session)
        return session

    @property
    def context(self) -> FakeContext:
        """The live session's context."""
        context = self.sessions[-1].context
        assert isinstance(context, FakeContext)
        return context

