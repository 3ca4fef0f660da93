"""A ``hint:`` line for the errors a new user met without one (issue 27 item 6): YAML
syntax errors of every kind, a target URL naming a Redis database the server does not have,
a mapping of another ``version``."""

from __future__ import annotations

import pytest

from migrator.errors import ConnectError, MappingError
from migrator.mapping.loader import parse_mapping
from migrator.target.cluster import connect_any
from tests.services import redis_db_url


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
