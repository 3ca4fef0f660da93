"""A source URL that points at a server which is not MySQL: one error, never a hang."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from migrator.errors import EXIT_CONNECT, EXIT_USAGE, ConnectError, MigratorError
from migrator.source.mysql import Source
from tests.faults import silent_server
from tests.test_cli_review import cli_run


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP server that accepts connections and says nothing (tests/faults.py)."""
    with silent_server() as server:
        yield server.port


def test_a_port_that_sends_no_greeting_is_an_error_after_the_timeout(silent_port: int) -> None:
    started = time.monotonic()
    with (
        Source(f"mysql+pymysql://root@127.0.0.1:{silent_port}/db", connect_timeout=1) as src,
        pytest.raises(ConnectError) as caught,
    ):
        src.schema()
    assert time.monotonic() - started < 30  # the timeout, not a hang (bound for a loaded host)
    assert "sent no MySQL greeting" in caught.value.message
    assert "MySQL listens on 3306" in (caught.value.hint or "")
    assert caught.value.exit_code == EXIT_CONNECT


def test_a_real_mysql_server_passes_the_greeting_check(mysql_db) -> None:  # type: ignore[no-untyped-def]
    with Source(mysql_db.url, connect_timeout=1) as src:
        assert src.schema().database == mysql_db.name


# -- the source URL's driver and query options (walk's review: each was exit 3 or 1, with the
# driver's TypeError or ValueError as the only words) -------------------------------------------


@pytest.mark.parametrize(
    ("query", "says", "hint"),
    [
        (
            "sslmode=require",
            "the option 'sslmode': MySQL's driver has no such option",
            "ssl_ca=FILE",
        ),
        ("ssl=true", "the option 'ssl': it takes a Python object, not text", "ssl_disabled=true"),
        ("read_timout=5", "the option 'read_timout'", "did you mean 'read_timeout'?"),
        ("read_timeout=abc", "read_timeout=abc in the source URL is not a whole number", "=60"),
        ("ssl_check_hostname=maybe", "is neither true nor false", "?ssl_check_hostname=false"),
        (
            "ssl_ca=/no/such/ca.pem",
            "ssl_ca=/no/such/ca.pem in the source URL: no such file",
            "path",
        ),
    ],
)
def test_a_query_option_the_driver_does_not_take_is_a_usage_error(
    mysql_db, query: str, says: str, hint: str
) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MigratorError) as caught, Source(f"{mysql_db.url}?{query}") as src:
        src.schema()
    assert caught.value.exit_code == EXIT_USAGE, caught.value
    assert says in caught.value.message
    assert hint in (caught.value.hint or "")
    assert "unexpected keyword" not in str(caught.value) and "object has no" not in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("scheme", "says"),
    [("mysql+foo", "a driver SQLAlchemy does not know"), ("mysql+asyncmy", "an asyncio driver")],
)
def test_a_driver_migrator_cannot_use_is_a_usage_error(mysql_db, scheme: str, says: str) -> None:  # type: ignore[no-untyped-def]
    url = scheme + "://" + mysql_db.url.partition("://")[2]
    with pytest.raises(MigratorError) as caught, Source(url) as src:
        src.schema()
    assert caught.value.exit_code == EXIT_USAGE
    assert says in caught.value.message and "mysql+pymysql://" in (caught.value.hint or "")


def test_the_options_connections_md_documents_are_taken(mysql_db) -> None:  # type: ignore[no-untyped-def]
    url = f"{mysql_db.url}?read_timeout=60&ssl_disabled=false"
    with Source(url) as src:
        assert src.schema().database == mysql_db.name


def test_an_unknown_option_is_named_without_its_value_or_the_password(
    mysql_db, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    head, _, rest = mysql_db.url.partition("://")
    user, _, where = rest.partition("@")
    url = f"{head}://{user.partition(':')[0]}:Pw-s3cret@{where}?ssl_passwd=Key-s3cret"
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\ntables:\n  emp: {}\n")
    done = cli_run("validate", str(path), "--source", url, "--json")
    assert done.returncode == EXIT_USAGE, done.stderr
    assert json.loads(done.stdout)["exit_code"] == EXIT_USAGE
    assert "'ssl_passwd'" in done.stderr
    assert "s3cret" not in done.stderr + done.stdout
