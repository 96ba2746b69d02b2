"""Hand-made PDFs, valid to the byte (pypdf reads them in strict mode): text pages, image pages, and
pages with a caption and a large image, for the extraction tests and the CLI's damaged-PDF tests."""

from __future__ import annotations

import random

TEXT_PAGE = b"BT /F1 12 Tf 72 720 Td (%s) Tj ET"
IMAGE_PAGE = b"q 100 0 0 100 72 600 cm /Im1 Do Q"  # paints a 1x1 grey image, no text


def pdf_stream(content: bytes, dictionary: bytes = b"") -> bytes:
    return b"<< %s/Length %d >>\nstream\n%s\nendstream" % (dictionary, len(content), content)


def assemble_pdf(objects: list[bytes]) -> bytes:
    """A PDF file of ``objects`` (numbered from 1, the first being the catalog) with an exact xref table."""
    pdf = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(pdf))
        pdf += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref_offset = len(pdf)
    pdf += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    pdf += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    pdf += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref_offset)
    return bytes(pdf)


def pdf_of_pages(contents: list[bytes]) -> bytes:
    """A PDF with one page per content stream; each page may use font /F1 (Helvetica) and image /Im1."""
    first_page = 5
    page_numbers = [first_page + 2 * index for index in range(len(contents))]
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % n for n in page_numbers), len(contents)),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        pdf_stream(b"\x80", b"/Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray "
                            b"/BitsPerComponent 8 "),
    ]
    for number, content in zip(page_numbers, contents):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> "
                       b"/XObject << /Im1 4 0 R >> >> /Contents %d 0 R >>" % (number + 1))
        objects.append(pdf_stream(content))
    return assemble_pdf(objects)


def pdf_with_an_image_per_page(sentences: list[bytes], image_bytes: int) -> bytes:
    """A PDF whose every page has a line of text and its own grey image of ``image_bytes``
    incompressible bytes (a scan with a caption, say): nearly all of the file is image data."""
    side = int(image_bytes ** 0.5)
    image_dictionary = b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray " \
                       b"/BitsPerComponent 8 " % (side, side)
    page_numbers = [4 + 3 * index for index in range(len(sentences))]
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % n for n in page_numbers), len(sentences)),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    rng = random.Random(5)
    for number, sentence in zip(page_numbers, sentences):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> "
                       b"/XObject << /Im1 %d 0 R >> >> /Contents %d 0 R >>" % (number + 2, number + 1))
        objects.append(pdf_stream(TEXT_PAGE % sentence + b"\n" + IMAGE_PAGE))
        objects.append(pdf_stream(rng.randbytes(side * side), image_dictionary))
    return assemble_pdf(objects)


def text_pdf(*sentences: str) -> bytes:
    return pdf_of_pages([TEXT_PAGE % sentence.encode("ascii") for sentence in sentences])
