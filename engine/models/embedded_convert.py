"""Making the built-in model's fast-reading copy with llama.cpp's quantizer (see :mod:`engine.models.embedded_layout`).

``python -m engine.models.embedded_convert`` is the set-up's step: it puts the copy in the set-up's folder.
The worker calls :func:`embedded_for_loading` at a load of the built-in model, which finds the copy
or makes it in the user's data folder, reporting the share of tensors converted.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from pathlib import Path

from engine.backends.llama_cpp import init_backend, quantize
from engine.models.embedded_layout import LAYOUT, LayoutKey, build_identity, find_copy, find_prepared, shared_folder, user_folder
from engine.models.model_files import check_model_file
from model_store.file_hashes import hash_file
from model_store.installed import embedded_model_file
from model_store.private_files import make_private_folder, repair

log = logging.getLogger(__name__)

QUANTIZE_THREADS = 2


def convert(source: Path, folder: Path, key: LayoutKey, on_progress: Callable[[float], None] | None = None) -> Path:
    """Write ``source`` in ``key.weight_type`` into ``folder`` (made 0700) and return the copy;
    ``on_progress`` hears the share of tensors converted.

    Raises:
        OSError: The folder cannot be made or written, or is a symlink.
        ModelLoadError: llama.cpp's quantizer refused the file.
    """
    make_private_folder(folder)
    if folder.is_symlink():
        raise OSError(f"{folder} is a symlink")
    repair([folder])
    target = folder / key.file_name(source)
    partial = folder / f".{target.name}.{os.getpid()}.partial"
    partial.unlink(missing_ok=True)
    try:
        quantize(source, partial, key.weight_type, requantize=True, threads=QUANTIZE_THREADS, on_progress=on_progress)
        os.chmod(partial, 0o600)
        check_model_file(partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def embedded_for_loading(source: Path, digest: Callable[[Path], str], data_dir: Path | None,
                         on_converting: Callable[[float], None] = lambda _: None) -> Path:
    """The file to load for the built-in model: a converted copy (found, or made now in the data
    folder, telling ``on_converting`` the share done from 0), else ``source`` itself."""
    key, found = find_prepared(source, digest, data_dir)
    if found is not None:
        return found
    if key is None or data_dir is None:
        return source
    on_converting(0.0)
    try:
        return convert(source, user_folder(data_dir), key, on_converting)
    except Exception as exc:  # noqa: BLE001 - any failure leaves the shipped file, which works
        log.warning("hearth: the built-in model could not be prepared for faster reading (%s); "
                    "it is loaded as shipped", exc)
        return source


def main() -> None:
    """Set-up: put the converted copy in :func:`shared_folder` (``--folder`` for another)."""
    parser = argparse.ArgumentParser(description="Prepare the built-in model's fast-reading copy")
    parser.add_argument("--folder", type=Path, default=None)
    args = parser.parse_args()
    init_backend()
    source = embedded_model_file()
    folder = args.folder or shared_folder()
    key = LayoutKey(hash_file(source), LAYOUT, build_identity())
    path = find_copy(folder, key.file_name(source)) or convert(source, folder, key)
    print(path)


if __name__ == "__main__":
    main()
