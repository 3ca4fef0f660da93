"""Row filters (docs/mapping.md#where): the loader's and validate's refusals, and migrate,
verify (rows that left the filter: their keys are stray), dry-run (rows left out) and
--workers on real servers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from migrator.commands import dry_run, migrate
from migrator.commands.validate import validate
from migrator.commands.verify import verify
from migrator.errors import MappingError
from migrator.mapping.loader import parse_mapping
from migrator.mapping.where import FilterSyntaxError, parse
from tests.services import MySQLDatabase

SCHEMA = """
CREATE TABLE acct (
  id INT PRIMARY KEY, status VARCHAR(10) COLLATE utf8mb4_general_ci, amount DECIMAL(8,2),
  ratio DOUBLE, note VARCHAR(10) COLLATE utf8mb4_swedish_ci, created DATE, city VARCHAR(9),
  KEY (city)
);
INSERT INTO acct VALUES
 (1, 'active', 10.00, 0.5, 'a', '2024-01-02', 'Oslo'),
 (2, 'Active', 9.99, 0.5, 'b', '2024-01-02', 'Oslo'),
 (3, 'closed', 50.00, 0.5, 'c', '2024-01-02', 'Rome'),
 (4, 'ACTIVE ', 11.00, 0.5, 'd', '2023-12-31', 'Rome'),
 (5, NULL, 99.00, NULL, NULL, NULL, NULL),
 (6, 'active', 12.50, 0.5, 'e', '2024-05-05', 'Rome');
"""
MAPPING = """
version: 1
tables:
  acct:
    where: "{where}"
    columns: [status, amount]
    indexes: [city]
    latest: [{{key: "acct:latest", order_by: created, limit: 3}}]
"""
WHERE = "status = 'active' AND amount >= 10 AND created >= DATE '2024-01-01'"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("created > now()", "now is not allowed"),
        ("a = NULL", "IS NULL"),
        ("a = ", "expected a value"),
        ("a IN ()", "expected a value"),
        ("a = 1 b = 2", "expected AND, OR"),
        ("a = DATE '2024-02-30'", "not a date"),
        ("(a = 1", "expected )"),
    ],
)
def test_bad_filters_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(FilterSyntaxError, match=re.escape(message)):
        parse(text)
    with pytest.raises(MappingError, match="bad filter") as e:
        parse_mapping(f'version: 1\ntables:\n  t:\n    where: "{text}"\n')
    assert e.value.path == "tables.t.where"


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("ratio = 0.5", "is double"),
        ("note = 'a'", "utf8mb4_swedish_ci"),
        ("status > 'a'", "follow its collation's order"),
        ("status = 'kén'", "printable ASCII"),
        ("amount = '10'", "compared with a non-number"),
        ("created = '2024-01-01'", "DATE '...'"),
        ("status = 1", "non-text value"),
        ("nope = 1", "unknown column 'nope'"),
    ],
)
def test_validate_refuses_what_mysql_and_python_could_see_differently(
    mysql_db: MySQLDatabase, tmp_path: Path, where: str, message: str
) -> None:
    mysql_db.run(SCHEMA)
    path = tmp_path / "m.yaml"
    path.write_text(MAPPING.format(where=where.replace('"', '\\"')))
    report = validate(path, source=mysql_db.url)
    assert report.exit_code == 2
    assert any(message in p.message and p.path.startswith("tables.acct") for p in report.errors), [
        str(p) for p in report.problems
    ]
    ok = tmp_path / "ok.yaml"
    ok.write_text(MAPPING.format(where="ratio IS NULL OR note IS NOT NULL"))
    assert validate(ok, source=mysql_db.url).exit_code == 0


@pytest.mark.parametrize("workers", [1, 2])
def test_migrate_verify_and_dry_run_keep_only_the_filtered_rows(
    mysql_db: MySQLDatabase, redis_url: str, redis_client, tmp_path: Path, workers: int
) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run(SCHEMA)
    path = tmp_path / "m.yaml"
    path.write_text(MAPPING.format(where=WHERE))
    resp = tmp_path / "load.resp"
    planned = dry_run(path, source=mysql_db.url, sample=0, resp_file=resp)
    written = resp.read_bytes()
    for i in range(1, 7):  # the RESP load holds the rows the filter keeps, and only them
        assert (b"$6\r\nacct:%d\r\n" % i in written) == (i in (1, 6)), i
    assert (planned.tables[0].rows, planned.tables[0].filtered_out) == (2, 4)
    shown = planned.as_dict()["tables"][0]
    assert (shown["where"], shown["filtered_out"]) == (WHERE, 4)
    report = migrate(path, source=mysql_db.url, target=redis_url, workers=workers, chunk_rows=1)
    assert report.exit_code == 0
    assert sorted(redis_client.keys("acct:[0-9]*")) == [b"acct:1", b"acct:6"]
    assert redis_client.smembers("acct:indices:city:Rome") == {b"6"}
    assert not redis_client.exists("acct:indices:city:Oslo:x")
    assert redis_client.lrange("acct:latest", 0, -1) == [b"6", b"1"]
    assert redis_client.get("acct:id") == b"6"
    assert verify(path, source=mysql_db.url, target=redis_url).exit_code == 0
    assert verify(path, source=mysql_db.url, target=redis_url, sample=3).exit_code == 0
    # row 1 leaves the filter, row 2 enters it, without sync: verify names both
    mysql_db.run("UPDATE acct SET status = 'closed' WHERE id = 1;"
                 "UPDATE acct SET amount = 10 WHERE id = 2")  # fmt: skip
    found = verify(path, source=mysql_db.url, target=redis_url)
    assert found.exit_code == 1
    text = str(found.as_dict())
    assert "acct:1" in text and "acct:2" in text, text
    fixed = verify(path, source=mysql_db.url, target=redis_url, fix=True)
    assert fixed.exit_code in (0, 1)
    assert verify(path, source=mysql_db.url, target=redis_url).exit_code == 0
    assert sorted(redis_client.keys("acct:[0-9]*")) == [b"acct:2", b"acct:6"]


def test_a_changed_filter_is_a_changed_part_of_the_fingerprint() -> None:
    from migrator.mapping.fingerprint import changes, fingerprint
    from migrator.mapping.kinds import Kind
    from migrator.mapping.resolve import resolve
    from migrator.mapping.schema import Column, Schema, TableSchema

    cols = (Column("id", Kind.INTEGER, False, "int"), Column("a", Kind.INTEGER, True, "int"))
    schema = Schema("db", {"t": TableSchema("t", cols, ("id",), (), ())}, ())

    def printed(where: str) -> dict:  # type: ignore[type-arg]
        m = parse_mapping(
            "version: 1\ntables:\n  t:" + (f"\n    where: {where!r}" if where else " {}")
        )
        return fingerprint(m, resolve(m, schema))

    assert changes(printed(""), printed(""), ["t"]) == []
    assert changes(printed("a = 1"), printed("a = 1"), ["t"]) == []
    assert changes(printed("a = 1"), printed("a = 2"), ["t"]) == ["tables.t: where"]
    assert changes(printed(""), printed("a = 2"), ["t"]) == ["tables.t: where"]


def test_init_never_drafts_a_filter(mysql_db: MySQLDatabase) -> None:
    from migrator.commands import init
    from migrator.mapping import scaffold

    mysql_db.run(SCHEMA)
    draft = scaffold.render(init(mysql_db.url))
    # the header names each opt-in key in a comment; no table gets one
    header = [line for line in draft.splitlines() if line.startswith("#")]
    body = [line.lstrip() for line in draft.splitlines() if not line.startswith("#")]
    for key in ("where", "fields", "formats", "expire", "as", "nest", "search"):
        assert any(f" {key}: " in line for line in header), key
        assert not any(line.startswith(f"{key}:") for line in body), key
    table = parse_mapping(draft).tables[0]
    assert table.where is None and table.expire is None and table.nest is None
    assert table.search is None and table.kind == "hash"


@pytest.mark.parametrize(("on_delete", "left_out"), [("CASCADE", False), ("SET NULL", True)])
def test_a_filtered_child_follows_a_cascade_that_could_bring_a_row_in(
    on_delete: str, left_out: bool
) -> None:
    """A SET NULL can bring into ``parent_id IS NULL OR ...`` a row the filter left out: sync
    follows it from the images it keeps of the rows left out (docs/sync.md, Row filters; was
    refused), which a CASCADE (the rows go) does not need."""
    from migrator.plan.cascade import followable
    from tests.test_cascade_plan import _plans, _schema

    text = """
version: 1
tables:
  parent: {}
  child:
    where: "parent_id IS NULL OR e > 3"
    references: [{columns: [parent_id], table: parent}]
"""
    plans = _plans(_schema(on_delete), text)
    rules, refusals = followable(plans)
    assert refusals == [] and len(rules) == 1
    assert (plans["child"].keeps is not None) is left_out
