"""The fault schedules' kinds with one fault of their own (issue 35: each of its cases in the
schedules, on both engines), for tests/schedules.py:

* ``early-signal``: ``migrate``, ``verify --fix`` or ``sync`` (drawn from the seed) sent SIGINT
  or SIGTERM 0.1-1.5 s after it was started, while the interpreter starts and imports. What
  the process does with SIGTERM when the signal is sent (``/proc/PID/status``) says where it
  was: caught (migrator's handler, set by the first line of ``migrator/__main__.py``): it must
  end 130 saying it was interrupted (one line while starting; ``sync``: 0 if it already
  followed), never a traceback nor a death by the signal; the default (the interpreter's own
  first moments, docs/commands.md: "is Python's"): a death by the signal is allowed too;
  ignored or ended (the command was done, saying why it stops): its own exit codes too. The
  command is then started again as its hint says, and the kind's recovery runs.
* ``verify-oom``: ``verify --fix`` while Redis is at its ``maxmemory`` (``noeviction``), with
  row keys to put back: exit 4 with a hint naming ``maxmemory``; once the limit is lifted the
  recovery (``verify --fix`` again) reaches exit 0.
* ``sync-load-swap``: ``sync --consistent-load`` of ``album`` (60,000 rows, read first) and
  ``item`` while gh-ost's cut-over (``CREATE TABLE _item_gho LIKE item``, its rows copied with
  the writes held, ``RENAME TABLE item TO _item_del, _item_gho TO item``) comes as the load
  reads ``album`` (seen in MySQL's process list; one schedule in four: 0.8-2.5 s after the
  start instead): ``item`` made after the load's snapshot began cannot be read in it, and the
  load starts again; a swap outside the load is followed. Exit 3 is allowed only with "run
  the command again"; ``sync`` is then started again. The event list says whether the
  window was met (``the first load starts again`` in sync's log)."""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.schedules import Command, Servers, Writer

Event = Callable[[str], None]
EARLY_SIGNAL_SECONDS = (0.1, 1.5)
SWAP_SECONDS = (0.8, 2.5)
SWAP = (
    "CREATE TABLE _item_gho LIKE item", "INSERT INTO _item_gho SELECT * FROM item",
    "RENAME TABLE item TO _item_del, _item_gho TO item", "DROP TABLE _item_del",
)  # fmt: skip
#: ``sync-load-swap``'s table read before ``item`` in the consistent load (listed first, and
#: first by name): gh-ost's cut-over waits for it to be read (``loads``), then comes before
#: ``item`` is opened in the load's snapshot
LEAD = "  album: {}\n"
LEAD_ROWS = 60_000
#: what sync says when a swap met its consistent first load (migrator/sync/first_load.py)
LOAD_AGAIN = "the first load starts again"


def own_base(kind: str, seed: int) -> str:
    """The command a kind runs: ``early-signal``'s is drawn from its seed."""
    if kind == "early-signal":
        return random.Random(f"{seed}-command").choice(["migrate", "verify", "sync"])
    return "verify" if kind == "verify-oom" else kind


def sigterm_state(pid: int) -> str:
    """What the process does with SIGTERM when it is sent (``/proc/PID/status``): ``caught``
    (migrator's handler, set by the first line of ``migrator/__main__.py``), ``ignored`` (deaf:
    it is saying why it stops, migrator/errors.py), ``ended`` (a zombie, or gone), or
    ``python`` (the default: the interpreter's own first moments)."""
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
    except OSError:
        return "ended"
    if fields.get("State", "").split()[:1] in (["Z"], ["X"]):
        return "ended"
    bit = 1 << (signal.SIGTERM - 1)
    if int(fields.get("SigCgt", "0"), 16) & bit:
        return "caught"
    return "ignored" if int(fields.get("SigIgn", "0"), 16) & bit else "python"


def early_signal(command: Command, seed: int, event: Event, allowed: set[int]) -> list[str]:
    """``allowed``: the command's own exit codes, for a signal that came as it ended."""
    rng = random.Random(f"{seed}-early-signal")
    sig = rng.choice([signal.SIGINT, signal.SIGTERM])
    time.sleep(max(0.0, command.started + rng.uniform(*EARLY_SIGNAL_SECONDS) - time.monotonic()))
    assert command.proc is not None
    state = sigterm_state(command.proc.pid)
    command.asked = True
    command.proc.send_signal(sig)
    event(f"{sig.name} {time.monotonic() - command.started:.2f}s after the start (SIGTERM "
          f"{state})")  # fmt: skip
    code = command.collect(60)
    what, _, err = command.runs[-1]
    problems = []
    may = {130, 0} if command.kind == "sync" else {130}
    if state == "python":  # the interpreter's own first moments: Python's (docs/commands.md)
        may.add(-sig)
    if state in ("ended", "ignored"):  # the command had ended, or was saying why it stops
        may |= allowed
    if code not in may:
        problems.append(f"{what} sent {sig.name} (SIGTERM {state}) ended with exit {code}")
    if "Traceback" in err and code != -sig:
        problems.append(f"{what} sent {sig.name} printed a traceback")
    if code == 130 and "interrupted" not in err:
        problems.append(f"{what} sent {sig.name} ended 130 without saying it was interrupted")
    if "nothing was done" in err and len(err.strip().splitlines()) != 1:
        problems.append(f"{what} sent {sig.name} while starting said more than one line")
    command.start(again=command.kind == "migrate" and "--resume" in err)  # as its hint says
    event(f"ended {code}; start {command.runs[-1][0]}")
    return problems


def fill_redis(servers: Servers, event: Event) -> None:
    """Redis at its maxmemory (below what it uses: every write refused), with 40 row keys of
    rows MySQL keeps removed: ``verify --fix`` must write to repair."""
    client = servers.redis.client()
    try:
        client.delete(*[f"item:{i}" for i in range(1, 51) if i % 5])
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", "1")
    finally:
        client.close()
    event("redis at maxmemory (noeviction), 40 row keys removed")


def redis_full(servers: Servers, command: Command, event: Event) -> list[str]:
    """``verify --fix`` on the full Redis ends 4 naming maxmemory; then the limit is lifted."""
    try:
        code = command.collect()
    finally:
        client = servers.redis.client()
        try:
            client.config_set("maxmemory", "0")
        finally:
            client.close()
    what, _, err = command.runs[-1]
    event(f"ended {code}; maxmemory lifted")
    if code != 4 or "maxmemory" not in err or "hint" not in err.lower():
        return [f"{what} on a Redis at maxmemory ended {code}, not 4 with a maxmemory hint"]
    return []


def lead_table(servers: Servers) -> None:
    servers.sql("CREATE TABLE album (id INT PRIMARY KEY, name VARCHAR(40))")
    conn = servers.mysql.connect("sched")
    try:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO album VALUES (%s, %s)",
                            [(n, f"album {n}") for n in range(1, LEAD_ROWS + 1)])  # fmt: skip
        conn.commit()
    finally:
        conn.close()


def loads(servers: Servers, timeout: float) -> bool:
    """Wait until a query of sync reads ``album`` (the consistent load's first table), asked
    on one connection every 2 ms (the read is a fraction of a second)."""
    deadline = time.monotonic() + timeout
    conn = servers.mysql.connect(None)
    try:
        with conn.cursor() as cur:
            while time.monotonic() < deadline:
                cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO "
                            "LIKE '%FROM%album%' AND ID <> CONNECTION_ID()")  # fmt: skip
                if cur.fetchone()[0]:
                    return True
                time.sleep(0.002)
    finally:
        conn.close()
    return False


def swap_in_load(
    servers: Servers, writer: Writer, command: Command, seed: int, event: Event
) -> list[str]:
    """gh-ost's cut-over of ``item`` at a moment drawn from the seed, writes held (as
    gh-ost holds them) while the ghost is filled and swapped in; then sync goes on, or
    stops with exit 3 naming the fix and is started again."""
    rng = random.Random(f"{seed}-swap")
    if rng.random() < 0.25:  # at a moment drawn from the seed (the load may be over)
        time.sleep(max(0.0, command.started + rng.uniform(*SWAP_SECONDS) - time.monotonic()))
    elif not loads(servers, 20):
        event("the consistent load was not seen reading album")
    with writer.hold:
        servers.sql(*SWAP)
    event(f"gh-ost swap of item {time.monotonic() - command.started:.2f}s after the start")
    time.sleep(rng.uniform(2.0, 4.0))
    if not command.ended():
        return []
    code = command.collect()
    what, _, err = command.runs[-1]
    command.start(again=True)
    event(f"ended {code}; start {command.runs[-1][0]}")
    if code == 3 and "run the command again" in err:
        return []
    return [f"{what} ended {code} after a swap: {err.strip()[-300:]}"]
