"""Bounded exponential backoff for transient failures (STYLE habit 8).

What is transient is decided by the stage that met the failure (``source.mysql.transient``,
``target.sink.transient``: dropped connections, timeouts, deadlocks, ``LOADING``, ``BUSY``,
``TRYAGAIN``...); everything else stops at once. The policy comes from the mapping's
``options.retries`` (``attempts``, ``backoff``, ``max_backoff``) and ``--retries N``:
after failure number k the wait is ``min(backoff * 2**(k-1), max_backoff)`` seconds, and
failure number ``attempts + 1`` in a row stops the command with exit 3 (``ConnectError``).
Each retry is announced through ``note`` (migrate shows it on the table's progress line).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

from migrator.errors import ConnectError

T = TypeVar("T")
#: says why an exception is worth a retry ("connection lost"), or None when it is not
Classify = Callable[[BaseException], "str | None"]


class Policy(Protocol):
    """The mapping's ``options.retries`` (``mapping.model.Retries``) as this module reads it."""

    @property
    def attempts(self) -> int: ...

    @property
    def backoff(self) -> float: ...

    @property
    def max_backoff(self) -> float: ...


class Default:
    attempts = 8
    backoff = 0.5
    max_backoff = 10.0


class Stopped(Exception):
    """The run was asked to stop (Ctrl-C, another task failed) while waiting to retry."""


class Retrying:
    """A retry policy in use: counts the retries of a run and announces each one."""

    def __init__(
        self,
        policy: Policy | None = None,
        note: Callable[[str], None] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.policy: Policy = policy or Default()
        self.note = note or (lambda message: None)
        self.stop = stop or threading.Event()
        self.total = 0  # retries so far, all failures together

    def delay(self, failures: int) -> float:
        p = self.policy
        return float(min(p.backoff * 2 ** (failures - 1), p.max_backoff))

    def failed(self, failures: int, reason: str, what: str) -> None:
        """The ``failures``-th failure in a row of ``what``: wait before the next try, or
        raise ConnectError (exit 3) when the policy's attempts are used up."""
        attempts = self.policy.attempts
        if failures > attempts:
            raise ConnectError(
                f"{what}: {reason} (still failing after {attempts} retries)",
                "check the server; more patience: options.retries in the mapping, or "
                "--retries N (migrate, verify)",
            )
        self.total += 1
        wait = self.delay(failures)
        self.note(f"retry {failures}/{attempts} in {wait:.1f}s: {what}: {reason}")
        if self.stop.wait(wait):
            raise Stopped("stopped while waiting to retry")

    def call(self, fn: Callable[[], T], classify: Classify, what: str) -> T:
        """``fn()``, tried again after each transient failure (as ``classify`` says)."""
        failures = 0
        while True:
            try:
                return fn()
            except Exception as e:
                reason = classify(e)
                if reason is None:
                    raise
                failures += 1
                self.failed(failures, reason, what)
