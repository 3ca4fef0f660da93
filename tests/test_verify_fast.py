"""verify's fast path (migrator/verify/fast.py) against real MariaDB and Redis: a clean table
passes without the general path, and every kind of tampering gives exactly the report the
general path gives (the fast path only decides which batches the general path re-reads)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands import migrate, verify
from migrator.verify import report as vr
from migrator.verify import tables as verifier
from migrator.verify.fast import MISSES, FastBatch, FastChecks
from tests.services import MySQLDatabase

LONG = "x" * 200  # a value this long makes Redis keep the hash unordered (hashtable)
SCHEMA = f"""
CREATE TABLE dept (dept_id INT PRIMARY KEY, dname VARCHAR(40));
CREATE TABLE emp (
  emp_id INT PRIMARY KEY, ename VARCHAR(40), email VARCHAR(80) UNIQUE, mgr_id INT,
  note TEXT, dept_id INT, KEY (mgr_id), FOREIGN KEY (dept_id) REFERENCES dept (dept_id));
INSERT INTO dept VALUES (1, 'R&D'), (2, 'Sales');
INSERT INTO emp VALUES
  (1, 'SMITH', 'smith@x.org', 8, 'hello', 1),
  (2, 'ALLEN', 'allen@x.org', 8, NULL, 2),
  (3, 'WARD', NULL, NULL, '{LONG}', 2),
  (4, NULL, NULL, NULL, NULL, NULL),
  (5, 'JONES', 'jones@x.org', 3, '%s 100%% $5\\r\\n', 1),
  (8, 'KING', 'king@x.org', NULL, 'boss', 1);
"""
MAPPING = """
version: 1
options:
  batch_size: 2
tables:
  dept: {}
  emp:
    unique: [email]
    indexes: [mgr_id]
    references:
      - columns: [dept_id]
        table: dept
"""


@pytest.fixture
def setup(mysql_db: MySQLDatabase, redis_url: str, tmp_path: Path) -> Callable[..., Any]:
    mysql_db.run(SCHEMA)
    path = tmp_path / "emp.yaml"
    path.write_text(MAPPING)
    migrate(path, source=mysql_db.url, target=redis_url, workers=1)

    def run(**kw: Any) -> Any:
        return verify(path, source=mysql_db.url, target=redis_url, **kw)

    return run


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What each fast batch's settle answered (True: clean, counted without re-reading)."""
    answers: list[bool] = []
    original = FastChecks.settle

    def settle(self: FastChecks, job: FastBatch) -> bool:
        answers.append(original(self, job))
        return answers[-1]

    monkeypatch.setattr(FastChecks, "settle", settle)
    return answers


def general(monkeypatch: pytest.MonkeyPatch, run: Callable[..., Any]) -> dict[str, Any]:
    with monkeypatch.context() as m:
        m.setattr(verifier, "usable", lambda checks: False)
        return _without_seconds(run().as_dict())


def _without_seconds(d: dict[str, Any]) -> dict[str, Any]:
    """The report without what differs from run to run: times, and the snapshot's moment."""
    d.pop("seconds", None)
    d.pop("snapshot", None)
    for t in d["tables"]:
        t.pop("seconds", None)
    return d


def test_clean_table_takes_the_fast_path(setup: Callable[..., Any], settled: list[bool]) -> None:
    report = setup()
    assert report.ok, report.as_dict()
    assert settled and all(settled)
    rows = {t.table: (t.mysql_rows, t.redis_rows) for t in report.tables}
    assert rows == {"dept": (2, 2), "emp": (6, 6)}


TAMPERING: dict[str, tuple[Callable[[redis.Redis], object], str, str]] = {
    "deleted row": (lambda r: r.delete("emp:2"), vr.MISSING_ROW, "emp:2"),
    "changed field": (lambda r: r.hset("emp:1", "ename", "SMYTH"), vr.DIFFERENT_VALUE, "emp:1"),
    "changed long field": (lambda r: r.hset("emp:3", "note", "short"), vr.DIFFERENT_VALUE,
                           "emp:3"),
    "extra field": (lambda r: r.hset("emp:1", "bonus", "1"), vr.EXTRA_FIELD, "emp:1"),
    "field where NULL": (lambda r: r.hset("emp:2", "note", "x"), vr.EXTRA_FIELD, "emp:2"),
    "missing field": (lambda r: r.hdel("emp:5", "note"), vr.MISSING_FIELD, "emp:5"),
    "all-NULL row changed": (lambda r: r.hset("emp:4", "emp_id", "44"), vr.DIFFERENT_VALUE,
                             "emp:4"),
    "row of another type": (lambda r: (r.delete("emp:8"), r.set("emp:8", "x")), vr.WRONG_TYPE,
                            "emp:8"),
    "missing index member": (lambda r: r.srem("emp:indices:mgr_id:8", "2"), vr.MISSING_INDEX,
                             "emp:indices:mgr_id:8"),
    "missing index set": (lambda r: r.delete("emp:indices:mgr_id:3"), vr.MISSING_INDEX,
                          "emp:indices:mgr_id:3"),
    "foreign index member": (lambda r: r.sadd("emp:indices:mgr_id:8", "77"), vr.FOREIGN_INDEX,
                             "emp:indices:mgr_id:8"),
    "missing unique entry": (lambda r: r.hdel("emp:uniques:email", "jones@x.org"),
                             vr.MISSING_UNIQUE, "emp:uniques:email"),
    "wrong unique entry": (lambda r: r.hset("emp:uniques:email", "smith@x.org", "2"),
                           vr.WRONG_UNIQUE, "emp:uniques:email"),
    "unique hash of another type": (lambda r: (r.delete("emp:uniques:email"),
                                               r.set("emp:uniques:email", "1")),
                                    vr.WRONG_TYPE, "emp:uniques:email"),
    "dangling reference": (lambda r: r.delete("dept:2"), vr.DANGLING, "emp:2"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(TAMPERING))
def test_tampering_gives_the_general_paths_report(
    name: str,
    setup: Callable[..., Any],
    settled: list[bool],
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tamper, kind, key = TAMPERING[name]
    tamper(redis_client)
    report = setup()
    check = next(t for t in report.tables if t.table == "emp")
    assert check.counts[kind] >= 1, check.as_dict()
    assert key in [d.key for d in check.examples[kind]]
    assert report.exit_code == 1
    if name not in ("foreign index member", "all-NULL row changed"):  # (by cardinality, after
        # the rows; and a row with no field at all is read back with HGETALL as before)
        assert False in settled  # the fast path saw it and handed the batch over
    assert _without_seconds(report.as_dict()) == general(monkeypatch, setup)


def test_a_table_that_differs_all_along_goes_the_general_way(
    setup: Callable[..., Any],
    settled: list[bool],
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    mysql_db: MySQLDatabase,
) -> None:
    redis_client.delete("dept:1", "dept:2")  # every employee with a department dangles
    mysql_db.run("UPDATE emp SET dept_id = 1 WHERE emp_id = 4;")  # (and emp:4 lacks it)
    report = setup(batch_size=1)
    # 2 dept batches, then emp's: MISSES of them, and one more sent before the last of
    # those was read; no more fast batches after that (each would be read twice)
    assert settled == [False] * (2 + MISSES + 1)
    check = next(t for t in report.tables if t.table == "emp")
    assert check.counts[vr.DANGLING] == 6
    assert _without_seconds(report.as_dict()) == general(monkeypatch, lambda: setup(batch_size=1))
