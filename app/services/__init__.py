"""Hearth's Qt-free services, shared by the window (``ui``) and the command line (``app.surfaces.cli``):
conversation turns, documents, settings and user folders, model references and listings, and the
words of reports both show. They use the engine's client and the store, and never Qt or a terminal.

The layers, enforced by import-linter (``pyproject.toml``)::

    app.surfaces.gui | app.surfaces.cli        entry points
    ui                       the window (the only Qt importer)
    app.services             this package
    engine                   the worker and its client
    model_store              SQLite, model files, downloads
"""
