"""gh-ost's and pt-online-schema-change's table swaps while ``sync`` follows (issue 19 items
1 and 3), on the private MariaDB with random writes of two seeds going on throughout:

* both tools' sequences reproduced in SQL — the shadow table created and altered, rows copied
  in chunks with writes going on (pt-osc: real INSERT/UPDATE/DELETE triggers on the table
  writing into ``_emp_new``; gh-ost: its changelog table, and the shadow brought level with
  the table while writes are held, as its cut-over lock does), then the one-statement
  ``RENAME TABLE`` swap (and pt-osc's ``DROP TABLE _emp_old`` and trigger clean-up): an
  index-only or unmapped-added-column migration never leaves the follow loop, the shadow
  tables' rows are ignored, and ``verify`` exits 0 after ``--until-caught-up``;
* a swap whose new table lacks a mapped column stops (exit 1) naming the mapping lines;
* where Debian's ``percona-toolkit`` is installed, a real ``pt-online-schema-change
  --execute`` run against the private server.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from migrator.reports import SchemaChanged
from tests.sync.ddl_scene import Writers, caught_up_and_verified, during_writes, line_of, scene
from tests.sync.osc import COLUMNS, gh_ost, pt_osc

ALTERS = {
    "index only": "ADD INDEX by_salary (salary)",
    "unmapped column added": "ADD COLUMN extra INT DEFAULT 1, ADD INDEX by_hired (hired)",
}


TOOLS: dict[str, Callable[[Any, str, Writers], None]] = {"gh-ost": gh_ost, "pt-osc": pt_osc}


@pytest.mark.parametrize("alter", list(ALTERS))
@pytest.mark.parametrize("tool", list(TOOLS))
def test_a_table_swap_that_leaves_the_mapping_alone_never_stops_sync(
    tool: str, alter: str, binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    path = scene(binlog_db, redis_url, tmp_path)

    def migrate(writers: Writers) -> None:
        TOOLS[tool](binlog_db, ALTERS[alter], writers)

    following = during_writes(path, binlog_db, redis_url, (51, 52), migrate)
    notes = following.notes()
    swaps = [n for n in notes if "table swap of emp (gh-ost, pt-online-schema-change)" in n]
    assert len(swaps) == 1 and swaps[0].endswith("applied, no reload"), notes
    if alter == "index only":
        assert "no mapped value changes (index, comment, engine, order)" in swaps[0]
    else:
        assert "column(s) extra added, not mapped" in swaps[0]
    caught_up_and_verified(path, binlog_db, redis_url)


def test_a_table_swap_without_a_mapped_column_stops_naming_the_mapping_lines(
    binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    path = scene(binlog_db, redis_url, tmp_path)

    def migrate(writers: Writers) -> None:
        gh_ost(binlog_db, "DROP COLUMN salary", writers, COLUMNS.replace(" salary,", ""))

    following = during_writes(
        path, binlog_db, redis_url, (53, 54), migrate, stops=True, tolerate=(1054,)
    )
    caught = following.error
    assert isinstance(caught, SchemaChanged) and caught.exit_code == 1, caught
    assert "RENAME" in caught.message and "salary" in caught.message
    hint = caught.hint or ""
    for text in ("columns: [email", "score: salary"):
        assert f"({path}:{line_of(path, text)})" in hint, (text, hint)


PT_OSC = shutil.which("pt-online-schema-change")


@pytest.mark.skipif(
    PT_OSC is None,
    reason="pt-online-schema-change is not installed: apt-get install -y percona-toolkit",
)
def test_a_real_pt_online_schema_change_run_never_stops_sync(
    binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    path = scene(binlog_db, redis_url, tmp_path)
    url = make_url(binlog_db.url)
    dsn = f"h={url.host},P={url.port},u={url.username},D={url.database},t=emp"

    def migrate(writers: Writers) -> None:
        assert PT_OSC is not None
        done = subprocess.run(
            [PT_OSC, "--alter", ALTERS["unmapped column added"], dsn, "--execute",
             "--recursion-method=none", "--chunk-size=20", "--no-check-replication-filters"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Successfully altered" in done.stdout, done.stdout

    following = during_writes(path, binlog_db, redis_url, (55, 56), migrate)
    notes = following.notes()
    assert sum("table swap of emp" in n and "extra" in n for n in notes) == 1, notes
    caught_up_and_verified(path, binlog_db, redis_url)
