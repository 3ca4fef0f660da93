"""The GTID state sync stores with its position (migrator/source/binlog/gtid.py), without servers:
how a transaction advances it, what a source lacks of it, when a position was made
elsewhere."""

from __future__ import annotations

from migrator.source.binlog.gtid import advance, is_state, missing, moved


def test_a_transaction_replaces_its_domains_entry_only() -> None:
    assert advance("0-1-10,1-1-5", "1-2-6") == "0-1-10,1-2-6"
    assert advance("0-1-10", "2-1-1") == "0-1-10,2-1-1"
    assert advance("", "0-1-1") == "0-1-1"
    # MySQL: the executed set grows (its sets are not MariaDB states; tests/test_gtid_set.py)
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    assert advance(f"{uuid}:1-5", f"{uuid}:6") == f"{uuid}:1-6"
    assert is_state("0-1-10,1-2-6") and not is_state(f"{uuid}:6")


def test_what_a_source_lacks_is_named_per_domain() -> None:
    assert missing("0-1-10,1-1-5", "0-2-12,1-1-5") == []
    gaps = missing("0-1-10,1-1-5", "0-1-7")
    assert gaps == [
        "domain 0: Redis holds changes up to 0-1-10, the source's binary log ends at 0-1-7 "
        "(3 transaction(s) missing)",
        "domain 1: Redis holds changes up to 1-1-5, the source's binary log has no "
        "transaction of that domain",
    ]


def test_a_position_made_elsewhere() -> None:
    here = {"source": "db1:3306/shop", "server": "1"}
    assert not moved(here, "db1:3306/shop", "1")
    assert moved(here, "db2:3306/shop", "2")  # another address
    assert moved(here, "db1:3306/shop", "2")  # the same address, another server
    assert not moved({"source": "db1:3306/shop"}, "db1:3306/shop", "2")  # stored before ids
