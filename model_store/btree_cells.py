"""Table b-trees read page by page (for ``hearth db recover``): the leaves reached from a root, and
the rows on one leaf, each decoded from its cell, overflow chain and record.

Every cell is checked as far as the format allows (its pointer inside the page, its bytes all
present, the record's header and body adding up to the payload size exactly, its text valid in the
file's encoding); a cell that fails is counted and left out, never guessed at.
Format: https://www.sqlite.org/fileformat2.html (sections 1.6 B-tree pages, 2.1 Record format).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from model_store.page_reader import FILE_HEADER_BYTES, TABLE_INTERIOR, TABLE_LEAF, PageFile, Unreadable, take, varint

INT_SIZES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}  # serial type -> bytes of a big-endian signed integer


@dataclass
class TreeWalk:
    """What walking one table's b-tree from its root met."""

    leaves: list[int] = field(default_factory=list)  # leaf pages, in rowid order
    pages: set[int] = field(default_factory=set)  # every page of the tree that was read
    unreadable: int = 0  # pages on the way that are missing or not b-tree pages of a table


@dataclass
class LeafRows:
    """The rows on one leaf page."""

    rows: list[tuple[int, list]] = field(default_factory=list)  # (rowid, values)
    overflow_pages: set[int] = field(default_factory=set)
    unreadable: int = 0  # cells that could not be read (bytes missing, or not a valid record)


def walk_table(pages: PageFile, root: int, taken: set[int]) -> TreeWalk:
    """The leaves of the table b-tree rooted at ``root``; pages already in ``taken`` (another tree's,
    or met twice: a loop in a damaged file) are not entered again."""
    walk = TreeWalk()
    stack = [root]
    while stack:
        number = stack.pop()
        if number in taken or number in walk.pages:
            walk.unreadable += 1
            continue
        try:
            data = pages.page(number)
            kind = take(data, _header_offset(number), 1)[0]
        except Unreadable:
            walk.unreadable += 1
            continue
        if kind == TABLE_LEAF:
            walk.pages.add(number)
            walk.leaves.append(number)
        elif kind == TABLE_INTERIOR:
            walk.pages.add(number)
            children = _interior_children(data, _header_offset(number), pages.page_count)
            walk.unreadable += children.count(0)
            stack.extend(reversed([child for child in children if child]))
        else:
            walk.unreadable += 1
    return walk


def _interior_children(data: bytes, start: int, page_count: int) -> list[int]:
    """The child pages of an interior page, left to right (0 for a pointer that cannot be read)."""
    cells = int.from_bytes(take(data, start + 3, 2), "big")
    children = []
    for i in range(cells):
        try:
            pointer = int.from_bytes(take(data, start + 12 + 2 * i, 2), "big")
            child = int.from_bytes(take(data, pointer, 4), "big")
        except Unreadable:
            child = 0
        children.append(child if 1 <= child <= page_count else 0)
    right = int.from_bytes(take(data, start + 8, 4), "big")
    children.append(right if 1 <= right <= page_count else 0)
    return children


def leaf_rows(pages: PageFile, number: int) -> LeafRows:
    """The rows of the table leaf page ``number``, each cell that can be read in full.

    Raises:
        Unreadable: If the page is missing or is not a table leaf.
    """
    data = pages.page(number)
    start = _header_offset(number)
    if take(data, start, 1)[0] != TABLE_LEAF:
        raise Unreadable(f"page {number} is not a table leaf")
    cells = int.from_bytes(take(data, start + 3, 2), "big")
    first_cell = start + 8 + 2 * cells
    found = LeafRows()
    for i in range(cells):
        try:
            pointer = int.from_bytes(take(data, start + 8 + 2 * i, 2), "big")
            if not first_cell <= pointer < pages.usable:
                raise Unreadable("a cell pointer outside the cell area")
            size, offset = varint(data, pointer)
            rowid, offset = varint(data, offset)
            payload, chain = _payload(pages, data, offset, size)
            signed = rowid - (1 << 64) if rowid >= 1 << 63 else rowid
            found.rows.append((signed, record_values(payload, pages.encoding)))
            found.overflow_pages |= chain
        except Unreadable:
            found.unreadable += 1
    return found


def _header_offset(number: int) -> int:
    return FILE_HEADER_BYTES if number == 1 else 0


def _payload(pages: PageFile, data: bytes, offset: int, size: int) -> tuple[bytes, set[int]]:
    """A cell's payload, its first part on the leaf and the rest on its overflow chain (§1.6)."""
    usable = pages.usable
    most_local = usable - 35
    if size <= most_local:
        return take(data, offset, size), set()
    if size > pages.page_count * usable:
        raise Unreadable("a payload larger than the file")
    least_local = (usable - 12) * 32 // 255 - 23
    local = least_local + (size - least_local) % (usable - 4)
    local = local if local <= most_local else least_local
    parts = [take(data, offset, local)]
    following = int.from_bytes(take(data, offset + local, 4), "big")
    remaining, chain = size - local, set()
    while remaining > 0:
        if following in chain or following == 0:
            raise Unreadable("an overflow chain that ends early or loops")
        page = pages.page(following)
        chain.add(following)
        parts.append(take(page, 4, min(remaining, usable - 4)))
        remaining -= len(parts[-1])
        following = int.from_bytes(page[:4], "big")
    return b"".join(parts), chain


def record_values(payload: bytes, encoding: str) -> list:
    """The values of a record: a header (its size, then one serial type per value) and a body."""
    header_size, offset = varint(payload, 0)
    if not offset <= header_size <= len(payload):
        raise Unreadable("a record header larger than the record")
    types = []
    while offset < header_size:
        serial, offset = varint(payload, offset)
        types.append(serial)
    if offset != header_size:
        raise Unreadable("a record header that overruns itself")
    body, values = header_size, []
    for serial in types:
        value, size = _value(payload, body, serial, encoding)
        values.append(value)
        body += size
    if body != len(payload):
        raise Unreadable("a record whose values do not fill its payload")
    return values


def _value(payload: bytes, offset: int, serial: int, encoding: str) -> tuple[object, int]:
    if serial == 0:
        return None, 0
    if serial in INT_SIZES:
        size = INT_SIZES[serial]
        return int.from_bytes(take(payload, offset, size), "big", signed=True), size
    if serial == 7:
        return struct.unpack(">d", take(payload, offset, 8))[0], 8
    if serial in (8, 9):
        return serial - 8, 0
    if serial in (10, 11):
        raise Unreadable("a reserved serial type")
    size = (serial - 12) // 2
    raw = take(payload, offset, size)
    if serial % 2 == 0:
        return raw, size
    try:
        return raw.decode(encoding), size
    except UnicodeDecodeError as exc:
        raise Unreadable("text that is not valid in the file's encoding") from exc
