"""``hearth doctor``'s report as lines of text: what the command prints and the GUI's System check
shows and copies (kept free of the engine and the store, so the window can import it)."""

from __future__ import annotations

from model_store.download_errors import format_bytes

FIRST_MODEL = "the server's first"


def report_lines(report: dict) -> list[str]:
    """The doctor's JSON as the lines a user reads and pastes into a bug report."""
    engine, cpu, data, database = report["engine"], report["cpu"], report["data"], report["database"]
    lines = ["Hearth system check"] + [f"{name}: {version}" for name, version in engine.get("versions", {}).items()]
    lines.append(f"CPU: {cpu['name']} ({cpu['machine']}, {cpu['cores']} cores): {' '.join(cpu['features'])}")
    build = engine.get("cpu_build")
    if build:
        lines.append(f"CPU build of llama.cpp: {build['variant']}: {build['reason']}")
        lines += [f"  canary {name}: {' '.join(filter(None, (c['status'], c['signal'])))} - {c['detail']}"
                  for name, c in build["canaries"].items()]
    check = engine.get("model_check")
    if check:
        lines.append(f"Model check ({check['model']}: load, read, write a token): {check['status']}"
                     + (f" - {check['message']}" if check["message"] else ""))
    if not engine.get("running"):
        lines.append(f"Engine: does not start: {engine.get('error')}")
    lines += [f"NPU: {d['name']}: {d['detail']}" for d in report["npu"]]
    lines.append(f"Data folder: {data['folder']} ({format_bytes(data['free_bytes'])} free)")
    lines.append(f"Database: integrity {database.get('integrity', 'not created yet')}")
    if "snapshots" in database:
        s = database["snapshots"]
        lines.append(f"Snapshots: {format_bytes(s['bytes'])} of {format_bytes(s['budget_bytes'])}")
    lines += [f"Model {m['id'] or m['name']}: {'present' if m['present'] else 'MISSING'}, sha256 {m['sha256']}"
              for m in database.get("models", [])]
    lines += _remote_lines(report.get("remote_engines"))
    lines.append("Problems:" if report["problems"] else "No problems found.")
    lines += [f"  - {problem}" for problem in report["problems"]]
    return lines


def _remote_lines(remote: dict | None) -> list[str]:
    """Where engine keys are kept, and each remote engine (its key's place, never the key)."""
    if not remote:
        return []
    store = remote["secret_store"]
    lines = [f"Secret store for engine keys: {store['detail']}" if store["available"] else
             f"Secret store for engine keys: none ({store['detail']}); keys are kept for the session, in a "
             "private file with consent, or read from an environment variable"]
    lines += [f"Remote engine {e['name']}: {e['url']} (model {e['model'] or FIRST_MODEL}, key: {e['key']})"
              for e in remote["engines"]]
    return lines

