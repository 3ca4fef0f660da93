"""The settings ``snapshot`` and ``form`` of change streams (docs/mapping.md#streams): what the
loader takes and refuses, the entries they give (``snapshot``, ``truncate``, the JSON images),
what ``verify`` calls well formed, and the memory model of a stream (docs/sync.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from migrator.commands.validate import validate
from migrator.errors import MappingError, MappingErrors
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.plan.estimate import MemoryModel
from migrator.plan.planner import TablePlan
from migrator.plan.stream import ChangeStream, snapshot_entries, streams_of
from migrator.verify.streams import malformed
from tests.test_expiry_plan import AHEAD, PAST, _at
from tests.test_expiry_plan import _row as _erow
from tests.test_planner import _plan
from tests.test_scaffold import sample_schema


def load(text: str) -> Any:
    return parse_mapping("version: 1\n" + text, file="m.yaml", environ={})


def test_snapshot_and_form_default_off_and_fields_and_a_table_takes_precedence() -> None:
    m = load(
        "options:\n  streams: {snapshot: true, form: json}\ntables:\n  emp: {}\n"
        "  dept: {streams: {snapshot: false}}\n  log: {streams: {form: fields}}\n"
    )
    emp, dept, log = (t.streams for t in m.tables)
    assert emp is not None and emp.snapshot and emp.form == "json"
    assert dept is not None and not dept.snapshot and dept.form == "json"
    assert log is not None and log.snapshot and log.form == "fields"
    plain = load("tables:\n  emp: {streams: true}\n").tables[0].streams
    assert plain is not None and not plain.snapshot and plain.form == "fields"


@pytest.mark.parametrize(
    ("text", "path", "message"),
    [
        ("tables:\n  emp: {streams: {snapshot: 'yes'}}\n", "tables.emp.streams.snapshot",
         "snapshot: true or false"),
        ("tables:\n  emp: {streams: {form: xml}}\n", "tables.emp.streams.form",
         "form: fields or json, got 'xml'"),
        ("options:\n  streams: {snapshot: 1}\ntables:\n  emp: {}\n",
         "options.streams.snapshot", "snapshot: true or false"),
    ],
)  # fmt: skip
def test_the_loader_refuses_a_bad_snapshot_or_form(text: str, path: str, message: str) -> None:
    with pytest.raises((MappingError, MappingErrors)) as raised:
        load(text)
    errors = raised.value.errors if isinstance(raised.value, MappingErrors) else [raised.value]
    assert any(e.path == path and message in e.detail for e in errors), [
        (e.path, e.detail) for e in errors
    ]


def _stream(text: str) -> tuple[ChangeStream, TablePlan]:
    plans = {r.name: TablePlan(r) for r in resolve(load(text), sample_schema(), ["emp"])}
    return streams_of(dict(plans))["emp"], plans["emp"]


def _row(plan: TablePlan, **values: bytes | None) -> tuple[bytes | None, ...]:
    row: list[bytes | None] = [None] * len(plan.select)
    for k, v in values.items():
        row[plan.pos[k]] = v
    return tuple(row)


def test_a_snapshot_entry_is_the_after_image_and_a_truncate_has_neither_pk_nor_image() -> None:
    s, plan = _stream("tables:\n  emp:\n    columns: [ename]\n    streams: {snapshot: true, "
                      "maxlen: 9}\n")  # fmt: skip
    row = _row(plan, emp_id=b"7", ename=b"Ada")
    assert s.snapshot_entry(row, b"b.000002:44", b"0-1-5", 17) == (
        b"XADD", b"emp:changes", b"MAXLEN", b"~", b"9", b"*", b"op", b"snapshot",
        b"table", b"emp", b"pk", b"7", b"pos", b"b.000002:44", b"gtid", b"0-1-5", b"ts", b"17",
        b"after.emp_id", b"7", b"after.ename", b"Ada",
    )  # fmt: skip
    assert s.truncate_entry(b"b.000002:44", b"", 17) == (
        b"XADD", b"emp:changes", b"MAXLEN", b"~", b"9", b"*", b"op", b"truncate",
        b"table", b"emp", b"pos", b"b.000002:44", b"ts", b"17",
    )  # fmt: skip
    entries = snapshot_entries(plan)
    assert entries is not None
    entries.at("b.000002", 44, None, "2026-01-02 03:04:05.500000")
    assert entries.truncate()[-2:] == (b"ts", b"1767323045")  # the snapshot's moment, UTC
    assert snapshot_entries(_stream("tables:\n  emp: {streams: true}\n")[1]) is None


def test_the_json_form_is_one_object_per_image_of_strings_and_nulls() -> None:
    s, plan = _stream("tables:\n  emp:\n    columns: [ename, email]\n    fields: {ename: name}\n"
                      "    streams: {form: json}\n")  # fmt: skip
    before = _row(plan, emp_id=b"7", ename=b'A\xc3\xa9 "x"', email=None)
    after = _row(plan, emp_id=b"7", ename=b"B", email=b"b@x.org")
    entry = s.entry(before, after, b"f.000001:4", b"", 5)
    assert entry is not None
    fields = dict(zip(entry[3::2], entry[4::2]))
    assert fields[b"before"] == '{"emp_id":"7","name":"Aé \\"x\\"","email":null}'.encode()
    assert json.loads(fields[b"after"]) == {"emp_id": "7", "name": "B", "email": "b@x.org"}
    assert not any(k.startswith((b"before.", b"after.")) for k in fields)
    assert malformed(fields, {b"emp"}) is None


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({b"op": b"snapshot", b"after.id": b"1"}, None),
        ({b"op": b"snapshot", b"before.id": b"1"}, "snapshot with images: before"),
        ({b"op": b"truncate", b"pk": b""}, None),
        ({b"op": b"truncate", b"after.id": b"1"}, "truncate with images: after"),
        ({b"op": b"insert", b"after": b'{"id":"1","n":null}'}, None),
        ({b"op": b"insert", b"after": b"{"}, "after: not JSON"),
        ({b"op": b"insert", b"after": b'{"id":1}'}, "neither a string nor null"),
        ({b"op": b"update", b"before": b'{"id":"1"}', b"after.id": b"1"},
         "an image both as fields and as JSON"),
        ({b"op": b"upsert", b"after.id": b"1"}, "is not one of insert, update, delete"),
    ],
)  # fmt: skip
def test_verify_reads_snapshot_truncate_and_json_entries(
    extra: dict[bytes, bytes], problem: str | None
) -> None:
    fields = {b"table": b"emp", b"pk": b"1", b"pos": b"b.000001:4", b"ts": b"5", **extra}
    found = malformed(fields, {b"emp"})
    assert (found is None) if problem is None else (found is not None and problem in found), found


def test_the_memory_model_sizes_a_stream_by_nodes_of_a_hundred_entries() -> None:
    model = MemoryModel()
    head = (b"XADD", b"s", b"*")
    for i in range(250):
        model.add((*head, b"op", b"snapshot", b"pk", b"%d" % i, b"after.v", b"x"), once=False)
    assert model.keys == 1
    nodes = model.streams[b"s"]
    assert len(nodes.closed) == 2 and nodes.count == 50
    one = MemoryModel()
    one.add((*head, b"op", b"snapshot", b"pk", b"1", b"after.v", b"x"), once=False)
    assert 2.0 < model.bytes / one.bytes < 250 / 10  # entries share nodes and field names


def test_validate_warns_that_sync_refuses_streams_on_a_cluster_target(tmp_path: Any) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\ntables:\n  emp:\n    streams: {snapshot: true}\n")
    cluster = validate(path, environ={"MIGRATOR_TARGET_URL": "redis+cluster://127.0.0.1:7000"})
    (warning,) = cluster.problems
    assert warning.level == "warning" and warning.path == "tables.emp.streams"
    assert "sync refuses change streams on a Redis Cluster" in warning.message
    assert warning.line == 4
    single = validate(path, environ={"MIGRATOR_TARGET_URL": "redis://127.0.0.1:6379/0"})
    assert single.problems == []


def test_a_load_has_no_snapshot_entry_for_a_row_it_does_not_write() -> None:
    """Past its expiry (left out), or refused by ``escape: reject``: what ``plan`` writes."""
    plan = _at(_plan("  emp:\n    expire: {column: hired, offset: 1h}\n"))
    keep, gone = _erow(plan, emp_id=b"1", hired=AHEAD), _erow(plan, emp_id=b"2", hired=PAST)
    assert plan.written([keep, gone]) == [keep]
    assert {c[1] for c in plan.plan([keep, gone])[0] if c[1].startswith(b"emp:")} == {b"emp:1"}
    plan = _plan("  emp:\n    key: 'emp:{ename}:{email}'\n    columns: [ename]\n")
    ok = _erow(plan, emp_id=b"1", ename=b"A", email=b"a@x")
    odd = _erow(plan, emp_id=b"2", ename=b"A:B", email=b"b@x")
    assert plan.written([ok, odd]) == [ok]
    assert plan.plan([ok, odd])[1].rejected and len(plan.plan([ok])[0]) == 1
