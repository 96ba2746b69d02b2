"""The Settings dialog (:mod:`ui.views.settings.dialog`) and its tabs, one module each: Chat, Model,
Performance, Privacy and Advanced."""
