"""EAGLE-3 heads and the models they fit, told from GGUF metadata alone.

An EAGLE-3 head (GGUF architecture ``eagle3``) is no model of its own: it drafts for one target by
reading three of that target's layers and borrowing its embeddings. So a head fits a model when

* the model's hidden size is the head's ``eagle3.target_hidden_size`` and the head's own
  (``eagle3.embedding_length``), since it borrows the model's embeddings and output; and
* every layer id in ``eagle3.target_layers`` is one the model has: ids below its layer count are
  layer inputs, an id equal to it is the trunk's output (llama.cpp's convention).

That is the rule the engine applies when it loads a head (``engine.backends.llama_eagle3.check_head``,
which also compares vocabularies); here it is applied without llama.cpp, to files on disk, so the
app can say which installed models a head fits and hand the right head to ``--draft auto``. A
model's layer count is llama.cpp's: ``block_count`` less the MTP ("nextn") layers a Qwen3.5 GGUF
counts among its blocks (hybrid-tiny: 5 blocks, 4 layers).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from model_store.gguf_meta import GgufUnreadable, Value, read_metadata
from model_store.regular_file import NotRegularFile

HEAD_ARCHITECTURE = "eagle3"
HEAD_TENSOR = "fc.weight"  # the fusion matrix every EAGLE-3 head has (3 * target hidden size -> its own)
N_TARGET_LAYERS = 3


class HeadUnusable(ValueError):
    """The file says it is an EAGLE-3 head but does not say which target it reads; the message says why."""


@dataclass(frozen=True)
class ModelShape:
    """What a head must match in a model: its hidden size and its layer count (llama.cpp's n_layer)."""

    n_embd: int
    n_layer: int


@dataclass(frozen=True)
class HeadTarget:
    """The model an EAGLE-3 head was made for, as far as its metadata tells."""

    hidden_size: int
    layers: tuple[int, ...]

    def fits(self, shape: ModelShape | None) -> bool:
        return (shape is not None and bool(self.layers) and shape.n_embd == self.hidden_size
                and max(self.layers) <= shape.n_layer)

    def words(self) -> str:
        """``"a model of hidden size 576 with at least 27 layers"`` (an id equal to the layer count reads the
        output, so the highest id is the fewest layers a fitting model has)."""
        return f"a model of hidden size {self.hidden_size} with at least {max(self.layers, default=0)} layers"


def head_target(meta: dict[str, Value]) -> HeadTarget:
    """The target an ``eagle3`` file's metadata declares.

    Raises:
        HeadUnusable: If the hidden size or the three layer ids are missing or impossible, or the head's
            own hidden size is not its target's (it could then borrow no model's embeddings).
    """
    size = meta.get(f"{HEAD_ARCHITECTURE}.target_hidden_size")
    layers = meta.get(f"{HEAD_ARCHITECTURE}.target_layers")
    own = meta.get(f"{HEAD_ARCHITECTURE}.embedding_length")
    if not _count(size):
        raise HeadUnusable("it does not say the hidden size of the model it drafts for "
                           "(eagle3.target_hidden_size); convert the head again with llama.cpp's converter")
    if (not isinstance(layers, list) or len(layers) != N_TARGET_LAYERS
            or not all(_count(i) or i == 0 for i in layers)):
        raise HeadUnusable(f"it does not say which {N_TARGET_LAYERS} layers of its model it reads "
                           "(eagle3.target_layers); convert the head again with llama.cpp's converter")
    if own != size:
        raise HeadUnusable(f"its own hidden size ({own}) is not that of the model it drafts for ({size}), so it "
                           "cannot borrow that model's embeddings as Hearth runs heads")
    return HeadTarget(int(size), tuple(int(i) for i in layers))


def model_shape(meta: dict[str, Value]) -> ModelShape | None:
    """A model's hidden size and layer count from its metadata (None when it does not say, or is a head)."""
    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or arch == HEAD_ARCHITECTURE:
        return None
    n_embd, blocks = meta.get(f"{arch}.embedding_length"), meta.get(f"{arch}.block_count")
    nextn = meta.get(f"{arch}.nextn_predict_layers", 0)
    if not _count(n_embd) or not _count(blocks) or not (_count(nextn) or nextn == 0) or nextn >= blocks:
        return None
    return ModelShape(int(n_embd), int(blocks - nextn))


def read_shape(path: Path) -> ModelShape | None:
    """:func:`model_shape` of a file; None when it cannot be read (a vanished or damaged model fits no head)."""
    try:
        return model_shape(read_metadata(path))
    except (GgufUnreadable, NotRegularFile, OSError):
        return None


def _count(value: Value | None) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
