"""The hand-written baseline: pymysql rows -> redis-py pipeline(transaction=False), flushed
every 5,000 rows, writing the same keys as benchmarks/emp.yaml into the target as it is.

    .venv/bin/python benchmarks/redispy_load.py --source MYSQL_URL --target REDIS_URL
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pymysql
import pymysql.cursors
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import connect_args

COLUMNS = ("ename", "email", "mgr_id", "hired", "salary", "note")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="MySQL URL of the benchmark database")
    parser.add_argument("--target", required=True, help="Redis URL to write to")
    args = parser.parse_args()
    conn = pymysql.connect(**connect_args(args.source))
    r = redis.Redis.from_url(args.target)
    pipe = r.pipeline(transaction=False)
    last = None
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(
            "SELECT emp_id, ename, email, mgr_id, hired, salary, note FROM emp ORDER BY emp_id"
        )
        n = 0
        for row in cur:
            emp_id = row[0]
            fields = {c: str(v) for c, v in zip(COLUMNS, row[1:]) if v is not None}
            pipe.hset(f"emp:{emp_id}", mapping=fields)
            pipe.hset("emp:uniques:email", row[2], emp_id)
            if row[3] is not None:
                pipe.sadd(f"emp:indices:mgr_id:{row[3]}", emp_id)
            last = emp_id
            n += 1
            if n % 5000 == 0:
                pipe.execute()
    if last is not None:
        pipe.set("emp:id", last)
    pipe.execute()
    print(n)


if __name__ == "__main__":
    main()
