"""A ``unique:`` on columns MySQL does not keep unique, holding one value in several rows
(issue 27 item 5): one rule for migrate and verify — Redis holds one entry per value, naming
one of the rows; the values and the rows beyond one per value are counted as rows sharing a
primary key are (a difference, exit 1), with the SQL that lists the rows; verify accepts the
entry whichever of the rows it names (before: it named one row as "MySQL's" and --fix
rewrote the entry to it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from migrator.commands.migrate import migrate
from migrator.commands.validate import validate
from migrator.commands.verify import verify
from migrator.verify import report as vr
from tests.services import MySQLDatabase

MAPPING = """
version: 1
tables:
  acct:
    unique:
      - columns: [email]
      - columns: [login]
        key: "login:{login}"
"""
ROWS = 300


@pytest.fixture
def accounts(mysql_db: MySQLDatabase, tmp_path: Path) -> tuple[MySQLDatabase, Path]:
    """Emails 'a3@x' and 'a7@x' are each held by 3 rows, logins 'l5' by 2 rows: no UNIQUE
    index on either column."""
    mysql_db.run(
        "CREATE TABLE acct (id INT PRIMARY KEY, email VARCHAR(40), login VARCHAR(20));"
        f"INSERT INTO acct SELECT seq, CONCAT('a', seq, '@x'), CONCAT('l', seq) "
        f"FROM seq_1_to_{ROWS};"
        "UPDATE acct SET email = 'a3@x' WHERE id IN (103, 203);"
        "UPDATE acct SET email = 'a7@x' WHERE id IN (107, 207);"
        "UPDATE acct SET login = 'l5' WHERE id = 250;"
    )
    path = tmp_path / "acct.yaml"
    path.write_text(MAPPING)
    return mysql_db, path


def test_migrate_counts_shared_unique_values_and_exits_1(
    accounts: tuple[MySQLDatabase, Path], redis_url: str, redis_client: redis.Redis
) -> None:
    db, path = accounts
    report = migrate(path, source=db.url, target=redis_url, workers=1)
    assert report.exit_code == 1
    shared = {s.columns: (s.values, s.rows) for s in report.tables[0].shared}
    assert shared == {("email",): (2, 4), ("login",): (1, 1)}
    sql = report.tables[0].shared[0].sql
    conn = db.connect()
    try:
        with conn.cursor() as cur:  # the SQL given lists exactly the rows that share a value
            cur.execute(sql)
            listed = sorted(r[0] for r in cur.fetchall())
    finally:
        conn.close()
    assert listed == [3, 7, 103, 107, 203, 207]
    assert redis_client.hget("acct:uniques:email", "a3@x") in (b"3", b"103", b"203")
    assert report.as_dict()["tables"][0]["shared_unique_values"][0]["rows"] == 4


def test_verify_accepts_any_sharing_row_and_counts_the_values(
    accounts: tuple[MySQLDatabase, Path], redis_url: str, redis_client: redis.Redis
) -> None:
    db, path = accounts
    migrate(path, source=db.url, target=redis_url, workers=1)
    redis_client.hset("acct:uniques:email", "a3@x", "103")  # another of the rows: right too
    report = verify(path, source=db.url, target=redis_url)
    check = report.tables[0]
    assert dict(check.counts) == {vr.SHARED_UNIQUE: 5}, check.counts  # 4 + 1 beyond one
    assert report.exit_code == 1
    assert any("SELECT * FROM `acct` WHERE (`email`) IN" in n for n in check.notes)
    fixed = verify(path, source=db.url, target=redis_url, fix=True)
    assert redis_client.hget("acct:uniques:email", "a3@x") == b"103"  # not rewritten
    assert dict(fixed.tables[0].counts) == {vr.SHARED_UNIQUE: 5}


def test_verify_still_finds_a_wrong_entry_of_a_shared_value(
    accounts: tuple[MySQLDatabase, Path], redis_url: str, redis_client: redis.Redis
) -> None:
    db, path = accounts
    migrate(path, source=db.url, target=redis_url, workers=1)
    redis_client.hset("acct:uniques:email", "a3@x", "5")  # a row that does not hold it
    redis_client.delete("login:l5")
    report = verify(path, source=db.url, target=redis_url)
    assert {vr.WRONG_UNIQUE, vr.MISSING_UNIQUE} <= set(report.tables[0].counts)


def test_validate_says_what_happens_to_a_shared_value(
    accounts: tuple[MySQLDatabase, Path],
) -> None:
    db, path = accounts
    report = validate(path, source=db.url)
    texts = [p.message for p in report.problems if p.path.startswith("tables.acct.unique")]
    unenforced = [t for t in texts if t.startswith("MySQL does not enforce")]
    assert len(unenforced) == 2, texts
    assert all("one entry, naming one of them" in t for t in unenforced), texts
