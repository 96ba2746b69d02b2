"""What the window says and does about the conversation database file itself: damaged (offer to
recover what is still readable) or read-only (say what would let Hearth save again). A part of
:class:`ui.controller.ChatController`, kept apart from the turns and the engine's events."""

from __future__ import annotations

from app.services.db_recovery import recovery_text
from model_store.recovery import Recovery
from model_store.storage_problems import DatabaseDamaged, DatabaseReadOnly, DiskFull
from ui.notices import STORE


class DatabaseFileNotices:
    """Mixed into the chat controller: uses its signals (``notice``, ``notice_with_action``, ``status``),
    its store thread and its conversation and model methods."""

    def _on_damaged(self, problem: DatabaseDamaged) -> None:
        self.notice_with_action.emit(
            "error", f"Could not open the conversation database {problem.path}: it is damaged ({problem.detail}). "
                     "Hearth stopped saving to it, so nothing more is lost. Recover copies everything still readable "
                     "into a new database and keeps the damaged file aside.", "Recover", self.recover_database)

    def _on_read_only(self, problem: DatabaseReadOnly | DiskFull) -> None:
        if isinstance(problem, DiskFull):  # opened for reading because the disk has no room left
            text = str(problem)
            self.passing_notice.emit("warning", text[:1].upper() + text[1:] + ".", STORE)
            return
        self.passing_notice.emit("warning", f"The conversation database {problem.path} is read-only ({problem.detail}): "
                                    "your conversations can be read, but new messages cannot be saved until your "
                                    "user may write to it and its folder, or another data folder is chosen in "
                                    "Settings.", STORE)

    def recover_database(self) -> None:
        """Copy what the damaged file still holds into a new one (see :mod:`model_store.recovery`)."""
        self.stop()
        self.status.emit("Recovering the conversation database…")

        def recovered(recovery: Recovery) -> None:
            self.status.emit("")
            self.show_conversation(None, [])
            self.refresh_list()
            self.notice.emit("info", recovery_text(recovery).replace("\n", " "))
            if self.loaded is not None:  # the engine reopens the database when it loads the model
                self.load_model(self.model_ref)

        def failed(message: str) -> None:
            self.status.emit("")
            self.notice.emit("error", message)

        self.store.recover(recovered, failed)
