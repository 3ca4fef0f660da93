"""The long run (``long`` marker, ~10 s a seed set): every kind of change that leaves the
mapping alone — indexes, columns, a wider ``VARCHAR``, comments, an engine, ``TRUNCATE``, a
gh-ost swap and a pt-osc swap — one after the other in ONE ``sync`` run, with random writes
of three seeds going on throughout; the run never leaves its follow loop and ``verify``
exits 0 after ``--until-caught-up``. The default suite proves each kind on its own
(tests/sync/test_ddl_effects.py, tests/sync/test_table_swaps.py)::

    .venv/bin/pytest tests/sync/test_ddl_long.py -m long
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.sync.ddl_scene import Writers, caught_up_and_verified, during_writes, scene
from tests.sync.osc import gh_ost, pt_osc

pytestmark = pytest.mark.long

STATEMENTS = [
    "ALTER TABLE emp ADD INDEX by_salary (salary)",
    "DROP INDEX title ON emp",
    "ALTER TABLE emp ADD COLUMN extra VARCHAR(10) DEFAULT 'e' FIRST",
    "ALTER TABLE emp MODIFY title VARCHAR(40)",
    "ALTER TABLE emp COMMENT 'staff', MODIFY note TEXT COMMENT 'free text'",
    "ALTER TABLE dept ENGINE=InnoDB",
    "TRUNCATE TABLE tag",
]


@pytest.mark.parametrize("seeds", [(101, 102, 103), (201, 202, 203), (301, 302, 303)])
def test_every_harmless_change_in_one_run_with_writes_going_on(
    seeds: tuple[int, ...], binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    path = scene(binlog_db, redis_url, tmp_path)

    def changes(writers: Writers) -> None:
        for statement in STATEMENTS:
            binlog_db.run(statement)
            writers.more(10)
        gh_ost(binlog_db, "ADD INDEX by_hired (hired)", writers)
        pt_osc(binlog_db, "ADD COLUMN extra2 INT DEFAULT 1", writers)

    following = during_writes(path, binlog_db, redis_url, seeds, changes)
    applied = [n for n in following.notes() if n.endswith("applied, no reload")]
    truncated = [n for n in following.notes() if n.startswith("TRUNCATE")]
    assert len(applied) == len(STATEMENTS) - 1 + 2 and len(truncated) == 1, following.notes()
    caught_up_and_verified(path, binlog_db, redis_url)
