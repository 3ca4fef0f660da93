"""sync's output at 80 columns and in a log (issue 16 item 5): the first run (its load: online,
the default, or ``--consistent-load``) and a later one (row changes applied), with COLUMNS=80
and piped with no COLUMNS."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.services import MySQLDatabase
from tests.sync.test_sync_logs import TEXT
from tests.test_cli_details import cli
from tests.test_output import WIDE_SQL, too_long


@pytest.mark.parametrize(
    ("how", "said"),
    [([], "first load done online from binlog"),
     (["--consistent-load"], "loaded a consistent snapshot")],
    ids=["online", "consistent"],
)  # fmt: skip
def test_sync_fits_80_columns(binlog_db: MySQLDatabase, redis_url: str, tmp_path: Path,
                              how: list[str], said: str) -> None:  # fmt: skip
    binlog_db.run(WIDE_SQL)
    mapping = tmp_path / "a_mapping_with_a_long_name_of_its_own.yaml"
    assert cli("init", "--source", binlog_db.url, "-o", str(mapping), columns=None).returncode == 0
    args = ["sync", str(mapping), "--source", binlog_db.url, "--target", redis_url]
    first = cli(*args, *how, "--until-caught-up", columns="80", MIGRATOR_SYNC_SERVER_ID="4171")
    assert first.returncode == 0, first.stderr
    binlog_db.run("UPDATE product_tag SET status = 'gone' WHERE id = 2")
    then = cli(*args, "--until-caught-up", columns=None, MIGRATOR_SYNC_SERVER_ID="4171")
    assert then.returncode == 0, then.stderr
    assert said in " ".join(first.stdout.split()) and "applied" in then.stdout
    for done in (first, then):
        # the log's lines are one record each, as a journal keeps them (docs/commands.md)
        said = [x for x in done.stderr.splitlines() if not TEXT.match(x)]
        assert not too_long(done.stdout, "\n".join(said)), done.stdout + done.stderr
        assert any(" stop: caught up at " in x for x in done.stderr.splitlines()), done.stderr
