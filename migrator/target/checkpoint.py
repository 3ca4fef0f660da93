"""Run state in Redis, under ``migrator:<mapping>:checkpoint``: per table, the last primary
key of the last acknowledged batch, the rows done, and whether the table finished."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from migrator.target.sink import Client

Command = tuple[bytes, ...]


@dataclass(frozen=True)
class TableState:
    after: tuple[bytes, ...] | None  # raw primary-key text of the last row written
    rows: int
    done: bool


def checkpoint_key(mapping_name: str) -> str:
    return f"migrator:{mapping_name}:checkpoint"


class Checkpoint:
    def __init__(self, client: Client, mapping_name: str) -> None:
        self.client = client
        self.key = checkpoint_key(mapping_name)

    def clear(self) -> None:
        self.client.delete(self.key)

    def load(self) -> dict[str, TableState]:
        out = {}
        for table, raw in self.client.hgetall(self.key).items():
            data: dict[str, Any] = json.loads(raw)
            after = data.get("after")
            name = table.decode() if isinstance(table, bytes) else str(table)
            out[name] = TableState(
                tuple(bytes.fromhex(v) for v in after) if after is not None else None,
                int(data.get("rows", 0)),
                bool(data.get("done", False)),
            )
        return out

    def command(
        self, table: str, after: Sequence[bytes | None] | None, rows: int, done: bool = False
    ) -> Command:
        """The HSET that records a table's progress; sent with the next batch, so it is only
        written once every earlier batch was acknowledged."""
        state = {
            "after": [v.hex() for v in after if v is not None] if after is not None else None,
            "rows": rows,
            "done": done,
        }
        return (b"HSET", self.key.encode(), table.encode(), json.dumps(state).encode())
