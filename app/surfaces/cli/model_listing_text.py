"""``hearth models list`` as text: the catalogue as a table that fits 100 columns, with what its marks
and columns mean, then the installed models and EAGLE-3 heads. (``--json`` has every figure in full,
:mod:`app.services.model_listing`.) A file's path is printed whole, however long."""

from __future__ import annotations

import textwrap

from app.services.model_listing import FIT_LABELS
from model_store.download_errors import format_bytes

WIDTH = 100  # columns of every line composed here
TRAINED_MARK = "+"  # after a context capped at the trained maximum where memory would hold more
LEGEND = ("Get a FILE with `hearth models pull FILE`. * marks the file to pick on this computer (the "
          "catalogue's choice when it fits, else the largest that fits). Context: the tokens a conversation can "
          "hold here, at most what the model was trained on "
          f"({TRAINED_MARK}: memory would hold more; `--json` says how much). Transformer: the context a plain "
          "transformer of the same size would get, for comparison.")


def wrapped(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)


def context_cell(tokens: int, memory_tokens: int) -> str:
    """``262,144+`` where the trained maximum is the limit and memory would hold more, else ``190,208``."""
    return f"{tokens:,}{TRAINED_MARK if memory_tokens > tokens else ''}"


def catalogue_lines(listing: dict) -> list[str]:
    refs = [f"{e['id']}:{v['quant']}" for e in listing["catalogue"] for v in e["variants"]]
    ref_width = max(map(len, refs), default=0)
    lines = [f"Catalogue, with advice for {format_bytes(listing['available_memory_bytes'])} of available memory:",
             *wrapped(LEGEND, "  "), "",
             f"    {'FILE':<{ref_width}} {'size':>11}  {'fit':<7}  {'context':>9}  {'transformer':>11}"]
    for entry in listing["catalogue"]:
        lines.append(f"  {entry['id']}: {entry['name']} [{entry['architecture']}]")
        lines += wrapped(entry["description"], "    ")
        for v in entry["variants"]:
            mark = "*" if v["recommended"] else " "
            size = ("~" if v["size_estimated"] else "") + format_bytes(v["size_bytes"])
            here = context_cell(v["max_context_tokens"], v["memory_context_tokens"])
            transformer = context_cell(v["transformer_max_context_tokens"], v["transformer_memory_context_tokens"])
            state = "  installed" if v["installed_id"] else ""
            ref = f"{entry['id']}:{v['quant']}"
            lines.append(f"  {mark} {ref:<{ref_width}} {size:>11}  {FIT_LABELS[v['fit']]:<7}  {here:>9}  "
                         f"{transformer:>11}{state}")
    return lines


def installed_lines(listing: dict) -> list[str]:
    lines = ["Installed:"]
    models = listing["installed"] or []
    width = max([len(m["id"] or m["name"]) for m in models] + [len(h["id"]) for h in listing.get("eagle3_heads") or []]
                + [len(listing["embedded"]["id"]) if listing.get("embedded") else 0])
    if listing.get("embedded"):
        embedded = listing["embedded"]
        lines.append(f"  {embedded['id']:<{width}} {format_bytes(embedded['size_bytes']):>11}  {embedded['name']}, "
                     "comes with Hearth (cannot be removed)")
    for model in models:
        name = model["id"] or model["name"]
        gone = "  (file missing)" if model["missing"] else ""
        lines.append(f"  {name:<{width}} {format_bytes(model['size_bytes']):>11}  {model['path']}{gone}")
    if not listing["installed"]:
        lines += wrapped("nothing else yet; `hearth models pull FILE` downloads one, `hearth models import PATH` "
                         "adds a GGUF you have", "  ")
    return lines


def head_lines(listing: dict) -> list[str]:
    heads = listing.get("eagle3_heads") or []
    lines = ["EAGLE-3 heads (drafters for one model each):"] if heads else []
    for head in heads:
        fits = ("file missing" if head["missing"] else f"fits {', '.join(head['fits'])}" if head["fits"]
                else f"fits no installed model (it drafts for {head['drafts_for']})")
        lines.append(f"  {head['id']:<28} {format_bytes(head['size_bytes']):>11}  EAGLE-3 head; {fits}")
    return lines


def print_listing(listing: dict) -> None:
    print("\n".join([*catalogue_lines(listing), "", *installed_lines(listing), *head_lines(listing)]))
