"""Expiry planning is pure (plan/expiry.py, plan/expiry_delta.py): rows in, commands out, with
a clock of the test's choosing."""

from __future__ import annotations

from migrator.plan.delta import Delta
from migrator.plan.expiry_delta import ExpiringTableDelta, table_delta
from migrator.plan.planner import TablePlan
from tests.test_planner import NAMES, _plan

NOW = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
EMP = """
  emp:
    expire: {column: hired, offset: 1h}
    unique:
      - email
      - columns: [ename]
        key: "login:{ename}:id"
    indexes: [mgr_id]
"""


def _at(plan: TablePlan) -> TablePlan:
    assert plan.expiry is not None
    plan.expiry.clock = lambda: NOW
    return plan


def _row(plan: TablePlan, **values: bytes | None) -> tuple[bytes | None, ...]:
    base = dict.fromkeys(NAMES, None) | {"emp_id": b"1", "ename": b"SMITH", "mgr_id": b"8"}
    base.update(values)
    return tuple(base[c] for c in plan.select)


AHEAD = b"2023-11-14 22:00:00"  # + 1h: 22:13:20 + 46:40 -> 1700002800000 ms
PAST = b"2023-11-14 21:00:00"  # + 1h: 13:20 before now


def test_migrate_writes_pexpireat_after_each_rows_own_keys() -> None:
    plan = _at(_plan(EMP))
    commands, stats = plan.plan([_row(plan, hired=AHEAD), _row(plan, emp_id=b"2", hired=PAST),
                                 _row(plan, emp_id=b"3", ename=b"WARD", hired=None)])  # fmt: skip
    names = [(c[0], c[1]) for c in commands]
    at = b"1700002800000"
    i = names.index((b"HSET", b"emp:1"))
    assert commands[i + 1 : i + 3] == [(b"SET", b"login:SMITH:id", b"1"),
                                       (b"PEXPIREAT", b"emp:1", at)]  # fmt: skip
    assert (b"PEXPIREAT", b"login:SMITH:id", at) in commands
    assert (b"ZADD", b"migrator:mapping:expiry:emp", at, b"1") in commands
    assert (b"HSET", b"emp:2") not in names and stats.rows == 2  # past: not loaded
    assert (b"PERSIST", b"emp:3") in commands  # a NULL moment: never expires
    assert (b"ZREM", b"migrator:mapping:expiry:emp", b"3") in commands
    assert not [c for c in commands if c[0] == b"PEXPIREAT" and b"indices" in c[1]]


def test_as_none_rows_are_scheduled_for_their_members() -> None:
    plan = _at(_plan("  emp:\n    as: none\n    expire: 10m\n    indexes: [mgr_id]\n"))
    commands, _ = plan.plan([_row(plan)])
    assert (b"ZADD", b"migrator:mapping:expiry:emp", b"%d" % (NOW * 1000 + 600_000), b"1") in (
        commands
    )


def _delta() -> tuple[TablePlan, ExpiringTableDelta]:
    plan = _at(_plan(EMP))
    d = table_delta(plan)
    assert isinstance(d, ExpiringTableDelta)
    return plan, d


def test_an_update_rewrites_the_row_and_renews_its_expiry() -> None:
    plan, d = _delta()
    old, new = _row(plan, hired=AHEAD), _row(plan, hired=AHEAD, salary=b"9.00")
    commands = d.change(old, new).commands
    assert commands[0] == (b"DEL", b"emp:1")  # written whole: Redis may have expired it
    hset = next(c for c in commands if c[:2] == (b"HSET", b"emp:1"))
    assert b"ename" in hset and b"salary" in hset
    assert commands[-2:] == [(b"PEXPIREAT", b"emp:1", b"1700002800000"),
                             (b"PEXPIREAT", b"login:SMITH:id", b"1700002800000")]  # fmt: skip


def test_an_update_into_the_past_removes_the_row_and_back_writes_it() -> None:
    plan, d = _delta()
    live, dead = _row(plan, hired=AHEAD), _row(plan, hired=PAST)
    gone = d.change(live, dead).commands
    assert (b"DEL", b"emp:1") in gone and (b"SREM", b"emp:indices:mgr_id:8", b"1") in gone
    assert (b"ZREM", b"migrator:mapping:expiry:emp", b"1") in gone
    assert not [c for c in gone if c[0] in (b"HSET", b"SADD", b"PEXPIREAT") and b"emp:1" in c]
    back = d.change(dead, live).commands
    assert (b"SADD", b"emp:indices:mgr_id:8", b"1") in back
    assert (b"PEXPIREAT", b"emp:1", b"1700002800000") in back


def test_the_sweep_plans_a_delete_of_the_memo_image() -> None:
    plan, d = _delta()
    total = Delta()
    d.sweep(_row(plan, hired=PAST), b"1699996400000", total)
    commands = total.commands
    assert (b"DEL", b"emp:1") in commands and (b"DEL", b"login:SMITH:id") in commands
    assert (b"SREM", b"emp:indices:mgr_id:8", b"1") in commands
    assert (b"HDEL", b"migrator:mapping:expiry:emp:memo", b"1") in commands


def test_documents_expire_as_row_hashes_do() -> None:
    for kind in ("json", "json-string"):
        plan = _at(_plan(f"  emp:\n    as: {kind}\n    expire: 10m\n    indexes: [mgr_id]\n"))
        at = b"%d" % (NOW * 1000 + 600_000)
        commands, _ = plan.plan([_row(plan)])
        assert (b"PEXPIREAT", b"emp:1", at) in commands, kind
        write = next(i for i, c in enumerate(commands) if c[1:2] == (b"emp:1",))
        assert write < commands.index((b"PEXPIREAT", b"emp:1", at))
        d = table_delta(plan)
        assert d.change(None, _row(plan)).commands[-1] == (b"PEXPIREAT", b"emp:1", at), kind
