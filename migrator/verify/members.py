"""Members nobody explains, named one by one.

The verify pass counts, per coalesced key (unique hash, index set, tag set, sorted set), the
members the source puts there, and compares that with the key's size. When a key holds more
than the source explains, this module names the extra members: it scans the key
(HSCAN/SSCAN/ZSCAN, a page at a time, so memory stays flat) and asks the source about each
page: the rows the members name (by primary key for index and sorted sets, by the unique
columns for a unique hash, by the placeholders of the set's key and member templates for a
tag set) are planned again, and a member that none of them puts at that key is foreign.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from migrator.mapping.model import Template
from migrator.plan.escape import composite
from migrator.plan.values import Kind
from migrator.retry import Retrying
from migrator.source.selects import keyset_value
from migrator.source.where import clause
from migrator.store.sink import retry
from migrator.verify.expiry import TOLERANCE
from migrator.verify.rows import run_structure

if TYPE_CHECKING:
    from migrator.verify.rows import RowChecks

SCAN_COUNT = 1000
Page = list[tuple[bytes, bytes | None]]  # (member or field, its value or score; None: a set)


def params(raw: Sequence[bytes], kinds: Sequence[Kind]) -> tuple[Any, ...] | None:
    """Key text -> query parameters for the columns, or None when it cannot be such a value."""
    out = []
    for v, kind in zip(raw, kinds):
        if kind is not Kind.BINARY:
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                return None
        try:
            out.append(keyset_value(v, kind))
        except ValueError:
            return None
    return tuple(out)


def scan_members(
    client: Any, name: str, key: bytes, retrying: Retrying | None = None
) -> Iterator[Page]:
    """A coalesced key's members a page at a time: (field, value) of a unique hash, (member,
    score) of a sorted set, (member, None) of a set; a dropped connection is retried as
    ``retrying`` says."""
    if name == "vector":  # no VSCAN: VRANDMEMBER of the set's size lists it whole
        size = retry(lambda: client.execute_command("VCARD", key), retrying=retrying)
        got = retry(lambda: client.execute_command("VRANDMEMBER", key, size or 1),
                    retrying=retrying) if size else []  # fmt: skip
        for i in range(0, len(got), SCAN_COUNT):
            yield [(m, None) for m in got[i : i + SCAN_COUNT]]
        return
    cursor: Any = 0
    scan = {"unique": client.hscan, "sorted": client.zscan}.get(name, client.sscan)
    while True:
        cursor, got = retry(
            lambda: scan(key, cursor, count=SCAN_COUNT),  # noqa: B023
            retrying=retrying,
        )
        if name == "unique":
            page: Page = list(got.items())
        elif name == "sorted":
            page = [(m, str(s).encode()) for m, s in got]
        else:
            page = [(m, None) for m in got]
        if page:
            yield page
        if int(cursor) == 0:
            return


class Explainer:
    """Names the members of one table's coalesced keys that no source row puts there."""

    def __init__(self, checks: RowChecks, source: Any, client: Any) -> None:
        self.checks, self.src, self.client = checks, source, client
        plan = checks.plan
        self.plan = plan
        self.name = plan.table.name
        self.selector = source.selector(self.name, plan.row_names)
        self.pk = plan.resolved.primary_key
        self.kinds = {c: plan.resolved.schema.column(c).kind for c in plan.select}
        # a row the filter leaves out explains nothing; one within verify's tolerance of its
        # expiry does (verify/expiry.py)
        self.where = clause(plan.resolved, TOLERANCE)

    def foreign(self, name: str, key: bytes) -> Iterator[tuple[bytes, bytes | None]]:
        """(member, its value) for every member of ``key`` no source row explains."""
        structure = self.checks.structures[name]
        for page in scan_members(self.client, name, key, self.checks.reader.retrying):
            rows = self._rows(name, key, [m for m, _ in page])
            b = run_structure(structure, rows)
            if name == "unique":
                produced = set(b.hsets.get(key, [])[0::2])
            elif name == "sorted":
                produced = set(b.zadds.get(key, [])[1::2])
            elif name == "vector":
                produced = {c[4] for c in b.commands if c[0] == b"VADD" and c[1] == key}
            else:
                produced = set(b.sadds.get(key, []))
            for member, value in page:
                if member not in produced:
                    yield member, value

    # -- the rows a page of members names --------------------------------------------------
    def _rows(self, name: str, key: bytes, members: list[bytes]) -> list[Any]:
        if name in ("index", "sorted", "vector"):
            return self._where(self.pk, [self.plan.read_joined(self.pk, m) for m in members])
        if name == "unique":
            hashed = [u.columns for u in self.plan.table.unique if u.key is None]
            cols = next(c for c in hashed if self.plan.unique_hash_key(c) == key)
            return self._where(cols, [self.plan.read_joined(cols, m) for m in members])
        rows: list[Any] = []
        for spec in self.plan.table.sets:
            got = self._invert(spec.key, key, True)
            if got is None:
                continue
            wanted: list[tuple[str, ...]] = []
            values: list[list[bytes] | None] = []
            for m in members:
                more = self._invert(spec.member, m, composite(spec.member))
                if more is None or any(got.get(c, v) != v for c, v in more.items()):
                    continue
                both = {**got, **more}
                cols = tuple(sorted(both))
                wanted.append(cols)
                values.append([both[c] for c in cols])
            for cols in dict.fromkeys(wanted):
                rows += self._where(cols, [v for c, v in zip(wanted, values) if c == cols])
        return rows

    def _invert(self, template: Template, text: bytes, escaped: bool) -> dict[str, bytes] | None:
        """The values a key or member was rendered from, unescaped under escape: backslash
        (``escaped``: whether this text is escaped there: keys always, members if composite)."""
        return self.plan.read(template, text, escaped)

    def _where(self, cols: Sequence[str], raw: Sequence[list[bytes] | None]) -> list[Any]:
        kinds = [self.kinds[c] for c in cols]
        values = {p for v in raw if v is not None and (p := params(v, kinds)) is not None}
        if not values:
            return []
        ordered = sorted(values, key=repr)
        rows = self.src.rows_where(self.name, self.selector, list(cols), ordered, self.where)
        if self.checks.expiry is not None:  # a fixed ttl's expired rows explain nothing
            rows = self.checks.expiry.explaining(rows)
        return [r for r in rows if self.plan.ambiguous(r) is None]  # rows migrate writes
