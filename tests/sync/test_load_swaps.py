"""gh-ost's cut-over during ``sync``'s consistent first load (issue 35 item 2): a mapping
with nested documents is loaded whole in one snapshot, and a table swapped in after that
snapshot began (``RENAME TABLE item TO _item_del, _item_gho TO item``, the ghost made after
it) cannot be read in it (error 1412). That was exit 2 with the hint "run the command again",
a code the service unit does not restart on; the load now starts again from a new snapshot,
as after a lost connection, and ends exact. On each engine."""

from __future__ import annotations

import threading
from typing import Any

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.progress import NullProgress

SCHEMA = """
CREATE TABLE book (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL);
CREATE TABLE tag (
  id INT PRIMARY KEY, tagname VARCHAR(32) NOT NULL, book_id INT NOT NULL,
  CONSTRAINT fk_tag_book FOREIGN KEY (book_id) REFERENCES book (id)
);
CREATE TABLE item (id INT PRIMARY KEY, name VARCHAR(64));
"""
MAPPING = """
version: 1
options:
  batch_size: 50
  retries: {attempts: 5, backoff: 0.2}
tables:
  book:
    as: json-string
    counter: false
  tag:
    as: none
    counter: false
    columns: [tagname, book_id]
    nest: {in: book, as: tags, order: tagname}
  item: {}
"""


class SwapOnce(NullProgress):
    """gh-ost's ghost of ``item`` made, filled and swapped in once ``book``'s first batch is
    read (in a thread of its own: the load holds the tables it has read)."""

    def __init__(self, db: Any) -> None:
        self.db, self.done = db, threading.Event()

    def advance(self, table: str, rows: int) -> None:
        if table == "book" and not self.done.is_set():
            swap = threading.Thread(target=self._swap)
            swap.start()
            swap.join(60)
            self.done.set()

    def _swap(self) -> None:
        self.db.run(
            "CREATE TABLE _item_gho LIKE item; INSERT INTO _item_gho SELECT * FROM item;"
            "RENAME TABLE item TO _item_del, _item_gho TO item"
        )


def test_a_swap_in_the_consistent_first_load_loads_again(binlog_db: Any, redis_url: str) -> None:
    binlog_db.run(SCHEMA)
    books = ", ".join(f"({i}, 'b{i}')" for i in range(1, 301))
    tags = ", ".join(f"({i}, 't{i % 5}', {1 + i % 300})" for i in range(1, 601))
    binlog_db.run(
        f"INSERT INTO book VALUES {books}; INSERT INTO tag VALUES {tags};"
        f"INSERT INTO item VALUES {books};"
    )
    m = parse_mapping(MAPPING, name="swap")
    swapping = SwapOnce(binlog_db)
    report = sync(m, source=binlog_db.url, target=redis_url, until_caught_up=True,
                  server_id=9650, progress=swapping)  # fmt: skip
    assert swapping.done.is_set()
    assert report.stopped == "caught up"
    assert any("first load starts again" in r for r in report.recoveries), report.recoveries
    assert verify(m, source=binlog_db.url, target=redis_url).exit_code == 0
