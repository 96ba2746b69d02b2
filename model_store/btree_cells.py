"""Table b-trees read page by page (for ``hearth db recover``): the leaves reached from a root, and
the rows on one leaf, each decoded from its cell, overflow chain and record.

Every cell is checked as far as the format allows (its pointer inside the page, its bytes all
present, the record's header and body adding up to the payload size exactly, its text valid in the
file's encoding); a cell that fails is counted and left out, never guessed at.
Format: https://www.sqlite.org/fileformat2.html (sections 1.6 B-tree pages, 2.1 Record format).
"""

from __future__ import annotations

import bisect
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
            children = _interior_children(data, _header_offset(number))
            walk.unreadable += children.count(0)
            stack.extend(reversed([child for child in children if child]))
        else:
            walk.unreadable += 1
    return walk


def _interior_children(data: bytes, start: int) -> list[int]:
    """The child pages of an interior page, left to right (0 for a pointer that cannot be read; a
    page past the file's end is kept, so that reading it counts it as missing)."""
    cells = int.from_bytes(take(data, start + 3, 2), "big")
    children = []
    for i in range(cells):
        try:
            pointer = int.from_bytes(take(data, start + 12 + 2 * i, 2), "big")
            child = int.from_bytes(take(data, pointer, 4), "big")
        except Unreadable:
            child = 0
        children.append(child)
    children.append(int.from_bytes(take(data, start + 8, 4), "big"))
    return children


@dataclass(frozen=True)
class Cell:
    """Where one table-leaf cell lies: its payload's size and first part on the leaf, and the first
    page of its overflow chain (0: none)."""

    pointer: int
    rowid: int
    size: int
    local: tuple[int, int]  # (offset, bytes) of the payload's part on the leaf
    first_overflow: int


def leaf_cells(pages: PageFile, number: int) -> tuple[list[Cell], int]:
    """The cells of the table leaf ``number`` that can be located, in pointer order, and how many
    could not. A cell whose bytes overlap an earlier one's (pointers aliasing one cell) is not
    located: each byte of a page belongs to one cell, so a page yields at most its own size.

    Raises:
        Unreadable: If the page is missing or is not a table leaf.
    """
    data = pages.page(number)
    start = _header_offset(number)
    if take(data, start, 1)[0] != TABLE_LEAF:
        raise Unreadable(f"page {number} is not a table leaf")
    count = int.from_bytes(take(data, start + 3, 2), "big")
    first_cell = start + 8 + 2 * count
    cells, spans, unreadable = [], [], 0  # spans: the (start, end) of each cell located, sorted
    for i in range(count):
        try:
            pointer = int.from_bytes(take(data, start + 8 + 2 * i, 2), "big")
            if not first_cell <= pointer < pages.usable:
                raise Unreadable("a cell pointer outside the cell area")
            cell, end = _locate(pages, data, pointer)
            at = bisect.bisect(spans, (pointer, end))
            if at and spans[at - 1][1] > pointer or at < len(spans) and spans[at][0] < end:
                raise Unreadable("a cell that overlaps another")
            spans.insert(at, (pointer, end))
            cells.append(cell)
        except Unreadable:
            unreadable += 1
    return cells, unreadable


def _locate(pages: PageFile, data: bytes, pointer: int) -> tuple[Cell, int]:
    """The cell at ``pointer`` and the offset just past its bytes on the page (§1.6)."""
    size, offset = varint(data, pointer)
    rowid, offset = varint(data, offset)
    usable, most_local = pages.usable, pages.usable - 35
    if size <= most_local:
        take(data, offset, size)
        return Cell(pointer, rowid, size, (offset, size), 0), offset + size
    if size > pages.page_count * usable:
        raise Unreadable("a payload larger than the file")
    least_local = (usable - 12) * 32 // 255 - 23
    local = least_local + (size - least_local) % (usable - 4)
    local = local if local <= most_local else least_local
    following = int.from_bytes(take(data, offset + local, 4), "big")
    if following == 0:
        raise Unreadable("an overflow chain that ends early")
    return Cell(pointer, rowid, size, (offset, local), following), offset + local + 4


def claim_overflow(pages: PageFile, number: int) -> None:
    """Give each overflow page met on the chains of leaf ``number``'s cells to the first cell whose
    chain reaches it; a chain stops at a page another cell has. Leaves in a table's tree claim
    before leaves found outside one, so a stray leaf cannot take a live row's pages; and since each
    overflow page has one owner, recovery reads each at most once for its rows."""
    if number in pages.claimed_leaves:
        return
    pages.claimed_leaves.add(number)
    try:
        cells, _ = leaf_cells(pages, number)
    except Unreadable:
        return
    for cell in cells:
        owner, following, remaining = (number, cell.pointer), cell.first_overflow, cell.size - cell.local[1]
        while remaining > 0 and following and following not in pages.overflow_owner:
            try:
                page = pages.page(following)
                next_page = int.from_bytes(take(page, 0, 4), "big")
            except Unreadable:
                break
            pages.overflow_owner[following] = owner
            remaining -= pages.usable - 4
            following = next_page


def leaf_rows(pages: PageFile, number: int) -> LeafRows:
    """The rows of the table leaf page ``number``, each cell that can be read in full.

    Raises:
        Unreadable: If the page is missing or is not a table leaf.
    """
    claim_overflow(pages, number)
    cells, unreadable = leaf_cells(pages, number)
    data, found = pages.page(number), LeafRows(unreadable=unreadable)
    for cell in cells:
        try:
            payload, chain = _payload(pages, data, number, cell)
            signed = cell.rowid - (1 << 64) if cell.rowid >= 1 << 63 else cell.rowid
            found.rows.append((signed, record_values(payload, pages.encoding)))
            found.overflow_pages |= chain
        except Unreadable:
            found.unreadable += 1
    return found


def _header_offset(number: int) -> int:
    return FILE_HEADER_BYTES if number == 1 else 0


def _payload(pages: PageFile, data: bytes, number: int, cell: Cell) -> tuple[bytes, set[int]]:
    """A cell's payload: its first part on the leaf, the rest on the overflow pages its chain owns."""
    offset, local = cell.local
    parts, chain = [take(data, offset, local)], set()
    remaining, following = cell.size - local, cell.first_overflow
    while remaining > 0:
        if following in chain or pages.overflow_owner.get(following) != (number, cell.pointer):
            raise Unreadable("an overflow chain that ends early, loops, or runs into another row's")
        page = pages.page(following)
        chain.add(following)
        parts.append(take(page, 4, min(remaining, pages.usable - 4)))
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
