"""Separators inside values (issue 10 item 5b, docs/mapping.md "Separators inside values"):
a row whose value would make a composite key, member or field ambiguous is rejected by
default, or escaped with ``escape: backslash``; the planner and the packed hot path agree
byte for byte in both modes. Pure: no server."""

from __future__ import annotations

import random

import pytest

from migrator.mapping.kinds import Kind
from migrator.mapping.loader import parse_mapping
from migrator.mapping.model import Template
from migrator.mapping.resolve import resolve
from migrator.mapping.schema import Column, IndexInfo, Schema, TableSchema
from migrator.plan.escape import AMBIGUOUS, escape, escaper, split, unescape, unrender
from migrator.plan.planner import TablePlan
from migrator.plan.resp import resp


def _schema() -> Schema:
    t = TableSchema(
        name="t",
        columns=(
            Column("a", Kind.TEXT, False, "varchar(20)"),
            Column("b", Kind.TEXT, False, "varchar(20)"),
            Column("n", Kind.INTEGER, True, "int"),
            Column("at", Kind.DATETIME, True, "datetime"),
            Column("note", Kind.TEXT, True, "varchar(20)"),
            Column("tag", Kind.TEXT, True, "varchar(20)"),
        ),
        primary_key=("a", "b"),
        indexes=(IndexInfo("ix", ("n", "at"), False),),
        foreign_keys=(),
    )
    return Schema("test", {"t": t}, ())


def _plan(body: str, options: str = "") -> TablePlan:
    opts = f"options: {{{options}}}\n" if options else ""
    m = parse_mapping(f"version: 1\n{opts}tables:\n  t:\n    {body}\n")
    (resolved,) = resolve(m, _schema(), ["t"])
    return TablePlan(resolved)


NAMES = ("a", "b", "n", "at", "note", "tag")
ROWS = [
    (b"a:b", b"c", b"1", b"2020-01-01 10:00:00", b"x", None),  # ambiguous: 'a' holds ':'
    (b"a", b"b:c", b"2", b"2020-01-01 10:00:00", b"y:z", None),  # ambiguous: 'b' holds ':'
    (b"p", b"q", b"3", b"2021-02-03 04:05:06", b"no:te", None),  # ':' in 'note' only
    (b"r\\s", b"t", None, None, None, None),  # a backslash: fine when rejecting, escaped else
    (b"u", b"v", b"-4", b"2022-12-31 23:59:59", None, None),
]


def rows_for(plan: TablePlan) -> list[tuple[bytes | None, ...]]:
    return [tuple(r[NAMES.index(c)] for c in plan.select) for r in ROWS]


BODIES = {
    "hash only": "",
    "composite unique and index": "unique: [[a, note]]\n    indexes: [[n, at], note]",
    "own templates": 'key: "t:{b}:{a}"\n    unique: [{columns: [note], key: "u:{note}:{a}"}]',
    "sets and sorted (general loop)": (
        'sets: [{key: "s:{note}", member: "{a}:{b}"}]\n'
        '    sorted: [{key: "z:{a}:{b}", score: n}]\n    indexes: [note]'
    ),
    "as none": "as: none\n    indexes: [note, [note, n]]",
}


@pytest.mark.parametrize("options", ["", "escape: backslash"])
@pytest.mark.parametrize("case", sorted(BODIES))
def test_packed_bytes_equal_planned_bytes(case: str, options: str) -> None:
    plan = _plan(BODIES[case] or "columns: [n, at, note]", options)
    rows = rows_for(plan)
    planned, stats = plan.plan(rows)
    payload, count, packed_stats = plan.pack(rows)
    assert payload == resp(planned), case
    assert count == len(planned)
    assert packed_stats == stats
    assert stats.rows == len(ROWS)


def test_ambiguous_rows_are_rejected_and_named() -> None:
    plan = _plan("unique: [[a, note]]\n    indexes: [[n, at]]")
    commands, stats = plan.plan(rows_for(plan))
    keys = {c[1] for c in commands if c[0] == b"HSET" and not c[1].startswith(b"t:uniques")}
    assert keys == {b"t:r\\s:t", b"t:u:v"}  # p:q is rejected: 'no:te' is in a composite unique
    assert stats.rejected == {AMBIGUOUS: 3}
    named = [(r.pk, r.column) for r in stats.rejects]
    assert named == [(("a:b", "c"), "a"), (("a", "b:c"), "b"), (("p", "q"), "note")]
    # the DATETIME's colons are not ambiguous: its index key is written
    assert any(c[1] == b"t:indices:n:-4:at:2022-12-31 23:59:59" for c in commands)


def test_a_composite_with_a_null_is_not_written_so_not_ambiguous() -> None:
    plan = _plan("as: none\n    indexes: [[note, tag]]", "separator: ' '")
    rows = [(b"p", b"q", None, None, b"no te", None), (b"r", b"s", b"1", None, b"no te", b"x")]
    _, stats = plan.plan([tuple(r[NAMES.index(c)] for c in plan.select) for r in rows])
    assert [(r.pk, r.column) for r in stats.rejects] == [(("r", "s"), "note")]


def test_single_value_keys_are_not_checked() -> None:
    plan = _plan('as: none\n    sets: [{key: "s:{note}", member: "{n}"}]')
    assert plan.checked == []
    commands, stats = plan.plan(rows_for(plan))
    assert not stats.rejected
    assert (b"SADD", b"s:no:te", b"3") in commands


def test_no_check_where_no_value_can_hold_the_separator() -> None:
    """Integers and dates in a composite: nothing to look at, the hot path pays nothing."""
    plan = _plan('as: none\n    indexes: [[n, at]]\n    sets: [{key: "k:{n}:{at}", member: "x"}]')
    assert plan.checked == [(plan.pos["a"], "a"), (plan.pos["b"], "b")]  # the primary key only
    plan2 = _plan("columns: [n]", "separator: '/'")
    assert plan2.checked == [(0, "a"), (1, "b")]


def test_backslash_escaping_keeps_colliding_rows_apart() -> None:
    plan = _plan("unique: [[a, note]]\n    indexes: [note]", "escape: backslash")
    commands, stats = plan.plan(rows_for(plan))
    assert not stats.rejected
    hashes = [c[1] for c in commands if c[0] == b"HSET" and not c[1].startswith(b"t:uniques")]
    assert hashes == [b"t:a\\:b:c", b"t:a:b\\:c", b"t:p:q", b"t:r\\\\s:t", b"t:u:v"]
    (unique,) = [c for c in commands if c[1] == b"t:uniques:a:note"]
    fields = dict(zip(unique[2::2], unique[3::2]))
    assert fields[b"a\\:b:x"] == b"a\\:b:c"  # field and value (the primary key) escaped
    assert fields[b"p:no\\:te"] == b"p:q"
    # a single-column index set: the value is escaped in the key, the member (pk) too
    assert (b"SADD", b"t:indices:note:no\\:te", b"p:q") in commands
    for key in hashes:
        parts = split(key, b":")
        assert parts[0] == b"t" and len(parts) == 3
    assert split(b"t:a\\:b:c", b":")[1:] == [b"a:b", b"c"]


@pytest.mark.parametrize("sep", [":", "::", "|", "/", "·", "-:"])
def test_escaping_round_trips(sep: str) -> None:
    rng = random.Random(7)
    alphabet = ["a", "\\", ":", "|", "/", "·", "-", "b"]
    s = sep.encode()
    for _ in range(500):
        values = [
            "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 6))).encode()
            for _ in range(rng.randrange(1, 4))
        ]
        joined = s.join(escape(v, s) for v in values)
        assert split(joined, s) == values, (values, joined)
        assert [unescape(escape(v, s), s) for v in values] == values
        assert [escaper(s)(v) for v in values] == [escape(v, s) for v in values]


def test_unrender_reads_values_back() -> None:
    t = Template.parse("t:indices:a:{a}:b:{b}")
    key = b"t:indices:a:" + escape(b"x:b:y", b":") + b":b:" + escape(b"\\", b":")
    assert unrender(t, key, b":", escaped=True) == {"a": b"x:b:y", "b": b"\\"}
    assert unrender(t, b"t:indices:a:1:b:2", b":", escaped=False) == {"a": b"1", "b": b"2"}
    assert unrender(t, b"t:indices:a:1:2:b:2", b":", escaped=False) is None


def test_sync_deltas_reject_and_escape_as_migrate_does() -> None:
    """sync's delta planning writes exactly the keys migrate writes: a row migrate rejects is
    not written by an insert, and an update that makes a row ambiguous removes it."""
    from migrator.plan.delta import TableDelta

    plan = _plan("indexes: [note]")
    rows = rows_for(plan)
    good, bad = rows[4], rows[0]  # ('u', 'v'), ('a:b', 'c')
    delta = TableDelta(plan).change(None, bad)
    assert delta.rejected == 1 and delta.commands == []
    inserted = TableDelta(plan).change(None, good).commands
    assert any(c[:2] == (b"HSET", b"t:u:v") for c in inserted)
    bad_update = tuple(b"x:y" if c == "a" else v for c, v in zip(plan.select, good))
    moved = TableDelta(plan).change(good, bad_update)
    assert moved.rejected == 1
    assert (b"DEL", b"t:u:v") in moved.commands  # the old row's keys go
    escaped = _plan("indexes: [note]", "escape: backslash")
    commands = TableDelta(escaped).change(None, rows_for(escaped)[0]).commands
    assert any(c[:2] == (b"HSET", b"t:a\\:b:c") for c in commands)


# -- issue 16 item 2: only two or more varying values are ambiguous -------------------------------
@pytest.mark.parametrize(
    ("kind", "column_type", "sep", "count"),
    [
        (Kind.INTEGER, "int", ":", 0),
        (Kind.INTEGER, "int", "-", None),  # a negative number holds one, others none
        (Kind.DATETIME, "datetime", ":", 2),
        (Kind.DATETIME, "datetime(3)", ".", 1),
        (Kind.DATETIME, "datetime", ".", 0),
        (Kind.TIMESTAMP, "timestamp(6)", ":", 2),
        (Kind.TIME, "time", ":", 2),
        (Kind.DATE, "date", "-", 2),
        (Kind.DECIMAL, "decimal(10,2)", ".", 1),
        (Kind.DECIMAL, "decimal(10,0)", ".", 0),
        (Kind.FLOAT, "float", ".", None),
        (Kind.TEXT, "varchar(20)", ":", None),
        (Kind.JSON, "json", ":", None),
    ],
)
def test_separator_count_by_type(kind: Kind, column_type: str, sep: str, count: int | None) -> None:
    from migrator.mapping.keyspace import separator_count

    assert separator_count(kind, column_type, sep) == count


def test_one_varying_value_beside_fixed_ones_is_written() -> None:
    """(n, note) and (at, note): 'note' is the only text, so 'no:te' is written; the primary
    key (a, b), two texts, stays guarded."""
    sets = 'sets: [{key: "s:{n}:{note}", member: "{at}:{note}"}]'
    plan = _plan(f"as: none\n    indexes: [[n, note], [at, note]]\n    {sets}")
    assert plan.checked == [(plan.pos["a"], "a"), (plan.pos["b"], "b")]
    row = tuple({"a": b"p", "b": b"q", "n": b"3", "at": b"2021-02-03 04:05:06",
                 "note": b"no:te"}.get(c) for c in plan.select)  # fmt: skip
    commands, stats = plan.plan([row])
    assert not stats.rejected
    assert (b"SADD", b"s:3:no:te", b"2021-02-03 04:05:06:no:te") in commands
    assert (b"SADD", b"t:indices:n:3:note:no:te", b"p:q") in commands
    payload, _, packed = plan.pack([row])
    assert payload == resp(commands) and packed == stats


@pytest.mark.parametrize(
    "text",
    ["t:{n}:{note}", "t:{note}:{n}", "{at}:{note}:{n}", "t:{n}:x:{note}:{at}", "t:{note}:{at}"],
)
def test_what_is_written_reads_back_one_way(text: str) -> None:
    """Random values, ':' and '\\' in the text among them: the key a row gets is read back to
    exactly that row's values (TablePlan.read, what verify's readers use)."""
    plan = _plan("columns: [n, at, note]")
    template = Template.parse(text)
    key_of = plan.key_fn(template)
    rng = random.Random(text)
    for _ in range(300):
        values = {
            "a": b"p", "b": b"q",
            "n": str(rng.randrange(-50, 50)).encode(),
            "at": b"20%02d-01-02 0%d:%02d:59" % (rng.randrange(100), rng.randrange(10),
                                                  rng.randrange(60)),
            "note": "".join(rng.choice("a:\\ b") for _ in range(rng.randrange(6))).encode(),
        }  # fmt: skip
        row = tuple(values.get(c) for c in plan.select)
        assert plan.ambiguous(row) is None
        key = key_of(row)
        assert key is not None
        got = plan.read(template, key, True)
        assert got == {c: values[c] for c in template.columns}, (key, got)


def test_two_varying_values_are_read_without_separators() -> None:
    plan = _plan('columns: [n]\n    key: "t:{a}:{b}"')
    t = plan.resolved.key
    assert plan.read(t, b"t:x:y", True) == {"a": b"x", "b": b"y"}
    assert plan.read(t, b"t:x:y:z", True) is None  # migrate never writes such a key
    assert plan.read_joined(("a", "b"), b"x:y") == [b"x", b"y"]
    assert plan.read_joined(("n", "note"), b"1:no:te") == [b"1", b"no:te"]
