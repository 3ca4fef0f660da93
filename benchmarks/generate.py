"""Create the benchmark table ``emp`` with N rows, generated server-side.

    .venv/bin/python benchmarks/generate.py 1000000 \
        [--source mysql+pymysql://root@127.0.0.1:3306/migrator_bench] [--force]

The database is the one ``--source`` names (created if missing; default ``migrator_bench``).
The table carries a comment that marks it as the benchmark's: an ``emp`` table without it is
someone's data, and is replaced only with ``--force``.

Rows come from one INSERT ... SELECT over a cross join of digit tables (``numbers``: 10^k rows
for the smallest k that covers N, on MariaDB and MySQL alike), so a million rows load in
seconds: ``emp_id`` INT primary key, ``ename``, ``email`` UNIQUE,
``mgr_id`` indexed (1,000 distinct values, 5% NULL), ``hired`` DATETIME, ``salary``
DECIMAL(10,2), ``note`` TEXT (a quarter NULL, a quarter non-ASCII).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import pymysql
from sqlalchemy.engine import make_url

DEFAULT_SOURCE = "mysql+pymysql://root@127.0.0.1:3306/migrator_bench"
MARK = "migrator benchmark table (benchmarks/generate.py)"

DDL = """
CREATE TABLE emp (
  emp_id INT NOT NULL PRIMARY KEY,
  ename VARCHAR(40) NOT NULL,
  email VARCHAR(80) NOT NULL,
  mgr_id INT NULL,
  hired DATETIME NOT NULL,
  salary DECIMAL(10,2) NOT NULL,
  note TEXT NULL,
  UNIQUE KEY uq_email (email),
  KEY ix_mgr (mgr_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='{mark}'
"""

FILL = """
INSERT INTO emp
SELECT seq,
       CONCAT('emp', seq),
       CONCAT('user', seq, '@example.com'),
       IF(seq % 20 = 0, NULL, (seq DIV 20) % 1000 + 1),
       TIMESTAMP('2000-01-01') + INTERVAL (seq * 37) % 9000 DAY + INTERVAL seq % 86400 SECOND,
       (seq * 7919 % 10000000) / 100,
       CASE seq % 4 WHEN 0 THEN NULL
                    WHEN 1 THEN CONCAT('Grüße aus Zürich, 東京 ', seq)
                    ELSE CONCAT('note ', seq) END
FROM ({numbers}) AS numbers WHERE seq <= {n}
"""


DIGITS = "SELECT 0 AS d UNION ALL " + " UNION ALL ".join(f"SELECT {i}" for i in range(1, 10))


def numbers(n: int) -> str:
    """A SELECT of ``seq`` = 1 .. 10^k (k digits, the fewest with 10^k >= n)."""
    k = max(1, len(str(max(n - 1, 1))))
    joins = ", ".join(f"({DIGITS}) AS d{i}" for i in range(k))
    value = " + ".join(f"d{i}.d * {10**i}" for i in range(k))
    return f"SELECT {value} + 1 AS seq FROM {joins}"


def connect_args(url: str) -> dict[str, Any]:
    """pymysql.connect() arguments for a MySQL URL that names its database."""
    u = make_url(url)
    if u.get_backend_name() != "mysql" or not u.database:
        raise SystemExit(f"--source must be a mysql:// URL with a database, got {u!r}")
    return {
        "host": u.host or "127.0.0.1",
        "port": u.port or 3306,
        "user": u.username or "root",
        "password": u.password or "",
        "database": u.database,
        "charset": "utf8mb4",
    }


def generate(rows: int, source: str = DEFAULT_SOURCE, force: bool = False) -> float:
    """(Re)create ``emp`` with ``rows`` rows in the database of ``source``; the seconds it took.
    Refuses (SystemExit) to replace an ``emp`` table this script did not make, unless ``force``.
    """
    t0 = time.perf_counter()
    args = connect_args(source)
    database = args.pop("database")
    conn = pymysql.connect(**args, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}` CHARACTER SET utf8mb4")
            cur.execute(f"USE `{database}`")
            cur.execute(
                "SELECT table_comment FROM information_schema.tables"
                " WHERE table_schema = %s AND table_name = 'emp'",
                (database,),
            )
            found = cur.fetchone()
            if found is not None and found[0] != MARK and not force:
                raise SystemExit(
                    f"refusing to replace {database}.emp: this benchmark did not make it (its"
                    f" comment is not {MARK!r}). Name another database in --source, or pass"
                    " --force to drop that table."
                )
            cur.execute("DROP TABLE IF EXISTS emp")
            cur.execute(DDL.format(mark=MARK))
            cur.execute(FILL.format(n=int(rows), numbers=numbers(int(rows))))
            cur.execute("ANALYZE TABLE emp")
    finally:
        conn.close()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=int, help="number of rows, e.g. 1000000")
    parser.add_argument(
        "--source", default=DEFAULT_SOURCE, help=f"MySQL URL of the database, e.g. {DEFAULT_SOURCE}"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace an emp table this script did not make"
    )
    args = parser.parse_args()
    seconds = generate(args.rows, args.source, args.force)
    print(f"{make_url(args.source).database}.emp: {args.rows:,} rows in {seconds:.1f}s")


if __name__ == "__main__":
    main()
