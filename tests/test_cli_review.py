"""What a new user meets: one clear message per mistake, the documented exit code, reports
readable at 80 columns, and a dry-run RESP file made by migrate's own packer.

Each test here guards a problem found by running the CLI as a new user would (real servers).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import typer
from rich.console import Console
from rich.text import Text

from migrator import cli
from migrator.commands.dryrun import dry_run
from migrator.lines import report_table
from migrator.plan.planner import TablePlan
from migrator.plan.resp import resp
from migrator.render.bars import RichProgress
from tests.services import MySQLDatabase

SQL = """
CREATE TABLE emp (emp_id INT PRIMARY KEY, ename VARCHAR(40) NOT NULL, mgr_id INT NULL,
                  KEY (mgr_id));
INSERT INTO emp VALUES (1, 'SMITH', 8), (2, 'ALLEN', 8), (3, 'WARD', NULL), (4, 'KING', 1),
                       (5, 'BLAKE', 4);
"""


def cli_run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``migrator ARGS`` in a subprocess: stdout and stderr apart, as a user's shell has them."""
    full_env = {**os.environ, "COLUMNS": "80", **env}
    full_env.pop("MIGRATOR_SOURCE_URL", None)
    full_env.pop("MIGRATOR_TARGET_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


@pytest.fixture
def emp_db(mysql_db: MySQLDatabase) -> MySQLDatabase:
    mysql_db.run(SQL)
    return mysql_db


def mapping(tmp_path: Path, db: MySQLDatabase, body: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(f"version: 1\nsource: {db.url}\ntables:\n{body}")
    return path


# -- a mapping that validate rejects is rejected by every command ------------------------------


@pytest.mark.parametrize("command", ["migrate", "dry-run", "verify"])
def test_row_key_without_the_primary_key_is_refused(
    command: str, emp_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = mapping(tmp_path, emp_db, '  emp:\n    key: "emp:{ename}"\n')
    done = cli_run(command, str(path), "--target", redis_url)
    assert done.returncode == 2, done.stderr
    assert "does not contain the primary key" in done.stderr
    assert "hint: put every primary-key column in the key, e.g. emp:{emp_id}" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert redis_client.dbsize() == 0


def test_every_mapping_error_gets_its_own_error_line_and_hint(
    emp_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    body = "  emps: {}\n  emp:\n    columns: [enam]\n    indexes: [mgrid]\n"
    path = mapping(tmp_path, emp_db, body)
    for args in (["validate"], ["migrate", "--target", redis_url]):
        done = cli_run(*args, str(path))
        assert done.returncode == 2, done.stderr
        # "error:" alone on its line where the mapping's path is long (an xdist worker's)
        errors = [x for x in done.stderr.splitlines() if x.startswith("error:")]
        hints = [x for x in done.stderr.splitlines() if x.startswith("  hint: ")]
        assert len(errors) == 3 and len(hints) == 3, done.stderr
        assert "hint: did you mean 'ename'?" in done.stderr
        assert "(did you mean" not in done.stderr  # the fix on its own line, not in brackets


# -- half-written runs say so ---------------------------------------------------------------------


def test_wrong_type_at_a_row_key_names_the_key_and_how_to_resume(
    emp_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = mapping(tmp_path, emp_db, "  emp: {}\n")
    redis_client.set("emp:3", "in the way")
    refused = cli_run("migrate", str(path), "--target", redis_url)  # checked before writing
    assert refused.returncode == 2 and "emp:3 (string)" in refused.stderr
    assert redis_client.dbsize() == 1
    done = cli_run("migrate", str(path), "--target", redis_url, "--into-existing")
    assert done.returncode == 1, done.stderr
    assert "WRONGTYPE" in done.stderr and "emp:3" in done.stderr
    # the resume hint repeats every option given, so following it writes to the same target;
    # at 80 columns the hint wraps between words, the command whole on a line of its own
    command = f"migrator migrate {path} --target {redis_url} --resume"
    assert f"  {command}\n" in done.stderr, done.stderr
    assert f"once fixed: {command}" in " ".join(done.stderr.split())
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def test_ctrl_c_says_how_to_continue(capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted() -> int:
        raise KeyboardInterrupt

    with pytest.raises(typer.Exit) as stopped:
        cli.run(interrupted, resume="'migrator migrate m.yaml --resume' continues")
    assert stopped.value.exit_code == 130
    err = capsys.readouterr().err
    assert "error: interrupted" in err and "hint: 'migrator migrate m.yaml --resume'" in err
    with pytest.raises(typer.Exit):
        cli.run(interrupted)  # verify, dry-run: nothing to resume, so no resume advice
    assert "--resume" not in capsys.readouterr().err


# -- reports readable at 80 columns ---------------------------------------------------------------


def test_report_tables_fit_80_columns_and_never_cut_a_number(
    emp_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = mapping(tmp_path, emp_db, "  emp: {}\n")
    assert cli_run("migrate", str(path), "--target", redis_url).returncode == 0
    redis_client.hset("emp:1", "ename", "CHANGED")
    done = cli_run("verify", str(path), "--target", redis_url)
    assert done.returncode == 1
    # a word longer than the screen (CI's deep tmp path) cannot be wrapped: it stands alone
    lines = [x for x in done.stdout.splitlines() if len(x.split()) > 1]
    assert all(len(x) <= 80 for x in lines), done.stdout
    assert "…" not in done.stdout, done.stdout
    for head in ("different", "structure", "problems", "status", "DIFFERENT"):
        assert head in done.stdout


def test_table_cells_are_never_read_as_markup() -> None:
    table = report_table("t [bold]x", ("table", "rows"), left=("table",))
    table.add_row(Text("[red]emp"), "1,234,567")
    console = Console(width=30, record=True)
    console.print(table)
    text = console.export_text()
    assert "[red]emp" in text and "[bold]x" in text


def test_keys_are_printed_as_written_never_as_emoji(emp_db: MySQLDatabase, tmp_path: Path) -> None:
    # rich turns ':email:' or ':a:' into emoji unless told not to; keys must read as written
    body = "  emp:\n    unique:\n      - columns: [ename]\n        key: 'emp:email:{ename}'\n"
    done = cli_run("dry-run", str(mapping(tmp_path, emp_db, body)), "--sample", "1")
    assert done.returncode == 0, done.stderr
    assert "SET emp:email:SMITH 1" in done.stdout
    assert "\N{ENVELOPE}" not in done.stdout


def test_progress_shows_rows_rate_and_eta_within_80_columns() -> None:
    console = Console(width=80, record=True, force_terminal=False)
    with RichProgress(console) as progress:
        progress.start("a_rather_long_table_name", 299_537)
        progress.advance("a_rather_long_table_name", 35_000)
    line = next(x for x in console.export_text().splitlines() if "rows/s" in x)
    assert "35,000/299,537" in line and "eta" in line
    assert len(line) <= 80


def test_json_goes_to_stdout_alone(emp_db: MySQLDatabase, redis_url: str, tmp_path: Path) -> None:
    path = mapping(tmp_path, emp_db, "  emp: {}\n")
    for command in ("migrate", "verify", "dry-run"):
        done = cli_run(command, str(path), "--target", redis_url, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["tables"][0]["table"] == "emp"


# -- dry-run's RESP file is made by migrate's packer (STYLE habit 3) -----------------------------


def test_resp_export_is_the_packed_bytes_migrate_sends(
    emp_db: MySQLDatabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = mapping(tmp_path, emp_db, "  emp:\n    indexes: [mgr_id]\n")
    packed: list[bytes] = []
    real_pack = TablePlan.pack

    def spy(self: TablePlan, rows: list[tuple[bytes | None, ...]]) -> tuple[bytes, int, object]:
        out = real_pack(self, rows)
        packed.append(out[0])
        return out

    monkeypatch.setattr(TablePlan, "pack", spy)
    out = tmp_path / "load.resp"
    report = dry_run(str(path), resp_file=out, batch_size=2, sample=0)
    assert len(packed) == 3  # 5 rows in batches of 2
    counter = resp([(b"SET", b"emp:id", b"5")])
    assert out.read_bytes() == b"".join(packed) + counter
    assert report.resp_bytes == out.stat().st_size


@pytest.mark.parametrize("command", ["init", "validate", "dry-run", "migrate", "verify"])
def test_help_names_what_a_value_is(command: str) -> None:
    done = cli_run(command, "--help")
    assert done.returncode == 0
    options = [x for x in done.stdout.splitlines() if x.lstrip("│ ").startswith("-")]
    assert not [x for x in options if "<str>" in x or "<int" in x], done.stdout
    assert "URL" in done.stdout


# -- walk's review: files named on the command line that cannot be written or read -------------


def flat(text: str) -> str:
    """A message as one line: the 80-column wrapping undone."""
    return " ".join(text.split())


def test_a_reject_list_that_cannot_be_written_stops_migrate_before_it_writes(
    emp_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """It loaded every row, then failed on the file with exit 2 and no word of the load."""
    path = mapping(tmp_path, emp_db, "  emp: {}\n")
    rejects = tmp_path / "no-such-dir" / "rejects.jsonl"
    done = cli_run("migrate", str(path), "--target", redis_url, "--rejects", str(rejects))
    assert done.returncode == 2, done.stderr
    assert f"cannot write the reject list {rejects}" in flat(done.stderr)
    assert "nothing was done" in flat(done.stderr)
    assert "hint: choose a file in a directory that exists" in flat(done.stderr)
    assert redis_client.dbsize() == 0
    assert not rejects.parent.exists()


def test_a_reject_list_that_can_be_written_is_written(
    emp_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    path = mapping(tmp_path, emp_db, "  emp: {}\n")
    rejects = tmp_path / "rejects.jsonl"
    done = cli_run("migrate", str(path), "--target", redis_url, "--rejects", str(rejects))
    assert done.returncode == 0, done.stderr
    assert rejects.read_text() == ""  # no row rejected


def test_init_into_a_missing_directory_says_what_to_do(
    emp_db: MySQLDatabase, tmp_path: Path
) -> None:
    out = tmp_path / "no-such-dir" / "m.yaml"
    done = cli_run("init", "--source", emp_db.url, "-o", str(out))
    assert done.returncode == 2, done.stderr
    assert f"cannot write {out}: No such file or directory; nothing was written" in flat(
        done.stderr
    )
    assert "hint: choose a file in a directory that exists" in flat(done.stderr)


def test_a_directory_given_as_the_mapping_is_named_so(tmp_path: Path) -> None:
    done = cli_run("validate", str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert "this is a directory, not a mapping file" in flat(done.stderr)
    assert "hint: name the mapping's YAML file, not a directory" in flat(done.stderr)
    assert "Errno" not in flat(done.stderr)
    (tmp_path / "shop.yaml").write_text("version: 1\n")
    done = cli_run("validate", str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert f"hint: name a YAML file in it: {tmp_path / 'shop.yaml'}" in flat(done.stderr)


def test_a_negative_dry_run_sample_says_what_to_give(emp_db: MySQLDatabase, tmp_path: Path) -> None:
    path = mapping(tmp_path, emp_db, "  emp: {}\n")
    done = cli_run("dry-run", str(path), "--sample", "-1", "--json")
    assert done.returncode == 2, done.stderr
    assert json.loads(done.stdout)["hint"] == (
        "give the rows per table whose commands to show, e.g. --sample 3 (0: none)"
    )


# -- walk's review: a target URL that redis-py would misread -----------------------------------


@pytest.mark.parametrize(
    ("tail", "says", "hint"),
    [
        ("/abc", "ends with '/abc', which is not a database number", "redis://host:6379/0"),
        ("/0?socket_timout=5", "the option 'socket_timout'", "did you mean 'socket_timeout'?"),
        ("/0?ssl_ca_certs=/ca.pem", "the TLS option 'ssl_ca_certs'", "rediss://"),
    ],
)
def test_a_target_url_redis_py_would_misread_is_refused(
    emp_db: MySQLDatabase, tmp_path: Path, tail: str, says: str, hint: str
) -> None:
    """/abc was database 0 without a word; an unknown option an unexpected error (exit 1).
    Refused before Redis is contacted: the port has no server (else exit 3)."""
    path = mapping(tmp_path, emp_db, "  emp: {}\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = cli_run("migrate", str(path), "--target", f"redis://127.0.0.1:{port}{tail}", "--json")
    assert done.returncode == 2, done.stderr
    assert says in flat(done.stderr) and hint in json.loads(done.stdout)["hint"]


def test_the_target_options_connections_md_names_are_taken(
    emp_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    path = mapping(tmp_path, emp_db, "  emp: {}\n")
    url = redis_url + "?socket_timeout=30&socket_connect_timeout=5&health_check_interval=3"
    done = cli_run("migrate", str(path), "--target", url + "&client_name=walk")
    assert done.returncode == 0, done.stderr
