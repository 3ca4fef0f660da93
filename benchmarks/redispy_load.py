"""The hand-written baseline: pymysql rows -> redis-py pipeline(transaction=False), flushed
every 5,000 rows, writing the same keys as benchmarks/emp.yaml.

    .venv/bin/python benchmarks/redispy_load.py [mysql_db] [redis_url]
"""

from __future__ import annotations

import sys

import pymysql
import pymysql.cursors
import redis

COLUMNS = ("ename", "email", "mgr_id", "hired", "salary", "note")


def main() -> None:
    database = sys.argv[1] if len(sys.argv) > 1 else "migrator_bench"
    url = sys.argv[2] if len(sys.argv) > 2 else "redis://127.0.0.1:6379/14"
    conn = pymysql.connect(host="127.0.0.1", user="root", database=database, charset="utf8mb4")
    r = redis.Redis.from_url(url)
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
