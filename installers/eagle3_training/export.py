"""The two ends of the built-in model's head training that need gguf: the target's token embeddings
in, the trained head's GGUF out.

- ``export.py embeddings DATA``: ``DATA/embeddings.npy``, the built-in model's ``token_embd``
  (dequantized from the copy it runs as), which the head reads its tokens through and starts its
  output matrix from.
- ``export.py gguf WEIGHTS.npz OUT.gguf``: the head ``train.py`` saved, as an ``eagle3`` GGUF with the
  target's tokenizer (copied byte for byte) and ``d2t``, its draft vocabulary's target ids. Matrices
  are stored as F16, norms as F32.

Run with the project's environment (``.venv/bin/python``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gguf
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.models.model_files import resolve_model_ref  # noqa: E402
from tests.fixtures.eagle3_head import Eagle3ForTarget, eagle3_hparams, read_target  # noqa: E402
from tests.fixtures.gguf_files import write_gguf  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collect import LAYERS  # noqa: E402

# train.py's parameter names -> llama.cpp's tensor names
NAMES = {
    "fc.weight": "fc.weight",
    "attn_norm": "blk.0.attn_norm.weight",
    "attn_norm_2": "blk.0.attn_norm_2.weight",
    "q.weight": "blk.0.attn_q.weight",
    "k.weight": "blk.0.attn_k.weight",
    "v.weight": "blk.0.attn_v.weight",
    "o.weight": "blk.0.attn_output.weight",
    "ffn_norm": "blk.0.ffn_norm.weight",
    "gate.weight": "blk.0.ffn_gate.weight",
    "up.weight": "blk.0.ffn_up.weight",
    "down.weight": "blk.0.ffn_down.weight",
    "output_norm": "output_norm.weight",
    "output": "output.weight",
}


def target_path() -> Path:
    return resolve_model_ref("default")


def embeddings(data: Path) -> None:
    reader = gguf.GGUFReader(str(target_path()))
    tensor = next(t for t in reader.tensors if t.name == "token_embd.weight")
    table = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
    np.save(data / "embeddings.npy", table)
    print(f"embeddings {table.shape} from {target_path().name}")


def to_gguf(weights: Path, out: Path) -> None:
    trained = np.load(weights)
    target = read_target(target_path())
    config = Eagle3ForTarget("built-in").config(target)
    assert config.target_layers == LAYERS, (config.target_layers, LAYERS)
    tensors = {}
    for name, gguf_name in NAMES.items():
        array = trained[name]
        tensors[gguf_name] = array.astype(np.float16 if array.ndim == 2 else np.float32)
    tensors["d2t"] = trained["d2t"].astype(np.int64)
    write_gguf(out, "eagle3", eagle3_hparams(config), tensors, target, "SmolLM2-135M-Instruct EAGLE-3 head", "")
    print(f"{out}: {out.stat().st_size / 1e6:.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("embeddings").add_argument("data", type=Path)
    g = sub.add_parser("gguf")
    g.add_argument("weights", type=Path)
    g.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.what == "embeddings":
        embeddings(args.data)
    else:
        to_gguf(args.weights, args.out)


if __name__ == "__main__":
    main()
