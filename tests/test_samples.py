"""The source documents' examples (samples/ + mappings/) give exactly the documents' keys and
the answers the documents give (issue 2 item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from migrator.commands import migrate

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def demo(mysql_db, redis_url: str, redis_client: redis.Redis) -> redis.Redis:  # type: ignore[no-untyped-def]
    for sql in sorted((REPO / "samples").glob("*.sql")):
        mysql_db.run(sql.read_text(encoding="utf-8"))
    report = migrate(REPO / "mappings/demo.yaml", source=mysql_db.url, target=redis_url)
    assert report.exit_code == 0 and report.rejected == 0
    return redis_client


def test_login_strings_lookup_list_and_leaderboard(demo: redis.Redis) -> None:
    r = demo
    assert r.get("login:1:login_times") == b"5"
    assert r.get("login:2:login_times") == b"1"
    assert r.get("login:3:login_times") == b"2"
    assert r.get("login:1:name") == b"ken thompson"
    assert r.get("login:1:last_login_time") == b"2011-01-01 00:00:00"
    assert r.get("login:ken thompson:id") == b"1"
    assert r.get("login:dennis ritchie:id") == b"2"
    assert r.get("login:Joe Armstrong:id") == b"3"
    assert r.get("login:id") == b"3"
    # the documents' questions: who logged in last, who logs in most
    assert r.lrange("login:last_login_times", 0, -1) == [b"3", b"2", b"1"]
    assert r.zrevrange("login:login_times", 0, 0) == [b"1"]
    assert r.zrevrange("login:login_times", 0, -1, withscores=True) == [
        (b"1", 5.0), (b"3", 2.0), (b"2", 1.0)
    ]  # fmt: skip
    # the application's next step: INCR the counter for a new user
    assert r.incr("login:id") == 4


def test_tags_answer_the_documents_queries(demo: redis.Redis) -> None:
    r = demo
    assert r.smembers("tag:ruby") == {b"1", b"2"}
    assert r.smembers("tag:web") == {b"2"}
    assert r.smembers("tag:erlang") == {b"3"}
    assert r.sinter("tag:web", "tag:ruby") == {b"2"}
    assert r.sdiff("tag:ruby", "tag:web") == {b"1"}
    assert r.sunion("tag:ruby", "tag:web") == {b"1", b"2"}
    assert r.get("book:1:name") == b"The Ruby Programming Language"


def test_emp_hash_counter_unique_and_index(demo: redis.Redis) -> None:
    r = demo
    assert r.get("emp:id") == b"3"
    assert r.hgetall("emp:1")[b"ename"] == b"SMITH"
    assert r.hget("emp:1", "mgr_id") == b"8"
    assert r.hget("emp:3", "ename") == b"SALESMAN"
    assert r.hgetall("emp:uniques:email") == {
        b"foo@gmail.com": b"1", b"bar@163.com": b"2", b"zoo@hotmail.com": b"3"
    }  # fmt: skip
    assert r.smembers("emp:indices:mgr_id:8") == {b"1", b"2"}
    assert r.smembers("emp:indices:mgr_id:7") == {b"3"}


def test_no_other_keys_than_the_documents(demo: redis.Redis) -> None:
    keys = {k.decode() for k in demo.scan_iter()}
    prefixes = ("login:", "tag:", "book:", "emp:", "migrator:demo:")
    assert keys and all(k.startswith(prefixes) for k in keys), sorted(keys)
