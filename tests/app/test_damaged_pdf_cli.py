"""pypdf's own warnings about a damaged PDF never reach the terminal; one line in words does (issue 17.7)."""

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.pdf import pdf_of_pages

ROOT = Path(__file__).resolve().parents[2]


def doc_load(model: Path, document: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "doc", "load", "--model", str(model), "--json", str(document)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_a_pdf_with_a_broken_header_is_read_with_one_clear_line(hybrid_tiny, tmp_path):
    good = pdf_of_pages([b"BT /F1 12 Tf 72 720 Td (The harbour is quiet at dawn.) Tj ET"])
    damaged = tmp_path / "report.pdf"
    damaged.write_bytes(good.replace(b"%PDF-1.4", b"%XYZ-1.4"))
    done = doc_load(hybrid_tiny, damaged)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["title"] == "report.pdf"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("report.pdf is damaged (") and "parts of its text may be missing" in lines[0]
    assert "invalid pdf header" not in done.stderr.lower() and "eof marker" not in done.stderr.lower()


def test_a_pdf_that_cannot_be_read_gets_its_error_alone(hybrid_tiny, tmp_path):
    good = pdf_of_pages([b"BT /F1 12 Tf 72 720 Td (The harbour is quiet at dawn.) Tj ET"])
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"junk before the header\n" + good.replace(b"%%EOF", b""))
    done = doc_load(hybrid_tiny, broken)
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert "broken.pdf is damaged" in line and "PDF viewer" in line
