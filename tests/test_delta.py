"""Delta planning is pure: (before, after) rows in, the commands that move every structure out."""

from __future__ import annotations

import random
from typing import Any

import pytest

from migrator.plan.delta import Delta, TableDelta
from migrator.plan.planner import TablePlan
from tests.test_planner import NAMES, _plan

EMP = """
  emp:
    unique:
      - email
      - columns: [ename]
        key: "login:{ename}:id"
    indexes: [mgr_id]
    sorted:
      - key: "emp:by:salary"
        score: salary
    latest:
      - key: "emp:latest"
        order_by: hired
        limit: 3
"""


def _row(plan: TablePlan, **values: bytes | None) -> tuple[bytes | None, ...]:
    base = dict.fromkeys(NAMES, None) | {"emp_id": b"1"}
    base.update(values)
    return tuple(base[c] for c in plan.select)


def _delta(yaml: str = EMP, table: str = "emp") -> tuple[TablePlan, TableDelta]:
    plan = _plan(yaml, table)
    return plan, TableDelta(plan)


def test_insert_writes_what_migrate_writes() -> None:
    plan, delta = _delta()
    row = _row(plan, ename=b"SMITH", email=b"s@x", mgr_id=b"8", salary=b"800.00")
    d = delta.change(None, row)
    planned, _ = plan.plan([row])
    assert d.commands[0] == (b"DEL", b"emp:1")  # a new row never mixes with an older one
    assert sorted(d.commands[1:]) == sorted(planned)
    assert d.counters == {b"emp:id": 1}
    assert d.dirty_latest == set()  # no hired value: not in the latest list


def test_update_writes_changed_fields_and_moves_memberships() -> None:
    plan, delta = _delta()
    before = _row(plan, ename=b"SMITH", email=b"s@x", mgr_id=b"8", salary=b"800.00")
    after = _row(plan, ename=b"SMITH", email=b"t@x", mgr_id=b"9", salary=None)
    d = delta.change(before, after)
    assert d.commands == [
        (b"HDEL", b"emp:1", b"salary"),
        (b"HDEL", b"emp:uniques:email", b"s@x"),
        (b"SREM", b"emp:indices:mgr_id:8", b"1"),
        (b"ZREM", b"emp:by:salary", b"1"),
        (b"HSET", b"emp:1", b"email", b"t@x", b"mgr_id", b"9"),
        (b"HSET", b"emp:uniques:email", b"t@x", b"1"),
        (b"SADD", b"emp:indices:mgr_id:9", b"1"),
    ]


def test_unchanged_values_write_nothing() -> None:
    plan, delta = _delta()
    row = _row(plan, ename=b"A", email=b"a@x", salary=b"1.00")
    assert delta.change(row, row).commands == []


def test_string_unique_moves_and_score_changes() -> None:
    plan, delta = _delta()
    before = _row(plan, ename=b"A", salary=b"1.00")
    after = _row(plan, ename=b"B", salary=b"2.50")
    d = delta.change(before, after)
    assert (b"DEL", b"login:A:id") in d.commands
    assert (b"SET", b"login:B:id", b"1") in d.commands
    assert (b"ZADD", b"emp:by:salary", b"2.50", b"1") in d.commands
    assert (b"HSET", b"emp:1", b"ename", b"B", b"salary", b"2.50") in d.commands


def test_every_column_null_keeps_the_row_by_its_primary_key() -> None:
    plan, delta = _delta()
    before = _row(plan, ename=b"A")
    after = _row(plan)
    d = delta.change(before, after)
    assert (b"HDEL", b"emp:1", b"ename") in d.commands
    assert (b"HSET", b"emp:1", b"emp_id", b"1") in d.commands


def test_delete_removes_the_row_and_every_membership() -> None:
    plan, delta = _delta()
    row = _row(plan, ename=b"A", email=b"a@x", mgr_id=b"8", salary=b"1.00",
               hired=b"2020-01-01 00:00:00")  # fmt: skip
    d = delta.change(row, None)
    assert d.commands == [
        (b"DEL", b"emp:1"),
        (b"HDEL", b"emp:uniques:email", b"a@x"),
        (b"DEL", b"login:A:id"),
        (b"SREM", b"emp:indices:mgr_id:8", b"1"),
        (b"ZREM", b"emp:by:salary", b"1"),
    ]
    assert d.counters == {}  # counters are never lowered
    assert d.dirty_latest == {("emp", 0)}  # the latest list is rebuilt from MySQL


def test_primary_key_change_is_a_delete_plus_an_insert() -> None:
    plan, delta = _delta()
    before = _row(plan, ename=b"A", mgr_id=b"8")
    after = _row(plan, emp_id=b"7", ename=b"A", mgr_id=b"8")
    d = delta.change(before, after)
    assert d.commands[:2] == [(b"DEL", b"emp:1"), (b"DEL", b"emp:7")]
    assert (b"SREM", b"emp:indices:mgr_id:8", b"1") in d.commands
    assert (b"SADD", b"emp:indices:mgr_id:8", b"7") in d.commands
    assert (b"SET", b"login:A:id", b"7") in d.commands
    assert d.counters == {b"emp:id": 7}


def test_latest_is_dirty_only_when_order_value_or_key_moves() -> None:
    plan, delta = _delta()
    row = _row(plan, ename=b"A", hired=b"2020-01-01 00:00:00")
    assert (
        delta.change(row, _row(plan, ename=b"B", hired=b"2020-01-01 00:00:00")).dirty_latest
        == set()
    )
    moved = _row(plan, ename=b"A", hired=b"2021-01-01 00:00:00")
    assert delta.change(row, moved).dirty_latest == {("emp", 0)}
    assert delta.change(None, row).dirty_latest == {("emp", 0)}


def test_tag_sets_in_both_directions() -> None:
    yaml = """
  tag:
    as: none
    sets:
      - key: "tag:{tagname}"
        member: "{book_id}"
      - key: "book_tags:{book_id}"
        member: "{tagname}"
"""
    plan, delta = _delta(yaml, "tag")
    pos = plan.pos
    old = [None] * len(plan.select)
    old[pos["tagname"]], old[pos["book_id"]] = b"ruby", b"1"
    new = list(old)
    new[pos["tagname"]] = b"web"
    d = delta.change(tuple(old), tuple(new))
    assert d.commands == [
        (b"SREM", b"tag:ruby", b"1"),
        (b"SREM", b"book_tags:1", b"ruby"),
        (b"SADD", b"tag:web", b"1"),
        (b"SADD", b"book_tags:1", b"web"),
    ]
    assert not any(c[1].startswith(b"tag:1") for c in d.commands)


def test_columns_style_rows() -> None:
    plan, delta = _delta("  emp:\n    as: columns\n    columns: [ename, salary]\n")
    before = _row(plan, ename=b"A", salary=b"1.00")
    after = _row(plan, ename=b"A", salary=None)
    assert delta.change(before, after).commands == [(b"DEL", b"emp:1:salary")]
    assert delta.change(None, before).commands == [
        (b"SET", b"emp:1:ename", b"A"),
        (b"SET", b"emp:1:salary", b"1.00"),
    ]


def test_a_group_is_its_net_effect_coalesced_per_key() -> None:
    plan, delta = _delta()
    one = _row(plan, email=b"a@x", mgr_id=b"8")
    two = _row(plan, emp_id=b"2", email=b"c@x", mgr_id=b"8")
    d = delta.change(None, one)
    delta.change(None, two, d)
    delta.change(one, _row(plan, email=b"b@x", mgr_id=b"8"), d)  # a -> b
    delta.change(two, _row(plan, emp_id=b"2", email=b"a@x", mgr_id=b"8"), d)  # c -> a
    commands = d.commands
    assert (b"HSET", b"emp:uniques:email", b"a@x", b"2", b"c@x", b"1") not in commands
    uniques = [c for c in commands if c[1] == b"emp:uniques:email"]
    assert uniques == [
        (b"HDEL", b"emp:uniques:email", b"c@x"),  # written, then removed: the net is removed
        (b"HSET", b"emp:uniques:email", b"a@x", b"2", b"b@x", b"1"),
    ]
    assert (b"SADD", b"emp:indices:mgr_id:8", b"1", b"2") in commands  # one SADD for both
    assert [c for c in commands if c[0] == b"DEL"] == [(b"DEL", b"emp:1"), (b"DEL", b"emp:2")]
    assert (b"HSET", b"emp:1", b"email", b"b@x", b"mgr_id", b"8") in commands
    assert d.counters == {b"emp:id": 2} and d.rows == 4


def test_a_deleted_row_in_a_group_leaves_nothing_behind() -> None:
    plan, delta = _delta()
    row = _row(plan, ename=b"A", email=b"a@x", mgr_id=b"8")
    d = delta.change(None, row)
    delta.change(row, None, d)
    assert d.commands == [
        (b"DEL", b"emp:1"),
        (b"HDEL", b"emp:uniques:email", b"a@x"),
        (b"DEL", b"login:A:id"),
        (b"SREM", b"emp:indices:mgr_id:8", b"1"),
    ]


# -- any sequence of changes, grouped any way, leaves what migrate writes for the final rows --
MODEL_MAPPINGS = [
    # EMP without its latest list (rebuilt from MySQL, not planned), one more sorted set
    EMP.split("    latest:")[0] + '      - key: "emp:by:hired:{mgr_id}"\n        score: hired\n',
    """
  emp:
    key: "e:{ename}:{emp_id}"
    unique: [[ename, mgr_id]]
    indexes: [[mgr_id, salary]]
""",
    "  emp:\n    as: columns\n    columns: [ename, salary]\n    unique: [email]\n",
]


def _apply(state: dict[bytes, object], commands: list[tuple[bytes, ...]]) -> None:
    """A model of Redis for the commands delta planning and migrate send."""
    for name, key, *args in commands:
        got: Any = state.get(key)
        if name == b"DEL":
            state.pop(key, None)
        elif name == b"SET":
            state[key] = args[0]
        elif name in (b"HSET", b"ZADD"):
            got = state.setdefault(key, {})
            pairs = zip(args[::2], args[1::2])
            got.update(pairs if name == b"HSET" else ((m, s) for s, m in pairs))
        elif name == b"SADD":
            state.setdefault(key, set()).update(args)
        else:
            assert name in (b"HDEL", b"SREM", b"ZREM"), name
            for member in args if got is not None else ():
                got.pop(member, None) if isinstance(got, dict) else got.discard(member)
            if not got:
                state.pop(key, None)


def _random_row(plan: TablePlan, rng: random.Random) -> tuple[bytes | None, ...]:
    def pick(*values: bytes | None) -> bytes | None:
        return rng.choice(values)

    return _row(
        plan, emp_id=b"%d" % rng.randint(1, 9), ename=pick(None, b"A", b"B", b"C"),
        email=pick(None, b"a@x", b"b@x", b"c@x", b"d@x"), mgr_id=pick(None, b"1", b"2"),
        salary=pick(None, b"1.00", b"-2.50", b"3"),
        hired=pick(None, b"2020-01-01 00:00:00", b"0000-00-00 00:00:00"),
    )  # fmt: skip


@pytest.mark.parametrize("yaml", MODEL_MAPPINGS)
def test_any_changes_in_any_groups_leave_what_migrate_writes(yaml: str) -> None:
    """Random inserts, updates (some of the primary key) and deletes that keep the table's
    unique constraints, applied as groups of changes: Redis ends as ``migrate`` of the final
    rows leaves it (counters aside: they never fall)."""
    plan, delta = _delta(yaml)
    uniques = [[plan.pos[c] for c in u.columns] for u in plan.table.unique]

    def clashes(row: tuple[bytes | None, ...], rows: dict[bytes, tuple[bytes | None, ...]]) -> bool:
        for cols in uniques:
            mine = [row[i] for i in cols]
            if None not in mine and any([r[i] for i in cols] == mine for r in rows.values()):
                return True
        return row[0] in rows

    for seed in range(200):
        rng = random.Random(seed)
        rows: dict[bytes, tuple[bytes | None, ...]] = {}
        state: dict[bytes, object] = {}
        for _ in range(rng.randint(1, 5)):
            group = Delta()
            for _ in range(rng.randint(1, 12)):
                before = rows.pop(rng.choice(sorted(rows))) if rows and rng.random() < 0.6 else None  # type: ignore[arg-type]
                after = (
                    None if before is not None and rng.random() < 0.3 else _random_row(plan, rng)
                )
                if after is not None and before is not None and rng.random() < 0.7:
                    after = (before[0], *after[1:])  # the same row, other values
                if after is not None and clashes(after, rows):
                    if before is not None:
                        rows[before[0]] = before  # type: ignore[index]
                    continue
                if after is not None:
                    rows[after[0]] = after  # type: ignore[index]
                delta.change(before, after, group)
            _apply(state, group.commands)
        expected: dict[bytes, object] = {}
        _apply(expected, plan.plan(sorted(rows.values(), key=lambda r: r[0] or b""))[0])  # type: ignore[arg-type]
        assert state == expected, seed
