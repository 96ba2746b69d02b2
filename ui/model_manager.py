"""What the Models page does, without widgets: the listing, downloads, imports and removals.

The listing (catalogue + fit advice + installed models) is built on the store thread. Pulls,
imports and removals run as ``hearth models ...`` child processes (:class:`~ui.cli_job.CliJob`),
one per action, so the hub client never loads in the window's process and a download survives
nothing it should not: cancelling terminates the child, which keeps the partial file, and the
next download of the same file resumes it. Every finished action refreshes the listing, and
with it the model picker.

What an action ends with (imported, or why not) is said where the user started it: in the Models
page (:attr:`ModelManager.action_ended`, :attr:`ModelManager.download_ended`), and in the window's
banner (:attr:`ModelManager.notice`) only when that page is closed (:attr:`ModelManager.page_open`).

The free memory every figure of the listing follows is read here, on each refresh, and kept steady
(:func:`ui.model_words.steady_memory`): the page changes only when it moved by a few percent.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.services.model_listing import listing_json
from app.services.model_refs import app_catalogue
from model_store.catalogue import Catalogue
from model_store.fit import DEFAULT_BUDGET_PERCENT, available_memory
from model_store.installed import ModelLibrary
from ui.cli_job import CliJob
from ui.model_words import steady_memory
from ui.store_thread import StoreThread


class ModelManager(QObject):
    listing_changed = Signal(dict)  # see app.services.model_listing.listing_json
    installed_changed = Signal(list)  # [InstalledModel], for the model picker
    download_progress = Signal(str, dict)  # ref, the pull's progress line
    download_ended = Signal(str, bool, str)  # ref, installed?, what happened
    notice = Signal(str, str)  # level, text: for the window's banner, while the Models page is closed
    action_ended = Signal(bool, str)  # an import or removal: done?, what happened (for the Models page)

    def __init__(self, store: StoreThread, models_dir: Path, cache_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.models_dir = models_dir
        self.cache_dir = cache_dir
        self.context_tokens: int | None = None
        self.memory_percent = DEFAULT_BUDGET_PERCENT  # the settings' budget for automatic contexts
        self.catalogue: Catalogue | None = None  # as the last listing read it: the state shapes the chart needs
        self.downloads: dict[str, CliJob] = {}
        self._jobs: list[CliJob] = []
        self.page_open = False  # the Models page is on screen (it says what happened there)
        self.read_memory = available_memory  # () -> free bytes now; a test feeds its own readings
        self.shown_memory: int | None = None  # the free memory the last listing was built with

    def refresh(self) -> None:
        models_dir, cache_dir = self.models_dir, self.cache_dir
        context, percent = self.context_tokens, self.memory_percent
        available = self.shown_memory = steady_memory(self.shown_memory, self.read_memory())

        def build(store):
            installed = ModelLibrary(store.db, models_dir).list()
            catalogue = app_catalogue(cache_dir)
            return installed, catalogue, listing_json(catalogue, installed, context, available, percent=percent)

        self.store.submit(build, self._refreshed, lambda message: self.notice.emit("error", message))

    def download(self, ref: str) -> None:
        if ref in self.downloads:
            return
        job = self._run(["models", "pull", "--json", ref])
        self.downloads[ref] = job
        errors: list[dict] = []
        job.line.connect(lambda event: self._pull_line(ref, event, errors))
        job.finished.connect(lambda code, message: self._pull_finished(job, ref, code, message, errors))
        job.start()

    def cancel(self, ref: str) -> None:
        job = self.downloads.get(ref)
        if job is not None:
            job.stop()

    def import_file(self, path: str) -> None:
        job = self._run(["models", "import", "--json", path])
        errors: list[dict] = []
        job.line.connect(lambda event: errors.append(event["error"]) if isinstance(event.get("error"), dict) else None)
        job.finished.connect(lambda code, message: self._action_done(
            job, code, f"Imported {Path(path).name}.",
            f"Could not import {Path(path).name}: {_reason(errors, message)}"))
        job.start()

    def remove(self, model_id: str) -> None:
        job = self._run(["models", "rm", model_id])
        job.finished.connect(lambda code, message: self._action_done(
            job, code, f"Removed {model_id}.", f"Could not remove {model_id}: {message}"))
        job.start()

    def shutdown(self) -> None:
        """Stop running downloads (their partial files stay for the next start)."""
        for job in list(self._jobs):
            job.stop()

    # -- internals -------------------------------------------------------------------------------

    def _run(self, argv: list[str]) -> CliJob:
        job = CliJob(argv, self)
        self._jobs.append(job)
        return job

    def _forget(self, job: CliJob) -> None:
        if job in self._jobs:
            self._jobs.remove(job)
        # The lambdas connected above hold the job: disconnect them, so the job is freed here, on the
        # GUI thread, and not later by the cycle collector on whatever thread happens to run it.
        with warnings.catch_warnings():  # PySide warns when a signal had nothing connected
            warnings.simplefilter("ignore", RuntimeWarning)
            job.line.disconnect()
            job.finished.disconnect()
        job.deleteLater()

    def _refreshed(self, result) -> None:
        installed, self.catalogue, listing = result
        self.installed_changed.emit([m for m in installed if not m.missing])
        self.listing_changed.emit(listing)

    def _pull_line(self, ref: str, event: dict, errors: list[dict]) -> None:
        if event.get("event") == "progress":
            self.download_progress.emit(ref, event)
        elif event.get("event") == "error":
            errors.append(event)

    def _pull_finished(self, job: CliJob, ref: str, code: int, message: str, errors: list[dict]) -> None:
        self._forget(job)
        self.downloads.pop(ref, None)
        if code == 0:
            self.download_ended.emit(ref, True, f"Downloaded {ref}; it is in the model list.")
        elif errors and errors[-1].get("kind") == "cancelled":
            self.download_ended.emit(ref, False, f"Download of {ref} paused; Download again resumes it.")
        else:
            text = errors[-1]["message"] if errors else message or "the download process ended unexpectedly"
            self.download_ended.emit(ref, False, f"Could not download {ref}: {text}")
            self._tell_the_window("error", f"Could not download {ref}: {text}")
        self.refresh()

    def _action_done(self, job: CliJob, code: int, ok_text: str, failed_text: str) -> None:
        self._forget(job)
        text = ok_text if code == 0 else failed_text
        self.action_ended.emit(code == 0, text)
        self._tell_the_window("info" if code == 0 else "error", text)
        self.refresh()

    def _tell_the_window(self, level: str, text: str) -> None:
        """The banner hears of an action's end only when the Models page, which says it, is closed."""
        if not self.page_open:
            self.notice.emit(level, text)


def _reason(errors: list[dict], message: str) -> str:
    """Why a command failed: its JSON error's reason (the words without the file's path, which the
    sentence already names), else its one error line."""
    reason = errors[-1].get("reason") if errors else None
    return reason if isinstance(reason, str) and reason else message or "the command ended unexpectedly"
