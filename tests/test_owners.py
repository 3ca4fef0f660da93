"""The owner hash of a sharded source (plan/owners.py): which shard each row came from, one
more structure of a table resolved for a shard. Pure: planned commands, no server."""

from __future__ import annotations

from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.plan.delta_entries import collector
from migrator.plan.expiry import encode_row
from migrator.plan.expiry_delta import table_delta
from migrator.plan.keyspace import KeySpace
from migrator.plan.owners import owner_field, owners_of, pk_of
from migrator.plan.planner import TablePlan
from tests.test_planner import _schema, rows

MAPPING = "version: 1\ntables:\n  emp: {unique: [email]}\n"


def _plan(shard: str) -> TablePlan:
    (resolved,) = resolve(parse_mapping(MAPPING, name="shop"), _schema(), ["emp"], shard=shard)
    return TablePlan(resolved)


def test_a_sharded_table_writes_each_rows_owner_beside_its_keys():
    plan = _plan("east")
    commands, _ = plan.plan(rows(plan))
    owners = [c for c in commands if c[1] == b"migrator:shop:shard:emp"]
    assert owners == [
        (b"HSET", b"migrator:shop:shard:emp", b"1:1", b"east", b"1:2", b"east", b"1:3", b"east")
    ]
    assert plan.pack(rows(plan))[0].count(b"migrator:shop:shard:emp") == 1  # the packed path too
    assert owner_field((b"12",)) == encode_row((b"12",)) == b"2:12"
    assert pk_of(b"2:12") == (b"12",)


def test_an_unsharded_table_keeps_no_owner_hash():
    plan = _plan("")
    assert owners_of(plan) is None
    commands, _ = plan.plan(rows(plan))
    assert not [c for c in commands if c[1].startswith(b"migrator:")]


def test_sync_keeps_it_through_h_entries_and_no_table_claims_its_key():
    plan = _plan("west")
    owners = owners_of(plan)
    assert owners is not None
    collect = collector(plan, owners)
    assert collect is not None
    out: dict = {}
    collect(rows(plan)[1], out)
    assert out == {("h", b"migrator:shop:shard:emp"): {b"1:2": b"west"}}
    assert owners.entries(rows(plan)[1]) == [("h", b"migrator:shop:shard:emp", b"1:2", b"west")]
    space = KeySpace([plan])
    assert space.owner(b"migrator:shop:shard:emp") is None


def test_a_claimed_row_found_past_its_moment_leaves_no_owner_field():
    """A shard's rows are claimed before they are planned (store/claims.py): one past its
    moment when planned (a load's batch, a change sync applies) is written by no shard, and
    its owner field goes (docs/sharding.md#expiry-over-shards)."""
    mapping = "version: 1\ntables:\n  emp: {unique: [email], expire: {column: hired}}\n"
    (resolved,) = resolve(parse_mapping(mapping, name="shop"), _schema(), ["emp"], shard="east")
    plan = TablePlan(resolved)
    commands, _ = plan.plan(rows(plan))  # row 1 hired in 2020: past; rows 2 and 3 never
    key = b"migrator:shop:shard:emp"
    assert [c for c in commands if c[1] == key] == [
        (b"HDEL", key, b"1:1"), (b"HSET", key, b"1:2", b"east", b"1:3", b"east"),
    ]  # fmt: skip
    delta = table_delta(plan).change(None, rows(plan)[0])  # an INSERT sync applies
    assert (b"HDEL", key, b"1:1") in delta.commands
