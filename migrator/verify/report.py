"""What verify found: per table, counts of each kind of difference and the first examples."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from migrator.errors import EXIT_DIFFERENCE, EXIT_OK
from migrator.plan.escape import AMBIGUOUS

if TYPE_CHECKING:
    from migrator.source.snapshot import Snapshot

EXAMPLES = 5

# kinds of difference, as the report names them
MISSING_ROW = "missing row key"
DIFFERENT_VALUE = "different value"
MISSING_FIELD = "missing field"
EXTRA_FIELD = "extra field"
WRONG_TYPE = "wrong type"
MISSING_UNIQUE = "missing unique entry"
WRONG_UNIQUE = "wrong unique entry"
FOREIGN_UNIQUE = "foreign unique entry"
MISSING_INDEX = "missing index member"
FOREIGN_INDEX = "foreign index member"
MISSING_SET = "missing set member"
FOREIGN_SET = "foreign set member"
MISSING_SORTED = "missing sorted member"
WRONG_SCORE = "wrong score"
FOREIGN_SORTED = "foreign sorted member"
MISSING_VECTOR = "missing vector-set element"
WRONG_VECTOR = "wrong vector-set element"  # its vector or its attributes
FOREIGN_VECTOR = "foreign vector-set element"
WRONG_COUNTER = "wrong counter"
WRONG_LATEST = "wrong latest list"
STALE = "stale key"
DANGLING = "dangling reference"
SHARED_KEY = "row sharing its key"  # a declared primary_key MySQL does not keep unique
SHARED_UNIQUE = "row sharing a unique value"  # a unique: MySQL does not keep unique
#: a row of a sharded source whose primary key or unique value an earlier shard holds
#: (docs/sharding.md#collisions): Redis holds the earlier shard's row
COLLIDING = "row colliding across shards"
#: a nested child of a sharded source whose parent row is on another shard: in no document
#: (docs/sharding.md#nested-documents)
CROSS_SHARD = "child on another shard than its parent"
#: a row migrate does not write by policy (a separator inside a composite's value under
#: ``escape: reject``, a NULL in a row-key column): MySQL holds it, Redis does not
REJECTED = "rejected row"
#: a key of a row with ``expire:`` that has no TTL, or one further than the tolerance from
#: the row's moment (docs/mapping.md#expire)
MISSING_TTL = "missing TTL"
WRONG_TTL = "wrong TTL"

MISSING_KINDS = frozenset({MISSING_ROW})
DIFFERENT_KINDS = frozenset(
    {
        DIFFERENT_VALUE,
        MISSING_FIELD,
        EXTRA_FIELD,
        WRONG_TYPE,
        SHARED_KEY,
        SHARED_UNIQUE,
        COLLIDING,
        CROSS_SHARD,
        MISSING_TTL,
        WRONG_TTL,
    }
)
STALE_KINDS = frozenset({STALE})
REJECTED_KINDS = frozenset({REJECTED})


def text(value: object, limit: int = 120) -> str | None:
    """A value as it may be shown: UTF-8 where it is, else escaped bytes; long ones cut."""
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            value = repr(value)[2:-1]
    elif not isinstance(value, str):
        value = str(value)
    return value if len(value) <= limit else value[: limit - 1] + "…"


@dataclass(frozen=True)
class Difference:
    kind: str
    key: str
    field: str | None
    mysql: str | None  # what the source says (MySQL's text), None: nothing
    redis: str | None  # what Redis holds, None: nothing

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "key": self.key,
            "field": self.field,
            "mysql": self.mysql,
            "redis": self.redis,
        }


@dataclass
class TableCheck:
    table: str
    mysql_rows: int = 0
    redis_rows: int | None = None  # row keys present (None: the table has none, or not counted)
    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[Difference]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: rejected rows per reason (``REJECTED`` counts them all)
    refused: Counter[str] = field(default_factory=Counter)
    #: rows read from MySQL per driver ("asyncmy", "pymysql") by the full pass
    readers: Counter[str] = field(default_factory=Counter)

    def add(
        self,
        kind: str,
        key: bytes | str,
        fieldname: object = None,
        mysql: object = None,
        redis: object = None,
        n: int = 1,
    ) -> None:
        self.counts[kind] += n
        shown = self.examples.setdefault(kind, [])
        if len(shown) < EXAMPLES:
            shown.append(
                Difference(kind, text(key) or "", text(fieldname), text(mysql), text(redis))
            )

    def _sum(self, kinds: frozenset[str]) -> int:
        return sum(n for k, n in self.counts.items() if k in kinds)

    @property
    def missing(self) -> int:
        return self._sum(MISSING_KINDS)

    @property
    def different(self) -> int:
        return self._sum(DIFFERENT_KINDS)

    @property
    def stale(self) -> int:
        return self._sum(STALE_KINDS)

    @property
    def rejected(self) -> int:
        return self._sum(REJECTED_KINDS)

    @property
    def structure(self) -> int:
        others = self.missing + self.different + self.stale + self.rejected
        return sum(self.counts.values()) - others

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    @property
    def status(self) -> str:
        return "ok" if self.ok else "different"

    @property
    def rows_per_second(self) -> float:
        return self.mysql_rows / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "mysql_rows": self.mysql_rows,
            "redis_rows": self.redis_rows,
            "missing": self.missing,
            "different": self.different,
            "stale": self.stale,
            "rejected": self.rejected,
            "rejected_reasons": dict(self.refused),
            "structure_problems": self.structure,
            "status": self.status,
            "differences": dict(self.counts),
            "examples": [d.as_dict() for ds in self.examples.values() for d in ds],
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
            "readers": dict(self.readers),
        }


@dataclass
class VerifyReport:
    mapping: str
    source: str
    target: str
    mode: str  # full | counts-only | sample N
    tables: list[TableCheck]
    seconds: float = 0.0
    snapshot: Snapshot | None = None  # the moment of the source this pass compared with
    #: --fix: what was changed per table (empty without --fix)
    repaired: list[TableRepair] = field(default_factory=list)
    #: --fix, when something was changed: the first pass (``tables`` is the re-check)
    found: list[TableCheck] | None = None
    #: what this pass's repairs changed (set by the pass; ``repaired`` is the run's)
    changes: list[TableRepair] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tables)

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.ok else EXIT_DIFFERENCE

    @property
    def rejected(self) -> Counter[str]:
        """Rejected rows per reason, over all tables."""
        return sum((t.refused for t in self.tables), Counter())

    def rejected_hints(self) -> list[str]:
        """One line per reason rows were rejected: what it means and the fix."""
        out = []
        fix = " (verify --fix cannot write them either)" if self.repaired else ""
        for why, n in sorted(self.rejected.items()):
            rows = f"{n:,} row(s) MySQL holds are not in Redis: migrate rejects them ({why})"
            if why == AMBIGUOUS:
                out.append(
                    f"{rows} under options.escape: reject{fix}; set options.escape: backslash "
                    f"in {self.mapping} and run migrator migrate {self.mapping} --replace"
                )
            else:
                out.append(f"{rows}{fix}; key the table by columns that are NOT NULL")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "mapping": self.mapping,
            "source": self.source,
            "target": self.target,
            "mode": self.mode,
            "identical": self.ok,
            "hints": self.rejected_hints(),
            "seconds": round(self.seconds, 3),
            "snapshot": self.snapshot.as_dict() if self.snapshot is not None else None,
            "tables": [t.as_dict() for t in self.tables],
            **({"fix": self.fix_dict()} if self.repaired else {}),
        }

    def fix_dict(self) -> dict[str, Any]:
        return {
            "changed": sum(t.total for t in self.repaired),
            "rechecked": self.found is not None,
            "not_writable": sum(self.rejected.values()),
            "tables": [t.as_dict() for t in self.repaired],
            "found": [t.as_dict() for t in self.found] if self.found is not None else None,
        }


#: what a repair does to each kind of difference, as the report says it
DONE = {
    MISSING_ROW: "written",
    DIFFERENT_VALUE: "rewritten",
    MISSING_FIELD: "written",
    EXTRA_FIELD: "removed",
    WRONG_TYPE: "replaced",
    MISSING_UNIQUE: "added",
    WRONG_UNIQUE: "rewritten",
    FOREIGN_UNIQUE: "removed",
    MISSING_INDEX: "added",
    FOREIGN_INDEX: "removed",
    MISSING_SET: "added",
    FOREIGN_SET: "removed",
    MISSING_SORTED: "added",
    WRONG_SCORE: "rewritten",
    FOREIGN_SORTED: "removed",
    MISSING_VECTOR: "added",
    WRONG_VECTOR: "rewritten",
    FOREIGN_VECTOR: "removed",
    WRONG_COUNTER: "rewritten",
    WRONG_LATEST: "rebuilt",
    STALE: "removed",
}


@dataclass(frozen=True)
class Change:
    kind: str
    key: str
    field: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "done": DONE.get(self.kind, ""), "key": self.key,
                "field": self.field}  # fmt: skip


@dataclass
class TableRepair:
    """What ``--fix`` changed in one table's keys: counts per kind, and the first examples."""

    table: str
    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[Change]] = field(default_factory=dict)
    commands: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, kind: str, key: bytes | str, fieldname: object = None, n: int = 1) -> None:
        self.counts[kind] += n
        shown = self.examples.setdefault(kind, [])
        if len(shown) < EXAMPLES:
            shown.append(Change(kind, text(key) or "", text(fieldname)))

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "changed": dict(self.counts),
            "commands": self.commands,
            "examples": [c.as_dict() for cs in self.examples.values() for c in cs],
        }
