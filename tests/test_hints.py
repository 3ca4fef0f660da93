"""What a new user met without a word (issue 27 item 6): a ``hint:`` line for YAML syntax
errors of every kind, a target URL naming a Redis database the server does not have, a
mapping of another ``version``; a verify that finds differences saying what it is doing."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.commands import migrate, verify
from migrator.errors import ConnectError, MappingError
from migrator.mapping.loader import parse_mapping
from migrator.progress import NullProgress
from migrator.store.cluster import connect_any
from tests.services import MySQLDatabase, redis_db_url


@pytest.mark.parametrize(
    "text",
    [
        "version: 1\ntables:\n  emp: {columns: [a, b}\n",  # a bracket closed by a brace
        "version: 1\ntables:\n  emp:\n    key: *emp\n",  # an alias nobody defined
        "version: 1\ntables:\n  emp:\n    key: @emp\n",  # a reserved character
    ],
)
def test_every_yaml_syntax_error_has_a_hint(text: str) -> None:
    with pytest.raises(MappingError, match="not valid YAML") as e:
        parse_mapping(text, file="m.yaml")
    assert e.value.hint and "line" in e.value.hint, e.value


def test_another_version_says_which_one_this_migrator_reads() -> None:
    with pytest.raises(MappingError, match="unsupported version 2") as e:
        parse_mapping("version: 2\ntables:\n  emp: {}\n", file="m.yaml")
    assert e.value.hint and "version: 1" in e.value.hint


def test_a_database_the_server_does_not_have(redis_server_url: str) -> None:
    with pytest.raises(ConnectError, match="no database of the number") as e:
        connect_any(redis_db_url(redis_server_url, 999))
    assert e.value.hint and "redis://host:6379/0" in e.value.hint
    assert e.value.exit_code == 3


class Notes(NullProgress):
    def __init__(self) -> None:
        self.said: list[str] = []

    def note(self, table: str, message: str) -> None:
        self.said.append(f"{table}: {message}")


def test_a_verify_with_differences_says_what_it_is_doing(
    mysql_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    """After a table's pass, the SCAN for stale keys and the lookups of row keys in MySQL
    are named on its progress line (before: nothing for a minute, issue 27 item 6)."""
    mysql_db.run(
        "CREATE TABLE t (id INT PRIMARY KEY, grp INT, KEY (grp));"
        "INSERT INTO t SELECT seq, seq % 7 FROM seq_1_to_3000;"
    )
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\ntables:\n  t: {indexes: [grp]}\n")
    migrate(path, source=mysql_db.url, target=redis_url, workers=1)
    mysql_db.run("DELETE FROM t WHERE id % 10 = 0; UPDATE t SET grp = 99 WHERE id % 10 = 1;")
    notes = Notes()
    report = verify(path, source=mysql_db.url, target=redis_url, progress=notes)
    assert report.exit_code == 1
    said = "\n".join(notes.said)
    assert "t: differences: naming each one" in said, said
    assert "t: looking for stale keys" in said and "looking each up in MySQL" in said, said
    assert "naming the members nobody explains" in said, said
