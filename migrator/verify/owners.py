"""Verify of a sharded source's owner hash (plan/owners.py): each row's field, batch by batch,
as the row images' (verify/row_images.py ``ImageCheck``), without holding every primary key
of the table: when the hash holds more fields than the rows found there, it is read with
HSCAN after the pass, and each page's fields are looked up on the shards they name (one
query per shard and page), those not found there on the other shards: a field whose row no
shard holds (deleted, or of a shard no longer listed) is an *extra field*, which ``--fix``
removes."""

from __future__ import annotations

from typing import Any

from migrator.plan.owners import Owners, owner_field, owners_of, pk_of
from migrator.verify import report as vr
from migrator.verify.row_images import Found, ImageCheck

#: fields read per HSCAN page and looked up per query
PAGE = 1000


class OwnerCheck(ImageCheck):
    """The owner hash of one table, checked batch by batch; fields beyond found afterwards."""

    def __init__(self, structure: Owners, found: Found) -> None:
        super().__init__(structure, found)
        self.remember = False

    @classmethod
    def of(cls, plan: object, found: Found) -> OwnerCheck | None:
        """The check of a table's owner hash, None if it keeps none."""
        owners = owners_of(plan)
        return None if owners is None else cls(owners, found)

    def near(self, rows: Any) -> None:
        """(Rows too close to their expiry: their fields are looked up like any other.)"""

    def rest(self, client: Any, src: Any = None, where: Any = None) -> None:
        """Fields no shard's row explains: looked up on the shard each names (``src``: the
        union of the shards, source/shards.py; without it, nothing is looked up)."""
        key = self.s.key
        sources = dict(getattr(src, "sources", ()))
        if not sources or client.hlen(key) <= self.present:
            return
        r = self.s.plan.resolved
        selector = src.selector(r.name, r.primary_key)
        page: list[tuple[bytes, bytes]] = []
        for item in client.hscan_iter(key, count=PAGE):
            page.append(item)
            if len(page) >= PAGE:
                self._look_up(page, sources, selector, where)
                page = []
        if page:
            self._look_up(page, sources, selector, where)

    def _look_up(
        self, page: list[tuple[bytes, bytes]], sources: dict[str, Any], selector: Any, where: Any
    ) -> None:
        r = self.s.plan.resolved
        by_shard: dict[bytes, list[bytes]] = {}
        for field, owner in page:
            by_shard.setdefault(owner, []).append(field)
        for owner, fields in by_shard.items():
            named = owner.decode("utf-8", "replace")
            left = fields
            # the shard it names first, then the others: a row another shard holds had its
            # field checked with that row (a *different value*, repaired there)
            for name in sorted(sources, key=lambda n: n != named):
                if not left:
                    break
                pks = [pk_of(f) for f in left]
                rows = sources[name].rows_where(r.name, selector, list(r.primary_key), pks, where)
                held = {owner_field(tuple(row)) for row in rows}
                left = [f for f in left if f not in held]
            for field in left:
                self.found(vr.EXTRA_FIELD, self.s.key, field, None, owner,
                           [(b"HDEL", self.s.key, field)])  # fmt: skip
