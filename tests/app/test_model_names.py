"""One name for a model wherever it is shown (issue 31, point 8): the catalogue's, else the name the
file gives itself tidied, else its file name; never a training run's raw label where the catalogue
has a name. ``hearth info`` shows it (its JSON keeps the file's own ``name`` and adds ``display_name``)."""

from __future__ import annotations

import json
import shutil

from app.surfaces.cli.main import main
from app.services.model_refs import model_display_name, open_library, tidy_name
from app.services.settings import app_data_dir
from model_store.installed import EMBEDDED_NAME

RAW_NAME = "Smollm2 135M 8k Lc100K Mix1 Ep2"  # the embedded file's general.name


def test_hearth_info_names_the_embedded_model_as_the_catalogue_does(capsys):
    assert main(["info"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (name,) = [line for line in lines if line.startswith("name ")]
    assert name.split(None, 1)[1] == EMBEDDED_NAME and not any(RAW_NAME in line for line in lines)
    assert main(["info", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["display_name"] == EMBEDDED_NAME and facts["name"] == RAW_NAME, "the file's own name is kept as it was"


def test_a_file_named_as_a_catalogue_file_gets_the_catalogue_name(tmp_path, hybrid_tiny):
    copy = tmp_path / "Qwen3.5-0.8B-Q8_0.gguf"
    shutil.copy(hybrid_tiny, copy)
    assert model_display_name(str(copy), app_data_dir(), general_name="hybrid-tiny") == "Qwen3.5 0.8B Q8_0"


def test_otherwise_the_files_own_name_tidied_else_its_file_name(tmp_path, hybrid_tiny):
    data = app_data_dir()
    assert model_display_name(str(hybrid_tiny), data, general_name="  my\tmodel\n v2 ") == "my model v2"
    renamed = tmp_path / "renamed.gguf"
    shutil.copy(hybrid_tiny, renamed)
    assert model_display_name(str(renamed), data) == "hybrid-tiny", "its general.name, read from the file"
    assert model_display_name(str(tmp_path / "gone-model.gguf"), data) == "gone-model", "no name in it: its file name"
    assert model_display_name("default", data, general_name=RAW_NAME) == EMBEDDED_NAME
    assert len(tidy_name("x" * 500)) == 64 and tidy_name("x" * 500).endswith("…")


def test_an_imported_file_is_named_by_the_name_it_was_imported_under_tidied(hybrid_tiny):
    library = open_library(app_data_dir())
    try:
        model = library.add(name="hybrid\u0007  tiny", path=hybrid_tiny, size_bytes=hybrid_tiny.stat().st_size,
                            source="import", architecture="qwen35")
    finally:
        library.db.close()
    assert model_display_name(model.id, app_data_dir()) == "hybrid tiny"
    assert model_display_name(str(hybrid_tiny), app_data_dir(), general_name="other") == "hybrid tiny"
