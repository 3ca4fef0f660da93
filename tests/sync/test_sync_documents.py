"""sync of JSON documents (``as: json-string``; docs/values.md#json-documents) on each engine:
random writes (inserts, updates of every column, deletes, primary-key changes) while sync
follows, then ``verify`` 0 and an independent comparison: each document read with redis-py
against a MySQL query, typed by docs/values.md's rules."""

from __future__ import annotations

import functools
import json
import threading
from decimal import Decimal
from typing import Any

import redis

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from tests.sync.helpers import while_syncing, write_random
from tests.sync.workload import MAPPING as WORKLOAD_MAPPING
from tests.sync.workload import SCHEMA
from tests.test_documents import MAPPING as TYPES_MAPPING
from tests.test_documents import TYPES

_ids = iter(range(8100, 8200))

#: the sync workload's mapping with its row tables as documents (emp with a renamed key and
#: a DECIMAL as a number), every other structure as it is
MAPPING = (
    WORKLOAD_MAPPING.replace("  dept:\n", "  dept:\n    as: {kind}\n")
    .replace("  emp:\n", "  emp:\n    as: {kind}\n    fields: {{note: remark}}\n"
             "    formats: {{salary: number}}\n")
    .replace("  stats:\n    as: columns", "  stats:\n    as: {kind}")
    .replace("{tag}", "{{tag}}").replace("{emp_id}", "{{emp_id}}").replace("{login}", "{{login}}")
)  # fmt: skip


def mapping(kind: str = "json-string") -> Any:
    return parse_mapping(MAPPING.format(kind=kind), name=f"docsync-{kind}")


def documents_match_mysql(db: Any, client: redis.Redis, kind: str) -> None:
    """Every emp row's document, read with redis-py, is the row MySQL returns, typed: and
    there is no document of a row MySQL lacks."""
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT id, email, login, dept_id, title, salary, CAST(hired AS CHAR), note "
                "FROM emp"
            )
            rows = cur.fetchall()
    finally:
        conn.close()
    want = {
        f"emp:{i}".encode(): {
            "email": email, "login": login, "dept_id": dept, "title": title,
            "salary": None if salary is None else Decimal(salary), "hired": hired,
            "remark": note,
        }
        for i, email, login, dept, title, salary, hired, note in rows
    }  # fmt: skip
    held = {k for k in client.scan_iter(match="emp:[0-9]*")}
    assert held == set(want)
    for key, expected in want.items():
        if kind == "json":  # a stock client's JSON commands: numbers as Python floats
            got = client.json().get(key)
            salary = expected["salary"]
            expected["salary"] = None if salary is None else float(salary)
        else:
            got = json.loads(client.get(key), parse_float=Decimal)
        assert got == expected, key
        assert all(type(got[c]) is type(expected[c]) for c in ("dept_id", "title", "remark"))


def synced(binlog_db: Any, redis_url: str, kind: str, seeds: tuple[int, ...]) -> None:
    binlog_db.run(SCHEMA)

    def run(stop: threading.Event, status: Any) -> None:
        sync(mapping(kind), source=binlog_db.url, target=redis_url, stop=stop,
             server_id=next(_ids), on_status=status)  # fmt: skip

    while_syncing(run, [functools.partial(write_random, binlog_db, s, 120) for s in seeds])
    sync(mapping(kind), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    report = verify(mapping(kind), source=binlog_db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()
    documents_match_mysql(binlog_db, redis.Redis.from_url(redis_url), kind)


def test_random_writes_keep_json_string_documents_exact(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    synced(binlog_db, redis_url, "json-string", (41, 42))


def test_every_type_synced_is_the_document_migrate_writes(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """Rows of every type inserted, updated and deleted while sync follows: each document
    is the one migrate writes (verify compares them), from the binary log's values."""
    create, rows = TYPES.split("SET SESSION sql_mode", 1)
    binlog_db.run(create)
    m = parse_mapping(TYPES_MAPPING.format(kind="json-string"), name="docsync-types")

    def caught_up() -> None:
        sync(m, source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=next(_ids))  # fmt: skip
        report = verify(m, source=binlog_db.url, target=redis_url)
        assert report.exit_code == 0, report.as_dict()

    caught_up()  # the first load: an empty table
    binlog_db.run("SET SESSION sql_mode" + rows)
    caught_up()
    client = redis.Redis.from_url(redis_url)
    assert client.exists("v:1", "v:2", "v:3") == 3
    binlog_db.run(
        """UPDATE v SET j = '{"z": [true, 1.25]}', d = d + 1, bl = UNHEX('0A0B'), """
        "i = 5 WHERE id = 1; UPDATE v SET id = 4 WHERE id = 2; DELETE FROM v WHERE id = 3"
    )
    caught_up()
    assert sorted(client.keys("v:*")) == [b"v:1", b"v:4"]
    assert json.loads(client.get("v:1"))["j"] == {"z": [True, 1.25]}


def test_random_writes_keep_redisjson_documents_exact(binlog_db, modules_redis_url: str) -> None:  # type: ignore[no-untyped-def]
    synced(binlog_db, modules_redis_url, "json", (43, 44))
