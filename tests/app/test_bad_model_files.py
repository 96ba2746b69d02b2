"""Every way a model file can be wrong gives one clear line naming the file and the reason."""

import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from app.surfaces.cli.main import main


def run_info(capsys, model) -> tuple[int, str]:
    code = main(["info", "--model", str(model), "--json"])
    return code, capsys.readouterr().err


def write_unknown_arch_gguf(path):
    import gguf

    writer = gguf.GGUFWriter(str(path), "flumph")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_missing_file(capsys, tmp_path):
    code, err = run_info(capsys, tmp_path / "nope.gguf")
    assert code == 1
    assert "nope.gguf" in err and "no such file" in err and "--model default" in err


def test_directory(capsys, tmp_path):
    code, err = run_info(capsys, tmp_path)
    assert code == 1 and "folder" in err and str(tmp_path) in err


def test_not_a_gguf(capsys, tmp_path):
    bogus = tmp_path / "notes.gguf"
    bogus.write_text("these are my notes, not a model\n" * 10)
    code, err = run_info(capsys, bogus)
    assert code == 1 and "not a GGUF model file" in err and "notes.gguf" in err


def test_empty_file(capsys, tmp_path):
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    code, err = run_info(capsys, empty)
    assert code == 1 and "empty.gguf" in err and "the file is empty" in err


@pytest.mark.parametrize("keep", [0.5, 0.99])
def test_truncated_download(capsys, tmp_path, hybrid_tiny, keep):
    data = hybrid_tiny.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: int(len(data) * keep)])
    code, err = run_info(capsys, cut)
    assert code == 1 and "truncated" in err and "cut.gguf" in err


def test_truncated_header(capsys, tmp_path, hybrid_tiny):
    cut = tmp_path / "header.gguf"
    cut.write_bytes(hybrid_tiny.read_bytes()[:100])
    code, err = run_info(capsys, cut)
    assert code == 1 and "truncated" in err


def test_unsupported_architecture(capsys, tmp_path):
    odd = tmp_path / "odd.gguf"
    write_unknown_arch_gguf(odd)
    code, err = run_info(capsys, odd)
    assert code == 1 and "flumph" in err and "not supported" in err


def test_a_good_file_still_loads_after_failures(capsys, tmp_path, hybrid_tiny):
    run_info(capsys, tmp_path / "missing.gguf")
    code, _ = run_info(capsys, hybrid_tiny)
    assert code == 0


# --- a GGUF header followed by garbage, a loop of links (issue 16) ---------------------------------
# Every command that takes a model path says what is wrong in one line of words: no numpy text,
# and a loop of links is not "no such file".

MODEL_PATH_COMMANDS = {
    "info": lambda path: ["info", "--model", str(path)],
    "generate": lambda path: ["generate", "--model", str(path), "--max-tokens", "2", "hi"],
    "import": lambda path: ["models", "import", str(path)],
}
LIBRARY_WORDS = ("out of bounds", "axis", "index", "numpy", "Traceback", "Error(")


def one_error_line(capsys, argv) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and lines[0].startswith("hearth: error: "), captured
    assert not any(words in lines[0] for words in LIBRARY_WORDS), lines[0]
    return lines[0]


def header_then_garbage(model, target, n_bytes=4096, seed=16) -> None:
    """A real model's 24-byte GGUF header, then random bytes."""
    garbage = np.random.default_rng(seed).integers(0, 256, n_bytes, dtype=np.uint8).tobytes()
    target.write_bytes(model.read_bytes()[:24] + garbage)


def garbage_tensor_table(model, target, seed=16) -> None:
    """A real model whose metadata is intact but whose list of tensors is random bytes."""
    import gguf

    reader = gguf.GGUFReader(model)
    start, end = reader.tensors[0].field.offset, reader.data_offset
    data = bytearray(model.read_bytes())
    data[start:end] = np.random.default_rng(seed).integers(0, 256, end - start, dtype=np.uint8).tobytes()
    target.write_bytes(bytes(data))


@pytest.mark.parametrize("command", MODEL_PATH_COMMANDS)
@pytest.mark.parametrize("seed", [16, 17])
def test_a_valid_header_then_garbage(capsys, tmp_path, hybrid_tiny, command, seed):
    bad = tmp_path / "garbage.gguf"
    header_then_garbage(hybrid_tiny, bad, seed=seed)
    line = one_error_line(capsys, MODEL_PATH_COMMANDS[command](bad))
    assert str(bad) in line and "GGUF header, but what follows is not GGUF metadata" in line and "damaged" in line


@pytest.mark.parametrize("command", MODEL_PATH_COMMANDS)
def test_garbage_in_the_list_of_tensors(capsys, tmp_path, hybrid_tiny, command):
    bad = tmp_path / "tensors.gguf"
    garbage_tensor_table(hybrid_tiny, bad)
    line = one_error_line(capsys, MODEL_PATH_COMMANDS[command](bad))
    assert str(bad) in line and ("damaged" in line or "unreadable" in line)


@pytest.mark.parametrize("command", MODEL_PATH_COMMANDS)
def test_a_loop_of_symbolic_links(capsys, tmp_path, command):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.symlink_to(b)
    b.symlink_to(a)
    line = one_error_line(capsys, MODEL_PATH_COMMANDS[command](a))
    assert str(a) in line and "symbolic link that leads back to itself" in line and "no such file" not in line


def test_a_link_to_nothing_says_where_it_points(capsys, tmp_path):
    link = tmp_path / "model.gguf"
    link.symlink_to(tmp_path / "moved-away.gguf")
    line = one_error_line(capsys, MODEL_PATH_COMMANDS["info"](link))
    assert "moved-away.gguf, which does not exist" in line


# --- the real CLI on hostile files and a FIFO (issue 32, point 15) --------------------------------
# Each bad file gives one stderr line naming the problem, in `info`, `generate` and `serve` alike,
# within seconds: no traceback, and a named pipe is refused, never waited on (it hung for ever).

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_FILES = {  # the file's name -> words its line must have
    "magic": "not a GGUF model file",
    "kv-count": "damaged",
    "dimension": "impossible dimension 1152921504606846976",
    "garbage": "what follows is not GGUF metadata",
    "fifo": "named pipe (FIFO)",
}
CLI_COMMANDS = {
    "info": ["info", "--model"],
    "generate": ["generate", "--max-tokens", "2", "--model"],
    "serve": ["serve", "--port", "0", "--model"],
}
CLI_SECONDS = 30  # each fails in about a second; the machine is shared


def write_hostile_files(model: Path, folder: Path) -> dict[str, Path]:
    """A real model with its magic changed, with a metadata count of 2^62, with a tensor dimension of
    2^60; a GGUF header followed by random bytes; and a named pipe."""
    import gguf

    data = model.read_bytes()
    paths = {name: folder / f"{name}.gguf" for name in HOSTILE_FILES}
    paths["magic"].write_bytes(b"GGUX" + data[4:])
    paths["kv-count"].write_bytes(data[:16] + struct.pack("<Q", 1 << 62) + data[24:])
    tensor = gguf.GGUFReader(model).tensors[0]
    dims_at = tensor.field.offset + 8 + len(tensor.name.encode()) + 4  # after the name and n_dims
    paths["dimension"].write_bytes(data[:dims_at] + struct.pack("<Q", 1 << 60) + data[dims_at + 8:])
    header_then_garbage(model, paths["garbage"])
    os.mkfifo(paths["fifo"])
    return paths


@pytest.fixture(scope="module")
def cli_runs(hybrid_tiny, tmp_path_factory) -> dict[tuple[str, str], tuple[int, str, float]]:
    """Every (file, command) run through the real CLI, all at once: (exit code, stderr, seconds)."""
    folder = tmp_path_factory.mktemp("hostile-files")
    paths = write_hostile_files(hybrid_tiny, folder)
    env = {**os.environ, "HEARTH_HOME": str(folder / "home")}
    started = time.monotonic()
    runs = {(name, command): subprocess.Popen([sys.executable, "-m", "app", *argv, str(paths[name]),
                                               *(["hi"] if command == "generate" else [])],
                                              cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.PIPE, text=True)
            for name in HOSTILE_FILES for command, argv in CLI_COMMANDS.items()}
    results = {}
    for key, process in runs.items():
        try:
            _out, err = process.communicate(timeout=max(1.0, started + CLI_SECONDS * 2 - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            _out, err = process.communicate()
            err += "\n(still running: killed)"
        results[key] = (process.returncode, err, time.monotonic() - started)
    return results


@pytest.mark.parametrize("command", CLI_COMMANDS)
@pytest.mark.parametrize("name", HOSTILE_FILES)
def test_a_hostile_model_file_is_one_line_in_every_command(cli_runs, name, command):
    code, err, seconds = cli_runs[(name, command)]
    lines = err.strip().splitlines()
    assert code != 0 and seconds < CLI_SECONDS * 2, (code, seconds, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("hearth: error: ") and f"{name}.gguf" in lines[0], lines[0]
    assert HOSTILE_FILES[name] in lines[0], lines[0]
