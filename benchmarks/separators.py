"""What the separator check costs on migrate's hot path (issue 10 item 5b), without a server.

    .venv/bin/python benchmarks/separators.py --rows 200000 --reps 5

A table whose composite primary key and composite index hold text (so every row is looked at
under ``escape: reject``) is packed by ``TablePlan.pack`` -- the bytes migrate sends -- three
ways: with the check (the default), with the check switched off (the code migrate ran before
it existed), and with ``escape: backslash``. Prints packed rows/s per way (median of the
repetitions) and the check's cost in percent. No row holds a separator, as in most data.
"""

from __future__ import annotations

import argparse
import statistics
import time

from migrator.mapping.kinds import Kind
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.mapping.schema import Column, Schema, TableSchema
from migrator.plan.planner import TablePlan

MAPPING = """version: 1
options: {{escape: {escape}}}
tables:
  visit:
    unique: [[city, email]]
    indexes: [[city, kind], kind]
"""
BATCH = 5000


def schema() -> Schema:
    visit = TableSchema(
        "visit",
        (
            Column("site", Kind.TEXT, False, "varchar(20)"),
            Column("id", Kind.INTEGER, False, "int"),
            Column("city", Kind.TEXT, True, "varchar(40)"),
            Column("kind", Kind.TEXT, True, "varchar(10)"),
            Column("email", Kind.TEXT, True, "varchar(60)"),
            Column("hits", Kind.INTEGER, True, "int"),
        ),
        ("site", "id"),
        (),
        (),
    )
    return Schema("bench", {"visit": visit}, ())


def plan(escape: str, checked: bool = True) -> TablePlan:
    (resolved,) = resolve(parse_mapping(MAPPING.format(escape=escape)), schema())
    p = TablePlan(resolved)
    if not checked:  # the hot path as it was before the check
        p.guards, p.checked = [], []
    return p


def rows(n: int, p: TablePlan) -> list[tuple[bytes | None, ...]]:
    out = []
    for i in range(n):
        values = {
            "site": b"eu-west",
            "id": b"%d" % i,
            "city": b"city-%d" % (i % 500),
            "kind": b"k%d" % (i % 7),
            "email": b"user%d@example.com" % i,
            "hits": b"%d" % (i * 7 % 1000),
        }
        out.append(tuple(values[c] for c in p.select))
    return out


def packed_per_second(p: TablePlan, data: list[tuple[bytes | None, ...]]) -> float:
    started = time.perf_counter()
    for at in range(0, len(data), BATCH):
        p.pack(data[at : at + BATCH])
    return len(data) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows packed, e.g. 200000")
    parser.add_argument("--reps", type=int, default=5, help="repetitions, e.g. 5")
    args = parser.parse_args()
    ways = {
        "reject (check on)": plan("reject"),
        "no check (before)": plan("reject", checked=False),
        "backslash": plan("backslash"),
    }
    data = rows(args.rows, ways["reject (check on)"])
    assert (
        ways["reject (check on)"].pack(data[:BATCH])[0]
        == ways["no check (before)"].pack(data[:BATCH])[0]
    ), "the check must not change the bytes of rows without a separator"
    figures: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.reps):
        for name, p in ways.items():  # interleaved, so load changes hit every way alike
            figures[name].append(packed_per_second(p, data))
    medians = {name: statistics.median(v) for name, v in figures.items()}
    for name, v in medians.items():
        print(f"{name:20} {v:12,.0f} rows/s packed  ({args.reps} reps: "
              + " ".join(f"{x:,.0f}" for x in figures[name]) + ")")  # fmt: skip
    before, check = medians["no check (before)"], medians["reject (check on)"]
    looked_at = len(ways["reject (check on)"].checked)
    print(f"the check costs {100 * (before - check) / before:.1f}% of packing speed "
          f"({args.rows:,} rows, {looked_at} columns looked at)")  # fmt: skip


if __name__ == "__main__":
    main()
