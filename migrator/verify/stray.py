"""verify's stray-key SCAN, run on a thread of its own while the row pass reads the source.

The SCAN of the verified tables' key spaces (store/keys.py) costs Redis about a second per
million keys, and waiting for it costs the client nothing: started with the pass, its pages
are tallied as they come (``KeySpace.tally``: per-row keys counted per table, every other key
kept with its table and pattern), and the pass's results are compared with the tally at the
end (checker.py, ``Checker.stale``). SCAN returns every key that exists from its start to its
end, so a stale key that was there before verify began is found whatever the pass does
meanwhile; a key the pass writes (``--fix``) may or may not come, and is expected anyway.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence

from migrator.plan.keyspace import KeyPattern, KeySpace
from migrator.retry import Policy, Retrying
from migrator.store.keys import scan_space
from migrator.store.sink import Client

Found = list[tuple[bytes, str, "KeyPattern | None"]]
#: keys asked for per SCAN call: fewer, larger pages mean fewer hand-overs between this thread
#: and the pass (with PyMySQL, whose rows are parsed in Python, 10,000 made verify ~0.4 s
#: faster per million keys than 2,000); each call holds Redis ~2-9 ms
PAGE = 10_000


class StrayScan:
    """SCAN and tally the key spaces of ``tables`` on a daemon thread: ``result`` waits for
    it (raising what it raised), ``cancel`` stops it after the page in hand."""

    def __init__(
        self, client: Client, space: KeySpace, tables: Sequence[str], policy: Policy | None = None
    ) -> None:
        self.client, self.space, self.tables = client, space, list(tables)
        self.policy = policy  # the mapping's options.retries (None: the default)
        self.rows: Counter[str] = Counter()
        self.others: Found = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="verify-scan", daemon=True)

    def start(self) -> StrayScan:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            # a retry's wait ends when the scan is cancelled (Stopped: nothing more to do)
            retrying = Retrying(self.policy, stop=self._stop)
            for page in scan_space(self.client, self.space, self.tables, PAGE, retrying):
                if self._stop.is_set():
                    return
                counted, others = self.space.tally(page, self.tables)
                self.rows.update(counted)
                self.others += others
        except BaseException as e:  # handed to the caller by result()
            self.error = e

    def result(self) -> tuple[Counter[str], Found]:
        """Per-row keys per table, and every other key of the tables (with its table and
        pattern, None when it fits none), once the SCAN is complete."""
        self._thread.join()
        return self._outcome()

    def _outcome(self) -> tuple[Counter[str], Found]:
        if self.error is not None:
            raise self.error
        return self.rows, self.others

    def cancel(self) -> None:
        """Stop after the page in hand, or at once while waiting to retry one."""
        self._stop.set()
        self._thread.join(timeout=5)


def scan_now(
    client: Client, space: KeySpace, tables: Sequence[str], policy: Policy | None = None
) -> tuple[Counter[str], Found]:
    """The same SCAN and tally, on the calling thread."""
    scan = StrayScan(client, space, tables, policy)
    scan._run()
    return scan._outcome()
