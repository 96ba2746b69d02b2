"""Every way a model file can be wrong gives one clear line naming the file and the reason."""

import numpy as np
import pytest

from app.cli import main


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
    assert "nope.gguf" in err and "no such file" in err


def test_directory(capsys, tmp_path):
    code, err = run_info(capsys, tmp_path)
    assert code == 1 and "folder" in err and str(tmp_path) in err


def test_not_a_gguf(capsys, tmp_path):
    bogus = tmp_path / "notes.gguf"
    bogus.write_text("these are my notes, not a model\n" * 10)
    code, err = run_info(capsys, bogus)
    assert code == 1 and "not a GGUF file" in err and "notes.gguf" in err


def test_empty_file(capsys, tmp_path):
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    code, err = run_info(capsys, empty)
    assert code == 1 and "empty.gguf" in err and "not a GGUF" in err


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
