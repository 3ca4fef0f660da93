"""Run state in Redis, under ``migrator:<mapping>:checkpoint``: per table (or key range), the
last primary key of the last acknowledged batch, the rows done, and whether it finished.

Three fields belong to the run rather than to a table: ``@marker``, the run's random token,
which every checkpoint write checks first (``guard.CHECKPOINT_SCRIPT``: a target that lost
the marker lost the data it vouched for); ``@run``, what the checkpoint is bound to (the
fingerprint of the resolved mapping and of the source, JSON), which ``--resume`` compares;
``#replace``, present in a ``--replace`` run's checkpoint from its first write (the intent to
remove what the mapping owns, ``done`` once the removal finished); and ``@keys``, how many keys
a complete load of every table wrote: a hint with which verify
guesses, before its pass, whether the target holds keys the mapping does not explain (then
it starts its stray-key SCAN at once, alongside the pass). A wrong hint costs time, never
correctness: verify decides by DBSIZE after the pass.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError, ResponseError

from migrator.errors import MigratorError
from migrator.store.guard import CHECKPOINT_SCRIPT, MARKER, RUN, new_token
from migrator.store.sink import Client
from migrator.store.sync_lock import lock_key
from migrator.store.sync_state import state_key

Command = tuple[bytes, ...]
#: the number of keys the last complete load of every table wrote (see above)
KEYS = "@keys"
#: a --replace run's removal: recorded with the run's marker, ``done`` once it finished
REPLACING = "#replace"


@dataclass(frozen=True)
class TableState:
    after: tuple[bytes, ...] | None  # raw primary-key text of the last row written
    rows: int
    done: bool
    until: tuple[bytes, ...] | None = None  # a chunk's last primary key (fixed by its plan)


def checkpoint_key(mapping_name: str) -> str:
    return f"migrator:{mapping_name}:checkpoint"


class Checkpoint:
    def __init__(self, client: Client, mapping_name: str, token: str | None = None) -> None:
        self.client = client
        self.key = checkpoint_key(mapping_name)
        self.token = token  # the run's marker: set, every checkpoint write checks it

    def clear(self) -> None:
        self.client.delete(self.key)

    def begin(self, token: str, run: dict[str, Any], replacing: bool = False) -> None:
        """Start afresh: no table state, this run's marker and binding; with ``replacing``
        the removal still to do, in the same transaction (the earlier run's table states
        are never seen without it)."""
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(self.key)
        pipe.hset(self.key, mapping={MARKER: token, RUN: json.dumps(run, sort_keys=True)})
        if replacing:
            pipe.hset(self.key, REPLACING, json.dumps({"after": None, "rows": 0, "done": False}))
        pipe.execute()
        self.token = token

    def bind(self, run: dict[str, Any]) -> None:
        """Record what the checkpoint is bound to now (a resume keeps marker and tables)."""
        self.client.hset(self.key, RUN, json.dumps(run, sort_keys=True))

    def forget(self, fields: list[str]) -> None:
        """Drop these tables' (or ranges') states: they load again from their start."""
        if fields:
            self.client.hdel(self.key, *fields)

    def record_keys(self, keys: int | None) -> None:
        """Record how many keys a complete load of every table wrote (None: unknown, as after
        a resumed or partial run), while the target still holds the run's marker."""
        if keys is None:
            self.client.hdel(self.key, KEYS)
        elif self.token is not None:
            try:
                self.client.eval(CHECKPOINT_SCRIPT, 1, self.key, self.token, KEYS, str(keys))
            except ResponseError:  # the marker is gone: no hint (nor is one needed)
                pass

    def run(self) -> tuple[str | None, dict[str, Any] | None]:
        """The marker and the binding found in the target (None where absent)."""
        marker, run = self.client.hmget(self.key, [MARKER, RUN])
        return (
            marker.decode() if isinstance(marker, bytes) else marker,
            json.loads(run) if run else None,
        )

    def reconcile(
        self, run: dict[str, Any], replacing: bool = False
    ) -> tuple[dict[str, TableState], str]:
        """After the target lost data: what it still vouches for, and what that means.
        The run's marker is still there -> its checkpoint (data and checkpoint are an
        ordered prefix of what was written); gone -> nothing (the run starts over, a
        ``--replace`` run with its removal to do again)."""
        marker, _ = self.run()
        if self.token is not None and marker == self.token:
            return self.load(), "continuing from the checkpoint the target still holds"
        self.begin(self.token or new_token(), run, replacing)
        return self.load(), "its data is gone: loading every table again"

    def load(self) -> dict[str, TableState]:
        out = {}
        for table, raw in self.client.hgetall(self.key).items():
            name = table.decode() if isinstance(table, bytes) else str(table)
            if name in (MARKER, RUN, KEYS):
                continue
            data: dict[str, Any] = json.loads(raw)
            after, until = data.get("after"), data.get("until")
            out[name] = TableState(
                tuple(bytes.fromhex(v) for v in after) if after is not None else None,
                int(data.get("rows", 0)),
                bool(data.get("done", False)),
                tuple(bytes.fromhex(v) for v in until) if until is not None else None,
            )
        return out

    def command(
        self,
        table: str,
        after: Sequence[bytes | None] | None,
        rows: int,
        done: bool = False,
        until: Sequence[bytes] | None = None,
    ) -> Command:
        """The write that records a table's (or chunk's) progress; sent with the next batch,
        so it is only written once every earlier batch was acknowledged. ``until``: a chunk's
        last key, repeated in each of its writes. With a marker it is a script that writes
        only while the target still holds the run's marker (else ``-MIGRATORLOST``)."""
        state: dict[str, Any] = {
            "after": [v.hex() for v in after if v is not None] if after is not None else None,
            "rows": rows,
            "done": done,
        }
        if until is not None:
            state["until"] = [v.hex() for v in until]
        value = json.dumps(state).encode()
        if self.token is None:
            return (b"HSET", self.key.encode(), table.encode(), value)
        return (b"EVAL", CHECKPOINT_SCRIPT.encode(), b"1", self.key.encode(),
                self.token.encode(), table.encode(), value)  # fmt: skip


#: KEYS[1] the checkpoint hash; ARGV: field, value. HSET only into a checkpoint that exists.
UPDATE_SCRIPT = (
    "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end "
    "return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])"
)


def record_keys_hint(client: Client, mapping_name: str, keys: int) -> None:
    """Record ``keys`` as ``@keys``: the keys the mapping's tables hold now, as ``verify --fix``
    proves them (Redis then matches MySQL) or ``sync`` follows them; only into a checkpoint
    that is there (one whose absence makes migrate's preflight look for keys in the way)."""
    client.eval(UPDATE_SCRIPT, 1, checkpoint_key(mapping_name), KEYS, str(keys))


def held_keys(client: Client, mapping_name: str) -> int:
    """The keys in the target's database, less the mapping's own (its checkpoint, its sync
    state and lock): what ``@keys`` is compared with."""
    own = (checkpoint_key(mapping_name), state_key(mapping_name), lock_key(mapping_name))
    return int(client.dbsize()) - sum(int(client.exists(k)) for k in own)


#: a target that cannot take the hint now: gone, or lost data (the guard's TargetLost)
UNREACHABLE = (RedisError, OSError, MigratorError)


class KeysFollower:
    """``@keys`` kept by ``sync``: the keys of the target's database (DBSIZE, less the
    mapping's own) less those that are not the mapping's: counted by sync before a load of
    its snapshot, or else what the hint found at its start leaves. Exact while nothing else
    writes to that database; a hint only, as above."""

    def __init__(self, client: Client, mapping_name: str) -> None:
        self.client, self.name = client, mapping_name
        keys = keys_hint(client, mapping_name)
        self.others = None if keys is None else held_keys(client, mapping_name) - keys

    def record(self, others: int | None = None) -> None:
        """Write the hint as of now (sync stops); ``others``: counted before a load. A hint
        only: a target that fails now (gone, or the guard sees it lost data) is left as it
        is, and the command's outcome stays its own."""
        others = self.others if others is None else others
        if others is not None:
            with suppress(*UNREACHABLE):
                held = held_keys(self.client, self.name)
                record_keys_hint(self.client, self.name, held - others)

    def forget(self) -> None:
        """Remove the hint (sync stopped on an error: what the target holds is not known);
        the error that stopped it stays the one reported."""
        with suppress(*UNREACHABLE):
            self.client.hdel(checkpoint_key(self.name), KEYS)


def keys_hint(client: Client, mapping_name: str) -> int | None:
    """``@keys`` of the mapping's checkpoint, if there is one."""
    raw = client.hget(checkpoint_key(mapping_name), KEYS)
    try:
        return int(raw) if raw is not None else None
    except ValueError:  # not ours to read: no hint
        return None


def removal_pending(states: dict[str, TableState]) -> bool:
    """Whether the checkpoint's run is a ``--replace`` whose removal has not finished."""
    state = states.get(REPLACING)
    return state is not None and not state.done


def tables_of(states: dict[str, TableState]) -> dict[str, TableState]:
    """The states of tables (and their chunks) alone, without the run's ``#replace``."""
    return {name: s for name, s in states.items() if name != REPLACING}
