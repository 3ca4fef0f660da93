"""Shared by the tests of the ``@keys`` hint (issue 16 item 7): a mapping whose rows make row
keys, index sets and a unique hash, and a record of every stray-key SCAN verify runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.verify import checker
from migrator.verify.stray import StrayScan

SCHEMA = """
CREATE TABLE member (id INT PRIMARY KEY, name VARCHAR(40), team INT, email VARCHAR(60),
  UNIQUE KEY (email), KEY (team));
INSERT INTO member VALUES (1, 'ann', 1, 'ann@x.org'), (2, 'bob', 1, 'bob@x.org'),
  (3, 'cy', 2, 'cy@x.org');
"""
#: changes after the load: a row gone, rows added, one of them with a team of its own
CHANGES = """
DELETE FROM member WHERE id = 3;
INSERT INTO member VALUES (4, 'dee', 7, 'dee@x.org'), (5, 'eve', 8, 'eve@x.org');
"""
MAPPING = """\
version: 1
tables:
  member:
    indexes: [team]
    unique: [email]
"""


def write_mapping(tmp_path: Path) -> Path:
    path = tmp_path / "members.yaml"
    path.write_text(MAPPING)
    return path


class Scans:
    """Every stray-key SCAN: ``alongside`` (started with the pass), ``after`` (after it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.alongside: list[list[str]] = []
        self.after: list[list[str]] = []
        start, now = StrayScan.start, checker.scan_now

        def spy_start(scan: StrayScan) -> StrayScan:
            self.alongside.append(scan.tables)
            return start(scan)

        def spy_now(*args: object, **kw: object) -> object:
            self.after.append(list(args[2]))  # type: ignore[call-overload]
            return now(*args, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(StrayScan, "start", spy_start)
        monkeypatch.setattr(checker, "scan_now", spy_now)

    @property
    def any(self) -> bool:
        return bool(self.alongside or self.after)
