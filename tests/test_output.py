"""Output that reads in a log and in an 80-column terminal (issue 16 item 5): with COLUMNS=80,
or piped with no COLUMNS at all, no line of migrate, verify, dry-run or sync is longer than 80
characters unless it holds a single value that is longer, no table name or header word is
cut; a long run prints progress lines at a steady interval when stderr is not a terminal,
``--json`` stays one object; ``--help`` shows no ``<bool>``.

Every command runs as the installed ``migrator`` in a subprocess: stdout and stderr are pipes,
as in a CI log.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
import typer.main
from rich.console import Console

from migrator.cli import app
from migrator.lines import ARGUMENTS, INTERVAL_ENV, ProgressLines, wrap
from migrator.render.bars import RichProgress
from tests.services import MySQLDatabase
from tests.test_cli_details import cli

WIDTH = 80
COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def single_value(line: str) -> bool:
    """A line that holds one value only (a URL, a quoted text, a key, a command to copy),
    whatever its length."""
    return len(ARGUMENTS.findall(line.strip())) == 1 or line.strip().startswith("migrator ")


def too_long(*outputs: str) -> list[str]:
    return [
        line
        for text in outputs
        for line in text.splitlines()
        if len(line) > WIDTH and not single_value(line)
    ]


def words_of(*outputs: str) -> set[str]:
    return {w.strip(",:;()") for text in outputs for w in text.split()}


def names(url: str) -> list[str]:
    engine = sa.create_engine(url)
    try:
        return sa.inspect(engine).get_table_names()
    finally:
        engine.dispose()


# -- the commands on Sakila and on long names, at 80 columns and piped --------------------------

WIDE_SQL = """
CREATE TABLE product_tag (
  id INT PRIMARY KEY, product_id INT NOT NULL, tag VARCHAR(40) NOT NULL,
  status VARCHAR(12) NOT NULL, description_of_the_tag_in_full VARCHAR(200),
  created_at_in_the_local_time_zone DATETIME, KEY (product_id), KEY (status)
);
INSERT INTO product_tag VALUES
  (1, 10, 'red', 'active', 'a long description of a tag, written in words of its own', NULL),
  (2, 11, 'blue', 'retired', NULL, '2024-05-01 10:00:00'),
  (3, 10, 'green', 'active', 'short', '2024-05-02 11:00:00');
"""


@pytest.mark.parametrize("columns", ["80", None], ids=["COLUMNS=80", "piped"])
def test_sakila_fits_80_columns_and_names_stay_whole(
    columns: str | None, sakila_url: str, redis_url: str, tmp_path: Path
) -> None:
    mapping = str(tmp_path / "sakila.yaml")
    assert cli("init", "--source", sakila_url, "-o", mapping, columns=columns).returncode == 0
    where = ["--source", sakila_url, "--target", redis_url]
    runs = {
        "dry-run": cli("dry-run", mapping, *where, columns=columns),
        "migrate": cli("migrate", mapping, *where, columns=columns),
        "verify": cli("verify", mapping, *where, columns=columns),
    }
    for command, done in runs.items():
        assert done.returncode == 0, (command, done.stderr)
        assert not too_long(done.stdout, done.stderr), (command, done.stdout + done.stderr)
    tables = names(sakila_url)
    assert "film_category" in tables
    for command in ("migrate", "verify"):
        shown = words_of(runs[command].stdout)
        assert set(tables) <= shown, (command, set(tables) - shown, runs[command].stdout)
    heads = {"rows", "read", "written", "entries", "skipped", "rejected", "seconds", "rows/s"}
    assert heads <= words_of(runs["migrate"].stdout), runs["migrate"].stdout
    heads = {"MySQL", "Redis", "missing", "different", "stale", "structure", "problems", "status"}
    assert heads <= words_of(runs["verify"].stdout), runs["verify"].stdout
    assert "ok" in words_of(runs["verify"].stdout)


@pytest.mark.parametrize("columns", ["80", None], ids=["COLUMNS=80", "piped"])
def test_long_names_and_differences_fit_80_columns(
    columns: str | None, mysql_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    """A table named product_tag, long column names and values, and verify's examples of
    differences (a changed value, a missing row) after a failed first connection."""
    mysql_db.run(WIDE_SQL)
    mapping = str(tmp_path / "shop.yaml")
    assert cli("init", "--source", mysql_db.url, "-o", mapping, columns=columns).returncode == 0
    where = ["--source", mysql_db.url, "--target", redis_url]
    migrated = cli("migrate", mapping, *where, columns=columns)
    assert migrated.returncode == 0, migrated.stderr
    mysql_db.run(
        "UPDATE product_tag SET description_of_the_tag_in_full = "
        "'another long description, of words that a terminal of eighty columns must wrap' "
        "WHERE id = 1; INSERT INTO product_tag VALUES (4, 12, 'x', 'new', NULL, NULL)"
    )
    verified = cli("verify", mapping, *where, columns=columns)
    assert verified.returncode == 1, verified.stderr
    refused = cli("verify", mapping, "--source", mysql_db.url, "--target",
                  "redis://127.0.0.1:1/0", columns=columns)  # fmt: skip
    assert refused.returncode == 3, refused.stderr
    for done in (migrated, verified, refused):
        assert not too_long(done.stdout, done.stderr), done.stdout + done.stderr
    for done in (migrated, verified):
        assert "product_tag" in words_of(done.stdout), done.stdout
    shown = words_of(verified.stdout)
    assert {"status", "DIFFERENT", "different", "missing"} <= shown, verified.stdout
    assert "description_of_the_tag_in_full" in shown, verified.stdout
    assert "error" in refused.stderr and "hint" in refused.stderr


LONG_NAME = "a_table_with_a_rather_long_name_indeed"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.mark.skipif(shutil.which("script") is None, reason="no script(1) to give a terminal")
def test_progress_bars_in_an_80_column_terminal_keep_a_long_name_whole(
    mysql_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    """stderr a terminal (script(1) gives one), COLUMNS=80: the bars make room for the name."""
    mysql_db.run(
        f"CREATE TABLE {LONG_NAME} (id INT PRIMARY KEY, v INT);"
        f"INSERT INTO {LONG_NAME} WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL "
        "SELECT n + 1 FROM s WHERE n < 500) SELECT n, n FROM s;"
        "CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1);"
    )
    mapping = tmp_path / "long.yaml"
    assert cli("init", "--source", mysql_db.url, "-o", str(mapping), columns=None).returncode == 0
    typescript = tmp_path / "typescript"
    line = f"migrator migrate {mapping} --source {mysql_db.url} --target {redis_url} 2>&1"
    program = Path(sys.executable).parent
    env = {**os.environ, "COLUMNS": "80", "PATH": f"{program}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["script", "-qec", line, str(typescript)], env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stdout
    shown = ANSI.sub("", typescript.read_text(encoding="utf-8", errors="replace"))
    bars = [x for x in re.split(r"[\r\n]+", shown) if re.match(rf"({LONG_NAME}|t) .*\d/", x)]
    assert any(x.startswith(f"{LONG_NAME} ") for x in bars), shown
    assert all(len(x.rstrip()) <= WIDTH for x in bars), bars
    assert "…" not in shown, shown


@pytest.mark.parametrize("name", ["t", "a_rather_long_table_name", LONG_NAME])
def test_progress_bars_narrow_or_drop_the_bar_for_a_long_name(name: str) -> None:
    console = Console(width=WIDTH, record=True, force_terminal=False)
    with RichProgress(console) as progress:
        progress.start(name, 299_537)
        progress.advance(name, 35_000)
    (line,) = {x.rstrip() for x in console.export_text().splitlines() if "35,000/299,537" in x}
    assert line.startswith(f"{name} ") and "…" not in line and len(line) <= WIDTH, line
    assert ("rows/s" in line) == (len(name) < 30), line  # the words go for the longest


def test_progress_bar_rates_count_from_the_tables_first_batch() -> None:
    """A table whose bar started long before its rows came (with workers every bar starts
    at once) shows the rows/s of its batches, as the summary does (issue 27 item 6: it
    showed '7 rows/s' where the summary said 4,711)."""
    console = Console(width=120, record=True, force_terminal=False)
    now = [100.0]
    with RichProgress(console) as progress:
        progress.clock = lambda: now[0]
        progress.start("t", 10_000)
        now[0] += 60.0  # waiting for a worker
        progress.advance("t", 1_000)
        now[0] += 2.0
        progress.advance("t", 9_000)
        progress.finish("t")
    (line,) = {x.rstrip() for x in console.export_text().splitlines() if "10,000/10,000" in x}
    assert "4,500 rows/s" in line, line


# -- progress lines in a log ------------------------------------------------------------------

PROGRESS = re.compile(r"^progress (\d+\.\d)s: ")


def ticks(stderr: str) -> list[float]:
    """The elapsed seconds of each tick (a tick may print a line per table under way)."""
    seen = [float(m.group(1)) for line in stderr.splitlines() if (m := PROGRESS.match(line))]
    return sorted(set(seen))


# verify's lines come from the same printer as migrate's (long)
@pytest.mark.parametrize("command", ["migrate", pytest.param("verify", marks=pytest.mark.long)])
def test_a_log_gets_progress_lines_at_a_steady_interval(
    command: str, employees_url: str, redis_url: str, tmp_path: Path
) -> None:
    mapping = str(tmp_path / "employees.yaml")
    assert cli("init", "--source", employees_url, "-o", mapping, columns=None).returncode == 0
    # batches of 5 rows: a run of a few seconds even with the fastest driver on a quiet
    # host (with 20, salaries took under 1 s: too short for a rate, shown after 0.5 s)
    where = ["--source", employees_url, "--target", redis_url, "--batch-size", "5"]
    if command == "verify":
        assert cli("migrate", mapping, *where, columns=None).returncode == 0
    done = cli(command, mapping, *where, "--json", columns=None, **{INTERVAL_ENV: "0.3"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # --json stays one object: progress goes to stderr
    assert report["tables"]
    lines = [x for x in done.stderr.splitlines() if x.startswith("progress ")]
    seconds = ticks(done.stderr)
    # migrate's 20-row batches last seconds; verify of the same rows can end in under a
    # second on a quiet host, so one tick is all it is sure to print
    assert len(seconds) >= (3 if command == "migrate" else 1), done.stderr
    # every 0.3 s: each tick in a 0.3 s slot of its own (printed to 0.1 s), none in the first;
    # a host too busy to wake the thread on time makes a tick late, or leaves a slot out,
    # but never crowds two into one
    slots = [int((s + 0.05) // 0.3) for s in seconds]
    assert len(set(slots)) == len(slots) and slots[0] >= 1, (seconds, done.stderr)
    shown = r"[\d,]+/[\d,]+ rows \(\d+%\)" + (
        r", [\d,]+ rows/s, eta \d:" if len(lines) >= 3 else ""
    )
    assert any(re.search(shown, x) for x in lines), done.stderr  # a rate once it has one
    assert all(len(x) <= WIDTH for x in lines), done.stderr
    quiet = cli(command, mapping, *where, columns=None, **{INTERVAL_ENV: "0"})
    assert quiet.returncode == 0 and "progress " not in quiet.stderr, quiet.stderr


def test_the_progress_interval_is_checked(tmp_path: Path) -> None:
    mapping = tmp_path / "m.yaml"
    mapping.write_text("version: 1\nsource: mysql+pymysql://root@127.0.0.1:1/x\ntables:\n  t: {}\n")
    done = cli("migrate", str(mapping), columns=None, **{INTERVAL_ENV: "soon"})
    assert done.returncode == 2, done.stderr
    assert f"{INTERVAL_ENV}='soon' is not a number of seconds" in done.stderr


def test_progress_lines_name_rows_rate_and_eta() -> None:
    written: list[str] = []
    lines = ProgressLines(written.append, interval=0)
    assert lines.lines() == [lines.lines()[0]] and "no table started yet" in lines.lines()[0]
    lines.start("payment", 16_044)
    lines.start("rental", None)
    lines.advance("payment", 2_000)
    lines.first["payment"] = (lines.first["payment"][0] - 2.0, 2_000)  # 2 s ago
    lines.advance("payment", 6_000)
    (line,) = lines.lines()
    assert re.fullmatch(
        r"progress \d+\.\ds: payment 8,000/16,044 rows \(49%\), [23],\d{3} rows/s, eta 0:00:0[23]",
        line,
    ), line
    lines.finish("payment")
    assert lines.lines()[0].endswith(": 1 table done, 8,000 rows, 1 to go")
    lines.note("rental", "retrying")
    assert written == ["note: rental: retrying"]


def test_wrap_keeps_words_and_long_values_whole() -> None:
    text = "error: cannot reach " + "x" * 90 + " (a value) please retry later"
    got = [x.plain for x in wrap(text, 30)]
    assert got == ["error: cannot reach", "  " + "x" * 90, "  (a value) please retry later"]
    command = '  HSET film:1 title "ACADEMY DINOSAUR" description "A Epic Drama of a Feminist"'
    got = [x.plain for x in wrap(command, 40, words=ARGUMENTS)]
    assert got == ['  HSET film:1 title "ACADEMY DINOSAUR"', '    description', (
        '    "A Epic Drama of a Feminist"'
    )]  # fmt: skip


# -- --help ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_help_shows_no_type_after_a_flag(name: str | None) -> None:
    args = ["--help"] if name is None else [name, "--help"]
    done = cli(*args, columns="80")
    assert done.returncode == 0, done.stderr
    assert "<bool>" not in done.stdout, done.stdout
    assert "--help" in done.stdout
    assert not too_long(done.stdout), done.stdout
