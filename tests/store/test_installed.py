"""The installed-models registry on a real SQLite file: registering downloads and imports,
listing them with loose files, vanished files, removal, and resolving ``--model`` references."""

from __future__ import annotations

import pytest

from model_store.db import StoreError, open_database
from model_store.installed import (
    InstalledModel,
    ModelLibrary,
    installed_models,
    models_folder,
    slugify,
)


@pytest.fixture
def folder(tmp_path):
    path = models_folder(tmp_path / "data")
    path.mkdir(parents=True)
    return path


@pytest.fixture
def library(db, folder):
    return ModelLibrary(db, folder)


def gguf_file(directory, name, size=100):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(b"G" * size)
    return path


def add_download(library, path, catalogue_id="qwen3.5-0.8b", quant="Q4_K_M", **kwargs):
    return library.add(name=f"Qwen3.5 0.8B {quant}", path=path, size_bytes=path.stat().st_size,
                       source="download", catalogue_id=catalogue_id, quant=quant,
                       sha256="a" * 64, architecture="qwen35", **kwargs)


def add_import(library, path, **kwargs):
    return library.add(name=path.stem, path=path, size_bytes=path.stat().st_size,
                       source="import", **kwargs)


# --- the folder scan the GUI already uses --------------------------------------------------------

def test_installed_models_scans_the_folder_and_skips_partial_downloads(folder):
    a = gguf_file(folder, "b-model.gguf", 10)
    gguf_file(folder / "sub", "a-model.gguf", 20)
    gguf_file(folder, "c.gguf.incomplete")
    gguf_file(folder, "notes.txt")
    found = installed_models(folder)
    assert [(m.name, m.size_bytes) for m in found] == [("b-model", 10), ("a-model", 20)]
    assert found[0] == InstalledModel("b-model", a, 10)
    assert installed_models(folder / "missing") == []


def test_installed_model_keeps_its_first_three_fields_positional(tmp_path):
    model = InstalledModel("n", tmp_path / "n.gguf", 5)
    assert (model.name, model.path, model.size_bytes, model.id, model.source) == (
        "n", tmp_path / "n.gguf", 5, None, "loose")


# --- registering -------------------------------------------------------------------------------

def test_download_is_registered_with_everything_known(library, tmp_path):
    path = gguf_file(tmp_path / "hf-cache", "Qwen3.5-0.8B-Q4_K_M.gguf")
    model = add_download(library, path)
    assert model.id == "qwen3.5-0.8b-q4_k_m"
    assert library.get(model.id) == model
    assert (model.source, model.catalogue_id, model.quant, model.architecture, model.sha256) == (
        "download", "qwen3.5-0.8b", "Q4_K_M", "qwen35", "a" * 64)
    assert model.path == path and not model.missing and model.added_at > 0


def test_registry_survives_reopening_the_database(db_path, tmp_path):
    path = gguf_file(tmp_path, "mine.gguf")
    db = open_database(db_path)
    added = add_import(ModelLibrary(db), path)
    db.close()
    db = open_database(db_path)
    try:
        assert ModelLibrary(db).get("mine") == added
    finally:
        db.close()


def test_import_ids_are_slugs_of_the_file_name_made_unique(library, tmp_path):
    first = add_import(library, gguf_file(tmp_path / "a", "My Fine-Tune (v2).gguf"))
    second = add_import(library, gguf_file(tmp_path / "b", "My Fine-Tune (v2).gguf"))
    third = add_import(library, gguf_file(tmp_path / "c", "my fine tune v2.gguf"))
    assert [first.id, second.id, third.id] == ["my-fine-tune-v2", "my-fine-tune-v2-2", "my-fine-tune-v2-3"]


@pytest.mark.parametrize("text, slug", [
    ("Qwen3.5-0.8B-Q4_K_M", "qwen3.5-0.8b-q4_k_m"), ("  ---  ", "model"), ("a:b/c", "a-b-c"),
    ("x" * 100, "x" * 64), ("Ünïcode model", "unicode-model"),
])
def test_slugify(text, slug):
    assert slugify(text) == slug


def test_explicit_id_is_used_and_checked(library, tmp_path):
    assert add_import(library, gguf_file(tmp_path, "a.gguf"), id="favourite").id == "favourite"
    with pytest.raises(StoreError, match="an installed model is already called 'favourite'"):
        add_import(library, gguf_file(tmp_path, "b.gguf"), id="favourite")
    with pytest.raises(StoreError, match="'Bad:Id' is not a usable model id"):
        add_import(library, gguf_file(tmp_path, "c.gguf"), id="Bad:Id")


def test_same_file_cannot_be_registered_twice(library, tmp_path):
    path = gguf_file(tmp_path, "once.gguf")
    add_import(library, path)
    with pytest.raises(StoreError, match=r"once.gguf is already installed as 'once'"):
        add_download(library, path)


@pytest.mark.parametrize("changes, message", [
    ({"source": "magic"}, "source must be one of download, import, not 'magic'"),
    ({"size_bytes": 0}, "size_bytes must be a positive integer"),
    ({"path": "nowhere.gguf"}, "there is no such file"),
])
def test_bad_registrations_are_refused(library, tmp_path, changes, message):
    args = dict(name="x", path=gguf_file(tmp_path, "x.gguf"), size_bytes=100, source="import")
    args.update(changes)
    if "path" in changes:
        args["path"] = tmp_path / changes["path"]
    with pytest.raises(StoreError, match=message):
        library.add(**args)
    assert library.registered() == []


# --- listing, vanishing, removing -----------------------------------------------------------------

def test_list_shows_registered_models_then_loose_files(library, folder, tmp_path):
    download = add_download(library, gguf_file(tmp_path / "hf", "Qwen3.5-0.8B-Q4_K_M.gguf"))
    imported = add_import(library, gguf_file(folder, "imported.gguf"))
    loose = gguf_file(folder, "dropped-in.gguf", 7)
    listed = library.list()
    assert [m.id for m in listed] == [imported.id, download.id, None]
    assert listed[2] == InstalledModel("dropped-in", loose, 7)


def test_symlinked_registered_file_is_not_listed_twice(library, folder, tmp_path):
    target = gguf_file(tmp_path / "blobs", "abc123")
    link = folder / "linked.gguf"
    link.symlink_to(target)
    add_download(library, link)
    assert [m.id for m in library.list()] == ["qwen3.5-0.8b-q4_k_m"]


def test_vanished_file_is_listed_as_missing_until_removed(library, tmp_path):
    path = gguf_file(tmp_path, "gone.gguf")
    add_import(library, path)
    path.unlink()
    (model,) = library.list()
    assert model.missing and model.id == "gone"
    removed = library.remove("gone")
    assert removed.id == "gone" and library.list() == []


def test_remove_unregisters_but_keeps_the_file(library, tmp_path):
    path = gguf_file(tmp_path, "keep.gguf")
    add_import(library, path)
    assert library.remove("keep").path == path
    assert path.is_file()
    with pytest.raises(StoreError, match="no installed model is called 'keep'"):
        library.get("keep")
    with pytest.raises(StoreError, match="no installed model is called 'keep'"):
        library.remove("keep")


def test_library_without_a_folder_lists_only_registered(db, folder, tmp_path):
    gguf_file(folder, "loose.gguf")
    add_import(ModelLibrary(db), gguf_file(tmp_path, "reg.gguf"))
    assert [m.id for m in ModelLibrary(db).list()] == ["reg"]


# --- resolving --model ---------------------------------------------------------------------------

def test_resolve_by_installed_id_and_by_catalogue_reference(library, tmp_path):
    q4 = add_download(library, gguf_file(tmp_path / "a", "q4.gguf"))
    assert library.resolve("qwen3.5-0.8b-q4_k_m") == q4.path
    assert library.resolve("qwen3.5-0.8b") == q4.path
    assert library.resolve("qwen3.5-0.8b:q4_k_m") == q4.path


def test_resolve_asks_which_quantization_when_several_are_installed(library, tmp_path):
    add_download(library, gguf_file(tmp_path / "a", "q4.gguf"))
    q8 = add_download(library, gguf_file(tmp_path / "b", "q8.gguf"), quant="Q8_0")
    with pytest.raises(StoreError, match=r"installed in several quantizations \(Q4_K_M, Q8_0\); name one"):
        library.resolve("qwen3.5-0.8b")
    assert library.resolve("qwen3.5-0.8b:Q8_0") == q8.path


def test_resolve_loose_file_by_name(library, folder):
    path = gguf_file(folder, "hand-copied.gguf")
    assert library.resolve("hand-copied") == path


def test_resolve_not_installed_says_how_to_get_it(library, tmp_path):
    add_download(library, gguf_file(tmp_path, "q4.gguf"))
    for ref in ("lfm2-1.2b", "qwen3.5-0.8b:Q8_0"):
        with pytest.raises(StoreError) as info:
            library.resolve(ref)
        assert str(info.value) == f"model '{ref}' is not installed; `hearth models pull {ref}` downloads it"


def test_resolve_vanished_file_says_what_happened(library, tmp_path):
    path = gguf_file(tmp_path, "q4.gguf")
    add_download(library, path)
    path.unlink()
    with pytest.raises(StoreError, match=r"registered but its file .*q4.gguf is gone") as info:
        library.resolve("qwen3.5-0.8b")
    assert "`hearth models rm qwen3.5-0.8b-q4_k_m`" in str(info.value)


# --- the schema ------------------------------------------------------------------------------------

def test_models_table_refuses_unknown_sources_and_duplicate_paths_at_the_sql_level(db):
    import sqlite3

    row = dict(id="a", name="a", path="/x.gguf", size_bytes=1, source="download", added_at=0.0)
    db["models"].insert(row)
    with pytest.raises(sqlite3.IntegrityError):
        db["models"].insert({**row, "id": "b"})
    with pytest.raises(sqlite3.IntegrityError):
        db["models"].insert({**row, "id": "c", "path": "/y.gguf", "source": "stolen"})
    assert ("catalogue_id", "quant") in {tuple(i.columns) for i in db["models"].indexes}
