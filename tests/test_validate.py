"""``migrator validate``: loader checks, then checks against the live schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import validate
from migrator.mapping.loader import parse_mapping
from migrator.mapping.validate import Problem, check_schema
from tests.test_scaffold import sample_schema

MAPPING = """\
version: 1
tables:
  emp:
    columns: [ename, emial]
    unique:
      - email
      - mgr_id
    sorted:
      - key: emp:by:name
        score: ename
      - key: emp:by:mgr
        score: mgr_id
    latest:
      - key: emp:latest
        order_by: hird
  empp: {}
  emp_view: {}
  dept:
    key: "dept:{dname}"
  book_tag:
    key: "book_tag:{book_id}"
  log:
    key: "log:{msg}"
"""


def problems(text: str) -> list[Problem]:
    return check_schema(parse_mapping(text, file="m.yaml", environ={}), sample_schema())


def test_every_problem_names_path_line_and_the_closest_name() -> None:
    got = {(p.level, p.path, p.line): p for p in problems(MAPPING)}
    assert set(got) == {
        ("error", "tables.emp.columns", 4),
        ("error", "tables.emp.latest[0].order_by", 15),
        ("warning", "tables.emp.unique[1]", 7),
        ("error", "tables.emp.sorted[0].score", 10),
        ("error", "tables.empp", 16),
        ("error", "tables.emp_view", 17),
        ("error", "tables.book_tag.key", 21),
        ("error", "tables.log.key", 23),
    }
    assert got["error", "tables.emp.columns", 4].hint == "did you mean 'email'?"
    assert "unknown column 'emial' in table emp" in str(got["error", "tables.emp.columns", 4])
    assert str(got["error", "tables.emp.latest[0].order_by", 15]).startswith(
        "m.yaml:15: tables.emp.latest[0].order_by: unknown column 'hird'"
    )
    assert got["error", "tables.empp", 16].hint == "did you mean 'emp'?"
    assert "is a view" in got["error", "tables.emp_view", 17].message
    assert "neither numeric nor a date" in got["error", "tables.emp.sorted[0].score", 10].message
    assert (
        "does not enforce ['mgr_id'] as unique" in got["warning", "tables.emp.unique[1]", 7].message
    )
    assert "rows would overwrite each other" in got["error", "tables.log.key", 23].message


def test_keys_with_a_not_null_unique_or_a_composite_key_are_fine() -> None:
    text = """\
version: 1
tables:
  dept:
    key: "dept:{code}"
  book_tag:
    as: none
    sets: [{key: "tag:{tagname}", member: "{book_id}"}]
  emp:
    key: "e:{emp_id}:{ename}"
    sorted: [{key: "emp:top", score: mgr_id}]
"""
    assert problems(text) == []


def test_key_on_a_nullable_unique_column_is_an_error() -> None:
    text = 'version: 1\ntables:\n  emp:\n    key: "emp:{email}"\n'
    (p,) = problems(text)
    assert (p.level, p.path, p.line) == ("error", "tables.emp.key", 4)
    assert p.hint == "put every primary-key column in the key, e.g. emp:{emp_id}"


def test_declared_primary_key_that_mysql_does_not_enforce_warns() -> None:
    text = "version: 1\ntables:\n  emp:\n    primary_key: [ename]\n"
    (warning,) = problems(text)  # the declaration is trusted; the default key is emp:{ename}
    assert (warning.level, warning.path, warning.line) == ("warning", "tables.emp.primary_key", 4)
    assert "does not enforce ['ename'] as unique" in warning.message
    assert warning.hint and "report rows that share a key" in warning.hint


def test_unknown_parent_table(tmp_path: Path) -> None:
    text = "version: 1\ntables:\n  emp:\n    references: [{columns: mgr_id, table: empz}]\n"
    (p,) = problems(text)
    assert (p.path, p.hint) == ("tables.emp.references[0].table", "did you mean 'emp'?")


def test_loader_errors_are_reported_with_their_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("version: 1\ntables:\n  emp:\n    indexs: [mgr_id]\n")
    report = validate(f, environ={})
    assert report.exit_code == 2
    (p,) = report.problems
    assert (p.path, p.line, p.hint) == ("tables.emp.indexs", 4, "did you mean 'indexes'?")


def test_without_a_source_the_file_alone_is_checked(tmp_path: Path) -> None:
    f = tmp_path / "emp.yaml"
    f.write_text("version: 1\ntables:\n  emp:\n    columns: [nosuch]\n")
    report = validate(f, environ={})
    assert report.exit_code == 0 and report.source is None
    assert report.summary() == (
        f"{f}: OK, 1 table (file only: no source given; pass --source URL to check the live schema)"
    )


# -- against the real server and through the CLI ------------------------------------------------

SQL = """
CREATE TABLE emp (emp_id INT PRIMARY KEY, ename VARCHAR(20) NOT NULL, email VARCHAR(40),
  mgr_id INT, hired DATETIME, UNIQUE KEY (email), KEY (mgr_id));
CREATE TABLE dept (dept_no CHAR(4) PRIMARY KEY, dname VARCHAR(20));
"""


@pytest.mark.smoke
def test_cli_validate_against_the_live_schema(mysql_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run(SQL)
    runner = CliRunner()
    env = {"MIGRATOR_SOURCE_URL": ""}
    good = tmp_path / "good.yaml"
    good.write_text(
        f"version: 1\nsource: {mysql_db.url}\ntables:\n  emp:\n    unique: [email, ename]\n"
        "    latest: [{key: 'emp:latest', order_by: hired}]\n  dept: {}\n"
    )
    ok = runner.invoke(app, ["validate", str(good)], env=env)
    assert ok.exit_code == 0, ok.output
    assert f"{good}: OK, 2 tables, 1 warning" in flat(ok.output)
    assert f"{good}:5: tables.emp.unique[1]: MySQL does not enforce ['ename']" in flat(ok.output)
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntables:\n  emp:\n    columns: [ename, emial]\n  dpt: {}\n")
    failed = runner.invoke(app, ["validate", str(bad), "--source", mysql_db.url], env=env)
    assert failed.exit_code == 2
    assert f"{bad}:4: tables.emp.columns: unknown column 'emial' in table emp" in flat(
        failed.output
    )
    assert "did you mean 'email'?" in flat(failed.output)
    assert f"{bad}:5: tables.dpt: no such table 'dpt'" in flat(failed.output)
    assert f"{bad}: 2 errors" in flat(failed.output)
    file_only = runner.invoke(app, ["validate", str(bad)], env=env)
    assert file_only.exit_code == 0 and "file only: no source given" in flat(file_only.output)
    from_env = runner.invoke(app, ["validate", str(bad)], env={"MIGRATOR_SOURCE_URL": mysql_db.url})
    assert from_env.exit_code == 2


def flat(output: str) -> str:
    """Output as one line: messages wrap at 80 columns, between words."""
    return " ".join(output.split())


def test_cli_validate_unreachable_source_exits_3(tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("version: 1\ntables:\n  emp: {}\n")
    url = "mysql+pymysql://root:hunter2@127.0.0.1:1/db"
    result = CliRunner().invoke(app, ["validate", str(f), "--source", url])
    assert result.exit_code == 3
    assert "hunter2" not in result.output and "Traceback" not in result.output


def test_cli_validate_loader_error_exits_2(tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("version: 1\ntables:\n  emp:\n    as: hashes\n")
    result = CliRunner().invoke(app, ["validate", str(f)], env={"MIGRATOR_SOURCE_URL": ""})
    assert result.exit_code == 2
    assert f"{f}:4: tables.emp.as: unknown 'as: hashes'" in " ".join(result.output.split())
    assert "did you mean 'hash'?" in result.output


def test_validate_json_lists_every_problem_with_its_line(tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("version: 1\ntables:\n  emp:\n    indexs: [a]\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["validate", str(f), "--json"])
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert data["ok"] is False
    (problem,) = data["problems"]
    assert problem["line"] == 4 and "indexs" in problem["message"]


def test_a_child_is_told_its_parent_failed_validation(mysql_db: Any, tmp_path: Path) -> None:
    """A parent whose own mapping has an error: the child's warning says so, not that the
    parent is not in the mapping (issue 27 item 6)."""
    mysql_db.run(
        "CREATE TABLE parent (id INT PRIMARY KEY, name VARCHAR(20));"
        "CREATE TABLE child (id INT PRIMARY KEY, parent_id INT, KEY (parent_id),"
        " FOREIGN KEY (parent_id) REFERENCES parent (id) ON DELETE CASCADE);"
    )
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\ntables:\n  parent: {indexes: [nmae]}\n  child: {indexes: [parent_id]}\n"
    )
    report = validate(path, source=mysql_db.url)
    child = [p.message for p in report.problems if p.path == "tables.child"]
    # (MySQL 9.7 logs the rows its cascades change: there sync follows them, no warning)
    assert all("parent did not pass validation" in m for m in child), report.problems
    assert not any("is not in the mapping" in p.message for p in report.problems)


@pytest.mark.engine(
    "mariadb", why="MariaDB does not log the rows its cascades change, so sync refuses a "
    "cascade it cannot apply exactly; MySQL 9.7 logs them (nothing refused there)",
)  # fmt: skip
def test_errors_come_first_and_what_concerns_sync_alone_is_one_line(
    mysql_db: Any, tmp_path: Path
) -> None:
    """c's two foreign keys, each SET NULL from a parent left out of the mapping whose own rows
    go with their top row (a cascade of a cascade through a table sync does not hold), are
    refused: one line for c."""
    mysql_db.run(
        "CREATE TABLE top (id INT PRIMARY KEY);"
        "CREATE TABLE p (code INT PRIMARY KEY, top_id INT NOT NULL, FOREIGN KEY (top_id) "
        "REFERENCES top (id) ON DELETE CASCADE);"
        "CREATE TABLE p2 (code INT PRIMARY KEY, top_id INT NOT NULL, FOREIGN KEY (top_id) "
        "REFERENCES top (id) ON DELETE CASCADE);"
        "CREATE TABLE c (id INT PRIMARY KEY, code INT, code2 INT, KEY (code), "
        "KEY (code2), FOREIGN KEY (code) REFERENCES p (code) ON DELETE SET NULL, "
        "FOREIGN KEY (code2) REFERENCES p2 (code) ON DELETE SET NULL);"
        "CREATE TABLE q (id INT PRIMARY KEY);"
    )
    path = tmp_path / "m.yaml"
    path.write_text(
        f"version: 1\nsource: {mysql_db.url}\ntables:\n  c:\n"
        "    indexes: [code, code2]\n    where: code IS NULL OR code2 IS NULL\n"
        "  q:\n    columns: [nope]\n"
    )
    runner = CliRunner()
    done = runner.invoke(app, ["validate", str(path)])
    assert done.exit_code == 2
    text = " ".join(done.output.split())  # the console's width wraps the lines
    assert text.startswith("error: ") and "unknown column 'nope'" in text, done.output
    assert text.count("note: ") == 1 and text.index("note: ") > text.index("'nope'")
    assert "tables.c: sync refuses this table: foreign key" in text
    assert "(code) -> p ON DELETE SET NULL; foreign key" in text and "(code2) -> p2" in text
    assert "a cascade of a cascade" not in text and "RESTRICT" not in text  # why, fix: --sync
    assert f"migrator validate --sync {path}" in text
    full = runner.invoke(app, ["validate", "--sync", str(path)])
    assert full.exit_code == 2 and "note:" not in full.output and "warning:" not in full.output
    said = " ".join(full.output.split())
    assert said.count("error: ") == 3 and said.count("sync refuses this table") == 2, said
    assert "a cascade of a cascade through a table sync does not hold" in said, said
    # without the unknown column: validate passes (migrate is not concerned), --sync does not
    path.write_text(path.read_text().replace("  q:\n    columns: [nope]\n", ""))
    assert runner.invoke(app, ["validate", str(path)]).exit_code == 0
    for_sync = runner.invoke(app, ["validate", "--sync", str(path)])
    assert for_sync.exit_code == 2 and "2 errors" in for_sync.output, for_sync.output
    as_json = json.loads(runner.invoke(app, ["validate", "--json", str(path)]).stdout)
    warned = [p for p in as_json["problems"] if p["level"] == "warning"]
    assert len(warned) == 2 and all(w["brief"] in w["message"] for w in warned)
