"""Which table each row read from a damaged file's pages belongs to (for ``hearth db recover``).

1. The file's schema is the table b-tree rooted at page 1 (``sqlite_schema``: type, name,
   tbl_name, rootpage, sql). Its SQL is never run: a text that one of Hearth's migrations wrote
   gives that table's columns at that version (:mod:`model_store.schema_history`); any other text
   is only a name and a root page, read with the table's current shape.
2. Each table's b-tree is walked from its root page; the rows on the leaves it reaches are that
   table's, in rowid order.
3. Table leaves that no tree reaches (their interior page was lost, or page 1 and with it the
   schema) are placed by shape: a page goes to the one known table that every row on it fits
   (number of values, each value's type against the column's declared type, NOT NULL and primary
   key columns present; a shorter record, written before an ``ALTER TABLE ... ADD COLUMN``, fits
   when the columns it lacks have defaults). Pages on the freelist are skipped (they may hold
   deleted rows); a page that fits no table or more than one is left out and counted.

Rows are yielded table by table in the order given (conversations before messages before
snapshots), so references can be checked as they go in.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from model_store.btree_cells import LeafRows, claim_overflow, leaf_rows, walk_table
from model_store.page_reader import TABLE_LEAF, PageFile, Unreadable
from model_store.schema_history import known_tables

SCHEMA_ROOT = 1
SCHEMA_TABLE = "sqlite_schema"


@dataclass(frozen=True)
class TableShape:
    """A table's columns and what each may hold, from ``PRAGMA table_info``."""

    name: str
    columns: tuple[str, ...]
    kinds: tuple[str, ...]  # "int", "real", "text", "blob" or "any", by SQLite's affinity rules
    required: tuple[bool, ...]  # NOT NULL or part of the primary key
    optional: tuple[bool, ...]  # may be missing from a record: has a default, or may be NULL
    rowid_column: int | None  # an INTEGER PRIMARY KEY: its value is the rowid, NULL in the record

    def fits(self, values: list) -> bool:
        if not 0 < len(values) <= len(self.columns) or not all(self.optional[len(values):]):
            return False
        return all(_fits(value, kind, required and i != self.rowid_column)
                   for i, (value, kind, required) in enumerate(zip(values, self.kinds, self.required)))

    def as_row(self, rowid: int, values: list) -> dict[str, object]:
        row = dict(zip(self.columns, values))
        if self.rowid_column is not None and row.get(self.columns[self.rowid_column]) is None:
            row[self.columns[self.rowid_column]] = rowid
        return row


def table_shape(conn: sqlite3.Connection, table: str) -> TableShape:
    """The shape of ``table`` as the database behind ``conn`` declares it."""
    return shape_from_info(table, conn.execute("SELECT * FROM pragma_table_info(?)", [table]).fetchall())


def shape_from_info(table: str, info: Sequence[Sequence]) -> TableShape:
    """The shape of ``table`` from its ``PRAGMA table_info`` rows."""
    keys = [row for row in info if row[5]]
    rowid_column = next((i for i, row in enumerate(info) if row[5]), None) \
        if len(keys) == 1 and keys[0][2].upper() == "INTEGER" else None
    return TableShape(table, tuple(row[1] for row in info), tuple(_kind(row[2]) for row in info),
                      tuple(bool(row[3] or row[5]) for row in info),
                      tuple(row[4] is not None or not (row[3] or row[5]) for row in info), rowid_column)


def quoted(name: str) -> str:
    """``name`` as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _kind(declared: str) -> str:
    declared = declared.upper()
    if "INT" in declared:
        return "int"
    if any(word in declared for word in ("CHAR", "CLOB", "TEXT")):
        return "text"
    if any(word in declared for word in ("REAL", "FLOA", "DOUB")):
        return "real"
    return "blob" if "BLOB" in declared else "any"


def _fits(value: object, kind: str, required: bool) -> bool:
    if value is None:
        return not required
    if kind == "int":
        return isinstance(value, int)
    if kind == "real":
        return isinstance(value, (int, float))  # SQLite stores a whole REAL as an integer
    if kind == "text":
        return isinstance(value, str)
    return kind == "any" or isinstance(value, bytes)


@dataclass
class Reading:
    """What reading the pages found, for the report."""

    pages: int = 0  # pages the database had, as far as the file shows: those it holds and those missing
    pages_missing: int = 0  # lost past the end of a truncated file (page_reader.PageFile.pages_missing)
    unreadable: dict[str, int] = field(default_factory=dict)  # table -> its pages that could not be read
    cells_unreadable: int = 0  # cells on readable leaves whose bytes are damaged or missing
    placed_by_shape: int = 0  # rows found on leaves no table's tree reaches any more
    pages_not_placed: int = 0  # such leaves that fit no known table, or several
    schema_readable: bool = True


class RowFinder:
    """Every row that can be read from ``pages``, with the table (of ``known``) it belongs to."""

    def __init__(self, pages: PageFile, known: dict[str, TableShape]) -> None:
        self.pages, self.known = pages, known
        self.reading = Reading()
        self.taken: set[int] = set()  # pages that belong to a tree walked already

    def rows(self) -> Iterator[tuple[str, dict[str, object]]]:
        """(table, {column: value}) for every row that can be read, table by table."""
        trees = self._schema()
        walks = {}
        for name, (root, _) in trees.items():  # every tree first, so no leaf is taken for an orphan
            walks[name] = walk_table(self.pages, root, self.taken)
            self.taken |= walks[name].pages
        for walk in walks.values():  # and their rows' overflow pages, so no stray cell takes them
            for number in walk.leaves:
                claim_overflow(self.pages, number)
        orphans = self._orphan_leaves()
        for name in self.known:
            if name in trees:
                shape = trees[name][1] or self.known[name]
                self.reading.unreadable[name] = walks[name].unreadable
                for number in walks[name].leaves:
                    yield from self._leaf(number, shape)
            for number in orphans.get(name, []):
                for row in self._leaf(number, self.known[name]):
                    self.reading.placed_by_shape += 1
                    yield row
        self.reading.pages_missing = self.pages.pages_missing
        self.reading.pages = self.pages.page_count + self.reading.pages_missing

    def _leaf(self, number: int, shape: TableShape) -> Iterator[tuple[str, dict[str, object]]]:
        found = self._read_leaf(number)
        self.reading.cells_unreadable += found.unreadable
        for rowid, values in found.rows:
            if shape.fits(values):
                yield shape.name, shape.as_row(rowid, values)
            else:
                self.reading.cells_unreadable += 1

    def _read_leaf(self, number: int) -> LeafRows:
        try:
            found = leaf_rows(self.pages, number)
        except Unreadable:
            return LeafRows()
        self.taken |= found.overflow_pages
        return found

    def _schema(self) -> dict[str, tuple[int, TableShape | None]]:
        """Table name -> (root page, shape), from the schema rows that can be read: every table, so
        that no table's leaves are taken for another's (None: a text none of Hearth's migrations
        wrote, so its columns are not known)."""
        walk = walk_table(self.pages, SCHEMA_ROOT, set())
        self.taken |= walk.pages
        history = known_tables()
        trees = {}
        for number in walk.leaves:
            for _, values in self._read_leaf(number).rows:
                if len(values) != 5 or values[0] != "table" or not isinstance(values[1], str) \
                        or not isinstance(values[3], int):
                    continue
                name, root, sql = values[1], values[3], values[4]
                known = history.get(sql) if isinstance(sql, str) else None
                trees[name] = (root, shape_from_info(name, known[1]) if known and known[0] == name else None)
        self.reading.schema_readable = any(name in trees for name in self.known)
        return trees

    def _orphan_leaves(self) -> dict[str, list[int]]:
        """Table leaves outside every tree walked, by the table whose shape most of their rows fit
        (a leaf is one table's; a damaged cell on it may fit none)."""
        skip = self.taken | self.pages.freelist() | self.pages.overflow_owner.keys()
        placed: dict[str, list[int]] = {}
        for number in self.pages.numbers():
            if number in skip or self.pages.page_type(number) != TABLE_LEAF:
                continue
            found = self._read_leaf(number)
            if not found.rows:  # an empty leaf (an empty table's root), or every cell damaged
                continue
            fits = {name: sum(shape.fits(values) for _, values in found.rows) for name, shape in self.known.items()}
            most = max(fits.values())
            best = [name for name, count in fits.items() if count == most]
            if most and len(best) == 1:
                placed.setdefault(best[0], []).append(number)
            else:
                self.reading.pages_not_placed += 1
        return placed
