"""The keys a mapping owns (plan/keyspace.py), pure: which table and pattern each key is, the
key spaces of join tables and composite keys, ignore globs, SCAN globs, and the fast tally."""

from __future__ import annotations

from collections import Counter

from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.plan.keyspace import KeySpace, glob_regex
from migrator.plan.planner import TablePlan
from tests.test_planner import _schema

MAPPING = """version: 1
options:
  ignore: ["emp:session:*", "tag:tmp?"]
tables:
  emp:
    unique: [email]
    indexes: [mgr_id]
    sorted:
      - key: "emp:by:salary"
        score: salary
  tag:
    as: none
    sets:
      - key: "tag:tagname:{tagname}"
        member: "{book_id}"
      - key: "twice:{tagname}:{tagname}"
        member: "{book_id}"
"""


def _space() -> KeySpace:
    m = parse_mapping(MAPPING)
    return KeySpace([TablePlan(r) for r in resolve(m, _schema())], m.options.ignore)


def _owner(space: KeySpace, key: bytes) -> tuple[str, str | None] | None:
    got = space.owner(key)
    return None if got is None else (got[0], got[1].what if got[1] is not None else None)


def test_each_key_belongs_to_the_most_specific_pattern_or_to_a_key_space() -> None:
    space = _space()
    assert _owner(space, b"emp:1") == ("emp", "hash")
    assert _owner(space, b"emp:indices:mgr_id:8") == ("emp", "index")
    assert _owner(space, b"emp:uniques:email") == ("emp", "unique")
    assert _owner(space, b"emp:id") == ("emp", "counter")
    assert _owner(space, b"emp:by:salary") == ("emp", "sorted")
    assert _owner(space, b"tag:tagname:ruby") == ("tag", "set")
    assert _owner(space, b"tag:x") == ("tag", None)  # under the join table's space, no pattern
    assert _owner(space, b"twice:a:a") == ("tag", "set")
    assert _owner(space, b"twice:a:b") == ("tag", None)  # a placeholder used twice must agree
    assert _owner(space, b"emp:session:9") is None  # ignored
    assert _owner(space, b"tag:tmp1") is None and _owner(space, b"tag:tmp12") == ("tag", None)
    assert _owner(space, b"migrator:emp:checkpoint") is None
    assert _owner(space, b"employees:1") is None and _owner(space, b"other") is None


def test_globs_cover_the_key_spaces_once() -> None:
    space = _space()
    assert space.globs() == ["emp:*", "tag:*", "twice:*"]
    assert space.globs(["tag"]) == ["tag:*", "twice:*"]
    assert glob_regex("a[bc]?\\*").fullmatch(b"ac1*") and not glob_regex("a[^b]").fullmatch(b"ab")


def test_tally_counts_row_keys_and_lists_the_others() -> None:
    space = _space()
    keys = [b"emp:%d" % i for i in range(1000)] + [
        b"emp:indices:mgr_id:8", b"emp:session:1", b"migrator:x", b"tag:y", b"twice:a:b",
        b"tag:tagname:web", b"unrelated",
    ]  # fmt: skip
    counts, others = space.tally(keys, ["emp", "tag"])
    assert counts == Counter({"emp": 1000})
    shown = sorted((k, t, p.what if p else None) for k, t, p in others)
    assert shown == [
        (b"emp:indices:mgr_id:8", "emp", "index"),
        (b"tag:tagname:web", "tag", "set"),
        (b"tag:y", "tag", None),
        (b"twice:a:b", "tag", None),
    ]
    counts, others = space.tally(keys, ["tag"])
    assert not counts and len(others) == 3


TRICKY = [
    b"emp:1", b"emp:", b"emp:1:2", b"emp:id", b"emp:idx", b"emp:indices:mgr_id:8",
    b"emp:indices:x", b"emp:uniques:email", b"emp:uniques:other", b"emp:by:salary",
    b"emp:by:salary:2", b"emp:session:1", b"migrator:emp:1", b"tag:tagname:a", b"tag:x",
    b"twice:a:a", b"twice:a:b", b"x@y:login:id", b"emp:9:login:id", b"other",
]  # fmt: skip


def _reference(space: KeySpace, keys: list[bytes], tables: list[str]) -> tuple[Counter[str], set]:
    """What tally must say, key by key through ``owner``."""
    counts: Counter[str] = Counter()
    others = set()
    for key in keys:
        got = space.owner(key)
        if got is None or got[0] not in tables:
            continue
        if got[1] is not None and got[1].family == "row":
            counts[got[0]] += 1
        else:
            others.add((key, got[0], got[1]))
    return counts, others


def test_tally_agrees_with_owner_key_by_key() -> None:
    """The prefix test for ``literal{pk}`` rows gives what the regex gives, whether or not a
    more specific pattern with an empty head (a unique string ``{email}:login:id``) rules it
    out."""
    rival = MAPPING.replace(
        "    unique: [email]\n",
        "    unique: [email, {columns: [email], key: '{email}:login:id'}]\n",
    )
    for text in (MAPPING, rival):
        m = parse_mapping(text)
        space = KeySpace([TablePlan(r) for r in resolve(m, _schema())], m.options.ignore)
        for tables in (["emp", "tag"], ["emp"], ["tag"]):
            counts, others = space.tally(TRICKY, tables)
            want_counts, want_others = _reference(space, TRICKY, tables)
            assert counts == want_counts, (tables, counts, want_counts)
            assert set(others) == want_others, (tables, set(others) ^ want_others)
        assert bool(space._prefixed_rows) == (text == MAPPING)
