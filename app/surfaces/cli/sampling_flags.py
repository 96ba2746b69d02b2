"""What ``generate``, ``send`` and ``chat`` sample with: each field from the first of its flag
(``--temperature`` …), the value the user set in Settings, and the model's own default
(:mod:`app.services.sampling_defaults`: the GGUF's keys, its family's in the catalogue, Hearth's).
A flag left out is None, so it is told apart from a value typed equal to a default."""

from __future__ import annotations

import argparse

from app.services.model_refs import ModelRefError, resolve_model_ref
from app.services.sampling_defaults import FIELDS, ResolvedSampling, hearth_sampling, model_sampling
from app.services.settings import Settings, app_data_dir, resolved_sampling


def flag_values(args: argparse.Namespace) -> dict[str, float | int]:
    """The sampling flags typed on the command line."""
    return {name: getattr(args, name) for name in FIELDS if getattr(args, name, None) is not None}


def model_defaults(args: argparse.Namespace, model: str | None, thinks: bool) -> ResolvedSampling:
    """The answering model's own sampling (``model``: its ref as ``--model`` takes it; None, or a remote
    engine's model: Hearth's defaults). A ref that does not resolve gives Hearth's: the load says why."""
    if model is None or getattr(args, "engine", None) is not None:
        return hearth_sampling()
    try:
        path = resolve_model_ref(model, app_data_dir())
    except ModelRefError:
        return hearth_sampling()
    return model_sampling(path, thinking=thinks and getattr(args, "thinking", None) != "off")


def sampling_for(args: argparse.Namespace, settings: Settings, model: str | None = None,
                 thinks: bool = False) -> ResolvedSampling:
    """Flags over the user's settings over the model's defaults, each value with where it came from."""
    return resolved_sampling(settings, model_defaults(args, model, thinks)).with_yours(**flag_values(args))
