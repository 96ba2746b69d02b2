"""The NPU compile cache never reads through a symlink and tightens a loose cache folder (issue 32,
point 8); the modes after a real compile are checked in tests/process/test_npu_prefill.py."""

from __future__ import annotations

import json
import stat
from dataclasses import asdict

from engine.npu import compiled

KEY = compiled.GraphKey("ab" * 32, 32, 256, "", "onnxruntime test", "digest")


def test_an_entry_that_is_a_symlink_is_removed_not_read(tmp_path):
    victim = tmp_path / "elsewhere"
    victim.mkdir()
    (victim / compiled.KEY_FILE).write_text(json.dumps(asdict(KEY)))
    root = tmp_path / "npu-cache"
    root.mkdir()
    entry = root / KEY.folder_name()
    entry.symlink_to(victim)
    assert compiled._load(entry, KEY) is None
    assert not entry.exists() and not entry.is_symlink() and (victim / compiled.KEY_FILE).exists()


def test_an_entry_holding_a_symlink_is_removed(tmp_path):
    target = tmp_path / "secret.txt"
    target.write_text("not the cache's")
    entry = tmp_path / "npu-cache" / KEY.folder_name()
    entry.mkdir(parents=True)
    (entry / compiled.KEY_FILE).symlink_to(target)
    assert compiled._load(entry, KEY) is None
    assert not entry.exists() and target.read_text() == "not the cache's"


def test_a_symlinked_cache_folder_is_not_used_and_a_loose_one_is_tightened(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    (tmp_path / "linked").symlink_to(real)
    assert compiled._private_root(tmp_path / "linked") is False
    real.chmod(0o755)
    assert compiled._private_root(real) is True and stat.S_IMODE(real.stat().st_mode) == 0o700
    made = tmp_path / "data" / "npu-cache"
    assert compiled._private_root(made) is True and stat.S_IMODE(made.stat().st_mode) == 0o700
