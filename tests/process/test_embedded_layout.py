"""Issue 51, point 3: the built-in model runs in the layout it reads prompts fastest in, made once.

A real worker with a fresh data folder and no set-up copy (``HEARTH_PREPARED_MODELS`` names an empty
folder, as on a machine that installed the app) converts the shipped Q4_1 with llama.cpp's quantizer
at its first start, saying so on the loading bar, step by step; the copy is private, byte for byte the
copy the set-up makes (the quantizer is deterministic), and answers; the next start finds it. A damaged copy is made again, and a
data folder that cannot hold one (the name taken by a file, or a symlink) loads the shipped file.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from app.engine_clients.client import new_request_id
from app.engine_clients.process_client import ProcessClient
from engine import protocol as p
from engine.models.embedded_layout import FOLDER, LAYOUT, SHARED_ENV, shared_folder
from engine.models.model_files import DEFAULT_MODEL, embedded_model_path, resolve_model_ref
from model_store.file_hashes import hash_file
from model_store.gguf_meta import read_metadata

Q8_0_FILE_TYPE = 7  # llama.cpp's LLAMA_FTYPE_MOSTLY_Q8_0, as general.file_type


def load(data: Path, shared: Path) -> tuple[list[p.ModelLoading], p.ModelLoaded, ProcessClient]:
    client = ProcessClient(data_dir=data, env={"HEARTH_HOME": str(data.parent / "home"), SHARED_ENV: str(shared)})
    client.start()
    steps, loaded = [], None
    for event in client.stream(p.LoadModel(request_id=new_request_id("load"), model="default", n_ctx=1024)):
        if isinstance(event, p.ModelLoading):
            steps.append(event)
        elif isinstance(event, (p.ModelLoaded, p.Error)):
            loaded = event
            break
    assert isinstance(loaded, p.ModelLoaded), loaded
    return steps, loaded, client


def answer(client: ProcessClient, prompt: str) -> str:
    command = p.Chat(request_id=new_request_id("chat"), messages=[p.WireMessage("user", prompt)], max_tokens=40,
                     sampling=p.SamplingSpec(temperature=0.0), draft=p.DraftSpec("off"))
    text = []
    for event in client.stream(command):
        if isinstance(event, p.TokenDelta):
            text.append(event.text)
        elif isinstance(event, (p.Finished, p.Error)):
            break
    return "".join(text)


@pytest.fixture
def folders(tmp_path):
    data, shared = tmp_path / "data", tmp_path / "no-setup-copy"
    data.mkdir(mode=0o700)
    shared.mkdir()
    return data, shared


def test_the_first_start_converts_the_built_in_model_with_progress_and_the_next_finds_it(folders):
    data, shared = folders
    steps, loaded, client = load(data, shared)
    try:
        kinds = [s.phase for s in steps]
        assert kinds[0] == "load" and "prepare" in kinds and kinds[-1] == "warm", kinds
        assert kinds.index("context") > max(i for i, k in enumerate(kinds) if k == "prepare")
        fractions = [s.fraction for s in steps]
        assert fractions == sorted(fractions), "the bar never moves backwards"
        preparing = [s.fraction for s in steps if s.phase == "prepare"]
        assert len({round(f, 2) for f in preparing}) >= 10, "the conversion moves the bar as it goes"
        copy = Path(loaded.facts.path)
        assert copy.parent == data / FOLDER and copy != embedded_model_path()
        assert read_metadata(copy)["general.file_type"] == Q8_0_FILE_TYPE
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600 and stat.S_IMODE(copy.parent.stat().st_mode) == 0o700
        assert not [f for f in copy.parent.iterdir() if f != copy], "no partial file left beside it"
        assert hash_file(copy) == hash_file(resolve_model_ref(DEFAULT_MODEL)), "the same bytes as the set-up's copy"
        assert "France" in answer(client, "What is the capital of France?")
    finally:
        client.close(mode="abort", timeout=5)

    steps, again, client = load(data, shared)
    client.close(mode="abort", timeout=5)
    assert "prepare" not in [s.phase for s in steps] and again.facts.path == loaded.facts.path


def test_a_damaged_copy_is_made_again(folders):
    data, shared = folders
    _, loaded, client = load(data, shared)
    client.close(mode="abort", timeout=5)
    copy = Path(loaded.facts.path)
    with open(copy, "r+b") as file:
        file.truncate(copy.stat().st_size // 2)
    steps, again, client = load(data, shared)
    try:
        assert "prepare" in [s.phase for s in steps] and again.facts.path == str(copy)
        assert hash_file(copy) == hash_file(resolve_model_ref(DEFAULT_MODEL))
        assert "France" in answer(client, "What is the capital of France?")
    finally:
        client.close(mode="abort", timeout=5)


@pytest.mark.parametrize("obstacle", ["file", "symlink"])
def test_a_data_folder_that_cannot_hold_the_copy_loads_the_shipped_file(folders, tmp_path, obstacle):
    data, shared = folders
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if obstacle == "file":
        (data / FOLDER).write_text("not a folder")
    else:
        (data / FOLDER).symlink_to(elsewhere, target_is_directory=True)
    steps, loaded, client = load(data, shared)
    try:
        assert Path(loaded.facts.path) == embedded_model_path()
        assert list(elsewhere.iterdir()) == [], "nothing is written through a symlink"
        assert "France" in answer(client, "What is the capital of France?")
    finally:
        client.close(mode="abort", timeout=5)


def test_the_set_up_copy_is_used_without_converting(folders):
    """The README's set-up prepared one (installers/setup_dev.sh): a start finds it and converts nothing."""
    data, _ = folders
    steps, loaded, client = load(data, shared_folder())
    client.close(mode="abort", timeout=5)
    assert "prepare" not in [s.phase for s in steps]
    assert Path(loaded.facts.path).parent == shared_folder() and f".{LAYOUT}." in Path(loaded.facts.path).name
    assert not (data / FOLDER).exists()
