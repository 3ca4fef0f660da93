"""sync across a failover by GTID (issue 17 item 3), on a primary and a replica of the test's own
(tests/replication.py: two private mariadbd, MariaDB GTID replication, the replica logging to
``replica-bin.*``): sync follows the primary, the primary stops, the replica is promoted, sync
is pointed at it — at its own address, or at the primary's old address (a moved virtual IP,
also while a running sync retries it) — and continues exactly after the last transaction it
applied; a replica that lacks
transactions Redis already holds, or whose history diverged, is refused with the reason
(exit 1) and nothing in Redis is touched."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.errors import EXIT_DIFFERENCE, EXIT_USAGE, MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.source.binlog.gtid import FailoverRefused, parse, render
from migrator.source.binlog.reader import BinlogPosition
from tests.binlog_server import missing
from tests.faults import wait_for
from tests.replication import ReplicaPair, on
from tests.replication import follow as follow_as
from tests.replication import stored as stored_as
from tests.replication import value as _value
from tests.services import MySQLDatabase, create_database, drop_database
from tests.sync.helpers import write_random as write
from tests.sync.workload import MAPPING, SCHEMA

pytestmark = pytest.mark.skipif(bool(missing()), reason=str(missing()))

NAME = "failover"
READER = 7900  # the sync's replica server id (the servers are 1 and 2)


@pytest.fixture
def pair() -> Iterator[ReplicaPair]:
    pair = ReplicaPair().start()
    try:
        yield pair
    finally:
        pair.stop()


@pytest.fixture
def target(redis_url: str) -> str:
    return redis_url


def follow(db: MySQLDatabase, target: str) -> Any:
    return follow_as(db, target, NAME, READER)


def stored(target: str) -> dict[str, str]:
    return stored_as(target, NAME)


def seq(state: str) -> int:
    return parse(state)[0][1]


def loaded(pair: ReplicaPair, target: str) -> MySQLDatabase:
    """The schema on the primary, replicated; sync's first load from the primary; writes it
    applies; then writes it has not applied yet (the replica receives them)."""
    db = create_database(pair.primary.url, "shop")
    db.run(SCHEMA)
    first = follow(db, target)
    assert first.snapshot is not None
    write(db, 1, 60)
    # a transaction in a second GTID domain: the stored state carries every domain
    db.run("SET SESSION gtid_domain_id = 1; REPLACE INTO other VALUES (9, 9)")
    write(db, 1, 10)
    follow(db, target)
    write(db, 2, 60)  # not applied by sync before the failover
    pair.caught_up()
    return db


def test_promoted_replica_continues_exactly_where_sync_was(
    pair: ReplicaPair, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="migrator.sync")
    loaded(pair, target)
    before = stored(target)
    assert before["file"].startswith("mysql-bin.") and before["server"] == "1"
    # what is stored is the GTID state at the stored file and offset, every domain of it
    at = _value(pair.primary, f"SELECT BINLOG_GTID_POS('{before['file']}', {before['pos']})")
    assert parse(before["gtid"]) == parse(at) and sorted(parse(at)) == [0, 1], (before, at)
    pair.promote()
    new = on(pair.replica, "shop")
    # the position found is stored at once, before anything is applied
    halted = threading.Event()
    halted.set()
    sync(parse_mapping(MAPPING, name=NAME), source=new.url, target=target, stop=halted,
         server_id=READER)  # fmt: skip
    found = stored(target)
    assert found["file"].startswith("replica-bin.") and found["gtid"] == before["gtid"]
    assert found["server"] == "2" and found["source"].endswith(f":{pair.replica.port}/shop")
    # the log says so: a failover event with the position found (sync/log.py)
    (moved,) = [r for r in caplog.records if getattr(r, "event", "") == "failover"]
    assert moved.levelname == "WARNING" and moved.fields["server"] == "2"  # type: ignore[attr-defined]
    assert moved.fields["position"] == f"{found['file']}:{found['pos']}"  # type: ignore[attr-defined]
    write(new, 3, 60)  # the new primary takes writes of its own
    report = follow(new, target)
    after = stored(target)
    # the position found on the replica is exactly after the stored GTID state: the replica
    # itself says so, and every transaction after it was applied, none twice
    start = report.started_at
    assert start.file.startswith("replica-bin.") and start.gtid == before["gtid"]
    at = _value(pair.replica, f"SELECT BINLOG_GTID_POS('{start.file}', {start.pos})")
    assert parse(at) == parse(before["gtid"]), (at, before)
    assert report.transactions == seq(pair.gtid(pair.replica)) - seq(before["gtid"])
    assert after["source"].endswith(f":{pair.replica.port}/shop") and after["server"] == "2"
    assert after["file"].startswith("replica-bin.")
    assert parse(after["gtid"]) == parse(pair.gtid(pair.replica))
    result = verify(parse_mapping(MAPPING, name=NAME), source=new.url, target=target)
    assert result.exit_code == 0, result.as_dict()
    # later runs follow the new server by file and offset
    write(new, 8, 30)
    again = follow(new, target)
    assert again.started_at == BinlogPosition(after["file"], int(after["pos"]), after["gtid"])
    assert again.transactions == seq(pair.gtid(pair.replica)) - seq(after["gtid"])
    result = verify(parse_mapping(MAPPING, name=NAME), source=new.url, target=target)
    assert result.exit_code == 0, result.as_dict()


def test_failover_behind_the_same_address_is_recognised_by_the_server_id(
    pair: ReplicaPair, target: str
) -> None:
    """A virtual IP moved to the promoted replica: the same host and port, another server
    (its own server id, its own log files); the stored file and offset mean nothing there."""
    loaded(pair, target)
    before = stored(target)
    address = pair.primary.port
    pair.promote()
    pair.replica.halt()
    pair.replica.port = address
    pair.replica.start()
    new = on(pair.replica, "shop")
    write(new, 4, 40)
    report = follow(new, target)
    assert report.started_at.file.startswith("replica-bin.")
    assert report.transactions == seq(pair.gtid(pair.replica)) - seq(before["gtid"])
    assert stored(target)["server"] == "2"
    result = verify(parse_mapping(MAPPING, name=NAME), source=new.url, target=target)
    assert result.exit_code == 0, result.as_dict()


def test_a_running_sync_fails_over_in_place_when_its_address_moves(
    pair: ReplicaPair, target: str
) -> None:
    """sync follows the primary, which is killed; the replica, promoted, takes the primary's
    address while sync retries it: the same run sees another server id there and continues
    by the stored GTID state, without a restart."""
    db = loaded(pair, target)
    address = pair.primary.port
    mapping = parse_mapping(MAPPING + "options:\n  retries: {attempts: 200, backoff: 0.2, "
                            "max_backoff: 1}\n", name=NAME)  # fmt: skip
    stop, errors = threading.Event(), []

    def run() -> None:
        try:
            sync(mapping, source=db.url, target=target, stop=stop, server_id=READER)
        except BaseException as e:
            errors.append(e)

    running = threading.Thread(target=run)
    running.start()
    try:
        head = pair.gtid(pair.primary)
        wait_for("sync caught up", lambda: stored(target)["gtid"] == head or errors, 60)
        pair.primary.halt(kill=True)
        pair.promote()
        pair.replica.halt()
        pair.replica.port = address  # a virtual IP moved
        pair.replica.start()
        new = on(pair.replica, "shop")
        write(new, 9, 40)
        head = pair.gtid(pair.replica)
        wait_for("sync on the replica", lambda: stored(target)["gtid"] == head or errors, 60)
    finally:
        stop.set()
        running.join(60)
    assert not errors and not running.is_alive(), errors
    assert stored(target)["server"] == "2"
    assert stored(target)["file"].startswith("replica-bin.")
    result = verify(parse_mapping(MAPPING, name=NAME), source=new.url, target=target)
    assert result.exit_code == 0, result.as_dict()


def test_a_replica_that_lacks_applied_transactions_is_refused(
    pair: ReplicaPair, target: str, tmp_path: Path
) -> None:
    """The replica stopped replicating; the primary logged more, which sync applied; then the
    primary went away. Pointed at the replica, sync refuses with exit 1, saying which GTIDs it
    lacks, and leaves Redis and its position as they were."""
    db = loaded(pair, target)
    pair.pause()
    write(db, 5, 40)
    follow(db, target)  # Redis now holds changes the replica never received
    applied = stored(target)
    held = pair.gtid(pair.replica)
    assert seq(held) < seq(applied["gtid"])
    pair.promote()
    mapping = tmp_path / f"{NAME}.yaml"
    mapping.write_text(MAPPING)
    new = on(pair.replica, "shop")
    done = subprocess.run(
        [sys.executable, "-m", "migrator", "sync", str(mapping), "--source", new.url,
         "--target", target, "--until-caught-up", "--server-id", str(READER)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == EXIT_DIFFERENCE, done.stderr
    missing_now = seq(applied["gtid"]) - seq(held)
    err = " ".join(done.stderr.split())  # lines wrap at 80 columns
    assert "lacks transactions that sync already applied" in err
    assert f"domain 0: Redis holds changes up to {render({0: parse(applied['gtid'])[0]})}" in err
    assert f"ends at 0-1-{seq(held)} ({missing_now} transaction(s) missing)" in err
    assert "--reload" in err and "Traceback" not in err
    assert stored(target) == applied


def test_a_replica_whose_history_diverged_is_refused_with_the_servers_reason(
    pair: ReplicaPair, target: str
) -> None:
    """As above, but the promoted replica then took enough writes of its own that its last
    sequence number passed the stored one: only the server can tell the stored GTID is not
    in its log (the histories diverged), and sync says what it said."""
    db = loaded(pair, target)
    pair.pause()
    write(db, 6, 20)
    follow(db, target)
    applied = stored(target)
    pair.promote()
    new = on(pair.replica, "shop")
    while seq(pair.gtid(pair.replica)) <= seq(applied["gtid"]):
        write(new, 7, 10)
    with pytest.raises(FailoverRefused) as refused:
        follow(new, target)
    assert refused.value.exit_code == EXIT_DIFFERENCE
    assert f"continue from the GTID state sync stored ({applied['gtid']})" in (
        refused.value.message
    )
    assert "not in the master's binlog" in refused.value.message
    assert stored(target) == applied


def test_a_position_of_another_database_is_another_source(binlog_db: Any, target: str) -> None:
    binlog_db.run(SCHEMA)
    follow(binlog_db, target)
    other = create_database(binlog_db.server_url, binlog_db.name + "_b")
    try:
        other.run(SCHEMA)
        with pytest.raises(MigratorError) as refused:
            follow(other, target)
        assert refused.value.exit_code == EXIT_USAGE
        assert "Redis holds sync state of another source" in refused.value.message
    finally:
        drop_database(binlog_db.server_url, other.name)
