"""Search indexes from the mapping (issue 29 item 3; plan/search.py, store/search_index.py,
verify/search.py), on a server with the query engine (tests/modules_server.py) and both
engines: migrate creates the index, FT.SEARCH by a TAG and a NUMERIC range returns what the
same MySQL query returns, a changed mapping swaps the alias without a gap, verify finds a
missing index and wrong counts, a target without search is refused at start."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.commands.search.query import Query

from migrator.commands import dry_run, migrate, sync, validate, verify
from migrator.errors import MappingError, MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.plan.search import definition
from migrator.source.mysql import Source
from migrator.store import search_index
from migrator.store.search_index import current, has_search, state_key, versions
from tests.faults import wait_for

REPO = Path(__file__).resolve().parent.parent

SCHEMA = """
CREATE TABLE book (
  id INT PRIMARY KEY,
  name VARCHAR(128) NOT NULL,
  author VARCHAR(64) COLLATE utf8mb4_bin NOT NULL,
  lang VARCHAR(16) COLLATE utf8mb4_general_ci,
  year INT,
  isbn VARCHAR(20),
  published DATE,
  UNIQUE KEY (isbn), KEY (author), FULLTEXT KEY (name)
) DEFAULT CHARSET=utf8mb4
"""

MAPPING = """
version: 1
tables:
  book:
    unique: [isbn]
    indexes: [lang, year]
    formats: {published: epoch}
    sorted:
      - {key: "book:by:published", score: published}
    search: {name: books%s}
"""

LANGS = ["en", "EN", "de", "fr", "pt br", "a,b", "x-y", None]
AUTHORS = ["Ann", "ann", "Bob", "O'Brien", "Zoë"]
WORDS = ["ruby", "erlang", "web", "redis", "python", "data"]


def _mapping(extra: str = "") -> Any:
    return parse_mapping(MAPPING % extra, name="searchtest")


def _rows(seed: int, n: int, start: int = 1) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)
    out = []
    for i in range(start, start + n):
        out.append((
            i, " ".join(rnd.sample(WORDS, 2)), rnd.choice(AUTHORS), rnd.choice(LANGS),
            rnd.choice([None, *range(1980, 2021)]), f"isbn-{i}" if rnd.random() < 0.8 else None,
            rnd.choice([None, "1999-12-31", "2005-06-01", "2020-02-29"]),
        ))  # fmt: skip
    return out


def _insert(db: Any, rows: list[tuple[Any, ...]]) -> None:
    db.insert("INSERT INTO book VALUES (%s, %s, %s, %s, %s, %s, %s)", rows)


def _ids(db: Any, where: str, args: tuple[Any, ...] = ()) -> set[int]:
    return {int(r[0]) for r in db.query(f"SELECT id FROM book WHERE {where}", args)}


def _found(client: redis.Redis, query: str) -> set[int]:
    result = client.ft("books").search(Query(query).no_content().paging(0, 10_000))
    return {int(str(d.id).split(":")[1]) for d in result.docs}


def _escape(value: str) -> str:
    return "".join(c if c.isalnum() else "\\" + c for c in value)


def _agrees(db: Any, client: redis.Redis) -> None:
    """FT.SEARCH by each TAG value, by NUMERIC ranges and both at once == MySQL's WHERE."""
    for lang in {x for x in LANGS if x}:
        assert _found(client, f"@lang:{{{_escape(lang)}}}") == _ids(db, "lang = %s", (lang,))
    for author in AUTHORS:  # utf8mb4_bin: case-sensitive on both sides
        got = _found(client, f"@author:{{{_escape(author)}}}")
        assert got == _ids(db, "author = %s", (author,)), author
    for lo, hi in ((1980, 1990), (1995, 2005), (2020, 2020)):
        assert _found(client, f"@year:[{lo} {hi}]") == _ids(db, "year BETWEEN %s AND %s", (lo, hi))
    both = _found(client, "@author:{Ann} @year:[1990 2010]")
    assert both == _ids(db, "author = 'Ann' AND year BETWEEN 1990 AND 2010")
    assert _found(client, "@name:ruby") == _ids(db, "name LIKE '%%ruby%%'")
    assert _found(client, "*") == _ids(db, "1")


@pytest.fixture
def loaded(mysql_db, modules_redis_url: str) -> tuple[Any, str]:  # type: ignore[no-untyped-def]
    mysql_db.run(SCHEMA)
    _insert(mysql_db, _rows(1, 300))
    report = migrate(_mapping(), source=mysql_db.url, target=modules_redis_url)
    assert report.exit_code == 0
    return mysql_db, modules_redis_url


def test_the_definition_follows_mapping_and_mysql(mysql_db) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run(SCHEMA)
    with Source(mysql_db.url) as src:
        (r,) = resolve(_mapping(), src.schema())
    index = definition(r)
    assert index is not None
    kinds = {a.column: (a.type, a.case_sensitive) for a in index.attributes}
    assert kinds["name"][0] == "TEXT"  # FULLTEXT
    assert kinds["author"] == ("TAG", True)  # a MySQL index, utf8mb4_bin
    assert kinds["lang"] == ("TAG", False)  # the mapping's index, _ci
    assert kinds["isbn"][0] == "TAG"  # unique
    assert kinds["year"][0] == kinds["published"][0] == "NUMERIC"  # index; score (epoch)
    assert index.prefix == "book:" and index.exclude == ("book:uniques:",)
    assert index.version == f"books:{index.digest}"
    changed = definition(resolve(_mapping(", text: [author]"), src_schema(mysql_db))[0])
    assert changed is not None and changed.digest != index.digest


def src_schema(db: Any) -> Any:
    with Source(db.url) as src:
        return src.schema()


def test_a_date_without_a_numeric_format_is_refused(mysql_db) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run(SCHEMA)
    m = parse_mapping("version: 1\ntables:\n  book:\n    search: {name: b, numeric: [published]}\n")
    with pytest.raises(MappingError, match=re.escape("formats: {published: epoch}")):
        definition(resolve(m, src_schema(mysql_db))[0])
    cols = parse_mapping("version: 1\ntables:\n  book:\n    as: columns\n    search: {name: b}\n")
    with pytest.raises(MappingError, match="as: hash"):
        definition(resolve(cols, src_schema(mysql_db))[0])


def test_migrate_creates_the_index_and_ft_search_agrees_with_mysql(loaded) -> None:  # type: ignore[no-untyped-def]
    db, url = loaded
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        index = current(client, "books")
        assert index is not None and index.startswith("books:")
        stored = client.hgetall(state_key("searchtest", "book"))
        assert stored["index"] == index and stored["alias"] == "books"
        assert "FT.CREATE" in stored["definition"]
        _agrees(db, client)
    finally:
        client.close()


def test_dry_run_prints_the_ft_create(mysql_db) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run(SCHEMA)
    _insert(mysql_db, _rows(2, 5))
    report = dry_run(_mapping(), source=mysql_db.url, sample=0)
    (table,) = report.tables
    assert table.search is not None
    assert table.search.startswith("FT.CREATE books:")
    assert "ON HASH PREFIX 1 book: FILTER" in table.search
    assert "year NUMERIC SORTABLE" in table.search and "name TEXT" in table.search
    assert table.as_dict()["search"] == table.search


def test_a_changed_mapping_swaps_the_alias_without_a_gap(loaded) -> None:  # type: ignore[no-untyped-def]
    db, url = loaded
    client = redis.Redis.from_url(url, decode_responses=True)
    before = current(client, "books")
    rows = len(_ids(db, "1"))
    errors: list[BaseException] = []
    totals: list[int] = []
    stop = threading.Event()

    def read() -> None:
        reader = redis.Redis.from_url(url, decode_responses=True)
        try:
            while not stop.is_set():
                try:
                    totals.append(reader.ft("books").search(Query("*").paging(0, 0)).total)
                except redis.RedisError as e:
                    errors.append(e)
        finally:
            reader.close()

    thread = threading.Thread(target=read)
    thread.start()
    try:
        report = migrate(_mapping(", text: [author]"), source=db.url, target=url)
    finally:
        stop.set()
        thread.join(30)
    try:
        assert report.exit_code == 0
        after = current(client, "books")
        assert after is not None and after != before
        assert not errors, errors[:3]
        assert len(totals) > 10 and set(totals) == {rows}
        assert list(client.execute_command("FT._LIST")) == [after]  # the old one dropped
        assert client.hget(state_key("searchtest", "book"), "index") == after
        # the new definition is the one queried: author is TEXT now
        assert _found(client, "@author:ann") == _ids(db, "LOWER(author) = 'ann'")  # TEXT: any case
        again = migrate(_mapping(", text: [author]"), source=db.url, target=url)
        assert again.exit_code == 0 and current(client, "books") == after  # unchanged: kept
    finally:
        client.close()


def test_verify_compares_the_index_with_mysql(loaded) -> None:  # type: ignore[no-untyped-def]
    db, url = loaded
    assert verify(_mapping(), source=db.url, target=url).exit_code == 0
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        client.execute_command("FT.DROPINDEX", current(client, "books"))
        missing = verify(_mapping(), source=db.url, target=url)
        assert missing.exit_code == 1
        assert missing.tables[0].counts["search index missing"] == 1
        fixed = verify(_mapping(), source=db.url, target=url, fix=True)
        assert fixed.exit_code == 0, fixed.as_dict()
        (victim,) = _ids(db, "lang = 'de' ORDER BY id LIMIT 1") or {0}
        client.hset(f"book:{victim}", "lang", "zz")
        wrong = verify(_mapping(), source=db.url, target=url)
        assert wrong.exit_code == 1
        assert wrong.tables[0].counts["search index tag count"] >= 1
        client.delete(f"book:{victim}")
        fewer = verify(_mapping(), source=db.url, target=url)
        assert fewer.tables[0].counts["search index documents"] == 1
    finally:
        client.close()


def test_a_target_without_search_is_refused_at_start(
    mysql_db, redis_url: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run(SCHEMA)
    _insert(mysql_db, _rows(3, 5))
    client = redis.Redis.from_url(redis_url)
    if has_search(client):
        client.close()
        pytest.skip("this target has search (Redis 8): the refusal needs one without")
    try:
        for command in (migrate, verify, sync):
            with pytest.raises(MigratorError) as e:
                command(_mapping(), source=mysql_db.url, target=redis_url)  # type: ignore[operator]
            assert e.value.exit_code == 2
            assert "no search" in e.value.message and "RediSearch" in str(e.value.hint)
            assert "redis.io" in str(e.value.hint) and "Debian's own" in str(e.value.hint)
        mapping = tmp_path / "m.yaml"
        mapping.write_text(MAPPING % "")
        for command in ("migrate", "verify", "sync"):
            done = subprocess.run(
                [sys.executable, "-m", "migrator", command, str(mapping),
                 "--source", mysql_db.url, "--target", redis_url],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 2, (command, done.stderr)
            assert "no search" in done.stderr and "--loadmodule" in done.stderr, done.stderr
        assert client.dbsize() == 0  # nothing written
    finally:
        client.close()


def test_a_target_database_other_than_0_is_refused_before_anything_is_written(
    mysql_db, modules_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The query engine indexes database 0 only: migrate once wrote every key, then failed
    with exit 1 and FT.CREATE's raw "Cannot create index on db != 0"."""
    mysql_db.run(SCHEMA)
    _insert(mysql_db, _rows(4, 5))
    db7 = modules_server.url.rsplit("/", 1)[0] + "/7"
    client = redis.Redis.from_url(db7)
    client.flushdb()
    monkeypatch.delenv("MIGRATOR_TARGET_URL", raising=False)
    try:
        for command in (migrate, verify, sync):
            with pytest.raises(MigratorError) as e:
                command(_mapping(), source=mysql_db.url, target=db7)  # type: ignore[operator]
            assert e.value.exit_code == 2, command
            assert "database 7: the query engine indexes database 0 only" in e.value.message
            assert "/0" in str(e.value.hint)
        assert client.dbsize() == 0  # nothing written
        with pytest.raises(MigratorError, match="database 7") as e:
            dry_run(_mapping(), source=mysql_db.url, target=db7, sample=0)
        assert e.value.exit_code == 2
        path = tmp_path / "m.yaml"
        path.write_text(f"target: {db7}\n" + MAPPING % "")
        problems = validate(path, source=mysql_db.url).problems
        assert [(p.level, p.path, p.line) for p in problems] == [("error", "target", 1)]
        assert validate(path, environ={"MIGRATOR_TARGET_URL": modules_server.url}).problems == []
        monkeypatch.setenv("MIGRATOR_TARGET_URL", "unix:///tmp/redis.sock?db=2")
        path.write_text(MAPPING % "")
        assert [p.path for p in validate(path).problems] == ["target"]
    finally:
        client.close()


def _docs_example() -> str:
    text = (REPO / "docs" / "mapping.md").read_text(encoding="utf-8")
    section = text.split("### `search`", 1)[1]
    return section.split("```yaml\n", 1)[1].split("```", 1)[0]


def test_the_documented_book_and_tag_example(mysql_db, modules_redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """docs/mapping.md's example on samples/book_tag.sql, and the answers it shows."""
    mysql_db.run((REPO / "samples" / "book_tag.sql").read_text(encoding="utf-8"))
    m = parse_mapping(_docs_example(), name="booktag")
    shown = dry_run(m, source=mysql_db.url, sample=0)
    creates = {t.table: t.search or "" for t in shown.tables}
    assert creates["book"].endswith("ON HASH PREFIX 1 book: SCHEMA name TEXT author TEXT")
    assert creates["tag"].endswith(
        'ON HASH PREFIX 1 tag: SCHEMA book_id NUMERIC SORTABLE tagname TAG SEPARATOR "\\x1f"'
    )
    assert migrate(m, source=mysql_db.url, target=modules_redis_url).exit_code == 0
    r = redis.Redis.from_url(modules_redis_url, decode_responses=True)
    try:
        ruby = r.ft("tags").search(Query("@tagname:{ruby}").return_field("book_id"))
        assert sorted(d.book_id for d in ruby.docs) == ["1", "2"]
        assert [
            d.id for d in r.ft("tags").search(Query("@tagname:{ruby} @book_id:[2 2]")).docs
        ] == ["tag:ruby:2"]
        assert [d.id for d in r.ft("books").search(Query("@name:erlang")).docs] == ["book:3"]
    finally:
        r.close()
    assert verify(m, source=mysql_db.url, target=modules_redis_url).exit_code == 0


def test_the_search_key_is_checked_when_loaded() -> None:
    with pytest.raises(MappingError, match="did you mean 'name'"):
        parse_mapping("version: 1\ntables:\n  book:\n    search: {nam: books}\n")
    with pytest.raises(MappingError, match="index_sets"):
        parse_mapping("version: 1\ntables:\n  book:\n    search: {name: b, index_sets: 1}\n")
    m = parse_mapping("version: 1\ntables:\n  book:\n    search: {name: b, tag: [x, y]}\n")
    assert m.table("book").search is not None and m.table("book").search.tag == ("x", "y")


def test_validate_reports_a_search_it_cannot_build(mysql_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run(SCHEMA)
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\ntables:\n  book:\n    as: columns\n    search: {name: b}\n")
    report = validate(path, source=mysql_db.url)
    assert [p.path for p in report.problems] == ["tables.book.search"], report.problems
    path.write_text(MAPPING % "")
    assert validate(path, source=mysql_db.url).problems == []


def test_a_bad_search_stops_migrate_with_its_file_and_line(
    mysql_db, modules_redis_url: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run(SCHEMA)
    path = tmp_path / "bad.yaml"
    path.write_text("version: 1\ntables:\n  book:\n    search: {name: b, numeric: [published]}\n")
    with pytest.raises(MappingError) as e:
        migrate(path, source=mysql_db.url, target=modules_redis_url)
    assert e.value.exit_code == 2 and e.value.line == 4 and str(e.value.file).endswith("bad.yaml")
    assert redis.Redis.from_url(modules_redis_url).dbsize() == 0


def test_only_index_sets_false_changes_what_sync_and_resume_are_bound_to() -> None:
    """A search index changes no key, so sync's per-table fingerprints stay (no re-snapshot
    of a table when its 'search:' is added or edited); 'index_sets: false' changes keys."""
    from migrator.sync.identity import table_fingerprints

    def prints(body: str) -> dict[str, str]:
        return table_fingerprints(parse_mapping(f"version: 1\ntables:\n  book: {body}\n"))

    plain = prints("{}")
    assert prints("{search: {name: b}}") == plain
    assert prints("{search: {name: c, tag: [lang]}}") == plain
    assert prints("{search: {name: b, index_sets: false}}") != plain


def test_an_index_of_the_applications_own_is_never_dropped(
    mysql_db, modules_redis_url: str
) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run(SCHEMA)
    _insert(mysql_db, _rows(4, 20))
    client = redis.Redis.from_url(modules_redis_url, decode_responses=True)
    try:
        client.execute_command("FT.CREATE", "books", "ON", "HASH", "SCHEMA", "x", "TAG")
        with pytest.raises(MigratorError, match="of its own") as e:
            migrate(_mapping(), source=mysql_db.url, target=modules_redis_url)
        assert e.value.exit_code == 2 and client.dbsize() == 0  # refused before writing
        client.execute_command("FT.CREATE", "mine", "ON", "HASH", "SCHEMA", "x", "TAG")
        client.execute_command("FT.DROPINDEX", "books")
        client.execute_command("FT.ALIASADD", "books", "mine")
        assert migrate(_mapping(), source=mysql_db.url, target=modules_redis_url).exit_code == 0
        assert current(client, "books") != "mine"
        assert "mine" in client.execute_command("FT._LIST")  # moved away from, not dropped
    finally:
        client.close()


def test_without_index_sets_a_cascade_into_the_table_keeps_a_set_per_value() -> None:
    """docs/mapping.md, search's limits: sync finds a cascade's children through the SET
    index; 'index_sets: false' leaves it out, so the table keeps a SET per value of the
    foreign key instead (plan/row_images.py; tests/test_cascade_plan.py's schema)."""
    from migrator.plan.cascade import followable
    from migrator.plan.planner import TablePlan
    from migrator.plan.row_images import images_of
    from tests.test_cascade_plan import MAPPING as CASCADE
    from tests.test_cascade_plan import _schema

    text = CASCADE + "    search: {name: children, index_sets: false, numeric: [e]}\n"
    plans = {r.name: TablePlan(r) for r in resolve(parse_mapping(text), _schema())}
    rules, refused = followable(plans)
    assert refused == [] and [r.key.name for r in rules] == ["fk_c"]
    images = images_of(plans["child"])
    assert images is not None and not images.whole and rules[0].by == images.by[0][0]
    kept = {r.name: TablePlan(r) for r in resolve(parse_mapping(CASCADE), _schema())}
    assert followable(kept)[1] == [] and images_of(kept["child"]) is None


def test_documents_get_an_index_on_json(mysql_db, modules_redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """'as: json' (RedisJSON documents): ON JSON, each attribute '$.field AS field'; the same
    FT.SEARCH answers as MySQL's queries, and verify 0."""
    mysql_db.run(SCHEMA)
    _insert(mysql_db, _rows(6, 200))
    m = parse_mapping(MAPPING.replace("  book:\n", "  book:\n    as: json\n") % "", name="docs")
    (shown,) = dry_run(m, source=mysql_db.url, sample=0).tables
    assert shown.search is not None and "ON JSON PREFIX 1 book: SCHEMA" in shown.search
    assert "$.year AS year NUMERIC SORTABLE" in shown.search and "FILTER" not in shown.search
    assert migrate(m, source=mysql_db.url, target=modules_redis_url).exit_code == 0
    client = redis.Redis.from_url(modules_redis_url, decode_responses=True)
    try:
        assert client.type("book:1") == "ReJSON-RL"
        _agrees(mysql_db, client)
    finally:
        client.close()
    assert verify(m, source=mysql_db.url, target=modules_redis_url).exit_code == 0


def test_an_index_build_killed_at_each_step_is_ended_by_the_next_run(
    mysql_db, modules_redis_url: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """A changed mapping's migrate killed (-9) while its new index version builds: the alias
    still answers from the old one; the next run builds on, swaps, and drops the old. A run
    killed after the swap but before the old version was dropped (the state is made here,
    the window being a single command): the next run drops it. Never two versions left."""
    mysql_db.run(SCHEMA)
    _insert(mysql_db, _rows(6, 40_000))
    client = redis.Redis.from_url(modules_redis_url, decode_responses=True)
    try:
        assert migrate(_mapping(), source=mysql_db.url, target=modules_redis_url).exit_code == 0
        old = current(client, "books")
        path = tmp_path / "searchtest.yaml"
        path.write_text(MAPPING % ", text: [author]")
        proc = subprocess.Popen(
            [sys.executable, "-m", "migrator", "migrate", str(path), "--source", mysql_db.url,
             "--target", modules_redis_url],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for("the new version", lambda: len(versions(client, "books")) == 2 or proc.poll(),
                     120, every=0.001)  # fmt: skip
        finally:
            proc.kill()
            proc.communicate(timeout=30)
        new = next(v for v in versions(client, "books") if v != old)
        assert current(client, "books") == old  # killed while building: the old one answers
        assert client.ft("books").search(Query("*").paging(0, 0)).total == 40_000
        assert migrate(_mapping(", text: [author]"), source=mysql_db.url,
                       target=modules_redis_url).exit_code == 0  # fmt: skip
        assert current(client, "books") == new and versions(client, "books") == [new]
        # killed right after FT.ALIASUPDATE: the new version aliased, the old one still there
        with Source(mysql_db.url) as src:
            first = definition(resolve(_mapping(), src.schema())[0])
        assert first is not None and first.version == old
        client.execute_command("FT.CREATE", old, *first.args())
        assert sorted(versions(client, "books")) == sorted([old, new])
        assert migrate(_mapping(", text: [author]"), source=mysql_db.url,
                       target=modules_redis_url).exit_code == 0  # fmt: skip
        assert list(client.execute_command("FT._LIST")) == [new]
        assert client.hget(state_key("searchtest", "book"), "index") == new
        for query, where in (
            ("@lang:{de}", "lang = 'de'"),
            ("@author:ann", "LOWER(author) = 'ann'"),
            ("@year:[1990 2000]", "year BETWEEN 1990 AND 2000"),
        ):
            total = client.ft("books").search(Query(query).paging(0, 0)).total
            assert total == len(_ids(mysql_db, where)), query
    finally:
        client.close()


@pytest.mark.parametrize(
    "url, number",
    [("redis://h:6379", 0), ("redis://h:6379/", 0), ("redis://h/3", 3), ("rediss://:p@h/12", 12),
     ("unix:///tmp/r.sock?db=4", 4), ("redis://h?db=5", 5), ("redis://h/x", 0)],
)  # fmt: skip
def test_the_database_a_url_names(url: str, number: int) -> None:
    from migrator.plan.search import database_of, wrong_database

    assert database_of(url) == number
    assert (wrong_database(number, ["t"]) is None) == (number == 0)


TAG_VALUES = ["price 10 €", "Renée 😀", "😀", "a b", "a,b", "x-y", "pt br", "日本 語", "€5",
              "a\\b", "q?", "1.5", "{x}", "o'k", "¿qué?", "tab\tx", "ä ß"]  # fmt: skip


def test_the_tag_query_matches_every_value_as_stored(modules_redis_url: str) -> None:
    """verify counts the documents of each TAG value with tag_query; an escaped symbol after
    a space ('price 10 €') matched nothing, so a clean migrate failed verify."""
    from migrator.store.search_index import counts, tag_query

    client = redis.Redis.from_url(modules_redis_url)
    try:
        client.execute_command(
            "FT.CREATE", "tagq", "ON", "HASH", "PREFIX", "1", "tq:", "SCHEMA",
            "v", "TAG", "SEPARATOR", "\x1f", "CASESENSITIVE",
        )  # fmt: skip
        for i, value in enumerate(TAG_VALUES * 2):
            client.hset(f"tq:{i}", "v", value)
        search_index.wait_indexed(client, "tagq")
        found = counts(client, "tagq", [tag_query("v", v) for v in TAG_VALUES])
        assert dict(zip(TAG_VALUES, found, strict=True)) == dict.fromkeys(TAG_VALUES, 2)
    finally:
        client.close()


def test_an_expired_zero_date_is_not_counted_in_the_index(mysql_db, modules_redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """A row whose expiry DATE is 0000-00-00 is expired (migrate writes no key of it); the
    count verify compares the index with once took it for live (a NOT NULL date column IS
    NULL at a zero date), so a clean migrate failed verify."""
    mysql_db.run(
        "SET SESSION sql_mode = '';"
        "CREATE TABLE pass (id INT PRIMARY KEY, holder VARCHAR(20), until DATE NOT NULL,"
        " KEY (holder));"
        "INSERT INTO pass VALUES (1, 'ann', '2999-01-01'), (2, 'bob', '0000-00-00'),"
        " (3, 'ann', '2000-01-01'), (4, 'cy', '2999-12-31');"
    )
    m = parse_mapping(
        "version: 1\ntables:\n  pass:\n    indexes: [holder]\n    expire: {column: until}\n"
        "    search: {name: passes}\n",
        name="zerodate",
    )
    assert migrate(m, source=mysql_db.url, target=modules_redis_url).exit_code == 0
    client = redis.Redis.from_url(modules_redis_url)
    try:
        assert client.exists("pass:1", "pass:2", "pass:3", "pass:4") == 2  # 1 and 4 live
    finally:
        client.close()
    assert verify(m, source=mysql_db.url, target=modules_redis_url).exit_code == 0
