"""The Settings dialog, kept under its old name: it lives in :mod:`ui.views.settings` (a module per tab)."""

from ui.views.settings.dialog import SettingsDialog
from ui.views.settings.model_tab import NO_MODEL_DETAILS, NO_MODEL_FILE, SEED_MESSAGE, SUGGESTED_CONTEXT

__all__ = ["NO_MODEL_DETAILS", "NO_MODEL_FILE", "SEED_MESSAGE", "SUGGESTED_CONTEXT", "SettingsDialog"]
