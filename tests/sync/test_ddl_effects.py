"""Each kind of DDL decided by its effect on the mapping (issue 19 item 1), on the private
MariaDB, with random writes of two seeds going on before, during and after the statement
while ``sync`` follows in the same process:

* a change that leaves the mapping's values alone (an index added or dropped, an unmapped
  column added, a wider ``VARCHAR``, a comment, an engine) and ``TRUNCATE``: the same run
  goes on — every status line says following or caught up, no reload, no reconnect — and
  ``verify`` exits 0 after ``--until-caught-up``;
* a change that alters what the mapping writes (a column added to an all-columns table, a
  ``DECIMAL`` scale, a ``DATETIME`` precision, a type whose text changes): a re-snapshot of
  that table; until the online re-snapshot is connected sync stops (exit 1) with the
  stored position kept, and stops at the same statement again;
* a column or table the mapping names dropped or renamed: exit 1 naming the mapping lines.

A backlog that spans ALTERs (sync down, rows written, columns moved and added, rows
written, a column dropped, rows written, sync started) is decoded with the columns each row
was logged with; a change right after the first load is judged by the loaded columns."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pymysql
import pytest
import redis

from migrator.reports import SchemaChanged
from migrator.sync.schema_watch import resnapshot_by_hand
from tests.sync.ddl_scene import (
    GONE,
    Writers,
    caught_up_and_verified,
    during_writes,
    line_of,
    once,
    scene,
    stored_state,
)

#: MySQL refuses an online ALTER whose log of concurrent DML met a duplicate key that a
#: writer's statement raised and rolled back ("Duplicate entry ... for key"): the statement
#: never reached the binary log, and a DBA runs it again — as this does, a few times
DDL_RETRIED = 1062


def _run(db: Any, statement: str) -> Callable[[Writers], None]:
    def change(writers: Writers) -> None:
        for attempt in range(5):
            try:
                db.run(statement)
                return
            except pymysql.err.IntegrityError as e:
                if e.args[0] != DDL_RETRIED or attempt == 4:
                    raise

    return change


def _stopped_by(
    statement: str, db: Any, redis_url: str, tmp_path: Path, seeds: tuple[int, ...],
    tolerate: tuple[int, ...] = (), **options: Any,
) -> tuple[Path, SchemaChanged]:  # fmt: skip
    """The scene, then ``statement`` with writes going on: the mapping, and sync's exit 1."""
    path = scene(db, redis_url, tmp_path)
    change = _run(db, statement)
    caught = during_writes(
        path, db, redis_url, seeds, change, stops=True, tolerate=tolerate, **options
    )
    assert isinstance(caught.error, SchemaChanged) and caught.error.exit_code == 1, caught.error
    return path, caught.error


APPLIED = {
    "add index": "ALTER TABLE emp ADD INDEX by_salary (salary)",
    "drop index": "DROP INDEX title ON emp",
    "add unmapped column": "ALTER TABLE emp ADD COLUMN extra VARCHAR(10) DEFAULT 'e' FIRST",
    "wider varchar": "ALTER TABLE emp MODIFY title VARCHAR(40)",
    "comment": "ALTER TABLE emp COMMENT 'staff', MODIFY note TEXT COMMENT 'free text'",
    "engine": "ALTER TABLE dept ENGINE=InnoDB",
}


@pytest.mark.parametrize("kind", list(APPLIED))
def test_a_change_that_leaves_the_mapping_alone_never_leaves_the_follow_loop(
    kind: str, binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    path = scene(binlog_db, redis_url, tmp_path)
    seeds = (len(kind), 7)
    following = during_writes(path, binlog_db, redis_url, seeds, _run(binlog_db, APPLIED[kind]))
    notes = [n for n in following.notes() if "applied, no reload" in n]
    assert len(notes) == 1, following.notes()
    caught_up_and_verified(path, binlog_db, redis_url)


def test_truncate_with_writes_going_on_is_applied_in_order(
    binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    path = scene(binlog_db, redis_url, tmp_path)

    def truncate(writers: Writers) -> None:
        binlog_db.run("TRUNCATE TABLE tag")
        writers.more(5)
        binlog_db.run("TRUNCATE TABLE emp")

    following = during_writes(path, binlog_db, redis_url, (11, 12), truncate)
    assert sum("TRUNCATE" in n for n in following.notes()) == 2, following.notes()
    caught_up_and_verified(path, binlog_db, redis_url)


RESNAPSHOT = {
    "column added to an all-columns table": (
        "ALTER TABLE dept ADD COLUMN region VARCHAR(10)", "dept", "region"),
    "decimal scale": ("ALTER TABLE emp MODIFY salary DECIMAL(10,3)", "emp", "salary"),
    "datetime precision": ("ALTER TABLE emp MODIFY hired DATETIME(6)", "emp", "hired"),
    "type whose text changes": ("ALTER TABLE stats MODIFY logins DECIMAL(10,2)", "stats",
                                "logins"),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(RESNAPSHOT))
def test_a_change_of_what_the_mapping_writes_resnapshots_that_table_online(
    kind: str, binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    # sync's own hook: the table is read again online with its new columns, the others keep
    # following, nothing stops; the writes go on throughout
    statement, table, column = RESNAPSHOT[kind]
    path = scene(binlog_db, redis_url, tmp_path)
    following = during_writes(
        path, binlog_db, redis_url, (21, 22), _run(binlog_db, statement), reader_restarts=True
    )
    phases = {s.phase for s in following.statuses}
    assert phases <= {"following", "caught up"}, phases  # no reload, no stop
    assert any(n.endswith(f"re-snapshotting {table}") for n in following.notes()), following.notes()
    report = following.end()
    assert [t.table for t in report.resnapshots] == [table], report.as_dict()
    assert report.snapshot is None
    assert column in stored_state(path, redis_url)["columns"]
    caught_up_and_verified(path, binlog_db, redis_url)


@pytest.mark.parametrize("kind", list(RESNAPSHOT))
def test_the_by_hand_hook_stops_before_a_change_of_what_the_mapping_writes(
    kind: str, binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    statement, table, column = RESNAPSHOT[kind]
    path, caught = _stopped_by(
        statement, binlog_db, redis_url, tmp_path, (21, 22), resnapshot=resnapshot_by_hand
    )
    message = " ".join(caught.message.split())
    assert f"table '{table}' needs a re-snapshot" in message and column in message
    if table == "dept":
        assert "column(s) region added to 'dept', mapped with all its columns" in message
    assert f"--resnapshot {table}" in (caught.hint or "") and "--reload" in (caught.hint or "")
    assert stored_state(path, redis_url).get("file"), "the stored position was removed"
    # the next run starts from the kept position and stops at the same statement
    with pytest.raises(SchemaChanged) as again:
        once(path, binlog_db, redis_url, resnapshot=resnapshot_by_hand)
    assert f"table '{table}' needs a re-snapshot" in " ".join(again.value.message.split())
    if kind == "decimal scale":  # --reload loads every table again and follows on
        once(path, binlog_db, redis_url, reload=True)
        caught_up_and_verified(path, binlog_db, redis_url)


def test_a_resnapshot_hook_that_takes_the_table_lets_sync_follow_on(
    binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    # the seam for the online per-table snapshot: a hook that returns means the table's
    # re-snapshot is under way; sync stores the position after the statement and follows on
    path = scene(binlog_db, redis_url, tmp_path)
    asked: list[tuple[str, str]] = []
    change = _run(binlog_db, "ALTER TABLE dept ADD COLUMN region VARCHAR(10)")
    following = during_writes(
        path, binlog_db, redis_url, (23, 24), change,
        resnapshot=lambda table, why: asked.append((table, why)),
    )  # fmt: skip
    assert [t for t, _ in asked] == ["dept"] and "region" in asked[0][1], asked
    assert any(n.endswith("re-snapshotting dept") for n in following.notes()), following.notes()
    assert "region" in stored_state(path, redis_url)["columns"]  # the columns after it
    caught_up_and_verified(path, binlog_db, redis_url)  # region is NULL: nothing to re-read


STOPS = {
    "drop a mapped column": ("ALTER TABLE emp DROP COLUMN title", "emp",
                             ["columns: [email", "- [dept_id, title]", "- title"]),
    "rename a mapped column": ("ALTER TABLE emp CHANGE login user_login VARCHAR(30)", "emp",
                               ["columns: [email", "- columns: [login]"]),
    "rename a mapped table": ("RENAME TABLE stats TO stats_old", "stats", ["  stats:"]),
    "drop a mapped table": ("DROP TABLE tag", "tag", ["  tag:"]),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(STOPS))
def test_a_removed_mapped_name_stops_naming_the_mapping_lines(
    kind: str, binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    statement, table, lines = STOPS[kind]
    path, caught = _stopped_by(statement, binlog_db, redis_url, tmp_path, (31, 32), GONE)
    assert f"table '{table}' changed" in caught.message
    assert not stored_state(path, redis_url).get("file")  # removed
    hint = caught.hint or ""
    for text in lines:
        assert f"({path}:{line_of(path, text)})" in hint, (text, hint)


def test_a_backlog_across_an_alter_is_decoded_with_the_columns_it_was_logged_with(
    binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    path = scene(binlog_db, redis_url, tmp_path)
    writers = Writers(binlog_db, (41, 42)).start()  # sync is down
    try:
        writers.more(40)
        # every mapped column of emp moves: a column in front, email after note; then the
        # column in front dropped again
        binlog_db.run(
            "ALTER TABLE emp ADD COLUMN pre INT DEFAULT 7 FIRST, "
            "MODIFY email VARCHAR(60) AFTER note"
        )
        writers.more(40)
        binlog_db.run("ALTER TABLE emp DROP COLUMN pre")
        writers.more(20)
    finally:
        writers.end()
    assert once(path, binlog_db, redis_url).snapshot is None  # nothing reloaded
    caught_up_and_verified(path, binlog_db, redis_url)


def test_a_change_right_after_the_first_load_is_judged_by_the_loaded_columns(
    binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    # no transaction follows the load: the columns stored with the snapshot's position are
    # all sync has to tell that the scale changed (the server's at start already have it)
    path = scene(binlog_db, redis_url, tmp_path)
    binlog_db.run("ALTER TABLE emp MODIFY salary DECIMAL(10,3)")
    with pytest.raises(SchemaChanged) as caught:
        once(path, binlog_db, redis_url, resnapshot=resnapshot_by_hand)
    assert "table 'emp' needs a re-snapshot" in " ".join(caught.value.message.split())
    report = once(path, binlog_db, redis_url)  # sync's own hook: emp read again, online
    assert [t.table for t in report.resnapshots] == ["emp"], report.as_dict()
    caught_up_and_verified(path, binlog_db, redis_url)


def test_rows_logged_before_a_precision_change_are_written_as_they_were_logged(
    binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    # sync is down while a row is written and the precision raised; the next run starts with
    # the server's new columns, yet writes the row before the ALTER as it was logged, then
    # stops for the re-snapshot at the ALTER
    binlog_db.run("CREATE TABLE ev (id INT PRIMARY KEY, at TIMESTAMP NULL, d TIME NULL)")
    path = tmp_path / "ev.yaml"
    path.write_text("version: 1\ntables:\n  ev: {}\n")
    once(path, binlog_db, redis_url)
    binlog_db.run(
        "INSERT INTO ev VALUES (1, '2020-01-01 10:00:00', '01:02:03'); "
        "ALTER TABLE ev MODIFY at TIMESTAMP(3) NULL, MODIFY d TIME(2) NULL; "
        "INSERT INTO ev VALUES (2, '2020-01-01 10:00:00.5', '01:02:03.25')"
    )
    with pytest.raises(SchemaChanged) as caught:
        once(path, binlog_db, redis_url, resnapshot=resnapshot_by_hand)
    assert "table 'ev' needs a re-snapshot" in " ".join(caught.value.message.split())
    client = redis.Redis.from_url(redis_url)
    assert client.hgetall("ev:1") == {b"at": b"2020-01-01 10:00:00", b"d": b"01:02:03"}
    assert not client.exists("ev:2")  # after the ALTER: not written
    client.close()
    caught_up_and_verified(path, binlog_db, redis_url)  # sync's own hook: ev read again
