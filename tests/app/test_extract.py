"""extract_text: the text of real files in every supported format, and a clear error for every bad one.

Every document here is a real file written into ``tmp_path``; the PDFs are assembled by hand
(:mod:`tests.helpers.pdf`) and checked with pypdf in strict mode, so they are valid to the byte.
"""

from __future__ import annotations

import codecs
import os
import random
import struct
import sys
import tracemalloc
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from app.services.extract import READ_CHUNK_BYTES, SAMPLE_BYTES, DocumentError, ExtractedDocument, extract_text
from tests.helpers.pdf import IMAGE_PAGE, pdf_of_pages, pdf_with_an_image_per_page, text_pdf


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def refused(path: Path, **options) -> str:
    """The message of the DocumentError that reading ``path`` raises; it always names the file."""
    with pytest.raises(DocumentError) as caught:
        extract_text(path, **options)
    message = str(caught.value)
    assert path.name in message
    return message


def test_the_hand_made_pdf_is_valid_to_pypdf_in_strict_mode(tmp_path):
    path = write(tmp_path / "two.pdf", text_pdf("Hello page one", "Hello page two"))
    reader = PdfReader(path, strict=True)
    assert len(reader.pages) == 2
    assert "Hello page two" in reader.pages[1].extract_text()


# --- text files and their encodings --------------------------------------------------------------


def test_utf8_text_is_read_as_it_is(tmp_path):
    content = "Grüße, 東京\nsecond line\n"
    path = write(tmp_path / "notes.txt", content.encode("utf-8"))
    assert extract_text(path) == ExtractedDocument(title="notes.txt", kind="text", text=content, pages=None,
                                                   encoding="utf-8", source_bytes=path.stat().st_size)


def test_a_utf8_byte_order_mark_is_not_part_of_the_text(tmp_path):
    path = write(tmp_path / "bom.txt", "\ufeffTitle\nbody\n".encode("utf-8"))
    document = extract_text(path)
    assert document.text == "Title\nbody\n"
    assert document.encoding == "utf-8-sig"


WIDE_TEXT = "Grüße, 東京\nzweite Zeile\n"
NATIVE = "le" if sys.byteorder == "little" else "be"  # the byte order Python's "utf-16" and "utf-32" write


@pytest.mark.parametrize(("data", "encoding"), [
    (WIDE_TEXT.encode("utf-16"), f"utf-16-{NATIVE}"),
    (codecs.BOM_UTF16_BE + WIDE_TEXT.encode("utf-16-be"), "utf-16-be"),
    (WIDE_TEXT.encode("utf-32"), f"utf-32-{NATIVE}"),  # a little-endian UTF-32 mark begins with UTF-16's
])
def test_utf16_and_utf32_with_a_byte_order_mark(tmp_path, data, encoding):
    document = extract_text(write(tmp_path / "wide.txt", data))
    assert document.text == WIDE_TEXT
    assert document.encoding == encoding


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("repeat", [1, 4000], ids=["short", "longer-than-the-sample"])
def test_utf16_without_a_byte_order_mark_is_read_as_text(tmp_path, codec, repeat):
    content = "Grüße aus Köln, 東京, 一 and 🙂\nzweite Zeile\n" * repeat  # 一 is U+4E00: a zero low byte
    path = write(tmp_path / "wide.txt", content.encode(codec))
    assert path.stat().st_size > SAMPLE_BYTES or repeat == 1
    document = extract_text(path)
    assert document.text == content
    assert document.encoding == codec


@pytest.mark.parametrize(("content", "codec"), [
    ("café déjà vu naïve\n" * 20, "latin-1"),
    ("Le café était fermé, alors nous sommes allés jusqu’à la gare. Déjà vu, pensa-t-elle, un peu naïve. "
     "Où est l’hôtel ? Ça coûte 5 €, mon cœur.\n" * 8, "cp1252"),
    ("El niño pequeño comió mañana en el jardín con su abuela, ¿verdad? ¡Qué día!\n" * 5, "cp1252"),
    # Windows-1252 is preferred among Latin code pages, but not over text that is not Western:
    ("Привет, как дела? Это тест кодировки, и он должен пройти.\n" * 5, "cp1251"),
    ("Zażółć gęślą jaźń. Pchnąć w tę łódź jeża lub ośm skrzyń fig.\n" * 5, "cp1250"),
])
def test_legacy_single_byte_text_decodes_to_the_right_characters(tmp_path, content, codec):
    path = write(tmp_path / "legacy.txt", content.encode(codec))
    document = extract_text(path)
    assert document.text == content
    assert document.encoding is not None


def test_utf8_is_recognised_when_the_sample_ends_inside_a_character(tmp_path):
    content = "a" * (SAMPLE_BYTES - 1) + "é and more"  # "é" is two bytes: the sample ends between them
    document = extract_text(write(tmp_path / "long.txt", content.encode("utf-8")))
    assert document.encoding == "utf-8"
    assert document.text == content


def test_crlf_and_lone_cr_become_newlines(tmp_path):
    path = write(tmp_path / "windows.txt", b"one\r\ntwo\rthree\n\r\nfour")
    assert extract_text(path).text == "one\ntwo\nthree\n\nfour"


def test_a_chunk_boundary_splits_neither_crlf_nor_a_character(tmp_path):
    head = b"a" * (READ_CHUNK_BYTES - 1)
    path = write(tmp_path / "long.log", head + b"\r\n" + head + "é".encode("utf-8") + b"end")
    text = extract_text(path).text
    assert text == "a" * (READ_CHUNK_BYTES - 1) + "\n" + "a" * (READ_CHUNK_BYTES - 1) + "éend"


def test_progress_is_reported_in_bytes_up_to_the_file_size(tmp_path):
    path = write(tmp_path / "big.txt", b"line of text\n" * (READ_CHUNK_BYTES // 5))  # about 2.6 chunks
    calls = []
    extract_text(path, on_progress=lambda done, total: calls.append((done, total)))
    size = path.stat().st_size
    assert len(calls) == 3
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert {total for _, total in calls} == {size}
    assert calls[-1] == (size, size)


def test_cancelling_a_text_file_stops_reading_it(tmp_path):
    path = write(tmp_path / "big.txt", b"line of text\n" * (READ_CHUNK_BYTES // 5))
    calls = []
    message = refused(path, on_progress=lambda done, total: calls.append(done), cancelled=lambda: bool(calls))
    assert "cancelled" in message
    assert len(calls) == 1


@pytest.mark.parametrize(("name", "kind"), [
    ("README.md", "markdown"), ("notes.markdown", "markdown"), ("tool.py", "code"), ("main.RS", "code"),
    ("config.yaml", "code"), ("data.csv", "text"), ("Makefile", "text"), ("notes.unknownext", "text"),
])
def test_text_like_files_keep_their_text_and_get_their_kind(tmp_path, name, kind):
    content = "# Title\n\ndef main() -> None:\n    print('<b>not html</b> &amp;')\n"
    document = extract_text(write(tmp_path / name, content.encode("utf-8")))
    assert (document.kind, document.text) == (kind, content)


# --- HTML ----------------------------------------------------------------------------------------

PAGE = """<!DOCTYPE html>
<html><head><title>The   Report</title>
<style>body { color: red; }</style>
<script>var hidden = "do not show";</script>
</head>
<body>
  <h1>Results &amp; findings</h1>
  <p>First    paragraph
     spans lines.</p><p>Second &lt;paragraph&gt; with <b>bold</b> text&nbsp;&#233;.</p>
  <noscript>Enable JavaScript</noscript>
  <ul><li>one</li><li>two</li></ul>
  <pre>keep   this
  layout</pre>
  line<br>break
</body></html>
"""


def test_html_keeps_only_the_visible_text_with_the_title_first(tmp_path):
    document = extract_text(write(tmp_path / "report.html", PAGE.encode("utf-8")))
    assert document.kind == "html"
    assert document.text.splitlines() == [
        "The Report",
        "Results & findings",
        "First paragraph spans lines.",
        "Second <paragraph> with bold text é.",
        "one",
        "two",
        "keep   this",
        "  layout",
        "line",
        "break",
    ]


HIDDEN_PARTS = """<html><head><title>Shown</title></head><body>
<p>Visible one.</p>
<div hidden><p>Hidden by the attribute.<br></br>Still hidden.<p>Also hidden</div>
<p style="color: red; display : none !important">Hidden by a style.</p>
<p style="display:block">Visible two.</p>
<svg viewBox="0 0 10 10"><title>Chart title</title><text x="1" y="1">Axis label</text></svg>
<template><p>Template row</p></template>
<noscript><p>Enable JavaScript</p></noscript>
<ul><li hidden>Hidden item<li>Visible item</ul>
<p hidden>Hidden paragraph<p>Visible three.
<div>Before <span hidden>secret</span> after, <img hidden src="x.png"> still visible.</div>
<input type="hidden" value="token"><p>Visible four.</p>
</body></html>
"""


def test_html_drops_hidden_elements_svg_templates_and_noscript(tmp_path):
    document = extract_text(write(tmp_path / "hidden.html", HIDDEN_PARTS.encode("utf-8")))
    assert document.text.splitlines() == [
        "Shown",
        "Visible one.",
        "Visible two.",
        "Visible item",
        "Visible three.",
        "Before after, still visible.",
        "Visible four.",
    ]


def test_html_in_a_legacy_encoding(tmp_path):
    page = "<html><body><p>Le café était fermé, alors nous sommes allés à la gare déjà.</p></body></html>"
    document = extract_text(write(tmp_path / "old.htm", page.encode("cp1252")))
    assert document.text == "Le café était fermé, alors nous sommes allés à la gare déjà."


@pytest.mark.parametrize(("name", "template", "codec"), [
    ("page.html", '<html><head><meta charset="windows-1250"></head><body><p>{}</p></body></html>', "cp1250"),
    ("feed.xml", '<?xml version="1.0" encoding="ISO-8859-2"?>\n<note>{}</note>\n', "iso8859-2"),
    ("old.py", "# -*- coding: cp1250 -*-\nTEXT = '{}'\n", "cp1250"),
])
def test_an_encoding_the_file_declares_is_used(tmp_path, name, template, codec):
    hungarian = "Árvíztűrő tükörfúrógép, őszi szél fúj."  # ő and ű: Central European, not Windows-1252
    content = template.format(hungarian)
    document = extract_text(write(tmp_path / name, content.encode(codec)))
    assert hungarian in document.text
    assert document.encoding == codec


def test_a_latin1_declaration_is_read_as_windows_1252_like_browsers_do(tmp_path):
    page = '<html><head><meta charset="iso-8859-1"></head><body><p>It’s 5 € – “quoted”.</p></body></html>'
    document = extract_text(write(tmp_path / "shop.html", page.encode("cp1252")))
    assert document.text == "It’s 5 € – “quoted”."


def test_a_declared_encoding_that_does_not_fit_the_bytes_is_ignored(tmp_path):
    page = '<html><head><meta charset="utf-8"></head><body><p>Le café était fermé déjà.</p></body></html>'
    document = extract_text(write(tmp_path / "liar.html", page.encode("cp1252")))
    assert document.text == "Le café était fermé déjà."


def test_html_with_no_visible_text_is_empty(tmp_path):
    path = write(tmp_path / "blank.html", b"<html><head><script>x = 1</script></head><body>  </body></html>")
    assert "is empty" in refused(path)


# --- files that cannot be read -------------------------------------------------------------------


def test_an_empty_file_is_refused(tmp_path):
    assert "is empty; there is nothing to read" in refused(write(tmp_path / "empty.txt", b""))


def test_a_whitespace_only_file_is_refused(tmp_path):
    assert "is empty; there is nothing to read" in refused(write(tmp_path / "blank.md", b" \n\t\r\n  \n"))


@pytest.mark.parametrize(("name", "data"), [
    ("table.bin", bytes(range(256)) * 100),
    ("photo.png", b"\x89PNG\r\n\x1a\n" + random.Random(7).randbytes(20_000)),
    ("renamed.txt", b"\x89PNG\r\n\x1a\n" + random.Random(8).randbytes(20_000)),
    ("noextension", bytes(range(256)) * 100),
    ("records.txt", b"name=alice\x00age=30\x00" * 200),  # valid UTF-8, but NUL bytes are not text
    ("python", Path(sys.executable).resolve().read_bytes()[:65536]),  # an executable (ELF on Linux)
    ("elf.txt", b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHI", 2, 62, 1) + random.Random(9).randbytes(4000)),
    # 16-bit numbers below 256 have NULs in every other byte, like UTF-16, but read as control characters:
    ("samples.txt", struct.pack("<3000H", *(i % 200 for i in range(3000)))),
])
def test_binary_files_are_refused_as_binary(tmp_path, name, data):
    assert "looks like a binary file, not text" in refused(write(tmp_path / name, data))


def test_a_missing_file_is_refused(tmp_path):
    assert "was not found" in refused(tmp_path / "gone.txt")


def test_a_folder_is_refused(tmp_path):
    folder = tmp_path / "papers"
    folder.mkdir()
    assert "is a folder, not a file" in refused(folder)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a user that file permissions apply to")
def test_an_unreadable_file_is_refused(tmp_path):
    path = write(tmp_path / "secret.txt", b"private")
    path.chmod(0)
    assert "not allowed to read" in refused(path)


def test_text_longer_than_the_limit_is_refused_and_the_limit_itself_is_accepted(tmp_path):
    path = write(tmp_path / "long.txt", b"x" * 1000)
    assert len(extract_text(path, max_chars=1000).text) == 1000
    message = refused(path, max_chars=999)
    assert "more than 999 characters" in message and "memory bounded" in message


# --- PDF -----------------------------------------------------------------------------------------


def test_a_pdf_gives_the_text_of_every_page_with_progress_per_page(tmp_path):
    path = write(tmp_path / "report.pdf", text_pdf("Hello page one", "Hello page two"))
    calls = []
    document = extract_text(path, on_progress=lambda done, total: calls.append((done, total)))
    assert (document.title, document.kind, document.pages, document.encoding) == ("report.pdf", "pdf", 2, None)
    assert document.source_bytes == path.stat().st_size
    assert document.text.index("Hello page one") < document.text.index("\n\n") < document.text.index("Hello page two")
    assert calls == [(1, 2), (2, 2)]


def test_a_pdf_without_an_extension_is_recognised_by_its_header(tmp_path):
    document = extract_text(write(tmp_path / "download", text_pdf("Hello page one")))
    assert (document.kind, document.pages) == ("pdf", 1)
    assert "Hello page one" in document.text


def test_cancelling_a_pdf_stops_after_the_current_page(tmp_path):
    path = write(tmp_path / "long.pdf", text_pdf("Page one", "Page two", "Page three"))
    calls = []
    message = refused(path, on_progress=lambda done, total: calls.append(done), cancelled=lambda: bool(calls))
    assert message == "Reading long.pdf was cancelled."
    assert calls == [1]


@pytest.mark.parametrize("content", [IMAGE_PAGE, b""], ids=["image", "blank"])
def test_a_pdf_without_a_text_layer_is_refused(tmp_path, content):
    path = write(tmp_path / "scan.pdf", pdf_of_pages([content, content]))
    assert len(PdfReader(path, strict=True).pages) == 2
    assert "has no text layer" in refused(path)


def first_half(data: bytes) -> bytes:
    return data[: len(data) // 2]


@pytest.mark.parametrize("data", [b"%PDF-1.4 garbage", first_half(text_pdf("Hello page one", "Hello page two"))],
                         ids=["garbage", "truncated"])
def test_a_damaged_pdf_is_refused_as_damaged(tmp_path, data):
    assert "is damaged" in refused(write(tmp_path / "broken.pdf", data))


def test_a_password_protected_pdf_is_refused(tmp_path):
    plain = write(tmp_path / "plain.pdf", text_pdf("Top secret"))
    writer = PdfWriter(clone_from=plain)
    writer.encrypt(user_password="swordfish", algorithm="RC4-128")
    locked = tmp_path / "locked.pdf"
    with locked.open("wb") as file:
        writer.write(file)
    assert "protected by a password" in refused(locked)


def test_an_encrypted_pdf_that_opens_without_a_password_is_read(tmp_path):
    plain = write(tmp_path / "plain.pdf", text_pdf("Readable by anyone"))
    writer = PdfWriter(clone_from=plain)
    writer.encrypt(user_password="", owner_password="owner", algorithm="RC4-128")
    restricted = tmp_path / "restricted.pdf"
    with restricted.open("wb") as file:
        writer.write(file)
    assert PdfReader(restricted).is_encrypted
    assert "Readable by anyone" in extract_text(restricted).text


def test_reading_a_pdf_of_large_images_holds_about_one_page_not_the_whole_file(tmp_path):
    captions = [b"Caption of plate %d" % number for number in range(1, 25)]
    path = write(tmp_path / "plates.pdf", pdf_with_an_image_per_page(captions, image_bytes=1 << 20))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        document = extract_text(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert document.pages == len(captions)
    assert all(caption.decode() in document.text for caption in captions)
    assert peak < size / 6, f"reading a {size:,}-byte PDF peaked at {peak:,} bytes"


def test_a_pdf_longer_than_the_limit_is_refused(tmp_path):
    path = write(tmp_path / "big.pdf", text_pdf("Hello page one", "Hello page two"))
    assert "too large" in refused(path, max_chars=20)
