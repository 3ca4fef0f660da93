"""sync across a failover by GTID on Oracle MySQL (issue 25 item 2): the stored position carries
MySQL's executed GTID set (``uuid:1-17``, never only the last GTID), and a promoted replica is
followed from it, on a primary and a replica of the test's own (tests/replication.py: two
private MySQL 9.7, GTID auto-position, the replica logging to ``replica-bin.*``). A replica that
lacks transactions Redis already holds is refused (exit 1) and Redis is left as it was."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.errors import EXIT_DIFFERENCE
from migrator.mapping.loader import parse_mapping
from migrator.source.binlog.gtid import FailoverRefused
from migrator.source.binlog.gtid_set import GtidSet
from migrator.source.binlog.reader import BinlogPosition
from tests.mysql_server import mysql_problem
from tests.replication import MySQLReplicaPair, on
from tests.replication import follow as follow_as
from tests.replication import stored as stored_as
from tests.replication import value as _value
from tests.services import MySQLDatabase, create_database
from tests.sync.helpers import write_random as write
from tests.sync.workload import MAPPING, SCHEMA

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(mysql_problem()), reason=str(mysql_problem())),
]

NAME = "failover_mysql"
READER = 7950  # the sync's replica server id (the servers are 1 and 2)


@pytest.fixture
def pair() -> Iterator[MySQLReplicaPair]:
    pair = MySQLReplicaPair().start()
    try:
        yield pair
    finally:
        pair.stop()


def follow(db: MySQLDatabase, target: str) -> Any:
    return follow_as(db, target, NAME, READER)


def stored(target: str) -> dict[str, str]:
    return stored_as(target, NAME)


def same_set(a: str, b: str) -> bool:
    return GtidSet.parse(a) == GtidSet.parse(b)


def count(server: Any, more: str, less: str) -> int:
    """How many transactions the set ``more`` has beyond ``less`` (the server counts)."""
    left = str(_value(server, "SELECT GTID_SUBTRACT(%s, %s)", (more, less)) or "")
    return sum(b - a + 1 for spans in GtidSet.parse(left).ranges.values() for a, b in spans)


def loaded(pair: MySQLReplicaPair, target: str) -> MySQLDatabase:
    """The schema on the primary, replicated; sync's first load from the primary; writes it
    applies; then writes it has not applied yet (the replica receives them)."""
    db = create_database(pair.primary.url, "shop")
    db.run(SCHEMA)
    first = follow(db, target)
    assert first.snapshot is not None
    write(db, 1, 60)
    follow(db, target)
    # what is stored is MySQL's executed set at that position: every transaction, from 1
    at = stored(target)
    assert same_set(at["gtid"], pair.gtid(pair.primary)), (at, pair.gtid(pair.primary))
    ((first_range, *_),) = GtidSet.parse(at["gtid"]).ranges.values()
    assert first_range[0] == 1 and first_range[1] > 20, at["gtid"]  # not only the last one
    write(db, 2, 60)  # not applied by sync before the failover
    pair.caught_up()
    return db


def test_the_stored_gtid_is_the_executed_set_and_a_promoted_replica_continues_from_it(
    pair: MySQLReplicaPair, target: str
) -> None:
    loaded(pair, target)
    before = stored(target)
    assert before["file"].startswith("binlog.") and before["server"] == "1"
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
    write(new, 3, 60)  # the new primary takes writes of its own
    report = follow(new, target)
    after = stored(target)
    # exactly after the stored set: every transaction beyond it applied, none twice
    assert report.started_at.file.startswith("replica-bin.")
    assert report.transactions == count(pair.replica, pair.gtid(pair.replica), before["gtid"])
    assert same_set(after["gtid"], pair.gtid(pair.replica)), (after, pair.gtid(pair.replica))
    result = verify(parse_mapping(MAPPING, name=NAME), source=new.url, target=target)
    assert result.exit_code == 0, result.as_dict()
    # later runs follow the new server by file and offset
    write(new, 8, 30)
    again = follow(new, target)
    assert again.started_at == BinlogPosition(after["file"], int(after["pos"]), after["gtid"])
    assert again.transactions == count(pair.replica, pair.gtid(pair.replica), after["gtid"])
    result = verify(parse_mapping(MAPPING, name=NAME), source=new.url, target=target)
    assert result.exit_code == 0, result.as_dict()


def test_failover_behind_the_same_address_is_recognised_by_the_server_id(
    pair: MySQLReplicaPair, target: str
) -> None:
    """A virtual IP moved to the promoted replica: the same host and port, another server
    (its own server id and log files); the stored file and offset mean nothing there."""
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
    assert report.transactions == count(pair.replica, pair.gtid(pair.replica), before["gtid"])
    assert stored(target)["server"] == "2"
    result = verify(parse_mapping(MAPPING, name=NAME), source=new.url, target=target)
    assert result.exit_code == 0, result.as_dict()


def test_a_replica_that_lacks_applied_transactions_is_refused(
    pair: MySQLReplicaPair, target: str
) -> None:
    db = loaded(pair, target)
    pair.pause()
    write(db, 5, 40)
    follow(db, target)  # Redis now holds changes the replica never received
    applied = stored(target)
    lacking = count(pair.primary, applied["gtid"], pair.gtid(pair.replica))
    assert lacking > 0
    pair.promote()
    new = on(pair.replica, "shop")
    with pytest.raises(FailoverRefused) as refused:
        follow(new, target)
    e = refused.value
    assert e.exit_code == EXIT_DIFFERENCE
    assert "lacks transactions that sync already applied" in e.message
    assert "that the source never executed" in e.message and "--reload" in (e.hint or "")
    assert stored(target) == applied


@pytest.fixture
def target(redis_url: str) -> str:
    return redis_url
