"""Model-side files are bounded (issue 50, point 3).

llama.cpp maps a GGUF file whole and reads every page of it into memory before it looks at a tensor,
so a valid EAGLE-3 head or draft model followed by a terabyte of holes (a sparse file: it costs no disk)
made the worker read for ever, 400 MiB more resident every second. Every file Hearth opens as a model
or a head goes through one check first (``model_store.gguf_meta``): its tensors' data must lie in the
file, and the file must end where that data does. A draft file must also fit in the memory left beside
the loaded model. Each refusal is one line naming the file, from the real CLI and its real worker,
within seconds and with the worker's memory bounded.
"""

from __future__ import annotations

import math
import os
import shutil
import struct
import time
from pathlib import Path

import gguf
import psutil
import pytest
from gguf.constants import GGML_QUANT_SIZES

from model_store.fit import AVAILABLE_MEMORY_ENV
from model_store.gguf_meta import TRAILING_SLACK
from tests.fixtures.hub_catalogue import MODEL_ID, write_hub_catalogue
from tests.helpers.cli import error_line, hearth, start_hearth

pytest_plugins = ["tests.store.conftest_hub"]

HOLES = 1 << 40  # a terabyte of holes after the file's data
RSS_BOUND = 2 << 30  # generous: each refusal comes before llama.cpp maps anything (the worker is ~100 MiB)
SECONDS = 90  # each ends in a few seconds; the machine is shared
TRAILING_WORDS = "goes on for 1.0 TiB more"


def with_holes(source: Path, target: Path) -> Path:
    """A copy of ``source`` followed by :data:`HOLES` bytes of holes."""
    shutil.copyfile(source, target)
    os.truncate(target, source.stat().st_size + HOLES)
    return target


def declaring(source: Path, target: Path, data_bytes: int) -> Path:
    """A copy of ``source`` whose last tensor's last dimension is grown so its tensors' data is about
    ``data_bytes``; the file is extended (with holes) to hold exactly that: sound in extent, but big."""
    last = max(gguf.GGUFReader(source).tensors, key=lambda t: t.data_offset)
    per_block, block_bytes = GGML_QUANT_SIZES[last.tensor_type]
    dims = [int(d) for d in last.field.parts[3]]
    unit = math.prod(dims[:-1]) * block_bytes // per_block  # the bytes of one step of the last dimension
    grown = -(-(data_bytes - last.data_offset) // unit)
    name_bytes = len(last.name.encode())
    dims_at = last.field.offset + 8 + name_bytes + 4  # after the name's length, the name and n_dims
    data = bytearray(source.read_bytes())
    struct.pack_into("<Q", data, dims_at + 8 * (len(dims) - 1), grown)
    target.write_bytes(bytes(data))
    os.truncate(target, last.data_offset + grown * unit)
    return target


def watched(*args: str, **env: str) -> tuple[int, str, int, float]:
    """Run the real CLI, watching the resident memory of it and its worker: (exit code, stderr, the
    largest resident bytes of any of its processes, seconds). A run past :data:`RSS_BOUND` or
    :data:`SECONDS` is killed (the command and the processes it started, by their ids)."""
    process, started, peak = start_hearth(*args, **env), time.monotonic(), 0
    tree = psutil.Process(process.pid)
    while process.poll() is None:
        try:
            family = [tree, *tree.children(recursive=True)]
            peak = max([peak, *(p.memory_info().rss for p in family)])
        except psutil.Error:
            family = [tree]
        if peak > RSS_BOUND or time.monotonic() - started > SECONDS:
            for p in reversed(family):
                try:
                    p.kill()
                except psutil.Error:
                    pass
            break
        time.sleep(0.05)
    _out, err = process.communicate()
    return process.returncode, err, peak, time.monotonic() - started


def refused_within_bounds(*args: str, **env: str) -> str:
    code, err, peak, seconds = watched(*args, **env)
    assert peak < RSS_BOUND, f"{peak / 2**30:.1f} GiB resident after {seconds:.0f} s: {err}"
    assert seconds < SECONDS, f"still running after {seconds:.0f} s: {err}"
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (code, err)
    return err.strip()


def generate(model: Path | str, *extra: str) -> tuple[str, ...]:
    return ("generate", "--model", str(model), *extra, "--temperature", "0", "--max-tokens", "4", "hi")


# --- a valid file followed by a terabyte of holes ---------------------------------------------------

def test_an_eagle3_head_followed_by_holes_is_refused_at_once(tmp_path, hybrid_tiny, eagle3_tiny):
    head = with_holes(eagle3_tiny, tmp_path / "holes-head.gguf")
    line = refused_within_bounds(*generate(hybrid_tiny, "--draft", f"eagle3:{head}"))
    assert line.startswith(f"hearth: error: Cannot load draft file {head}: "), line
    assert TRAILING_WORDS in line and "damaged" in line and "choose another file" in line, line


def test_a_draft_model_followed_by_holes_is_refused_at_once(tmp_path, hybrid_tiny, test_models):
    draft = with_holes(test_models["hybrid-draft"], tmp_path / "holes-draft.gguf")
    line = refused_within_bounds(*generate(hybrid_tiny, "--draft", f"model:{draft}"))
    assert line.startswith(f"hearth: error: Cannot load draft file {draft}: "), line
    assert TRAILING_WORDS in line and "choose another file" in line, line


def test_a_model_followed_by_holes_is_refused_as_damaged_not_as_too_big(tmp_path, hybrid_tiny):
    model = with_holes(hybrid_tiny, tmp_path / "holes-model.gguf")
    line = refused_within_bounds(*generate(model))
    assert line.startswith(f"hearth: error: Cannot load model {model}: "), line
    assert TRAILING_WORDS in line and "of memory" not in line, line


def test_the_drafting_model_still_answers_after_a_refused_head(tmp_path, hybrid_tiny, eagle3_tiny):
    """A refused head leaves a sound one usable: the check refuses what is wrong, not every head."""
    result = hearth(*generate(hybrid_tiny, "--draft", f"eagle3:{eagle3_tiny}"))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("fixture", ["eagle3_tiny", "hybrid_tiny"])
def test_importing_a_file_followed_by_holes_is_refused(request, tmp_path, fixture):
    bad = with_holes(request.getfixturevalue(fixture), tmp_path / f"holes-{fixture}.gguf")
    line = error_line(hearth("models", "import", str(bad), timeout=SECONDS))
    assert f"cannot import {bad}: " in line and TRAILING_WORDS in line, line
    listing = hearth("models", "list", "--json")
    assert listing.returncode == 0 and str(bad) not in listing.stdout


def test_a_downloaded_model_with_bytes_past_its_data_is_refused_when_it_loads(hub, tmp_path, tiny_gguf_bytes):
    """A catalogue download is verified by its checksum, then opened as any model is: through the same check."""
    padded = tiny_gguf_bytes + bytes(2 * TRAILING_SLACK)  # matches the catalogue's sha256: only the check can tell
    env = {"HF_HOME": str(tmp_path / "hf-home"), "HF_ENDPOINT": hub.url,
           "HEARTH_CATALOGUE": str(write_hub_catalogue(hub, tmp_path, {"Q8_0": padded}))}
    pulled = hearth("models", "pull", f"{MODEL_ID}:Q8_0", timeout=SECONDS, **env)
    assert pulled.returncode == 0, pulled.stderr
    line = refused_within_bounds(*generate(MODEL_ID), **env)
    assert "goes on for 2.0 MiB more" in line and "get the file again" in line, line


# --- the memory check covers draft files ---------------------------------------------------------

def test_a_draft_model_too_big_for_the_memory_left_is_refused_with_the_numbers(tmp_path, hybrid_tiny, test_models):
    draft = declaring(test_models["hybrid-draft"], tmp_path / "big-draft.gguf", 8 << 30)
    line = refused_within_bounds(*generate(hybrid_tiny, "--draft", f"model:{draft}"),
                                 **{AVAILABLE_MEMORY_ENV: str(4 << 30)})
    assert line.startswith(f"hearth: error: Cannot load draft file {draft}: this draft needs about 8.0 GiB"), line
    assert "is available beside the loaded model" in line and "another drafting choice" in line, line
