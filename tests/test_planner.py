"""The planner is pure: rows in, commands out (STYLE habit 9: assert on planned commands)."""

from __future__ import annotations

import pytest

from migrator.mapping.kinds import Kind
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.mapping.schema import Column, IndexInfo, Schema, TableSchema
from migrator.plan.planner import TablePlan
from migrator.plan.resp import resp


def _schema() -> Schema:
    emp = TableSchema(
        name="emp",
        columns=(
            Column("emp_id", Kind.INTEGER, False, "int"),
            Column("ename", Kind.TEXT, True, "varchar(20)"),
            Column("email", Kind.TEXT, True, "varchar(64)"),
            Column("mgr_id", Kind.INTEGER, True, "int"),
            Column("salary", Kind.DECIMAL, True, "decimal(10,2)"),
            Column("hired", Kind.DATETIME, True, "datetime"),
        ),
        primary_key=("emp_id",),
        indexes=(IndexInfo("email", ("email",), True), IndexInfo("mgr", ("mgr_id",), False)),
        foreign_keys=(),
    )
    tag = TableSchema(
        name="tag",
        columns=(
            Column("tagname", Kind.TEXT, False, "varchar(20)"),
            Column("book_id", Kind.INTEGER, False, "int"),
        ),
        primary_key=("tagname", "book_id"),
        indexes=(),
        foreign_keys=(),
    )
    return Schema("test", {"emp": emp, "tag": tag}, ())


def _plan(yaml_tables: str, table: str = "emp") -> TablePlan:
    m = parse_mapping("version: 1\ntables:\n" + yaml_tables)
    (resolved,) = resolve(m, _schema(), [table])
    return TablePlan(resolved)


NAMES = ("emp_id", "ename", "email", "mgr_id", "salary", "hired")
FULL_ROWS = [
    (b"1", b"SMITH", b"foo@gmail.com", b"8", b"800.00", b"2020-01-01 00:00:00"),
    (b"2", b"ALLEN", b"bar@163.com", b"8", None, None),
    (b"3", None, None, None, None, None),
]


def rows(plan: TablePlan) -> list[tuple[bytes | None, ...]]:
    """The sample rows in the plan's select order, as the source would give them."""
    return [tuple(r[NAMES.index(c)] for c in plan.select) for r in FULL_ROWS]


def test_defaults_hash_counter_and_select_order() -> None:
    plan = _plan("  emp:\n")
    assert plan.select == ("emp_id", "ename", "email", "mgr_id", "salary", "hired")
    commands, stats = plan.plan(rows(plan))
    assert commands[0] == (
        b"HSET", b"emp:1", b"ename", b"SMITH", b"email", b"foo@gmail.com", b"mgr_id", b"8",
        b"salary", b"800.00", b"hired", b"2020-01-01 00:00:00",
    )  # fmt: skip
    assert commands[1] == (b"HSET", b"emp:2", b"ename", b"ALLEN", b"email", b"bar@163.com",
                           b"mgr_id", b"8")  # fmt: skip
    # every non-key column NULL: the row still exists, keyed by its primary key
    assert commands[2] == (b"HSET", b"emp:3", b"emp_id", b"3")
    assert stats.rows == 3 and stats.keys == 3
    assert plan.counter_command(b"3") == (b"SET", b"emp:id", b"3")
    assert plan.counter_command(None) == (b"SET", b"emp:id", b"0")


def test_unique_and_index_writes_are_coalesced_per_key() -> None:
    plan = _plan("  emp:\n    columns: [ename]\n    unique: [email]\n    indexes: [mgr_id]\n")
    commands, stats = plan.plan(rows(plan))
    assert (b"HSET", b"emp:uniques:email", b"foo@gmail.com", b"1", b"bar@163.com", b"2") in commands
    assert (b"SADD", b"emp:indices:mgr_id:8", b"1", b"2") in commands
    assert len(commands) == 3 + 2  # three rows, one unique HSET, one SADD
    assert stats.entries == 4
    assert stats.skipped["NULL unique value (not indexed)"] == 1
    assert stats.skipped["NULL index value (not indexed)"] == 1


def test_composite_unique_index_and_reference_written_once() -> None:
    plan = _plan(
        "  emp:\n    columns: []\n    unique: [[ename, email]]\n"
        "    indexes: [[mgr_id, ename], mgr_id]\n"
        "    references: [{columns: [mgr_id], table: emp}]\n"
    )
    commands, _ = plan.plan(rows(plan)[:2])
    assert (b"HSET", b"emp:uniques:ename:email", b"SMITH:foo@gmail.com", b"1",
            b"ALLEN:bar@163.com", b"2") in commands  # fmt: skip
    assert (b"SADD", b"emp:indices:mgr_id:8:ename:SMITH", b"1") in commands
    sadds = [c for c in commands if c[:2] == (b"SADD", b"emp:indices:mgr_id:8")]
    assert sadds == [(b"SADD", b"emp:indices:mgr_id:8", b"1", b"2")]  # index + FK: one SET


def test_columns_style_and_string_lookup() -> None:
    plan = _plan(
        "  emp:\n    as: columns\n    columns: [ename, mgr_id]\n"
        "    unique: [{columns: [ename], key: 'emp:{ename}:id'}]\n"
    )
    commands, stats = plan.plan(rows(plan))
    assert (b"SET", b"emp:1:ename", b"SMITH") in commands
    assert (b"SET", b"emp:1:mgr_id", b"8") in commands
    assert (b"SET", b"emp:SMITH:id", b"1") in commands
    assert (b"SET", b"emp:3:emp_id", b"3") in commands  # all-NULL row
    assert stats.keys == 7  # 5 column strings, 2 unique strings


def test_sorted_scores_and_nulls_counted() -> None:
    plan = _plan(
        "  emp:\n    as: none\n    sorted:\n      - {key: 'emp:by:salary', score: salary}\n"
        "      - {key: 'emp:by:hired', score: hired}\n"
    )
    commands, stats = plan.plan(rows(plan))
    assert commands == [
        (b"ZADD", b"emp:by:salary", b"800.00", b"1"),
        (b"ZADD", b"emp:by:hired", b"1577836800", b"1"),
    ]
    assert stats.skipped["NULL score (not in sorted set)"] == 4


def test_tag_sets_and_composite_primary_key() -> None:
    plan = _plan(
        "  tag:\n    as: none\n    sets:\n      - {key: 'tag:{tagname}', member: '{book_id}'}\n"
        "      - {key: 'book:{book_id}:tags', member: '{tagname}'}\n",
        table="tag",
    )
    assert plan.resolved.counter is None  # composite key: no counter
    commands, _ = plan.plan([(b"ruby", b"1"), (b"ruby", b"2"), (b"web", b"2")])
    assert (b"SADD", b"tag:ruby", b"1", b"2") in commands
    assert (b"SADD", b"tag:web", b"2") in commands
    assert (b"SADD", b"book:2:tags", b"ruby", b"web") in commands
    assert plan.pk_text((b"ruby", b"1")) == b"ruby:1"


def test_latest_rebuild_is_atomic() -> None:
    plan = _plan("  emp:\n    latest: [{key: 'emp:latest', order_by: hired, limit: 2}]\n")
    latest = plan.table.latest[0]
    assert plan.latest_commands(latest.key, [b"3", b"1"]) == [
        (b"MULTI",),
        (b"DEL", b"emp:latest"),
        (b"RPUSH", b"emp:latest", b"3", b"1"),
        (b"EXEC",),
    ]


def test_null_in_a_custom_row_key_rejects_the_row() -> None:
    plan = _plan("  emp:\n    key: 'emp:{email}'\n    columns: [ename]\n")
    commands, stats = plan.plan(rows(plan))
    assert [c[1] for c in commands] == [b"emp:foo@gmail.com", b"emp:bar@163.com"]
    assert stats.rejected["NULL in a row-key column"] == 1


def test_resp_encoding() -> None:
    assert resp([(b"SET", b"k", b"a b")]) == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na b\r\n"
    assert resp([(b"SET", b"k", b"")]) == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"
    # several commands, from an iterator; a long value (its header made, not kept); ``*0``
    long = b"x" * 5000
    assert resp(iter([(b"PING",), (b"SET", long, b"\r\n")])) == (
        b"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$5000\r\n" + long + b"\r\n$2\r\n\r\n\r\n"
    )
    assert resp([(b"PING",), (), (b"GET", b"k")]) == (
        b"*1\r\n$4\r\nPING\r\n*0\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
    )
    assert resp([]) == b""


@pytest.mark.parametrize(
    "tables",
    [
        "  emp:\n",
        "  emp:\n    columns: []\n",
        "  emp:\n    columns: [ename]\n    unique: [email]\n    indexes: [mgr_id]\n",
        "  emp:\n    unique: [[ename, email]]\n    indexes: [[mgr_id, ename]]\n",
        "  emp:\n    key: 'emp:{email}'\n    columns: [ename, salary]\n",
        "  emp:\n    sorted: [{key: 'emp:by:salary', score: salary}]\n    indexes: [mgr_id]\n",
        "  emp:\n    as: columns\n    unique: [{columns: [ename], key: 'emp:{ename}:id'}]\n",
        "  emp:\n    as: none\n    indexes: [mgr_id]\n",
    ],
)
def test_packed_hot_path_is_byte_identical_to_the_plan(tables: str) -> None:
    plan = _plan(tables)
    commands, stats = plan.plan(rows(plan))
    packed, count, packed_stats = plan.pack(rows(plan))
    assert packed == resp(commands)
    assert count == len(commands)
    assert packed_stats == stats


def test_coalescing_cuts_the_command_count_about_threefold() -> None:
    """5,000 rows with a unique and a non-unique index: one HSET per row, one HSET for the
    unique hash, one SADD per distinct indexed value, instead of three commands per row."""
    plan = _plan("  emp:\n    columns: [ename]\n    unique: [email]\n    indexes: [mgr_id]\n")
    many = [
        tuple(
            {"emp_id": b"%d" % n, "ename": b"e%d" % n, "email": b"u%d@x" % n,
             "mgr_id": b"%d" % (n % 50)}.get(c) for c in plan.select
        )
        for n in range(1, 5001)
    ]  # fmt: skip
    commands, stats = plan.plan(many)
    assert len(commands) == 5000 + 1 + 50
    uncoalesced = 5000 * 3
    assert uncoalesced / len(commands) > 2.9
    assert stats.entries == 10000
