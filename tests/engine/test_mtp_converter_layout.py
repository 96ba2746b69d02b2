"""A Qwen3.5 file carries its own MTP block in the layout llama.cpp's converter writes, and Hearth drafts
with it by default.

The converter (``vendor/llama.cpp/conversion/qwen.py``, ``_QwenMtpMixin.filter_tensors``) renames the
checkpoint's ``mtp.*`` tensors to one more decoder layer (``mtp.layers.0.*`` -> layer ``n_layer``, and
``mtp.fc`` / ``pre_fc_norm_embedding`` / ``pre_fc_norm_hidden`` / ``norm`` -> that layer's ``eh_proj`` /
``enorm`` / ``hnorm`` / ``shared_head.norm``), gguf-py's ``TensorNameMap`` maps those to GGUF names,
and ``<arch>.nextn_predict_layers`` says how many such layers there are. Both the renames and the map
are read here from the vendored sources in llama-cpp-python's sdist, so a converter that changes them
fails this test. The ``qwen35-0.8b-shape`` fixture (Qwen3.5-0.8B's shape, random weights, Q8_0 by
llama.cpp's quantizer) must hold exactly those names, and llama.cpp must load it with its MTP head.
"""

from __future__ import annotations

import ast
import importlib
import sys
import types

import gguf
import pytest

from engine.decoding.generation import Generation, GenerationSettings
from engine.templates.prompts import raw_prompt_tokens
from engine.protocol import DraftSpec
from engine.decoding.sampling import GREEDY
from engine.models.session import open_session
from engine.speculative.drafting import Drafting
from tests.fixtures.llama_sdist import member_path
from tests.helpers.real_models import REAL_SHAPES, real_model

# The MTP layer's own decoder-layer tensors in a Qwen3.5 checkpoint (a gated full-attention layer)
MTP_LAYER = ["input_layernorm", "post_attention_layernorm", "self_attn.q_proj", "self_attn.k_proj",
             "self_attn.v_proj", "self_attn.o_proj", "self_attn.q_norm", "self_attn.k_norm", "mlp.gate_proj",
             "mlp.up_proj", "mlp.down_proj"]
N_LAYER = 24  # Qwen3.5-0.8B


def converter_renames() -> dict[str, str]:
    """The ``remapper`` dict of the vendored ``_QwenMtpMixin.filter_tensors``, read from its source."""
    tree = ast.parse(member_path("vendor/llama.cpp/conversion/qwen.py").read_text())
    mixin = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "_QwenMtpMixin")
    for node in ast.walk(mixin):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "remapper" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("the vendored converter has no MTP remapper")


def vendored_name_map(n_blocks: int):
    """gguf-py's ``TensorNameMap`` for qwen35 from the sdist (not the installed gguf package)."""
    folder = member_path("vendor/llama.cpp/gguf-py/gguf/tensor_mapping.py").parent
    package = types.ModuleType("vendored_gguf")
    package.__path__ = [str(folder)]
    sys.modules["vendored_gguf"] = package
    try:
        constants = importlib.import_module("vendored_gguf.constants")
        mapping = importlib.import_module("vendored_gguf.tensor_mapping")
        return mapping.get_tensor_name_map(constants.MODEL_ARCH.QWEN35, n_blocks), constants
    finally:
        for name in [n for n in sys.modules if n == "vendored_gguf" or n.startswith("vendored_gguf.")]:
            del sys.modules[name]


def converter_mtp_names() -> set[str]:
    """The GGUF names the converter gives a Qwen3.5-0.8B checkpoint's MTP tensors."""
    renames = converter_renames()
    assert renames == {"fc": "eh_proj", "pre_fc_norm_embedding": "enorm", "pre_fc_norm_hidden": "hnorm",
                       "norm": "shared_head.norm"}, renames
    name_map, _ = vendored_name_map(N_LAYER + 1)
    hf = [f"model.layers.{N_LAYER}.{renamed}.weight" for renamed in renames.values()]
    hf += [f"model.layers.{N_LAYER}.{part}.weight" for part in MTP_LAYER]
    names = {name_map.get_name(name, try_suffixes=(".weight",)) for name in hf}
    assert None not in names, dict(zip(hf, names))
    return names


@pytest.fixture(scope="module")
def qwen35_shape():
    return real_model(REAL_SHAPES["qwen35"])


def test_the_qwen35_shape_holds_the_converters_mtp_layout(qwen35_shape):
    expected = converter_mtp_names()
    reader = gguf.GGUFReader(qwen35_shape)
    held = {t.name for t in reader.tensors if t.name.startswith(f"blk.{N_LAYER}.")}
    assert held == expected
    assert not any(t.name.startswith(f"blk.{N_LAYER + 1}.") for t in reader.tensors)
    _, constants = vendored_name_map(N_LAYER + 1)
    key = constants.Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch="qwen35")
    assert key == "qwen35.nextn_predict_layers"
    assert int(reader.fields[key].parts[-1][0]) == 1
    assert int(reader.fields["qwen35.block_count"].parts[-1][0]) == N_LAYER + 1


def test_a_qwen35_with_its_mtp_block_drafts_with_it_by_default_and_changes_no_token(qwen35_shape):
    session = open_session(str(qwen35_shape), n_ctx=512, draft_max=3)
    drafting = Drafting(session)
    try:
        assert session.model.has_mtp
        prompt = raw_prompt_tokens(session.model, "The lighthouse keeper wrote in her log that the lamp")

        def run(make=None) -> Generation:
            generation = Generation(session, prompt, GenerationSettings(GREEDY, max_tokens=12), make_source=make)
            list(generation)
            return generation

        plain = run()
        make, stats = drafting.plan(DraftSpec("auto"), 3, auto_off=False)
        assert stats.kind == "mtp"
        drafted = run(make)
        assert drafted.source.stats.kind == "mtp" and drafted.source.stats.drafted > 0
        assert drafted.token_ids == plain.token_ids
    finally:
        drafting.close()
        session.close()
