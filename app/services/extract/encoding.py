"""Which encoding a text-like file is in (see the package docstring for the rules)."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from charset_normalizer import CharsetMatch, CharsetMatches, from_bytes

DECLARATION_SEARCH_BYTES = 8192  # where an encoding declaration is looked for
_DECLARATIONS = (
    re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE),  # HTML
    re.compile(rb"""<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""", re.IGNORECASE),  # XML
    re.compile(rb"\A(?:[^\n]*\n)?[ \t\f]*#[^\n]*?coding[:=][ \t]*([-\w.]+)"),  # PEP 263, first two lines
)
_READ_LIKE_BROWSERS = {"iso8859-1": "cp1252", "ascii": "cp1252"}  # what "latin-1" and "ascii" mean in practice

# The priors that correct charset-normalizer (see the module doc).
WESTERN_ENCODING = "cp1252"
WESTERN_MAX_CHAOS = 0.3  # charset-normalizer's "mess" ratio above which Windows-1252 is not preferred
COHERENCE_MARGIN = 0.1  # how much worse than the guess Windows-1252 may fit a language and still win
SAME_CHAOS = 0.05  # readings whose chaos differs by no more than this are as good as each other
_WINDOWS_CODE_PAGE = re.compile(r"cp125\d$")
_RARELY_USED_CODE_PAGE = re.compile(r"mac_|cp(437|7\d\d|8\d\d|1125)$|hp_roman8$")  # Mac and DOS code pages

# BOM-less UTF-16 (see _utf16_without_bom): the share of zero high bytes it needs, of zero low
# bytes it tolerates (U+0100, U+4E00 ...), and of control characters in the decoded sample.
UTF16_MIN_ZERO_HIGH_BYTES = 0.3
UTF16_MAX_ZERO_LOW_BYTES = 0.05
UTF16_MAX_CONTROL_SHARE = 0.01
_CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0e-\x1f\x7f]")  # C0 controls and DEL, but not \t \n \v \f \r

_BYTE_ORDER_MARKS = (  # UTF-32 first: its little-endian mark starts with UTF-16's
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


# --- text-like files ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Encoding:
    name: str  # reported, e.g. "utf-8-sig"
    codec: str  # decodes the bytes after the byte-order mark, e.g. "utf-8"
    bom_length: int = 0


def detect_encoding(sample: bytes, *, truncated: bool) -> Encoding | None:
    """The encoding of a file from a sample of its first bytes, or None if it looks binary.

    Args:
        sample: The file's first bytes.
        truncated: Whether the file goes on after the sample (it may end inside a character).
    """
    marked = _encoding_from_bom(sample)
    if marked is not None:
        return marked
    if b"\x00" in sample:
        return _utf16_without_bom(sample, truncated=truncated)
    if _decodes_as(sample, "utf-8", truncated=truncated):
        return Encoding("utf-8", "utf-8")
    legacy = _declared_encoding(sample, truncated=truncated) or _guess_legacy_encoding(
        _whole_lines(sample) if truncated else sample)
    if legacy is None:
        return None
    name = codecs.lookup(legacy).name
    return Encoding(name, name)


def _encoding_from_bom(sample: bytes) -> Encoding | None:
    for mark, codec in _BYTE_ORDER_MARKS:
        if sample.startswith(mark):
            name = "utf-8-sig" if codec == "utf-8" else codec
            return Encoding(name, codec, len(mark))
    return None


def _utf16_without_bom(sample: bytes, *, truncated: bool) -> Encoding | None:
    """UTF-16 text with no byte-order mark, told from binary by where its NUL bytes fall, else None.

    Characters below U+0100 (all of ASCII) have a zero high byte, so Latin-script UTF-16 has NULs
    in nearly every other byte and almost none between: odd positions in little-endian, even ones
    in big-endian. Binary data (an executable, an image, a table of numbers) has NULs on both or
    on neither. The sample must then decode, and read as text: no NUL characters, few controls.
    """
    high_bytes_zero = {"utf-16-le": _nul_share(sample[1::2]), "utf-16-be": _nul_share(sample[0::2])}
    low_bytes_zero = {"utf-16-le": _nul_share(sample[0::2]), "utf-16-be": _nul_share(sample[1::2])}
    codec = max(high_bytes_zero, key=high_bytes_zero.__getitem__)
    if high_bytes_zero[codec] < UTF16_MIN_ZERO_HIGH_BYTES or low_bytes_zero[codec] > UTF16_MAX_ZERO_LOW_BYTES:
        return None
    text = _decoded(sample, codec, truncated=truncated)
    return Encoding(codec, codec) if text is not None and _reads_as_text(text) else None


def _nul_share(data: bytes) -> float:
    return data.count(0) / len(data) if data else 0.0


def _reads_as_text(text: str) -> bool:
    """No NUL characters and at most a few other control characters (tabs and newlines aside)."""
    return "\x00" not in text and len(_CONTROL_CHARACTERS.findall(text)) <= UTF16_MAX_CONTROL_SHARE * len(text)


def _decodes_as(sample: bytes, codec: str, *, truncated: bool) -> bool:
    """Whether ``codec`` is a text encoding that decodes the sample without an error."""
    return _decoded(sample, codec, truncated=truncated) is not None


def _decoded(sample: bytes, codec: str, *, truncated: bool) -> str | None:
    """The sample decoded by ``codec`` if it is a text encoding that decodes it without an error."""
    try:
        decoded = codecs.getincrementaldecoder(codec)().decode(sample, final=not truncated)
    except (ValueError, TypeError):  # UnicodeDecodeError, or a bytes-to-bytes codec like base64
        return None
    return decoded if isinstance(decoded, str) else None


def _declared_encoding(sample: bytes, *, truncated: bool) -> str | None:
    """The encoding an HTML <meta>, an XML declaration or a coding cookie names, if it reads the sample."""
    label = _declared_label(sample[:DECLARATION_SEARCH_BYTES])
    if label is None:
        return None
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    if name.startswith(("utf-16", "utf-32")):  # cannot be: the sample has no NUL bytes
        return None
    for codec in (_READ_LIKE_BROWSERS.get(name, name), name):
        if _decodes_as(sample, codec, truncated=truncated):
            return codec
    return None


def _declared_label(head: bytes) -> str | None:
    for pattern in _DECLARATIONS:
        match = pattern.search(head)
        if match:
            return match.group(1).decode("ascii")
    return None


def _whole_lines(sample: bytes) -> bytes:
    """The sample up to its last newline, so a multi-byte character is not cut in two.

    In the legacy multi-byte encodings (Shift-JIS, GBK, Big5, EUC) byte 0x0A is only ever a newline.
    """
    end = sample.rfind(b"\n")
    return sample[: end + 1] if end > 0 else sample


def _guess_legacy_encoding(sample: bytes) -> str | None:
    """charset-normalizer's guess, corrected towards the code pages in common use (see the module doc)."""
    readings = from_bytes(sample)
    guess = readings.best()
    if _western_reads_as_well(sample, guess):
        return WESTERN_ENCODING
    if guess is None:
        return None
    return _windows_alternative(readings, guess) or guess.encoding


def _western_reads_as_well(sample: bytes, guess: CharsetMatch | None) -> bool:
    """Whether Windows-1252 reads the sample with little chaos and fits a language as well as ``guess``."""
    western = from_bytes(sample, cp_isolation=[WESTERN_ENCODING], threshold=WESTERN_MAX_CHAOS).best()
    return western is not None and (guess is None or western.coherence >= guess.coherence - COHERENCE_MARGIN)


def _windows_alternative(readings: CharsetMatches, guess: CharsetMatch) -> str | None:
    """A Windows code page that reads the sample about as well as ``guess``, a Mac or DOS one."""
    if not _RARELY_USED_CODE_PAGE.match(guess.encoding):
        return None
    for reading in readings:
        if _WINDOWS_CODE_PAGE.match(reading.encoding) and reading.chaos <= guess.chaos + SAME_CHAOS:
            return reading.encoding
    return None


