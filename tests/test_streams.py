"""Change streams (issue 37): the ``streams:`` settings the loader reads and refuses, what
``validate`` reports against a schema, the envelope of an entry (plan/stream.py), and the
stream keys the key space leaves alone (verify, ``migrate --replace``, ``sync --reload``)."""

from __future__ import annotations

from typing import Any

import pytest

from migrator.errors import MappingError, MappingErrors, MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.mapping.validate import check_schema
from migrator.plan.keyspace import KeySpace
from migrator.plan.planner import TablePlan
from migrator.plan.stream import ChangeStream, streams_of
from migrator.sync.coordinator import refuse_cluster_streams
from migrator.sync.identity import mapping_fingerprint, table_fingerprints
from tests.test_scaffold import sample_schema

BASE = "version: 1\n"


def load(text: str) -> Any:
    return parse_mapping(BASE + text, file="m.yaml", environ={})


def test_options_give_every_table_a_stream_and_a_table_its_own() -> None:
    m = load(
        "options:\n  separator: '/'\n  streams: {ops: [update, insert], maxlen: 500}\n"
        "tables:\n  emp: {}\n  dept: {streams: {key: all-changes, columns: keys}}\n"
        "  log: {streams: false}\n"
    )
    emp, dept, log = m.tables
    assert emp.streams is not None and emp.streams.key == "emp/changes"
    assert emp.streams.ops == ("insert", "update") and emp.streams.maxlen == 500
    assert emp.streams.columns == "all"
    assert dept.streams is not None and dept.streams.key == "all-changes"
    assert dept.streams.columns == "keys" and dept.streams.maxlen == 500
    assert log.streams is None
    assert m.kept() == ("emp/changes", "all-changes")


def test_without_streams_no_table_has_one_and_true_takes_the_defaults() -> None:
    m = load("tables:\n  emp: {}\n  dept: {streams: true}\n")
    assert m.tables[0].streams is None
    assert m.tables[1].streams is not None and m.tables[1].streams.key == "dept:changes"
    assert m.tables[1].streams.ops == ("insert", "update", "delete")
    assert m.kept() == ("dept:changes",)


def test_one_stream_for_every_table_is_a_key_without_the_placeholder() -> None:
    m = load("options:\n  streams: {key: 'feed:*'}\ntables:\n  emp: {}\n  dept: {}\n")
    assert {t.streams.key for t in m.tables if t.streams} == {"feed:*"}
    assert m.kept() == ("feed:\\*",)  # a glob that matches that one key


@pytest.mark.parametrize(
    ("text", "path", "message"),
    [
        ("tables:\n  emp: {streams: {ops: [insert, upsert]}}\n", "tables.emp.streams.ops",
         "unknown operation 'upsert'"),
        ("tables:\n  emp: {streams: {key: 'emp:{emp_id}'}}\n", "tables.emp.streams.key",
         "its only placeholder is {table}"),
        ("tables:\n  emp: {streams: {key: 'emp:{table'}}\n", "tables.emp.streams.key",
         "unbalanced brace"),
        ("tables:\n  emp: {streams: {maxlen: 0}}\n", "tables.emp.streams.maxlen",
         "a positive number of entries"),
        ("tables:\n  emp: {streams: {colums: keys}}\n", "tables.emp.streams.colums",
         "unknown key 'colums'"),
        ("tables:\n  emp: {streams: {columns: some}}\n", "tables.emp.streams.columns",
         "all, keys, or a list"),
        ("options:\n  streams: {columns: [ename]}\ntables:\n  emp: {}\n",
         "options.streams.columns", "goes under a table's own streams:"),
        ("tables:\n  emp: {streams: 3}\n", "tables.emp.streams", "true, false or a mapping"),
        ("options:\n  streams: true\ntables:\n  emp: {where: 'emp_id > 3'}\n",
         "tables.emp.streams", "a table with where: is not supported"),
    ],
)  # fmt: skip
def test_the_loader_refuses_a_bad_streams_setting(text: str, path: str, message: str) -> None:
    with pytest.raises((MappingError, MappingErrors)) as raised:
        load(text)
    errors = raised.value.errors if isinstance(raised.value, MappingErrors) else [raised.value]
    assert any(e.path == path and message in e.detail for e in errors), [
        (e.path, e.detail) for e in errors
    ]
    assert all(e.line is not None for e in errors)


def test_validate_names_an_unknown_stream_column() -> None:
    m = load("tables:\n  emp:\n    streams: {columns: [ename, emial]}\n")
    problems = check_schema(m, sample_schema())
    found = [p for p in problems if p.path == "tables.emp.streams.columns"]
    assert found and "unknown column 'emial' in table emp" in found[0].message
    assert found[0].line == 4 and found[0].hint == "did you mean 'email'?"


def _stream(text: str, table: str = "emp") -> ChangeStream:
    m = load(text)
    plans = {r.name: TablePlan(r) for r in resolve(m, sample_schema(), [table])}
    return streams_of(dict(plans))[table]


def _row(stream: ChangeStream, **values: bytes | None) -> tuple[bytes | None, ...]:
    plan_pos = {name: i for name, i in _positions(stream).items()}
    row: list[bytes | None] = [None] * (max(plan_pos.values()) + 1)
    for k, v in values.items():
        row[plan_pos[k]] = v
    return tuple(row)


def _positions(stream: ChangeStream) -> dict[str, int]:
    return {after.decode().removeprefix("after."): i for _, after, i, _f in stream.columns}


EMP = (
    "tables:\n  emp:\n    columns: [ename, email, mgr_id]\n    fields: {ename: name}\n"
    "    streams: {key: 'emp:changes', maxlen: 1000}\n"
)


def test_an_update_is_one_xadd_with_both_images_as_the_hash_writes_them() -> None:
    s = _stream(EMP)
    before = _row(s, emp_id=b"7", name=b"Ada", email=None, mgr_id=b"1")
    after = _row(s, emp_id=b"7", name=b"Ada L", email=b"ada@x.org", mgr_id=b"1")
    cmd = s.entry(before, after, b"mysql-bin.000003:1234", b"0-1-57", 1_700_000_000)
    assert cmd == (
        b"XADD", b"emp:changes", b"MAXLEN", b"~", b"1000", b"*",
        b"op", b"update", b"table", b"emp", b"pk", b"7",
        b"pos", b"mysql-bin.000003:1234", b"gtid", b"0-1-57", b"ts", b"1700000000",
        b"before.emp_id", b"7", b"before.name", b"Ada", b"before.mgr_id", b"1",
        b"after.emp_id", b"7", b"after.name", b"Ada L", b"after.email", b"ada@x.org",
        b"after.mgr_id", b"1",
    )  # fmt: skip


def test_insert_and_delete_carry_one_image_keys_only_the_key_and_ops_filter() -> None:
    s = _stream("tables:\n  emp:\n    streams: {columns: keys, ops: [delete]}\n")
    row = _row(s, emp_id=b"9")
    assert s.entry(None, row, b"f:1", b"", 5) is None  # an insert: not asked for
    assert s.entry(row, row, b"f:1", b"", 5) is None  # an update: not asked for
    assert s.entry(row, None, b"f:1", b"", 5) == (
        b"XADD", b"emp:changes", b"*", b"op", b"delete", b"table", b"emp", b"pk", b"9",
        b"pos", b"f:1", b"ts", b"5", b"before.emp_id", b"9",
    )  # fmt: skip
    every = _stream("tables:\n  emp:\n    streams: true\n")
    full = every.entry(None, _row(every, emp_id=b"9", ename=b"Bo"), b"f:1", b"g", 5)
    assert full is not None and full[3:5] == (b"op", b"insert")
    assert full[-4:] == (b"after.emp_id", b"9", b"after.ename", b"Bo")


def test_a_formatted_column_is_written_in_its_format() -> None:
    s = _stream("tables:\n  dept:\n    formats: {dname: number}\n    streams: true\n", "dept")
    pos = _positions(s)
    row: list[bytes | None] = [None] * (max(pos.values()) + 1)
    row[pos["dept_no"]], row[pos["dname"]] = b"d1", b"0042.50"
    entry = s.entry(None, tuple(row), b"f:1", b"", 1)
    plan = TablePlan(resolve(load("tables:\n  dept:\n    formats: {dname: number}\n"),
                             sample_schema(), ["dept"])[0])  # fmt: skip
    hashed = plan.plan([tuple(row)])[0][0]
    assert entry is not None and entry[-2:] == (b"after." + hashed[-2], hashed[-1])


def test_the_key_space_leaves_the_streams_to_the_streams() -> None:
    m = load("tables:\n  emp:\n    streams: true\n")
    plans = [TablePlan(r) for r in resolve(m, sample_schema(), ["emp"])]
    assert KeySpace(plans, m.kept()).ignored(b"emp:changes")
    assert not KeySpace(plans, m.options.ignore).ignored(b"emp:changes")


def test_adding_streams_changes_no_fingerprint_so_sync_loads_nothing_again() -> None:
    plain = load("tables:\n  emp: {}\n  dept: {}\n")
    streamed = load("options:\n  streams: {maxlen: 9}\ntables:\n  emp: {}\n"
                    "  dept: {streams: {columns: [dname]}}\n")  # fmt: skip
    assert mapping_fingerprint(plain) == mapping_fingerprint(streamed)
    assert table_fingerprints(plain) == table_fingerprints(streamed)


def test_maxage_trims_by_minid_from_this_machines_clock() -> None:
    m = load("options:\n  streams: {maxage: 2h}\ntables:\n  emp: {}\n"
             "  dept: {streams: {maxlen: 10}}\n")  # fmt: skip
    emp, dept = m.tables
    assert emp.streams is not None and emp.streams.maxage == 7200.0
    assert dept.streams is not None and (dept.streams.maxlen, dept.streams.maxage) == (10, None)
    s = _stream("options:\n  streams: {maxage: 90s}\ntables:\n  emp: {}\n")
    s.clock = lambda: 1_000_000.0
    entry = s.entry(None, _row(s, emp_id=b"1"), b"f:1", b"", 1)
    assert entry is not None and entry[:7] == (
        b"XADD",
        b"emp:changes",
        b"MINID",
        b"~",
        b"%d" % (1_000_000_000 - 90_000),
        b"*",
        b"op",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{maxage: 0}", "maxage must be above zero"),
        ("{maxage: 3w}", "unknown unit 'w'"),
        ("{maxage: 1h, maxlen: 5}", "by maxlen or by maxage, not both"),
    ],
)
def test_a_bad_maxage_is_refused(text: str, message: str) -> None:
    with pytest.raises(MappingError) as raised:
        load(f"tables:\n  emp: {{streams: {text}}}\n")
    assert raised.value.path == "tables.emp.streams.maxage" and message in raised.value.detail


def test_sync_refuses_streams_on_a_redis_cluster() -> None:
    resolved = resolve(load("tables:\n  emp: {}\n  dept: {streams: true}\n"), sample_schema())
    refuse_cluster_streams(resolved, cluster=False)
    refuse_cluster_streams(resolved[:1], cluster=True)  # no stream: nothing to refuse
    with pytest.raises(MigratorError, match=r"cannot write change streams \(dept\) on a Redis"):
        refuse_cluster_streams(resolved, cluster=True)
