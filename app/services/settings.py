"""The user's persisted settings: one ``msgspec.Struct`` saved as JSON in ``<config dir>/settings.json``.

Design:

* Qt-free, so the CLI, the GUI and tests share one definition; the settings dialog only edits a
  :class:`Settings` and asks :func:`validate_settings` what is wrong with it.
* :func:`validate_settings` is the single place that knows the rules. It returns one user-facing
  message per invalid field, so a form can show each next to its field. Sampling bounds are not
  restated here: each sampling field is checked by :func:`engine.protocol.sampling_problem`.
* Loading never fails. A missing file means defaults; a file that is not a JSON object is moved
  aside to ``settings.json.broken`` (the user's bytes are kept) and defaults are used; a single
  wrong-typed or invalid value is reset to its default. Every such repair is reported in
  :attr:`LoadedSettings.problems`. Unknown keys are ignored, so an older Hearth can read a newer
  file.
* Saving refuses invalid settings and writes atomically (temporary file in the same folder, fsync,
  ``os.replace``), so a failed save leaves the previous file as it was. The file is private (0600):
  it holds the local API server's key.
* Sampling the model has defaults for (temperature, top-k, top-p, min-p, repeat penalty) is kept only
  where the user set it: ``None`` (absent from the file) follows the model loaded
  (:mod:`app.services.sampling_defaults`); :func:`sampling_spec` lays the user's values on the
  model's. A file from schema 1, which wrote every value, is read through
  :mod:`app.services.settings_migration`.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from app.services.paths import UserPaths, user_paths
from app.services.sampling_defaults import ResolvedSampling, resolve_sampling
from app.services.settings_migration import MODEL_SAMPLING, migrate
from app.services.tools.tool_settings import ToolSettings, tool_settings_problem
from engine.devices.calibration import Calibration, CalibrationError
from engine.protocol import DEFAULTS, WHEN_FULL_CHOICES, MAX_DRAFT, MAX_DRAFT_PATHS, MAX_TOKENS, SamplingSpec, sampling_problem
from engine.protocol.draft_choice import DraftRefused, parse_draft_spec
from model_store.fit import BUDGET_PERCENT_RANGE, CONTEXT_STEP, DEFAULT_BUDGET_PERCENT
from model_store.own_files import NotOwnFile, check_own_file, read_own_bytes
from model_store.private_files import make_private_folder

SCHEMA_VERSION = 2  # 2: sampling saved only where the user set it (app.services.settings_migration)
SETTINGS_FILE = "settings.json"
BROKEN_SUFFIX = ".broken"

MAX_TOKENS_RANGE = (1, 32768)
DRAFT_MAX_RANGE = (1, MAX_DRAFT)  # the protocol's limit (engine.protocol.DraftLength)
DRAFT_PATHS_RANGE = (1, MAX_DRAFT_PATHS)  # 1: a chain of drafts; more: a tree (engine.protocol.DraftPaths)
SNAPSHOT_BUDGET_GIB_RANGE = (0.1, 1024.0)
CONTEXT_RANGE = (CONTEXT_STEP, MAX_TOKENS)  # a fixed context; 0 (auto) is also allowed
AUTO_CONTEXT = 0
DEVICE_POLICIES = ("auto", "cpu", "npu")
SAMPLING_FIELDS = ("temperature", "top_k", "top_p", "min_p", "seed", "repeat_penalty", "repeat_last_n",
                   "dry_multiplier")
API_PORT_RANGE = (1024, 65535)  # below 1024 needs administrator rights on most systems
TEXT_SIZE_RANGE = (80, 200)  # percent of the platform's default font
THEMES = ("system", "light", "dark")  # system: follow the system's light or dark colour scheme
NO_NPU_MESSAGE = "No NPU was found on this machine; choose Auto or CPU."
NEWER_SCHEMA_MESSAGE = (
    "Your settings.json was written by a newer Hearth (schema {version}); settings this version does not "
    "know were ignored and will be dropped when settings are next saved."
)


class Settings(msgspec.Struct, kw_only=True):
    schema_version: int = SCHEMA_VERSION
    model: str = "default"  # "default" (embedded SmolLM2) or a path to a .gguf
    # Sampling: None (absent from the file) = the model's own default (app.services.sampling_defaults)
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    seed: int | None = DEFAULTS.sampling.seed  # None = a fresh random seed per answer
    max_tokens: int = DEFAULTS.max_tokens
    draft: str = DEFAULTS.draft  # auto | off | lookup | mtp | model:PATH
    draft_max: int = DEFAULTS.draft_max
    draft_paths: int = DEFAULTS.draft_paths  # guesses checked side by side each round (--draft-paths)
    device_policy: str = "auto"  # auto | cpu | npu
    snapshot_budget_gib: float = 4.0
    data_folder: str = ""  # "" = the default per-user data folder
    highlight_drafts: bool = False  # colour text that came from accepted drafts
    device_calibration: dict | None = None  # measured prefill speeds (`hearth devices calibrate`); None: never
    # Context per model (key: context_key(path)): tokens, or 0 for auto (the longest the memory
    # budget holds, capped at the trained length; engine.context.context_memory). Absent: auto.
    contexts: dict[str, int] = {}
    kv_cache_8bit: bool = False  # q8_0 K/V: about half the attention cache's memory (off: f16)
    memory_budget_percent: int = DEFAULT_BUDGET_PERCENT  # of the available memory an automatic context may fill
    # The local API server (``hearth serve`` run by the app): on/off, its port, its key ("": none),
    # and whether other devices may connect (binds 0.0.0.0; needs a key).
    api_server: bool = False
    api_server_port: int = 8089
    api_server_key: str = ""
    api_server_lan: bool = False
    telemetry_open: bool = False  # the window's telemetry dock: closed for a new user, then as it was left
    # The system prompt a new conversation starts with (each keeps its own; "": none, the model's default).
    system_prompt: str = ""
    repeat_penalty: float | None = None  # 1 = off (engine.decoding.sampling); None: the model's default
    repeat_last_n: int | None = None  # the penalty's window: -1 the whole answer, 0 off; None: the model's default
    dry_multiplier: float | None = None  # the sequence penalty (engine.decoding.sequence_penalty): 0 off; None: the model's default
    text_size: int = 100  # percent of the platform's default font (ui.theme)
    theme: str = "system"  # one of THEMES
    when_full: str = DEFAULTS.when_full  # a conversation longer than the model can read: one of p.WHEN_FULL_CHOICES
    tools: ToolSettings = msgspec.field(default_factory=ToolSettings)  # Settings → Tools (app.services.tools)

    def context_for(self, model_path: str) -> int:
        """The context chosen for the model file at ``model_path`` (0: auto)."""
        return self.contexts.get(context_key(model_path), AUTO_CONTEXT)

    @property
    def kv_type(self) -> str:
        return "q8_0" if self.kv_cache_8bit else "f16"


def context_key(model_path: str) -> str:
    """How a model is named in :attr:`Settings.contexts`: its file's absolute path (links kept as
    they are: a broken or looping one is the load's to report, not this lookup's)."""
    return os.path.abspath(os.path.expanduser(model_path))


class SettingsError(Exception):
    """Settings could not be saved; the message says why and what to do."""


@dataclass
class LoadedSettings:
    settings: Settings
    problems: list[str] = field(default_factory=list)
    unreadable: bool = False  # the file could not be read at all (and was set aside when it could be)


def settings_path(config_dir: Path) -> Path:
    return Path(config_dir) / SETTINGS_FILE


# --- validation ---------------------------------------------------------------------------------


def _sentence(text: str) -> str:
    """``"top-p must be ..."`` -> ``"Top-p must be ..."`` with a closing full stop."""
    text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def _sampling_message(name: str, value: Any) -> str | None:
    """Check one sampling field (the protocol's rules); None where the model's default is followed."""
    if value is None and name in MODEL_SAMPLING:
        return None
    problem = sampling_problem(name, value)
    return None if problem is None else _sentence(problem)


def _range_message(label: str, value: float, bounds: tuple[float, float], unit: str = "") -> str | None:
    low, high = bounds
    if not low <= value <= high:  # also catches NaN
        return f"{label} must be between {low:g} and {high:g}{unit}, got {value:g}."
    return None


def _gguf_file_message(path_text: str, what: str) -> str | None:
    path = Path(path_text)
    if path.suffix.lower() != ".gguf":
        return f"The {what} must be a .gguf file, but {path_text} is not; choose a file ending in .gguf."
    if not path.is_file():
        return f"The {what} {path_text} is not an existing file; choose an existing .gguf file."
    return None


DRAFT_FILES = {"model": "draft model", "eagle3": "EAGLE-3 head"}  # the drafting choices that take a file


def _draft_message(draft: str) -> str | None:
    kind = draft[:-1] if draft.endswith(":") else None
    if kind in DRAFT_FILES:
        return f"Choose a{'n' if kind == 'eagle3' else ''} {DRAFT_FILES[kind]} file (.gguf), or pick another drafting choice."
    try:
        spec = parse_draft_spec(draft)
    except DraftRefused as error:
        return _sentence(str(error))
    return _gguf_file_message(spec.path, DRAFT_FILES[spec.kind]) if spec.kind in DRAFT_FILES and spec.path else None


def _device_message(policy: str, npu_available: bool) -> str | None:
    if policy not in DEVICE_POLICIES:
        return f"Device must be Auto, CPU or NPU, got {policy!r}."
    if policy == "npu" and not npu_available:
        return NO_NPU_MESSAGE
    return None


def _calibration_message(data: dict | None) -> str | None:
    try:
        Calibration.from_dict(data) if data is not None else None
    except CalibrationError as exc:
        return str(exc)
    return None


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _data_folder_message(folder: str) -> str | None:
    if folder == "":
        return None
    path = Path(folder)
    if not path.is_absolute():
        return f"The data folder {folder} is not a full path; choose the folder with Browse… instead."
    existing = _nearest_existing(path)
    if not existing.is_dir():
        return f"{existing} is a file, not a folder; choose a different data folder."
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"Hearth cannot write to {existing}; choose a folder you are allowed to write to."
    return None


def _model_message(model: str) -> str | None:
    return None if model == "default" else _gguf_file_message(model, "model file")


def _contexts_message(contexts: dict[str, int]) -> str | None:
    for tokens in contexts.values():
        if tokens != AUTO_CONTEXT and not CONTEXT_RANGE[0] <= tokens <= CONTEXT_RANGE[1]:
            return (f"A context must be Auto or between {CONTEXT_RANGE[0]:,} and {CONTEXT_RANGE[1]:,} tokens, "
                    f"got {tokens:,}.")
    return None


def _theme_message(theme: str) -> str | None:
    return None if theme in THEMES else f"The theme must be System, Light or Dark, got {theme!r}."


def _api_key_message(key: str) -> str | None:
    """A key travels in an HTTP header (``Authorization: Bearer KEY``): visible ASCII, no spaces."""
    if all("!" <= char <= "~" for char in key):
        return None
    return "The API key may use only letters, digits and punctuation, without spaces; press Generate for one."


def _api_lan_message(s: Settings) -> str | None:
    if s.api_server_lan and (not s.api_server_key or _api_key_message(s.api_server_key)):
        return "Letting other devices connect needs a key: type one or press Generate."
    return None


def validate_settings(s: Settings, *, npu_available: bool = False) -> dict[str, str]:
    """Field name -> one clear message for each invalid field; empty when all are valid.

    Assumes the fields have their declared types (``load_settings`` and the dialog ensure that).
    """
    messages: dict[str, str | None] = {name: _sampling_message(name, getattr(s, name)) for name in SAMPLING_FIELDS}
    messages["max_tokens"] = _range_message("Max tokens", s.max_tokens, MAX_TOKENS_RANGE)
    messages["draft"] = _draft_message(s.draft)
    messages["draft_max"] = _range_message("Max draft length", s.draft_max, DRAFT_MAX_RANGE, " tokens")
    messages["draft_paths"] = _range_message("Draft paths", s.draft_paths, DRAFT_PATHS_RANGE)
    messages["device_policy"] = _device_message(s.device_policy, npu_available)
    messages["snapshot_budget_gib"] = _range_message(
        "The snapshot budget", s.snapshot_budget_gib, SNAPSHOT_BUDGET_GIB_RANGE, " GiB"
    )
    messages["data_folder"] = _data_folder_message(s.data_folder)
    messages["model"] = _model_message(s.model)
    messages["device_calibration"] = _calibration_message(s.device_calibration)
    messages["contexts"] = _contexts_message(s.contexts)
    messages["memory_budget_percent"] = _range_message("The memory budget", s.memory_budget_percent,
                                                       BUDGET_PERCENT_RANGE, " %")
    messages["api_server_port"] = _range_message("The API server's port", s.api_server_port, API_PORT_RANGE)
    messages["api_server_key"] = _api_key_message(s.api_server_key)
    messages["api_server_lan"] = _api_lan_message(s)
    messages["text_size"] = _range_message("The text size", s.text_size, TEXT_SIZE_RANGE, " %")
    messages["theme"] = _theme_message(s.theme)
    messages["tools"] = tool_settings_problem(s.tools)
    messages["when_full"] = None if s.when_full in WHEN_FULL_CHOICES else \
        f"When a conversation is too long: choose one of {', '.join(WHEN_FULL_CHOICES)}, got {s.when_full!r}."
    return {name: message for name, message in messages.items() if message is not None}


# --- loading ------------------------------------------------------------------------------------


def move_aside(path: Path) -> Path | None:
    """Rename a bad file Hearth keeps to ``NAME.broken`` (or ``.broken.N`` if that is taken), so the
    user's bytes are kept."""
    target = path.with_name(path.name + BROKEN_SUFFIX)
    number = 1
    while target.exists():
        target = path.with_name(f"{path.name}{BROKEN_SUFFIX}.{number}")
        number += 1
    try:
        path.rename(target)
    except OSError:
        return None
    return target


def _read_object(path: Path) -> dict[str, Any]:
    """The file's top-level JSON object; raises ``OSError`` or ``ValueError`` when there is none."""
    try:
        document = msgspec.json.decode(read_own_bytes(path))
    except msgspec.DecodeError as error:
        raise ValueError(f"it is not valid JSON: {error}") from error
    except RecursionError:  # e.g. 100,000 nested brackets: msgspec's decoder gives up
        raise ValueError("it is nested too deeply to read") from None
    if not isinstance(document, dict):
        raise ValueError("it does not contain a JSON object")
    return document


def _typed_fields(document: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """The known keys whose values have the right type; each wrong-typed one is reported."""
    defaults = Settings()
    kept: dict[str, Any] = {}
    for name in Settings.__struct_fields__:
        if name not in document:
            continue
        try:
            msgspec.convert({name: document[name]}, Settings)
        except msgspec.ValidationError:
            problems.append(
                f"The saved {name} setting {document[name]!r} has the wrong type, so it was reset to "
                f"its default ({_default_words(defaults, name)}); set it again in Settings if needed."
            )
            continue
        kept[name] = document[name]
    return kept


def _default_words(defaults: Settings, name: str) -> str:
    value = getattr(defaults, name)
    return "the model's own value" if value is None and name in MODEL_SAMPLING else repr(value)


def _reset_invalid(s: Settings, npu_available: bool, problems: list[str]) -> Settings:
    defaults = Settings()
    invalid = validate_settings(s, npu_available=npu_available)
    for name, message in invalid.items():
        problems.append(f"The saved {name} setting was reset to its default ({_default_words(defaults, name)}): {message}")
    return msgspec.structs.replace(s, **{name: getattr(defaults, name) for name in invalid})


def read_settings(config_dir: Path) -> LoadedSettings:
    """The saved settings as :func:`load_settings` reads them, for a window that already runs: a file
    that cannot be read (an editor half-way through writing it), or is not the user's own, is left
    where it is, not set aside (``unreadable``)."""
    try:
        return load_settings(config_dir, npu_available=True, set_aside=False)
    except NotOwnFile as error:
        return LoadedSettings(Settings(), [str(error)], unreadable=True)


def load_settings(config_dir: Path, *, npu_available: bool = False, set_aside: bool = True) -> LoadedSettings:
    """The saved settings, repaired where needed; never raises for a bad or missing file.

    Raises:
        NotOwnFile: If ``settings.json`` is a symbolic link or another user's file: it is not read
            (it could point the data folder or the API server anywhere), nor set aside.
    """
    path = settings_path(config_dir)
    if check_own_file(path) is None:
        return LoadedSettings(Settings())
    try:
        document = _read_object(path)
    except (OSError, ValueError) as error:
        if not set_aside:
            return LoadedSettings(Settings(), [f"Could not read settings from {path}: {error}."], unreadable=True)
        moved = move_aside(path)
        kept = f"your file was kept as {moved}" if moved else "saving settings will replace the file"
        reason = getattr(error, "strerror", None) or str(error)
        message = f"Could not read settings from {path}: {reason}. Default settings are in use and {kept}."
        return LoadedSettings(Settings(), [message], unreadable=True)
    problems: list[str] = []
    loaded = msgspec.convert(_typed_fields(migrate(document), problems), Settings)
    if loaded.schema_version > SCHEMA_VERSION:
        problems.append(NEWER_SCHEMA_MESSAGE.format(version=loaded.schema_version))
    loaded = msgspec.structs.replace(loaded, schema_version=SCHEMA_VERSION)
    return LoadedSettings(_reset_invalid(loaded, npu_available, problems), problems)


# --- saving -------------------------------------------------------------------------------------


def write_atomically(path: Path, data: bytes) -> None:
    existing = _nearest_existing(path.parent)
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{existing} is a file, not a folder")
    make_private_folder(path.parent)
    # mkstemp creates the file 0600, so settings.json (replaced by it) is private too.
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as temp:
            temp.write(data)
            temp.flush()
            os.fsync(temp.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def save_settings(s: Settings, config_dir: Path, *, npu_available: bool = False) -> None:
    """Write ``s`` to ``settings.json``; raises :class:`SettingsError` and keeps the old file on failure."""
    invalid = validate_settings(s, npu_available=npu_available)
    if invalid:
        raise SettingsError("These settings cannot be saved: " + " ".join(invalid.values()))
    path = settings_path(config_dir)
    data = msgspec.json.format(msgspec.json.encode(_saved_fields(s)), indent=2) + b"\n"
    try:
        write_atomically(path, data)
    except OSError as error:
        reason = error.strerror or str(error)
        raise SettingsError(
            f"Could not save settings to {path}: {reason}. "
            "Free some disk space or check the folder's permissions."
        ) from error


# --- views for the rest of the app --------------------------------------------------------------


def _saved_fields(s: Settings) -> dict[str, Any]:
    """What the file keeps: every field but the sampling the user left to the model (absent, so an
    older Hearth reading the file uses its own defaults there)."""
    return {name: value for name, value in msgspec.structs.asdict(s).items()
            if not (name in MODEL_SAMPLING and value is None)}


def user_sampling(s: Settings) -> dict[str, float | int]:
    """The sampling values the user set (the others follow the model)."""
    return {name: getattr(s, name) for name in MODEL_SAMPLING if getattr(s, name) is not None}


def resolved_sampling(s: Settings, defaults: ResolvedSampling | None = None) -> ResolvedSampling:
    """Each sampling value an answer uses and where it came from: the user's over ``defaults`` (the
    model's, :func:`app.services.sampling_defaults.resolve_sampling`; None: those of ``s.model``)."""
    return (defaults if defaults is not None else resolve_sampling(s.model)).with_yours(**user_sampling(s))


def sampling_spec(s: Settings, defaults: ResolvedSampling | None = None) -> SamplingSpec:
    """What an answer samples with: the user's values, else the model's (see :func:`resolved_sampling`)."""
    return resolved_sampling(s, defaults).spec(seed=s.seed)


def snapshot_budget_bytes(s: Settings) -> int:
    return int(s.snapshot_budget_gib * 1024**3)


def data_dir(s: Settings, paths: UserPaths) -> Path:
    """The data folder the user chose, or the default per-user one."""
    return Path(s.data_folder) if s.data_folder else paths.data


def current_settings() -> Settings:
    """The saved settings as every command uses them (repaired where needed, never raises). A file
    that could not be read is said in one stderr line, once: it is set aside as it is said."""
    loaded = load_settings(user_paths().ensure().config, npu_available=True)
    if loaded.unreadable:
        print(f"hearth: {loaded.problems[0]}", file=sys.stderr, flush=True)
    return loaded.settings


def app_data_dir() -> Path:
    """The data folder every command uses: the one chosen in the settings, else the default (created)."""
    paths = user_paths().ensure()
    folder = data_dir(current_settings(), paths)
    make_private_folder(folder)  # a folder the user chose and made keeps its mode
    return folder
