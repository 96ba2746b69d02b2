"""The model catalogue: the shipped file is valid, broken ones are refused with the entry and
field named, references resolve, and cached hub metadata is laid over the shipped numbers."""

from __future__ import annotations

import copy
import json

import pytest

from model_store.catalogue import (
    CACHE_NAME,
    CatalogueError,
    CatalogueFile,
    load_catalogue,
    parse_catalogue,
    save_cached_metadata,
    split_ref,
)
from model_store.db import StoreError

HYBRID_ARCHS = {"qwen35", "lfm2", "granitehybrid", "nemotron_h"}


def entry(model_id="tiny-a", **changes):
    base = {
        "id": model_id,
        "name": "Tiny A",
        "repo_id": "someone/Tiny-A-GGUF",
        "architecture": "qwen35",
        "context_length": 4096,
        "has_mtp": False,
        "draft": None,
        "licence": "Apache-2.0",
        "description": "A tiny test model.",
        "recommended_quant": "Q4_K_M",
        "state": {"attention_layers": 1, "kv_heads": 2, "head_dim": 64, "recurrent_layers": 3,
                  "conv_state_elements": 100, "ssm_state_elements": 1000},
        "files": [
            {"quant": "Q4_K_M", "filename": "tiny-Q4_K_M.gguf", "size_bytes": 1000, "sha256": None},
            {"quant": "Q8_0", "filename": "tiny-Q8_0.gguf", "size_bytes": 2000,
             "sha256": "a" * 64},
        ],
        "source": "made up for tests",
    }
    base.update(changes)
    return base


def document(*entries):
    return json.dumps({"schema_version": 1, "models": list(entries)}).encode()


def parse(*entries):
    return parse_catalogue(document(*entries), "test.json")


# --- the shipped catalogue -------------------------------------------------------------------

def test_packaged_catalogue_loads_and_lists_hybrid_models_first():
    catalogue = load_catalogue()
    archs = [e.architecture for e in catalogue]
    assert len(catalogue) >= 5
    first_plain = next(i for i, a in enumerate(archs) if a not in HYBRID_ARCHS)
    assert all(a not in HYBRID_ARCHS for a in archs[first_plain:])
    assert {"qwen35", "lfm2"} <= set(archs)


def test_packaged_entries_are_consistent():
    for e in load_catalogue():
        assert e.file().quant == e.recommended_quant
        assert e.source.strip()
        for f in e.files:
            # a verified digest only makes sense with a verified size
            assert not (f.sha256 and f.size_estimated), (e.id, f.quant)
        if e.draft:
            assert load_catalogue().get(e.draft).architecture == e.architecture


def test_qwen35_small_state_matches_llama_cpp_numbers():
    # Hearth's notes (llama-cpp-hybrid.md B4): 12 KiB/token of KV and ~19.3 MiB of recurrent
    # state for Qwen3.5-0.8B, from its 6 attention and 18 Gated DeltaNet layers.
    e = load_catalogue().get("qwen3.5-0.8b")
    assert e.kv_bytes_per_token() == 12 * 1024
    assert e.recurrent_state_bytes() == 18 * (72 * 1024 + 1024 * 1024)


def test_transformer_has_no_recurrent_state():
    e = load_catalogue().get("llama-3.2-1b-instruct")
    assert e.recurrent_state_bytes() == 0
    assert e.kv_bytes_per_token() == 2 * 16 * 8 * 64 * 2


# --- references --------------------------------------------------------------------------------

def test_resolve_picks_recommended_or_named_quant_case_insensitively():
    catalogue = parse(entry())
    e, f = catalogue.resolve("tiny-a")
    assert (e.id, f.quant) == ("tiny-a", "Q4_K_M")
    assert catalogue.resolve("tiny-a:q8_0")[1].filename == "tiny-Q8_0.gguf"


def test_unknown_model_and_quant_are_explained():
    catalogue = parse(entry())
    with pytest.raises(CatalogueError, match=r"no model 'nope' in the catalogue; `hearth models list`"):
        catalogue.get("nope")
    with pytest.raises(CatalogueError, match=r"no quantization 'Q2_K'; available: Q4_K_M, Q8_0"):
        catalogue.resolve("tiny-a:Q2_K")


@pytest.mark.parametrize("ref, expected", [
    ("a", ("a", None)), ("a:Q8_0", ("a", "Q8_0")), ("a:", ("a", None)), (" a ", ("a", None)),
])
def test_split_ref(ref, expected):
    assert split_ref(ref) == expected


def test_catalogue_error_is_a_store_error():
    assert issubclass(CatalogueError, StoreError)


# --- schema errors name the entry and the field ----------------------------------------------------

def mutate(path, value):
    e = entry("tiny-b")
    target = e
    *parents, last = path
    for key in parents:
        target = target[key]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return e


_DELETE = object()


@pytest.mark.parametrize("path, value, message", [
    (("files", 0, "size_bytes"), 0, "files[0].size_bytes must be a positive integer"),
    (("files", 0, "size_bytes"), -5, "files[0].size_bytes must be a positive integer"),
    (("files", 1, "size_bytes"), "2000", "files[1].size_bytes: expected `int`, got `str`"),
    (("files", 1, "size_bytes"), True, "files[1].size_bytes: expected `int`, got `bool`"),
    (("files", 0, "sha256"), "ABC", "files[0].sha256 must be 64 lowercase hex digits or null"),
    (("files", 0, "quant"), "Q4 K", "files[0].quant 'Q4 K' must be letters, digits and '_'"),
    (("files", 1, "quant"), "q4_k_m", "files[1].quant 'q4_k_m' is listed twice"),
    (("files",), [], "files must list at least one quantization"),
    (("files", 0, "colour"), "red", "files[0]: object contains unknown field `colour`"),
    (("files", 0, "filename"), _DELETE, "files[0]: object missing required field `filename`"),
    (("state", "kv_heads"), 0, "state.kv_heads and state.head_dim must be positive"),
    (("state", "recurrent_layers"), -1, "state.recurrent_layers must not be negative"),
    (("recommended_quant",), "Q2_K", "recommended_quant 'Q2_K' is not one of the files' quant"),
    (("id",), "Tiny:B", "id must be 1-64 lowercase letters"),
    (("repo_id",), "no-slash", "repo_id must look like 'owner/name'"),
    (("revision",), "main branch", "revision 'main branch' is not a branch"),
    (("context_length",), 0, "context_length must be a positive integer"),
    (("description",), "two\nlines", "description must be one line"),
    (("licence",), " ", "licence must not be empty"),
    (("architecture",), "Qwen 3.5", "architecture 'Qwen 3.5' is not a GGUF architecture name"),
    (("extra",), 1, "object contains unknown field `extra`"),
    (("source",), _DELETE, "object missing required field `source`"),
])
def test_schema_errors_name_entry_and_field(path, value, message):
    with pytest.raises(CatalogueError) as info:
        parse(entry("tiny-a"), mutate(path, value))
    text = str(info.value)
    assert text.startswith("test.json: catalogue entry 1")
    assert "(tiny-b)" in text or path == ("id",)
    assert message in text


@pytest.mark.parametrize("filename", [
    "../escape.gguf", "/etc/passwd.gguf", "dir/../../x.gguf", "dir\\x.gguf", "C:x.gguf",
    "c:/x.gguf", "./x.gguf", "a//b.gguf", "", "model.bin", "bad\x00name.gguf",
])
def test_filenames_that_would_escape_a_folder_are_refused(filename):
    bad = mutate(("files", 0, "filename"), filename)
    with pytest.raises(CatalogueError, match=r"catalogue entry 1 \(tiny-b\): files\[0\]\.filename"):
        parse(entry("tiny-a"), bad)


def test_subfolder_filenames_are_allowed():
    ok = mutate(("files", 0, "filename"), "Q4_K_M/tiny-Q4_K_M.gguf")
    assert parse(ok).get("tiny-b").file().filename == "Q4_K_M/tiny-Q4_K_M.gguf"


def test_duplicate_ids_are_refused():
    with pytest.raises(CatalogueError, match=r"entry 1 \(tiny-a\): id 'tiny-a' is already used by entry 0"):
        parse(entry("tiny-a"), entry("tiny-a"))


def test_draft_must_exist_and_not_be_itself():
    with pytest.raises(CatalogueError, match=r"entry 0 \(tiny-a\): draft 'ghost' is not in the catalogue"):
        parse(entry("tiny-a", draft="ghost"))
    with pytest.raises(CatalogueError, match=r"draft must name another model"):
        parse(entry("tiny-a", draft="tiny-a"))
    assert parse(entry("tiny-a", draft="tiny-b"), entry("tiny-b")).get("tiny-a").draft == "tiny-b"


def test_malformed_json_and_wrong_top_level_are_refused_naming_the_origin():
    with pytest.raises(CatalogueError, match=r"^test.json: not a valid catalogue: JSON is malformed"):
        parse_catalogue(b'{"schema_version": 1, "models": [}', "test.json")
    with pytest.raises(CatalogueError, match=r"not a valid catalogue: .*`models`"):
        parse_catalogue(b'{"schema_version": 1}', "test.json")
    with pytest.raises(CatalogueError, match=r"schema_version 2 is not supported"):
        parse_catalogue(b'{"schema_version": 2, "models": []}', "test.json")


def test_entry_that_is_not_an_object_is_named_by_index():
    with pytest.raises(CatalogueError, match=r"catalogue entry 1: expected `object`, got `str`"):
        parse(entry("tiny-a"), "oops")


def test_unreadable_catalogue_file(tmp_path):
    with pytest.raises(CatalogueError, match=r"cannot read the catalogue .*missing.json"):
        load_catalogue(tmp_path / "missing.json")


# --- cached hub metadata ------------------------------------------------------------------------

@pytest.fixture
def catalogue_file(tmp_path):
    e = entry("tiny-a")
    e["files"][0]["size_estimated"] = True
    path = tmp_path / "catalogue.json"
    path.write_bytes(document(e))
    return path


def verified(quant="Q4_K_M", filename="tiny-Q4_K_M.gguf", size=1234, sha256="b" * 64):
    return CatalogueFile(quant=quant, filename=filename, size_bytes=size, sha256=sha256)


def test_cached_metadata_replaces_estimates_after_a_restart(tmp_path, catalogue_file):
    cache = tmp_path / "cache"
    assert load_catalogue(catalogue_file, cache_dir=cache).get("tiny-a").file().size_estimated
    save_cached_metadata(cache, "tiny-a", [verified()])
    f = load_catalogue(catalogue_file, cache_dir=cache).get("tiny-a").file("Q4_K_M")
    assert (f.size_bytes, f.sha256, f.size_estimated) == (1234, "b" * 64, False)
    untouched = load_catalogue(catalogue_file, cache_dir=cache).get("tiny-a").file("Q8_0")
    assert (untouched.size_bytes, untouched.sha256) == (2000, "a" * 64)
    assert load_catalogue(catalogue_file).get("tiny-a").file().size_bytes == 1000


def test_cached_metadata_merges_saves_and_keeps_known_digest(tmp_path, catalogue_file):
    cache = tmp_path / "cache"
    save_cached_metadata(cache, "tiny-a", [verified()])
    save_cached_metadata(cache, "tiny-a", [verified("Q8_0", "tiny-Q8_0.gguf", 2222, None)])
    e = load_catalogue(catalogue_file, cache_dir=cache).get("tiny-a")
    assert e.file("Q4_K_M").size_bytes == 1234
    assert (e.file("Q8_0").size_bytes, e.file("Q8_0").sha256) == (2222, "a" * 64)


@pytest.mark.parametrize("kwargs, saved", [
    ({"revision": "0123abc"}, verified()),  # read at another revision than the catalogue's "main"
    ({}, verified(filename="renamed.gguf")),  # describes a different file
    ({}, verified(size=0)),
    ({}, verified(sha256="not-a-digest")),
])
def test_cached_metadata_for_something_else_is_ignored(tmp_path, catalogue_file, kwargs, saved):
    cache = tmp_path / "cache"
    save_cached_metadata(cache, "tiny-a", [saved], **kwargs)
    f = load_catalogue(catalogue_file, cache_dir=cache).get("tiny-a").file()
    assert (f.size_bytes, f.size_estimated) == (1000, True)


@pytest.mark.parametrize("content", [b"{not json", b"[]", b'{"version": 99, "entries": {}}',
                                     b'{"version": 1, "entries": []}'])
def test_damaged_cache_is_ignored_not_fatal(tmp_path, catalogue_file, content):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / CACHE_NAME).write_bytes(content)
    assert load_catalogue(catalogue_file, cache_dir=cache).get("tiny-a").file().size_bytes == 1000
    save_cached_metadata(cache, "tiny-a", [verified()])  # and a save repairs it
    assert load_catalogue(catalogue_file, cache_dir=cache).get("tiny-a").file().size_bytes == 1234


def test_parsed_entries_are_immutable():
    e = parse(entry()).get("tiny-a")
    with pytest.raises(AttributeError):
        e.id = "other"
    assert copy.deepcopy(e) == e


def test_every_shipped_model_says_what_it_is_good_for_in_one_short_line():
    from model_store.catalogue import load_catalogue
    from model_store.catalogue_schema import GOOD_FOR_LENGTH, CatalogueError, check_entry

    entries = list(load_catalogue())
    assert all(entry.good_for.strip() and len(entry.good_for) <= GOOD_FOR_LENGTH for entry in entries)
    assert all("Good for:" in entry.source for entry in entries), "each says where its line came from"
    import msgspec
    with pytest.raises(CatalogueError, match="good_for must be one line"):
        check_entry(msgspec.structs.replace(entries[0], good_for="two\nlines"), "entry 0")
