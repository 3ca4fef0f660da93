"""Which reader sync decodes the binary log with (source/binlog/process.reader_for): pure."""

from __future__ import annotations

import pytest

from migrator.errors import EXIT_USAGE, MigratorError
from migrator.source.binlog import process
from migrator.source.binlog.process import READER_ENV, ReaderProcess, reader_for, reader_kind
from migrator.source.binlog.reader import BinlogPosition, BinlogReader
from migrator.source.mysql import parse_url

URL = "mysql+pymysql://u:secret@127.0.0.1:1/db"


def _reader() -> object:
    import threading

    return reader_for(parse_url(URL), server_id=1, database="db", tables={},
                      start=BinlogPosition("b.000001", 4), stop=threading.Event(),
                      heartbeat=0.2, ctl=None)  # fmt: skip


CHOICES = [(None, "process"), ("", "process"), ("process", "process"), (" Thread ", "thread")]


@pytest.mark.parametrize(("value", "kind"), CHOICES)
def test_the_setting_names_the_reader(monkeypatch, value, kind) -> None:  # type: ignore[no-untyped-def]
    if value is None:
        monkeypatch.delenv(READER_ENV, raising=False)
    else:
        monkeypatch.setenv(READER_ENV, value)
    assert reader_kind() == kind
    monkeypatch.setattr(process.os, "cpu_count", lambda: 2)
    assert isinstance(_reader(), ReaderProcess if kind == "process" else BinlogReader)


def test_one_core_decodes_in_a_thread(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv(READER_ENV, raising=False)
    monkeypatch.setattr(process.os, "cpu_count", lambda: 1)
    assert isinstance(_reader(), BinlogReader)


def test_another_value_is_refused_with_the_fix(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(READER_ENV, "fork")
    with pytest.raises(MigratorError) as e:
        reader_kind()
    assert e.value.exit_code == EXIT_USAGE
    assert "'fork'" in str(e.value) and "'thread'" in str(e.value)
