"""MySQL GTID sets (migrator/source/binlog/gtid_set.py): what sync stores as MySQL's position."""

from __future__ import annotations

import pytest

from migrator.source.binlog import gtid
from migrator.source.binlog.gtid_set import GtidSet, is_set

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "4a5b0000-0000-11e1-9e33-c80aa9429562"


def test_the_executed_set_grows_by_each_transaction_from_the_first() -> None:
    state = f"{A}:1-16"
    state = gtid.advance(state, f"{A}:17")
    assert state == f"{A}:1-17"  # the whole set, never only the last GTID
    assert gtid.advance("", f"{A}:1") == f"{A}:1"  # a server whose log had no GTID yet


def test_sets_render_as_mysql_does() -> None:
    text = f"{B.upper()}:1-5:7,\n{A}:1-3:4:9-10:tag_x:1-2"
    s = GtidSet.parse(text)
    assert str(s) == f"{A}:1-4:9-10:tag_x:1-2,{B}:1-5:7"
    s.add(B, 6)
    s.add(A, 3)  # already in: no change
    s.add(A, 3, "tag_x")
    assert str(s) == f"{A}:1-4:9-10:tag_x:1-3,{B}:1-7"
    assert s.contains(B, 6) and not s.contains(A, 5)


@pytest.mark.parametrize("text", ["", "0-1-5", f"{A}", f"{A}:0", f"{A}:5-3", "x:1", f"{A}:1-"])
def test_what_is_not_a_set(text: str) -> None:
    assert not is_set(text)


def test_mariadb_states_are_kept_as_before() -> None:
    assert gtid.advance("0-1-5,1-1-3", "0-1-6") == "0-1-6,1-1-3"
    assert not is_set("0-1-5")
