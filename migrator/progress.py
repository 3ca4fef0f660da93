"""How stages report progress: a small protocol with a silent default. rich lives in render.py."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, table: str, total: int | None) -> None: ...

    def advance(self, table: str, rows: int) -> None: ...

    def finish(self, table: str) -> None: ...


class NullProgress:
    """Reports nothing."""

    def start(self, table: str, total: int | None) -> None:
        pass

    def advance(self, table: str, rows: int) -> None:
        pass

    def finish(self, table: str) -> None:
        pass


NULL_PROGRESS = NullProgress()
