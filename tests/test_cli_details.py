"""CLI details a user expects (issue 9 item 5): ``-h``, shell completion, ``--debug`` after the
command, reports that read well in pipes, CI logs and narrow terminals, UTF-8 samples shown
as text, a key count that matches DBSIZE, and ``--counts-only`` claiming no more than it checked.

CLI tests run ``migrator`` in a subprocess (stdout not a terminal, as in a pipe or CI log)
and check the exit code and the message.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import typer.main
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import migrate
from migrator.commands.dryrun import command_line, quote
from tests.services import MySQLDatabase

REPO = Path(__file__).resolve().parent.parent
COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def cli(*args: str, columns: str | None = "80", **env: str) -> subprocess.CompletedProcess[str]:
    """The installed ``migrator`` in a subprocess; ``columns=None`` leaves COLUMNS unset."""
    full = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    full.pop("MIGRATOR_SOURCE_URL", None)
    full.pop("MIGRATOR_TARGET_URL", None)
    if columns is not None:
        full["COLUMNS"] = columns
    full.update(env)
    program = Path(sys.executable).parent / "migrator"
    return subprocess.run(
        [str(program), *args], capture_output=True, text=True, env=full, timeout=120
    )


@pytest.fixture
def demo_db(mysql_db: MySQLDatabase) -> MySQLDatabase:
    """The samples (login, book, tag, emp) in a database of the test's own."""
    for sql in sorted((REPO / "samples").glob("*.sql")):
        mysql_db.run(sql.read_text(encoding="utf-8"))
    return mysql_db


def demo(db: MySQLDatabase, redis_url: str, *extra: str, **kw: str) -> list[str]:
    return [str(REPO / "mappings/demo.yaml"), "--source", db.url, "--target", redis_url, *extra]


def loaded(db: MySQLDatabase, redis_url: str) -> None:
    """The demo mapping migrated, in this process: what a verify test starts from (the
    command line's migrate is tested on its own; a subprocess costs seconds on a busy host)."""
    assert migrate(REPO / "mappings/demo.yaml", source=db.url, target=redis_url).exit_code == 0


# -- -h, completion, --debug anywhere -----------------------------------------------------------


@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_dash_h_is_help(name: str | None) -> None:
    args = ["-h"] if name is None else [name, "-h"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output and re.search(r"--help\s+-h\s", result.output), result.output


def test_shell_completion_is_offered_and_prints_a_script() -> None:
    shown = cli("--help")
    assert "--install-completion" in shown.stdout and "--show-completion" in shown.stdout
    program = Path(sys.executable).parent / "migrator"
    done = subprocess.run(  # typer names the shell it runs under (shellingham): run it in bash
        ["bash", "-c", f"'{program}' --show-completion; exit $?"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "_MIGRATOR_COMPLETE" in done.stdout and "complete" in done.stdout


def test_completion_completes_command_names() -> None:
    done = cli(
        columns=None, _MIGRATOR_COMPLETE="complete_bash", COMP_WORDS="migrator ve", COMP_CWORD="1"
    )
    assert done.returncode == 0, done.stderr
    assert "verify" in done.stdout and "migrate" not in done.stdout


@pytest.mark.parametrize(
    ("words", "offered"),
    [
        ("--tables ", {"login", "book", "tag", "emp"}),
        ("--tables e", {"emp"}),
        ("--tables login,b", {"login,book"}),
        ("--tables nope", set()),
    ],
)
def test_completion_offers_the_mappings_tables(words: str, offered: set[str]) -> None:
    line = f"migrator verify {REPO / 'mappings/demo.yaml'} {words}"
    done = cli(
        columns=None, _MIGRATOR_COMPLETE="complete_bash", COMP_WORDS=line,
        COMP_CWORD=str(len(line.split()) - (0 if line.endswith(" ") else 1)),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == offered


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_is_accepted_before_and_after_the_command(where: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    args = ["--debug", "migrate", missing] if where == "before" else ["migrate", missing, "--debug"]
    done = cli(*args)
    assert done.returncode == 2, done.stderr
    assert "mapping file not found" in done.stderr
    assert "Traceback" in done.stderr  # --debug took effect


def test_without_debug_no_traceback(tmp_path: Path) -> None:
    done = cli("migrate", str(tmp_path / "nope.yaml"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "mapping file not found" in done.stderr


# -- reports in pipes, CI logs and narrow terminals ---------------------------------------------


def test_piped_report_is_one_wide_table_without_padding(
    demo_db: MySQLDatabase, redis_url: str
) -> None:
    done = cli("migrate", *demo(demo_db, redis_url), columns=None)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert not [x for x in lines if x != x.rstrip()], "trailing blanks:\n" + done.stdout
    head = next(x for x in lines if "rows read" in x)
    assert "keys written" in head and "rows/s" in head, done.stdout  # one header line
    for table in ("login", "book", "tag", "emp"):
        assert any(re.match(rf"\s*{table}\s+\d", x) for x in lines), done.stdout


@pytest.mark.parametrize("command", ["migrate", "verify"])
def test_narrow_terminal_gets_plain_lines_not_fragments(
    command: str, demo_db: MySQLDatabase, redis_url: str
) -> None:
    if command == "verify":
        loaded(demo_db, redis_url)
    done = cli(command, *demo(demo_db, redis_url), columns="40")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(x) <= 40 or len(x.split()) == 1 for x in lines), done.stdout  # or one URL
    text = " ".join(done.stdout.split())  # the lines joined again where they were wrapped
    for table, rows in (("login", 3), ("book", 3), ("tag", 4), ("emp", 3)):
        if command == "verify":
            assert f"{table}: MySQL rows {rows}," in text, done.stdout
        else:
            assert f"{table}: rows read {rows}, keys written " in text, done.stdout
    assert "status ok" in text or command == "migrate"
    # no header cut into pieces, no cell folded onto the next line
    assert not [x for x in lines if x.strip() in ("tabl", "e", "logi", "n")], done.stdout


def test_counts_only_says_counts_match(demo_db: MySQLDatabase, redis_url: str) -> None:
    loaded(demo_db, redis_url)
    done = cli("verify", *demo(demo_db, redis_url, "--counts-only"))
    assert done.returncode == 0, done.stderr
    assert "counts match" in done.stdout
    assert "Redis matches MySQL" not in done.stdout + done.stderr
    full = cli("verify", *demo(demo_db, redis_url))
    assert "Redis matches MySQL" in full.stdout


# -- migrate counts every key it writes ---------------------------------------------------------


def test_migrate_counts_every_key_it_wrote(
    demo_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    done = cli("migrate", *demo(demo_db, redis_url, "--json"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    own = len(redis_client.keys("migrator:*"))  # the checkpoint
    assert report["keys"] == redis_client.dbsize() - own
    keys = {t["table"]: t["keys"] for t in report["tables"]}
    # tag: no row keys, but a SET per tag (ruby, web, erlang) and a reference SET per book
    # (books 1, 2, 3: where sync finds a deleted book's tags)
    assert keys["tag"] == 3 + 3
    # emp: 3 hashes, the counter, the unique HASH, 2 index SETs (mgr_id 7 and 8)
    assert keys["emp"] == 3 + 1 + 1 + 2
    # login: 9 column STRINGs, 3 name STRINGs, the counter, the sorted set, the latest list
    assert keys["login"] == 9 + 3 + 1 + 1 + 1
    human = cli("migrate", *demo(demo_db, redis_url), columns=None)
    total = next(x for x in human.stdout.splitlines() if x.strip().startswith("total"))
    assert f" {report['keys']} " in total, human.stdout


def test_migrate_keys_are_counted_once_across_batches_and_workers(
    demo_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    """An index SET written by several batches (or worker processes) is one key."""
    demo_db.run("INSERT INTO emp VALUES " + ", ".join(
        f"({i}, 'E{i}', {7 + i % 2}, 'e{i}@x')" for i in range(10, 60)
    ))  # fmt: skip
    for workers in ("1", "2"):
        redis_client.flushdb()
        done = cli(
            "migrate", *demo(demo_db, redis_url, "--json", "--batch-size", "7"),
            "--tables", "emp", "--workers", workers,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["keys"] == redis_client.dbsize() - len(redis_client.keys("migrator:*"))


# -- dry-run shows text as text -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("arg", "shown"),
    [
        ("é".encode(), "é"),
        ("Zoë Straße".encode(), '"Zoë Straße"'),
        ("東京".encode(), "東京"),
        ("tab\tand\u200b".encode(), '"tab\\tand\\xe2\\x80\\x8b"'),  # controls and invisibles
        (b"\xff\x00", '"\\xff\\x00"'),
        ("okÿ".encode() + b"\xff", '"okÿ\\xff"'),  # text stays text beside a bad byte
    ],
)
def test_dry_run_quotes_only_what_it_must(arg: bytes, shown: str) -> None:
    assert quote(arg) == shown


def test_dry_run_sample_shows_utf8_text(mysql_db: MySQLDatabase, tmp_path: Path) -> None:
    mysql_db.run(
        "CREATE TABLE city (id INT PRIMARY KEY, name VARCHAR(40));"
        "INSERT INTO city VALUES (1, 'Zürich'), (2, '東京');"
    )
    path = tmp_path / "m.yaml"
    path.write_text(f"version: 1\nsource: {mysql_db.url}\ntables:\n  city: {{}}\n")
    done = cli("dry-run", str(path))
    assert done.returncode == 0, done.stderr
    assert "HSET city:1 name Zürich" in done.stdout
    assert "HSET city:2 name 東京" in done.stdout
    assert command_line((b"SET", "ü".encode())) == "SET ü"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_takes_debug_after_it(name: str) -> None:
    params = typer.main.get_command(app).commands[name].params  # type: ignore[attr-defined]
    assert "--debug" in [o for p in params for o in getattr(p, "opts", ())], name


def test_plain_lines_wrap_between_pairs_with_an_indent() -> None:
    from rich.text import Text

    from migrator.lines import report_table, table_lines

    table = report_table("t", ("table", "MySQL rows", "Redis rows", "status"), ("table",))
    table.add_row(Text("a_long_table_name"), "1,234,567", "-", Text("DIFFERENT"))
    table.add_row(Text("b"), "2", "2", Text("ok"))
    lines = [x.plain for x in table_lines(table, 30)]
    assert lines == [
        "a_long_table_name:",
        "  MySQL rows 1,234,567,",
        "  status DIFFERENT",
        "b: MySQL rows 2, Redis rows 2,",
        "  status ok",
    ]
