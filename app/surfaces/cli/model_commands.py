"""``hearth models list|pull|import|rm|search``: the catalogue, downloads, local imports, hub search.

Downloads go through :mod:`model_store.downloads` (the real huggingface_hub client, into the shared
Hugging Face cache); a verified file is then registered in the installed-models registry under
``<catalogue id>-<quant>``, which ``--model`` accepts everywhere. The GUI runs ``pull --json`` in a
child process and reads its JSON lines (one ``progress`` object at most ten times a second, then
``installed`` or ``error``), so the window never loads the hub client and a cancelled or crashed
download cannot take it down; SIGTERM cancels a pull and keeps the partial file for the next try.

``import`` also takes an EAGLE-3 head (GGUF architecture ``eagle3``): it is registered with the model
it was made for (hidden size and layers, :mod:`model_store.eagle3_heads`), and ``import`` and
``list`` say which installed models it fits; ``--draft auto`` drafts with it for those.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from app.surfaces.cli.commands import UserError
from app.surfaces.cli.model_listing_text import print_listing
from app.services.model_listing import fitting_ids, listing_json
from app.services.model_refs import app_catalogue, open_library, tidy_name
from app.services.paths import user_paths
from app.services.settings import app_data_dir, current_settings
from app.surfaces.cli.terminal_text import json_text, visible, visible_strings
from model_store.catalogue import CatalogueError, save_cached_metadata
from model_store.catalogue_schema import CatalogueFile
from model_store.db import StoreError
from model_store.download_errors import DownloadError, format_bytes
from model_store.downloads import (
    ChecksumMismatch, DownloadCancelled, DownloadProgress, HubOffline, NotEnoughSpace, UnsafeFilename,
    delete_cached_file, download_file,
)
from model_store.eagle3_heads import HEAD_ARCHITECTURE, HeadTarget, HeadUnusable, head_target
from model_store.gguf_check import SUPPORTED_ARCHITECTURES, GgufSummary, ImportRefused, check_gguf
from model_store.gguf_meta import GgufUnreadable, read_metadata
from model_store.hub_search import search_gguf_repos

ERROR_KINDS = ((DownloadCancelled, "cancelled"), (HubOffline, "offline"), (NotEnoughSpace, "no_space"),
               (ChecksumMismatch, "checksum"), (UnsafeFilename, "unsafe_name"))


def run_list(args: argparse.Namespace) -> int:
    paths = user_paths().ensure()
    try:
        catalogue = app_catalogue(paths.cache)
        library = open_library(app_data_dir())
    except (CatalogueError, StoreError) as exc:
        raise UserError(str(exc)) from exc
    listing = listing_json(catalogue, library.list(), args.context, percent=current_settings().memory_budget_percent,
                           heads=library.heads())
    if args.json:
        print(json_text(listing))
    else:
        print_listing(visible_strings(listing))  # names and paths come from files and the catalogue
    return 0


def run_pull(args: argparse.Namespace) -> int:
    paths = user_paths().ensure()
    try:
        entry, file = app_catalogue(paths.cache).resolve(args.ref)
        library = open_library(app_data_dir())
    except (CatalogueError, StoreError) as exc:
        raise UserError(str(exc)) from exc
    cancel = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: cancel.set())
    report = _json_progress if args.json else _text_progress
    try:
        result = download_file(entry.repo_id, file.filename, revision=entry.revision, on_progress=report,
                               cancel=cancel, expected_sha256=file.sha256)
    except DownloadError as exc:
        if args.json:
            kind = next((name for cls, name in ERROR_KINDS if isinstance(exc, cls)), "failed")
            _emit({"event": "error", "kind": kind, "message": str(exc)})
        raise UserError(str(exc)) from exc
    finally:
        if not args.json:
            print(file=sys.stderr)
    save_cached_metadata(paths.cache, entry.id, [CatalogueFile(file.quant, file.filename, result.size_bytes,
                                                               result.sha256)], revision=entry.revision)
    installed = library.for_catalogue(entry.id, file.quant)
    model = installed[0] if installed else library.add(
        name=f"{entry.name} {file.quant}", path=result.path, size_bytes=result.size_bytes, source="download",
        sha256=result.sha256, catalogue_id=entry.id, quant=file.quant, architecture=entry.architecture)
    done = {"event": "installed", "id": model.id, "path": str(model.path), "size_bytes": result.size_bytes,
            "sha256": result.sha256, "transferred_bytes": result.transferred_bytes}
    if args.json:
        _emit(done)
    else:
        print(f"installed {visible(model.id)} ({format_bytes(result.size_bytes)}); use it with --model "
              f"{visible(model.id)}")
    return 0


def run_import(args: argparse.Namespace) -> int:
    try:
        summary, head = checked_import(args.path)
        library = open_library(app_data_dir())
        model = library.add(
            name=tidy_name(summary.name) or summary.path.stem, path=summary.path, size_bytes=summary.size_bytes,
            source="import", architecture=summary.architecture, head=head)
    except ImportRefused as exc:  # --json: {"error": {"kind": "refused", "reason": ..., "message": ...}}
        raise UserError(str(exc), kind="refused", reason=exc.reason) from exc
    except StoreError as exc:
        raise UserError(str(exc)) from exc
    fits = fitting_ids(head, library.registered()) if head is not None else None
    if args.json:
        found = {"id": model.id, "name": model.name, "path": str(model.path),
                 "architecture": summary.architecture, "size_bytes": summary.size_bytes,
                 "parameter_count": summary.parameter_count, "context_length": summary.context_length}
        if head is not None:
            found["eagle3"] = {"target_hidden_size": head.hidden_size, "target_layers": list(head.layers), "fits": fits}
        print(json.dumps(found))
    elif head is not None:
        print(f"imported {visible(model.id)} (EAGLE-3 head, {format_bytes(summary.size_bytes)}); {head_fit_words(head, fits)}")
    else:
        print(f"imported {visible(model.id)} ({visible(summary.architecture)}, {format_bytes(summary.size_bytes)}); "
              f"use it with --model {visible(model.id)}")
    return 0


def checked_import(path) -> tuple[GgufSummary, HeadTarget | None]:
    """A model file, or an EAGLE-3 head with the model it was made for, checked for import.

    Raises:
        ImportRefused: Saying why the file cannot be imported.
    """
    summary = check_gguf(path, SUPPORTED_ARCHITECTURES | {HEAD_ARCHITECTURE})
    if summary.architecture != HEAD_ARCHITECTURE:
        return summary, None
    try:
        return summary, head_target(read_metadata(summary.path))
    except (HeadUnusable, GgufUnreadable, OSError) as exc:
        raise ImportRefused(summary.path, str(exc)) from None


def head_fit_words(head: HeadTarget, fits: list[str]) -> str:
    """Which installed models an EAGLE-3 head fits, or that it fits none, in one clause."""
    if fits:
        return f"--draft auto drafts with it for {', '.join(visible(i) for i in fits)}"
    return (f"it fits no installed model: it drafts for {head.words()}; import or download that model, "
            "then --draft auto uses it")


def run_rm(args: argparse.Namespace) -> int:
    paths = user_paths().ensure()
    try:
        library = open_library(app_data_dir())
        model = library.get(args.id)
        freed = 0
        if model.source == "download" and not args.keep_file:
            entry, file = app_catalogue(paths.cache).resolve(f"{model.catalogue_id}:{model.quant}")
            freed = delete_cached_file(entry.repo_id, file.filename, revision=entry.revision)
        library.remove(model.id)
    except (CatalogueError, StoreError) as exc:
        raise UserError(str(exc)) from exc
    if model.source == "download" and not args.keep_file:
        print(f"removed {visible(model.id)}; {format_bytes(freed)} freed")
    else:
        print(f"removed {visible(model.id)} from Hearth's list; the file {visible(str(model.path))} was left where "
              "it is")
    return 0


def run_search(args: argparse.Namespace) -> int:
    try:
        found = search_gguf_repos(args.query, limit=args.limit)
    except DownloadError as exc:
        raise UserError(str(exc)) from exc
    if args.json:
        print(json.dumps([{"repo_id": r.repo_id, "downloads": r.downloads, "likes": r.likes,
                           "last_modified": r.last_modified} for r in found]))
    else:
        for repo in found:
            print(f"{visible(repo.repo_id):<60} {repo.downloads or 0:>10,} downloads")
        if not found:
            print(f"no GGUF repositories match {args.query!r}")
    return 0


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _json_progress(progress: DownloadProgress) -> None:
    _emit({"event": "progress", "filename": progress.filename, "downloaded_bytes": progress.downloaded_bytes,
           "total_bytes": progress.total_bytes, "bytes_per_second": round(progress.bytes_per_second, 1),
           "eta_seconds": None if progress.eta_seconds is None else round(progress.eta_seconds, 1)})


def _text_progress(progress: DownloadProgress) -> None:
    eta = "" if progress.eta_seconds is None else f", {progress.eta_seconds:,.0f} s left"
    sys.stderr.write(f"\r{visible(progress.filename)}: {format_bytes(progress.downloaded_bytes)} of "
                     f"{format_bytes(progress.total_bytes)}, {format_bytes(int(progress.bytes_per_second))}/s{eta}   ")
    sys.stderr.flush()
