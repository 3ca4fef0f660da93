"""Search indexes over children nested in their parent's document (issue 29 items 3 and 5;
plan/search.py's paths, source/nesting.py's counts, verify/search.py), on a server with the
query engine (tests/modules_server.py) and both engines: the JSON paths the definition makes
from ``tags.tagname``, what validate refuses, FT.SEARCH by nested TAG values and NUMERIC
ranges (two levels, a map, an object) agreeing with MySQL's joins, verify 0 and finding a
wrong count, the alias moved to a new version when a path is added, and docs/mapping.md's
book-and-tag example run as written with a stock client."""

from __future__ import annotations

import ast
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.commands.search.query import Query

from migrator.commands import dry_run, migrate, validate, verify
from migrator.errors import MappingError
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.plan.search import SearchIndex, definitions
from migrator.source.mysql import Source
from migrator.store.search_index import current
from tests.services import MySQLDatabase

REPO = Path(__file__).resolve().parent.parent

SCHEMA = """
CREATE TABLE book (
  id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, year INT, `labels_code` VARCHAR(8),
  `a.b` INT, added DATE
) CHARACTER SET utf8mb4;
CREATE TABLE label (
  id INT PRIMARY KEY, book_id INT NOT NULL,
  word VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci,
  code VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  stars INT, price DECIMAL(6,2), seen DATETIME,
  FOREIGN KEY (book_id) REFERENCES book (id)
) CHARACTER SET utf8mb4;
CREATE TABLE note (
  id INT PRIMARY KEY, label_id INT NOT NULL,
  body VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, remark VARCHAR(32),
  FOREIGN KEY (label_id) REFERENCES label (id)
) CHARACTER SET utf8mb4;
CREATE TABLE detail (
  book_id INT PRIMARY KEY, pages INT,
  FOREIGN KEY (book_id) REFERENCES book (id)
) CHARACTER SET utf8mb4;
"""

MAPPING = """
version: 1
tables:
  book:
    as: json
    counter: false
    columns: [name, year]
    where: "id <= 170"
    search:
      name: books
      tag: [labels.word, labels.code, labels.notes.body]
      numeric: [year, labels.stars, detail.pages%s]
      text: [labels.notes.remark]
  label:
    as: none
    counter: false
    columns: [word, code, stars]
    where: "stars IS NULL OR stars != 4"
    nest: {in: book, as: labels, by: [book_id], order: word}
  note:
    as: none
    counter: false
    columns: [body, remark]
    nest: {in: label, as: notes, by: [label_id], kind: map}
  detail:
    as: none
    counter: false
    columns: [pages]
    nest: {in: book, as: detail, kind: object}
"""

WORDS = ["ruby", "Ruby", "web", "WEB", "erlang", "a b", "x,y", None]
CODES = ["A", "a", "b-1", None]
BODIES = ["ok", "OK", "deep note", None]
REMARKS = ["fast red", "slow blue", "red", None]


def _mapping(extra: str = "") -> Any:
    return parse_mapping(MAPPING % extra, name="nestsearch")


def _load(db: MySQLDatabase, seed: int = 1, books: int = 180) -> None:
    db.run(SCHEMA)
    rnd = random.Random(seed)
    book: list[tuple[Any, ...]] = []
    label: list[tuple[Any, ...]] = []
    note: list[tuple[Any, ...]] = []
    detail: list[tuple[Any, ...]] = []
    for b in range(1, books + 1):
        book.append((b, f"book {b}", rnd.choice([None, *range(1990, 2021)])))
        for _ in range(rnd.randrange(5)):
            lid = len(label) + 1
            label.append((lid, b, rnd.choice(WORDS), rnd.choice(CODES),
                          rnd.choice([None, 1, 2, 3, 4, 5])))  # fmt: skip
            for _ in range(rnd.randrange(3)):
                note.append((len(note) + 1, lid, rnd.choice(BODIES), rnd.choice(REMARKS)))
        if rnd.random() < 0.5:
            detail.append((b, rnd.choice([None, 100, 250, 400, 800])))
    db.insert("INSERT INTO book (id, name, year) VALUES (%s, %s, %s)", book)
    db.insert("INSERT INTO label (id, book_id, word, code, stars) VALUES (%s, %s, %s, %s, %s)",
              label)  # fmt: skip
    db.insert("INSERT INTO note VALUES (%s, %s, %s, %s)", note)
    db.insert("INSERT INTO detail VALUES (%s, %s)", detail)


def _index(db: MySQLDatabase, text: str) -> SearchIndex:
    m = parse_mapping(text)
    with Source(db.url) as src:
        resolved = resolve(m, src.schema())
    (index,) = definitions(resolved, m)
    return index


# the books a query keeps, as MySQL says: the mapping's filters, and each level joined
KEPT = "book.id <= 170"
LABELS = "JOIN label ON label.book_id = book.id AND (label.stars IS NULL OR label.stars != 4)"


def _ids(db: MySQLDatabase, joins: str, where: str, args: tuple[Any, ...] = ()) -> set[int]:
    sql = f"SELECT DISTINCT book.id FROM book {joins} WHERE {KEPT} AND {where}"
    return {int(r[0]) for r in db.query(sql, args)}


def _found(client: redis.Redis, query: str) -> set[int]:
    result = client.ft("books").search(Query(query).no_content().paging(0, 10_000))
    return {int(str(d.id).split(":")[1]) for d in result.docs}


def _escape(value: str) -> str:
    return "".join(c if c.isalnum() else "\\" + c for c in value)


def test_a_path_into_the_nested_children_is_a_json_path_attribute(
    mysql_db: MySQLDatabase,
) -> None:
    mysql_db.run(SCHEMA)
    index = _index(mysql_db, MAPPING % "")
    args = " ".join(index.args())
    assert args.startswith("ON JSON PREFIX 1 book: SCHEMA ")
    attrs = {a.field: a for a in index.attributes}
    assert (attrs["labels_word"].path, attrs["labels_word"].type) == ("$.labels[*].word", "TAG")
    assert not attrs["labels_word"].case_sensitive  # the child column's _ci collation
    assert attrs["labels_code"].case_sensitive  # utf8mb4_bin
    assert attrs["labels_notes_body"].path == "$.labels[*].notes.*.body"  # a map, two levels
    assert [h.table.name for h in attrs["labels_notes_body"].via] == ["label", "note"]
    assert attrs["labels_notes_body"].via[1].by == ("label_id",)
    assert (attrs["labels_stars"].path, attrs["labels_stars"].type) == (
        "$.labels[*].stars", "NUMERIC",
    )  # fmt: skip
    assert attrs["detail_pages"].path == "$.detail.pages"  # an object
    remark = attrs["labels_notes_remark"]
    assert (remark.path, remark.type) == ("$.labels[*].notes.*.remark", "TEXT")
    assert "$.labels[*].word AS labels_word TAG SEPARATOR \x1f" in args
    assert "$.detail.pages AS detail_pages NUMERIC SORTABLE" in args
    # a changed path is a new definition: a new version under the alias
    more = _index(mysql_db, MAPPING.replace("columns: [name, year]", 'columns: [name, year, "a.b"]')
                  % ", a.b")  # fmt: skip
    assert more.digest != index.digest
    assert {a.field: a.path for a in more.attributes}["a.b"] == '$["a.b"]'  # its own column
    # temporal and DECIMAL child columns: NUMERIC with a numeric format of the child's
    formatted = MAPPING.replace("columns: [word, code, stars]",
                                "columns: [word, code, stars, price, seen]\n"
                                "    formats: {seen: epoch, price: number}")  # fmt: skip
    types = {a.field: a.type for a in _index(mysql_db, formatted % ", labels.seen").attributes}
    assert types["labels_seen"] == "NUMERIC"
    types = {a.field: a.type for a in _index(mysql_db, formatted % ", labels.price").attributes}
    assert types["labels_price"] == "NUMERIC"


BAD = [
    ("tag: [labels.wrod]", "hold no column 'wrod'", "did you mean 'word'?"),
    ("tag: [lables.word]", "no nested field 'lables' (nested fields: detail, labels)",
     "tags.tagname"),
    ("tag: [labels.notes.id]", "hold no column 'id' (it is not in its columns)",
     "add it to tables.note.columns"),
    ("tag: [labels.stars]", "is a number in the document", "numeric: [labels.stars]"),
    ("numeric: [labels.word]", "would be a NUMERIC attribute", "search: {tag: [labels.word]}"),
    ("tag: [labels.code, labels_code]", "are named labels_code", "fields:"),
    ("numeric: [labels.seen]", "(datetime) of table label would be a NUMERIC attribute",
     "tables.label.formats: {seen: epoch}"),
]  # fmt: skip


@pytest.mark.parametrize(("search", "why", "fix"), BAD)
def test_validate_and_migrate_refuse_a_bad_path(
    mysql_db: MySQLDatabase, modules_redis_url: str, tmp_path: Path, search: str, why: str,
    fix: str,
) -> None:  # fmt: skip
    mysql_db.run(SCHEMA)
    text = MAPPING.replace(
        "    search:\n      name: books\n      tag: [labels.word, labels.code, labels.notes.body]\n"
        "      numeric: [year, labels.stars, detail.pages%s]\n      text: [labels.notes.remark]\n",
        f"    search: {{name: books, {search}}}\n",
    ).replace("columns: [name, year]", "columns: [name, year, labels_code]")
    text = text.replace("columns: [word, code, stars]", "columns: [word, code, stars, seen]")
    path = tmp_path / "m.yaml"
    path.write_text(text)
    report = validate(path, source=mysql_db.url)
    (problem,) = [p for p in report.problems if p.level == "error"]
    assert why in problem.message and fix in (problem.hint or ""), problem
    assert (problem.path, problem.line) == ("tables.book.search", 9)
    with pytest.raises(MappingError, match=re.escape(why)) as e:
        migrate(path, source=mysql_db.url, target=modules_redis_url)
    assert e.value.exit_code == 2 and e.value.line == 9
    assert redis.Redis.from_url(modules_redis_url).dbsize() == 0  # refused before writing


@pytest.mark.parametrize("kind", ["hash", "json-string"])
def test_a_path_needs_redisjson_documents(mysql_db: MySQLDatabase, kind: str) -> None:
    mysql_db.run(SCHEMA)
    text = MAPPING.replace("  book:\n    as: json\n", f"  book:\n    as: {kind}\n") % ""
    text = text.replace("    nest:", "    #") if kind == "hash" else text  # no nest into a hash
    m = parse_mapping(text)
    with Source(mysql_db.url) as src:
        resolved = resolve(m, src.schema())
    with pytest.raises(MappingError) as e:
        definitions(resolved, m)
    assert e.value.exit_code == 2 and e.value.path == "tables.book.search"
    assert "as: json" in (e.value.hint or "")
    if kind == "hash":
        assert "a path into nested children needs documents" in e.value.detail


def test_ft_search_on_nested_children_agrees_with_mysql_and_verify(
    mysql_db: MySQLDatabase, modules_redis_url: str
) -> None:
    _load(mysql_db)
    db = mysql_db
    # the data has documents where two children share a value (counted once by verify)
    shared = db.query(
        "SELECT book_id FROM label WHERE word IS NOT NULL AND book_id <= 170 "
        "AND (stars IS NULL OR stars != 4) GROUP BY book_id, word HAVING COUNT(*) > 1 LIMIT 1"
    )
    assert shared, "the sample must hold a book with two labels of the same word"
    first = _mapping()
    assert migrate(first, source=db.url, target=modules_redis_url).exit_code == 0
    client = redis.Redis.from_url(modules_redis_url, decode_responses=True)
    try:
        for word in {w for w in WORDS if w}:  # _ci: ruby finds Ruby, as MySQL's = does
            got = _found(client, f"@labels_word:{{{_escape(word)}}}")
            assert got == _ids(db, LABELS, "label.word = %s", (word,)), word
        for code in {c for c in CODES if c}:  # utf8mb4_bin: A is not a
            got = _found(client, f"@labels_code:{{{_escape(code)}}}")
            assert got == _ids(db, LABELS, "label.code = %s", (code,)), code
        notes = LABELS + " JOIN note ON note.label_id = label.id"
        for body in {b for b in BODIES if b}:  # a map, two levels down
            got = _found(client, f"@labels_notes_body:{{{_escape(body)}}}")
            assert got == _ids(db, notes, "note.body = %s", (body,)), body
        for word in ("red", "blue"):  # TEXT: a word of the remark
            got = _found(client, f"@labels_notes_remark:{word}")
            assert got == _ids(db, notes, "note.remark LIKE %s", (f"%{word}%",)) and got, word
        for lo, hi in ((1, 2), (3, 5), (4, 4)):
            got = _found(client, f"@labels_stars:[{lo} {hi}]")
            assert got == _ids(db, LABELS, "label.stars BETWEEN %s AND %s", (lo, hi))
        pages = "JOIN detail ON detail.book_id = book.id"
        assert _found(client, "@detail_pages:[200 500]") == _ids(
            db, pages, "detail.pages BETWEEN 200 AND 500"
        )
        both = _found(client, "@labels_word:{ruby} @year:[2000 2010]")
        assert both == _ids(db, LABELS, "label.word = 'ruby' AND book.year BETWEEN 2000 AND 2010")
        assert _found(client, "*") == _ids(db, "", "1")  # books without children too
        assert verify(first, source=db.url, target=modules_redis_url).exit_code == 0
        # a wrong child in a document: verify's per-value count of the nested TAG finds it
        (victim,) = shared[0]
        client.json().set(f"book:{victim}", "$.labels[*].word", "zzz")
        wrong = verify(first, source=db.url, target=modules_redis_url)
        assert wrong.exit_code == 1
        book = next(t for t in wrong.tables if t.table == "book")
        assert book.counts["search index tag count"] >= 1
        shown = [d.field for d in book.examples["search index tag count"]]
        assert all(str(f).startswith("labels_word=") for f in shown), shown
    finally:
        client.close()


TEXT_KEY = """
CREATE TABLE lang (code VARCHAR(8) COLLATE utf8mb4_general_ci PRIMARY KEY, name VARCHAR(32))
  CHARACTER SET utf8mb4;
CREATE TABLE word (
  id INT PRIMARY KEY, code VARCHAR(8) COLLATE utf8mb4_general_ci NOT NULL,
  w VARCHAR(16) COLLATE utf8mb4_general_ci, FOREIGN KEY (code) REFERENCES lang (code)
) CHARACTER SET utf8mb4;
INSERT INTO lang VALUES ('en', 'English'), ('de', 'German');
INSERT INTO word VALUES (1, 'en', 'hello'), (2, 'EN', 'hello'), (3, 'EN', 'bye'),
  (4, 'de', 'hallo'), (5, 'de', 'Hallo');
"""

TEXT_KEY_MAPPING = """
version: 1
tables:
  lang:
    as: json
    counter: false
    search: {name: langs, tag: [words.w]}
  word:
    as: none
    counter: false
    columns: [w]
    nest: {in: lang, as: words, by: [code]}
"""


def test_verify_joins_the_levels_by_the_foreign_keys_bytes(
    mysql_db: MySQLDatabase, modules_redis_url: str
) -> None:
    """A child whose text key differs from its parent's in case is not in the document
    (docs/mapping.md, nested children's limits); verify's MySQL side leaves it out the same
    way, and counts a document once for two children whose values the collation equates."""
    mysql_db.run(TEXT_KEY)
    m = parse_mapping(TEXT_KEY_MAPPING, name="textkey")
    assert migrate(m, source=mysql_db.url, target=modules_redis_url).exit_code == 0
    client = redis.Redis.from_url(modules_redis_url, decode_responses=True)
    try:
        assert client.json().get("lang:en", "$.words[*].w") == ["hello"]
        ft = client.ft("langs")
        assert ft.search(Query("@words_w:{bye}")).total == 0
        assert [d.id for d in ft.search(Query("@words_w:{HALLO}")).docs] == ["lang:de"]
    finally:
        client.close()
    assert verify(m, source=mysql_db.url, target=modules_redis_url).exit_code == 0


def test_a_new_path_moves_the_alias_to_a_new_version(
    mysql_db: MySQLDatabase, modules_redis_url: str
) -> None:
    _load(mysql_db, seed=2, books=40)
    plain = parse_mapping(MAPPING.replace(
        "      tag: [labels.word, labels.code, labels.notes.body]\n"
        "      numeric: [year, labels.stars, detail.pages%s]\n      text: [labels.notes.remark]\n",
        "      numeric: [year]\n",
    ), name="nestsearch")  # fmt: skip
    assert migrate(plain, source=mysql_db.url, target=modules_redis_url).exit_code == 0
    client = redis.Redis.from_url(modules_redis_url, decode_responses=True)
    try:
        before = current(client, "books")
        # --tables book: the nested tables a path names are resolved all the same
        again = migrate(_mapping(), source=mysql_db.url, target=modules_redis_url, tables=["book"])
        assert again.exit_code == 0
        after = current(client, "books")
        assert after is not None and after != before
        assert before not in client.execute_command("FT._LIST")  # the old version dropped
        got = _found(client, "@labels_word:{web}")
        assert got == _ids(mysql_db, LABELS, "label.word = 'web'") and got
    finally:
        client.close()
    assert verify(_mapping(), source=mysql_db.url, target=modules_redis_url).exit_code == 0
    checked = verify(_mapping(), source=mysql_db.url, target=modules_redis_url, tables=["book"])
    assert checked.exit_code == 0


def _example() -> str:
    text = (REPO / "docs" / "mapping.md").read_text(encoding="utf-8")
    section = text.split("### `search`", 1)[1].split("### `nest`", 1)[0]
    return section.split("**Nested children.**", 1)[1]


def _block(text: str, lang: str) -> str:
    return text.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def test_the_documented_nested_example(mysql_db: MySQLDatabase, modules_redis_url: str) -> None:
    """docs/mapping.md's books with their tags nested, searchable by tag, on
    samples/book_tag.sql: the document, the FT.CREATE dry-run prints, and each FT.SEARCH
    (redis-py, as written there) returning the documents shown and what MySQL's query
    shown returns."""
    section = _example()
    mysql_db.run((REPO / "samples" / "book_tag.sql").read_text(encoding="utf-8"))
    m = parse_mapping(_block(section, "yaml"), name="booktag")
    shown = dry_run(m, source=mysql_db.url, sample=0)
    create = next(t.search for t in shown.tables if t.table == "book")
    assert create is not None
    said = _block(section.split("prints the index", 1)[1], "").strip()
    assert re.sub(r"books:[0-9a-f]{12} ", "books:<digest> ", create) == said
    assert migrate(m, source=mysql_db.url, target=modules_redis_url).exit_code == 0
    r = redis.Redis.from_url(modules_redis_url, decode_responses=True)
    try:
        assert r.json().get("book:2") == json.loads(_block(section, "json"))
        python = _block(section, "python").splitlines()
        getter = re.fullmatch(r'r\.json\(\)\.get\("(.+?)"\)\["(\w+)"\]  # (.+)', python[0])
        assert getter is not None
        key, name, value = getter.groups()
        document: Any = r.json().get(key)
        assert document[name] == ast.literal_eval(value)
        queries = [re.fullmatch(r'r\.ft\("books"\)\.search\(Query\("(.+)"\)\)  # (.+)', line)
                   for line in python[1:]]  # fmt: skip
        sql = [s.strip() for s in _block(section, "sql").split(";") if s.strip()]
        assert len(queries) == len(sql) == 2
        for match, statement in zip(queries, sql, strict=True):
            assert match is not None
            query, answer = match.groups()
            docs = r.ft("books").search(Query(query)).docs
            assert sorted(d.id for d in docs) == answer.split()
            mysql = sorted(f"book:{row[0]}" for row in mysql_db.query(statement))
            assert sorted(d.id for d in docs) == mysql, statement
    finally:
        r.close()
    assert verify(m, source=mysql_db.url, target=modules_redis_url).exit_code == 0
