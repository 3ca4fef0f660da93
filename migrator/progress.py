"""How stages report progress: a small protocol with a silent default. rich lives in render/."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, table: str, total: int | None) -> None: ...

    def advance(self, table: str, rows: int) -> None: ...

    def finish(self, table: str) -> None: ...

    def note(self, table: str, message: str) -> None:
        """Something worth seeing on the table's line: a retry, a reload after a loss."""


class NullProgress:
    """Reports nothing."""

    def start(self, table: str, total: int | None) -> None:
        pass

    def advance(self, table: str, rows: int) -> None:
        pass

    def finish(self, table: str) -> None:
        pass

    def note(self, table: str, message: str) -> None:
        pass


NULL_PROGRESS = NullProgress()
