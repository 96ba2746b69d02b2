"""The sub-commands of ``hearth`` that look after what is stored: ``models`` (the catalogue, downloads,
imports) and ``db`` (the conversation database)."""

from __future__ import annotations

from app.surfaces.cli import flag_types


def add_db_commands(sub) -> None:
    db = sub.add_parser("db", help="the conversation database")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    recover = db_sub.add_parser("recover", help="copy what can still be read out of a damaged database into a new "
                                                "one; the damaged file is kept aside (close Hearth first)")
    recover.add_argument("--json", action="store_true")
    recover.set_defaults(run="app.surfaces.cli.db_commands:run_recover")


def add_models_commands(sub) -> None:
    models = sub.add_parser("models", help="the model catalogue, downloads and imports")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    listing = models_sub.add_parser("list", help="the catalogue with memory-fit advice, and the installed models")
    listing.add_argument("--context", type=flag_types.context_length, default=None, metavar="TOKENS",
                         help="context length the memory advice assumes (default 8192, capped per model)")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run="app.surfaces.cli.model_commands:run_list")
    pull = models_sub.add_parser("pull", help="download a catalogue model into the Hugging Face cache")
    pull.add_argument("ref", metavar="ID[:QUANT]", help="a catalogue id, optionally with a quantization")
    pull.add_argument("--json", action="store_true", help="JSON lines: progress, then installed or error")
    pull.set_defaults(run="app.surfaces.cli.model_commands:run_pull")
    imported = models_sub.add_parser("import", help="check a local GGUF file and add it to the installed models")
    imported.add_argument("path", metavar="PATH")
    imported.add_argument("--json", action="store_true")
    imported.set_defaults(run="app.surfaces.cli.model_commands:run_import")
    remove = models_sub.add_parser("rm", help="remove an installed model (a download's file is deleted)")
    remove.add_argument("id", metavar="ID")
    remove.add_argument("--keep-file", action="store_true", help="only unregister; keep a downloaded file")
    remove.set_defaults(run="app.surfaces.cli.model_commands:run_rm")
    search = models_sub.add_parser("search", help="search Hugging Face for GGUF repositories (needs a connection)")
    search.add_argument("query", metavar="WORDS")
    search.add_argument("--limit", type=int, default=20)
    search.add_argument("--json", action="store_true")
    search.set_defaults(run="app.surfaces.cli.model_commands:run_search")
