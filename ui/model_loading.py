"""The model's life in the window: loading it (said at once, with progress, under the name the
picker gives it), and loading it again when the worker comes back after dying.

From the moment the window opens until the model is in, :attr:`ModelLoader.loading` is true and
``model_progress`` says what is being loaded ("Loading SmolLM2 135M Instruct…", then the worker's
fraction); a question asked meanwhile is held (:mod:`ui.held_question`), not refused. A notice
about having no model or no engine names its cause (:mod:`ui.notices`) and goes when a model loads
or the engine is back. A part of :class:`ui.controller.ChatController`, kept apart from the turns.
"""

from __future__ import annotations

import msgspec

from app.services.context_info import grown_line
from app.services.model_refs import model_file
from app.services.settings import AUTO_CONTEXT
from engine import protocol as p
from app.engine_clients.client import EngineDead, new_request_id
from ui.formatting import model_name
from ui.notices import ENGINE, MODEL
from ui.remote_text import remote_name

RESTARTED = "The engine restarted and is ready."
LOAD_STEPS = {  # engine.models.load_progress's steps, as the loading bar says them
    "prepare": "Preparing {name} to read faster (only the first time)…",
    "load": "Loading {name}…",
    "context": "Loading {name}: making room for your conversation…",
    "warm": "Loading {name}: warming up…",
}


class ModelLoader:
    """Mixed into the chat controller: uses its signals, its bridge and settings, and
    :class:`~ui.held_question.QuestionHolding`'s release and give-back."""

    def _loading_started(self, text: str, fraction: float = 0.0) -> None:
        self.loading = True
        self.model_progress.emit(text, fraction)

    def _loading_ended(self) -> None:
        self.loading = False
        self.model_progress.emit("", -1.0)

    def loading_text(self, ref: str | None = None, step: str = "load") -> str:
        """"Loading SmolLM2 135M Instruct…": the model as the picker names it, and the load's ``step``
        (the worker's ``ModelLoading.phase``) in words."""
        return LOAD_STEPS.get(step, LOAD_STEPS["load"]).format(name=self.name_model(ref or self.model_ref))

    def load_model(self, ref: str) -> None:
        self.model_ref = ref
        self.loaded = None
        if self.bridge.held:  # another model after a crash loop: a new worker loads it when ready
            self._loading_started("Starting the engine…")
            self.bridge.retry()
            return
        self._load_request = new_request_id("load")
        self._loading_started(self.loading_text(ref))
        if not self.bridge.send(self._load_command(ref)):
            self.model_progress.emit("Waiting for the engine to start…", 0.0)

    def _load_command(self, ref: str) -> p.LoadModel:
        """Load ``ref`` with the settings the worker takes at load time, its context among them."""
        s, path = self.settings, model_file(ref)
        return p.LoadModel(request_id=self._load_request, model=ref, draft_max=s.draft_max, draft_paths=s.draft_paths,
                           device_policy=s.device_policy, calibration=s.device_calibration,
                           n_ctx=s.context_for(path) if path is not None else AUTO_CONTEXT, kv_type=s.kv_type,
                           memory_percent=s.memory_budget_percent,
                           name="" if remote_name(ref) else model_name(ref))  # what the worker calls it

    def model_path(self) -> str | None:
        """The file of the current model (whose context the settings keep); None if it cannot be found."""
        return model_file(self.model_ref)

    def _on_context_grown(self, grown: p.ContextGrown) -> None:
        """The worker made the context longer to go on with a request: keep its report and say so once."""
        if self.loaded is None:
            return
        self.loaded = msgspec.structs.replace(self.loaded, n_ctx=grown.context.n_ctx, context=grown.context)
        self.context_grown.emit(self.loaded)
        self.notice.emit("info", f"{_sentence(grown_line(grown))}.")

    def retry_engine(self, cpu_variant: str | None = None) -> None:
        """Start the engine again after a crash loop (with ``cpu_variant``: "safe", or a build's name);
        nothing when it is not held (already started again, by a model chosen in the meantime)."""
        if not self.bridge.held:
            return
        self._loading_started("Starting the engine…")
        self.bridge.retry(cpu_variant)

    def _on_crash_loop(self, dead: EngineDead, doing: str) -> None:
        self._restarting = False
        self._loading_ended()
        self._give_back_held()
        model = _model_label(self.model_ref)
        what = f"while loading {model}" if doing == "loading the model" else f"while {model} read its first input"
        self.crash_loop.emit(f"{_sentence(dead.message)} {what}, twice in a row, so Hearth stopped restarting the "
                             "engine. Your messages are kept. A safer CPU build or another model may work; the "
                             "system check says more.")

    def _on_gave_up(self, message: str) -> None:
        self._loading_ended()
        self._give_back_held()
        self.passing_notice.emit("error", message, ENGINE)

    def _on_ready(self, ready: p.Ready) -> None:
        self.devices = list(ready.devices)
        self.load_model(self.model_ref)

    def _on_model_event(self, event: p.Event) -> None:
        if isinstance(event, p.ModelLoading):
            self._loading_started(self.loading_text(step=event.phase), event.fraction)
        elif isinstance(event, p.ModelLoaded):
            self.loaded = event
            self.devices = list(event.found_devices) or self.devices
            self._loading_ended()
            for cause in (MODEL, ENGINE):  # a model answers: the engine is up, and has a model
                self.cause_gone.emit(cause)
            self.model_loaded.emit(event)
            if self.conversation is not None:
                self.open_in_engine(self.conversation.id)
            else:
                self._restart_done(RESTARTED)
            self._release_held()
        elif isinstance(event, p.Error):
            self._restarting = False  # the load failed: that error is the news, not a restart
            self._loading_ended()
            self._give_back_held()
            self.model_failed.emit(event.message)
            self.passing_notice.emit("error", f"{event.message} Choose another model in the model menu.", MODEL)

    def _restart_done(self, text: str) -> None:
        """Say once, after the worker died and came back, that it is ready again (and what it restored):
        news about the conversation on screen, gone with its next answer."""
        if self._restarting:
            self._restarting = False
            self.conversation_notice.emit("info", text)

    def _on_died(self, dead: EngineDead) -> None:
        self.turn_flow.engine_died(dead)
        self.loaded = None
        if self.bridge.held:  # not restarted: the crash loop's notice says why and what to do
            return
        self._restarting = True
        self._loading_started("Restarting the engine…")
        self.passing_notice.emit("warning", f"{_sentence(dead.message)}. Restarting it; your conversation is safe "
                                            "and the answer written so far is kept, marked interrupted.", ENGINE)


def _model_label(ref: str) -> str:
    if (engine := remote_name(ref)) is not None:
        return f"remote engine {engine}"
    return "the embedded default model" if ref == "default" else ref.rsplit("/", 1)[-1]


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]
