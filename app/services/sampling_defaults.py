"""A model's default sampling, field by field, with where each value came from.

The one place that decides what a request samples with when nobody set a field (the CLI, the window's
turn and the API server all ask :func:`resolve_sampling`; the worker only ever uses the spec a
request carries). For each field, the first of:

1. ``model``: the GGUF's own ``general.sampling.*`` keys, as llama.cpp reads them
   (``src/llama-arch.cpp``: ``general.sampling.temp``, ``top_k``, ``top_p``, ``min_p``,
   ``penalty_repeat``, ``penalty_last_n``; llama.cpp has no key for the sequence penalty,
   ``dry_multiplier``, so a file never sets it);
2. ``catalogue``: the values the model's family publishes (``sampling`` in
   ``model_store/catalogue.json``; thinking on and off where they differ);
3. ``hearth``: Hearth's defaults, :data:`engine.protocol.DEFAULTS` (chosen with
   ``tests/bench/bench_loops.py`` so that the built-in SmolLM2 does not loop).

A value that the protocol would refuse (:func:`engine.protocol.sampling_problem`) is passed over for
the next source. What the user sets (a conversation's or the settings' value, a CLI flag, a field of
an API request) goes on top with :meth:`ResolvedSampling.with_yours` and is labelled ``yours``.

The penalty's window (``repeat_last_n``, llama.cpp's ``penalty_last_n``) is read as llama.cpp reads it:
-1 is the whole answer (llama.cpp: the whole context), 0 switches the penalty off.
"""

from __future__ import annotations

import logging
import os
from functools import lru_cache
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from engine.models.model_files import embedded_model_path
from engine.protocol import DEFAULTS, SamplingSpec, sampling_problem
from model_store.catalogue import Catalogue, CatalogueEntry, load_catalogue
from model_store.gguf_meta import GgufUnreadable, read_metadata

log = logging.getLogger(__name__)

FIELDS = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n",
          "dry_multiplier")  # the seed has no model default
GGUF_KEYS = {"temperature": "general.sampling.temp", "top_k": "general.sampling.top_k",
             "top_p": "general.sampling.top_p", "min_p": "general.sampling.min_p",
             "repeat_penalty": "general.sampling.penalty_repeat",
             "repeat_last_n": "general.sampling.penalty_last_n"}
COUNTS = ("top_k", "repeat_last_n")  # whole numbers; a GGUF or catalogue value with a fraction is passed over
SOURCES = ("yours", "model", "catalogue", "hearth")
LABELS = {"yours": "yours", "model": "from the model", "catalogue": "from the catalogue",
          "hearth": "Hearth's default"}
GENERIC_ARCHITECTURES = {"llama"}  # shared by unrelated families: a catalogue entry must match by file name


@dataclass(frozen=True)
class ResolvedSampling:
    """Each sampling field's value and its source (one of :data:`SOURCES`)."""

    values: dict[str, float | int] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def spec(self, seed: int | None = None) -> SamplingSpec:
        return SamplingSpec(**self.values, seed=seed)

    def label(self, name: str) -> str:
        """``"from the model"``, ``"from the catalogue"``, ``"yours"`` or ``"Hearth's default"``."""
        return LABELS[self.sources[name]]

    def with_yours(self, **given: float | int | None) -> ResolvedSampling:
        """These values laid on top, each labelled ``yours``; a None leaves the field as resolved."""
        values, sources = dict(self.values), dict(self.sources)
        for name, value in given.items():
            if value is not None and name in FIELDS:
                values[name], sources[name] = value, "yours"
        return ResolvedSampling(values, sources)


def resolve_sampling(model: str | Path | None = None, *, thinking: bool = False,
                     catalogue: Catalogue | None = None) -> ResolvedSampling:
    """The default sampling of the model file at ``model`` (``None`` or ``"default"``: the built-in
    model), with thinking on or off. A file that cannot be read gives the catalogue's or Hearth's
    values (its load will say what is wrong with it)."""
    path = embedded_model_path() if model in (None, "default") else Path(os.path.expanduser(str(model)))
    metadata = _metadata(path)
    advice = _catalogue_values(path, metadata, catalogue, thinking)
    hearth = msgspec.structs.asdict(DEFAULTS.sampling)
    values, sources = {}, {}
    for name in FIELDS:
        for source, value in (("model", metadata.get(GGUF_KEYS.get(name, ""))), ("catalogue", advice.get(name)),
                              ("hearth", hearth[name])):
            if _usable(name, value):
                values[name], sources[name] = _typed(name, value), source
                break
    return ResolvedSampling(values, sources)


def model_sampling(model: str | None, *, thinking: bool = False) -> ResolvedSampling:
    """:func:`resolve_sampling` of the model file at ``model``, read once while the file stays the same
    (the window asks at every answer). ``None`` (a remote engine's model, or a file that cannot be
    found): Hearth's defaults."""
    if model is None:
        return hearth_sampling()
    path = embedded_model_path() if model == "default" else Path(os.path.expanduser(model))
    try:
        stat = path.stat()
        stamp = (stat.st_size, stat.st_mtime_ns)
    except OSError:
        stamp = None
    return _cached(str(path), stamp, thinking)


@lru_cache(maxsize=16)
def _cached(path: str, _stamp: tuple | None, thinking: bool) -> ResolvedSampling:
    return resolve_sampling(path, thinking=thinking)


def hearth_sampling() -> ResolvedSampling:
    """Hearth's own defaults, each labelled so (:data:`engine.protocol.DEFAULTS`)."""
    hearth = msgspec.structs.asdict(DEFAULTS.sampling)
    return ResolvedSampling({name: hearth[name] for name in FIELDS}, dict.fromkeys(FIELDS, "hearth"))


def _metadata(path: Path) -> dict:
    try:
        return read_metadata(path)
    except (GgufUnreadable, OSError, ValueError) as exc:
        log.info("sampling defaults: %s could not be read (%s)", path, exc)
        return {}


def _catalogue_values(path: Path, metadata: dict, catalogue: Catalogue | None, thinking: bool) -> dict:
    entry = catalogue_entry(path, metadata, catalogue)
    if entry is None or entry.sampling is None:
        return {}
    advice = entry.sampling
    values = {name: getattr(advice, name) for name in FIELDS}
    if thinking and advice.thinking is not None:
        values.update({name: v for name in FIELDS if (v := getattr(advice.thinking, name)) is not None})
    return {name: value for name, value in values.items() if value is not None}


def catalogue_entry(path: Path, metadata: dict, catalogue: Catalogue | None = None) -> CatalogueEntry | None:
    """The catalogue's entry for a model file: the one that lists its file name, else the one family
    of its GGUF architecture (not for an architecture unrelated families share, such as ``llama``)."""
    try:
        entries = list(catalogue if catalogue is not None else load_catalogue())
    except Exception as exc:  # a broken catalogue must not stop an answer  # noqa: BLE001
        log.warning("sampling defaults: the catalogue could not be read (%s)", exc)
        return None
    for entry in entries:
        if any(f.filename.rsplit("/", 1)[-1] == path.name for f in entry.files):
            return entry
    architecture = metadata.get("general.architecture")
    if architecture in GENERIC_ARCHITECTURES:
        return None
    return next((e for e in entries if e.architecture == architecture and e.sampling is not None), None)


def _usable(name: str, value: object) -> bool:
    if value is None or isinstance(value, (bool, str, list)):
        return False
    if name in COUNTS and not float(value).is_integer():
        return False
    try:
        return sampling_problem(name, _typed(name, value)) is None
    except (TypeError, OverflowError, ValueError):
        return False


def _typed(name: str, value: float | int) -> float | int:
    return int(value) if name in COUNTS else float(value)
