"""Create the benchmark table ``migrator_bench.emp`` with N rows, generated server-side.

    .venv/bin/python benchmarks/generate.py 1000000

Rows come from MariaDB's SEQUENCE engine (``seq_1_to_N``) in one INSERT ... SELECT, so a
million rows load in seconds: ``emp_id`` INT primary key, ``ename``, ``email`` UNIQUE,
``mgr_id`` indexed (1,000 distinct values, 5% NULL), ``hired`` DATETIME, ``salary``
DECIMAL(10,2), ``note`` TEXT (a quarter NULL, a quarter non-ASCII).
"""

from __future__ import annotations

import argparse
import time

import pymysql

DATABASE = "migrator_bench"

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
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
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
FROM seq_1_to_{n}
"""


def generate(rows: int, host: str = "127.0.0.1", port: int = 3306, user: str = "root") -> float:
    """(Re)create migrator_bench.emp with ``rows`` rows; returns the seconds it took."""
    t0 = time.perf_counter()
    conn = pymysql.connect(host=host, port=port, user=user, charset="utf8mb4", autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE} CHARACTER SET utf8mb4")
            cur.execute(f"USE {DATABASE}")
            cur.execute("DROP TABLE IF EXISTS emp")
            cur.execute(DDL)
            cur.execute(FILL.format(n=int(rows)))
            cur.execute("ANALYZE TABLE emp")
    finally:
        conn.close()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=int, help="number of rows, e.g. 1000000")
    args = parser.parse_args()
    seconds = generate(args.rows)
    print(f"{DATABASE}.emp: {args.rows:,} rows in {seconds:.1f}s")


if __name__ == "__main__":
    main()
