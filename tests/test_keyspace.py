"""The keys a mapping owns (plan/keyspace.py), pure: which table and pattern each key is, the
key spaces of join tables and composite keys, ignore globs, SCAN globs, and the fast tally."""

from __future__ import annotations

import random
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


def _spaces() -> dict[str, KeySpace]:
    """The test mapping without ignore globs, and the same with a rival pattern whose head is
    empty (then no prefix test applies), and with ignore globs."""
    plain = MAPPING.replace('options:\n  ignore: ["emp:session:*", "tag:tmp?"]\n', "")
    rival = plain.replace(
        "    unique: [email]\n",
        "    unique: [email, {columns: [email], key: '{email}:login:id'}]\n",
    )
    out = {}
    for name, text in (("plain", plain), ("rival", rival), ("ignore", MAPPING)):
        m = parse_mapping(text)
        out[name] = KeySpace([TablePlan(r) for r in resolve(m, _schema())], m.options.ignore)
    return out


def test_a_page_of_row_keys_is_tallied_at_once_as_owner_says() -> None:
    """A page whose keys all start with a row literal is counted with bytes.count on the
    joined page; only keys of more specific patterns are picked out for the regex."""
    space = _spaces()["plain"]
    page = [b"emp:%d" % i for i in range(500)] + [
        b"emp:indices:mgr_id:8", b"emp:uniques:email", b"emp:id", b"emp:idx", b"emp:",
        b"emp:by:salary", b"emp:by:salary:2", b"emp:1:2", b"emp:indices:x",
    ]  # fmt: skip
    for tables in (["emp", "tag"], ["emp"], ["tag"]):
        split = space._paged.split(page, set(tables))
        assert split is not None
        counts, others = space.tally(page, tables)
        want_counts, want_others = _reference(space, page, tables)
        assert counts == want_counts and set(others) == want_others, tables
    counts, others = space.tally(page, ["emp"])
    # emp:idx, emp:, emp:by:salary:2, emp:1:2 and emp:indices:x fit emp:{emp_id}
    assert counts == Counter({"emp": 500 + 5})
    assert sorted(k for k, _, _ in others) == sorted([*page[500:503], b"emp:by:salary"])


def test_pages_the_joined_count_cannot_take_go_key_by_key() -> None:
    spaces = _spaces()
    rows = [b"emp:%d" % i for i in range(10)]
    for extra in ([b"tag:x"], [b"emp:a\nb"], [b"migrator:emp:checkpoint"]):
        assert spaces["plain"]._paged.split(rows + extra, {"emp", "tag"}) is None
    assert spaces["rival"]._paged.split(rows, {"emp"}) is None  # no prefix test at all
    # ignore globs: a page with no key starting with their heads is taken at once
    assert spaces["ignore"]._paged.split(rows, {"emp"}) is not None
    assert spaces["ignore"]._paged.split([*rows, b"emp:session:1"], {"emp"}) is None
    counts, others = spaces["ignore"].tally([*rows, b"emp:session:1"], ["emp"])
    assert counts == Counter({"emp": 10}) and not others


def test_tally_agrees_with_owner_on_random_pages() -> None:
    """Keys made of the mapping's own fragments, so that prefixes, heads and separators
    collide in every way; each page is tallied both ways."""
    fragments = [b"emp:", b"emp:i", b"emp:id", b"emp:indices:", b"mgr_id:", b"uniques:",
                 b"email", b"by:salary", b"tag:", b"tagname:", b"twice:", b"1", b"x", b":",
                 b"session:", b"login:id", b"@"]  # fmt: skip
    rng = random.Random(11)
    for name, space in _spaces().items():
        taken = 0
        for _ in range(300):
            head = rng.choice([b"emp:", b"emp:", b"tag:", b""])
            page = [head + b"".join(rng.choices(fragments, k=rng.randint(0, 4)))
                    for _ in range(rng.randint(1, 30))]  # fmt: skip
            if rng.random() < 0.5:
                page += [b"emp:%d" % rng.randint(0, 99) for _ in range(20)]
            for tables in (["emp", "tag"], ["emp"], ["tag"]):
                taken += space._paged.split(page, set(tables)) is not None
                counts, others = space.tally(page, tables)
                want_counts, want_others = _reference(space, page, tables)
                assert counts == want_counts, (name, page, tables)
                assert set(others) == want_others, (name, page, tables)
        assert taken > 0 or name == "rival", name  # the joined count was tried
