"""Mapping files -> model: every construct, env expansion, and errors that say where."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.errors import MappingError
from migrator.mapping.loader import load_mapping, parse_mapping
from migrator.mapping.model import Retries, Template
from migrator.mapping.shape import expand_env

FULL = """\
version: 1
source: ${SRC:-mysql+pymysql://root@127.0.0.1:3306/company}
target: ${TGT}
options:
  separator: "|"
  batch_size: 100
tables:
  emp:
    primary_key: [emp_id]
    key: "emp|{emp_id}"
    as: hash
    columns: [ename, email, mgr_id]
    counter: "emp|id"
    unique:
      - email
      - [first_name, last_name]
      - columns: [ename]
        key: "emp|{ename}|id"
    indexes:
      - mgr_id
      - [dept_id, title]
    references:
      - columns: [mgr_id]
        table: emp
    sorted:
      - key: "emp|by|salary"
        score: salary
    latest:
      - key: "emp|latest|hired"
        order_by: hired
        limit: 10
  login:
    as: columns
    counter: false
  tag:
    as: none
    sets:
      - key: "tag|{tagname}"
        member: "{book_id}"
"""


def test_every_construct_loads_into_the_model() -> None:
    m = parse_mapping(FULL, environ={"TGT": "redis://h:6379/3"})
    assert m.source == "mysql+pymysql://root@127.0.0.1:3306/company"
    assert m.target == "redis://h:6379/3"
    assert m.options.separator == "|" and m.options.batch_size == 100
    emp = m.table("emp")
    assert emp.primary_key == ("emp_id",)
    assert emp.key == Template.parse("emp|{emp_id}")
    assert emp.columns == ("ename", "email", "mgr_id")
    assert emp.counter == Template.parse("emp|id")
    assert [u.columns for u in emp.unique] == [("email",), ("first_name", "last_name"), ("ename",)]
    assert emp.unique[0].key is None and emp.unique[2].key == Template.parse("emp|{ename}|id")
    assert [i.columns for i in emp.indexes] == [("mgr_id",), ("dept_id", "title")]
    assert emp.references[0].columns == ("mgr_id",) and emp.references[0].table == "emp"
    assert emp.sorted[0].score == "salary" and emp.latest[0].limit == 10
    assert m.table("login").kind == "columns" and m.table("login").counter is False
    tag = m.table("tag")
    assert tag.kind == "none" and tag.sets[0].member.columns == ("book_id",)


def test_defaults_are_left_for_the_live_schema() -> None:
    m = parse_mapping("version: 1\ntables:\n  emp:\n")
    emp = m.table("emp")
    assert emp.primary_key is None and emp.key is None and emp.columns is None
    assert emp.counter is None and emp.kind == "hash"
    assert m.options.separator == ":" and m.options.batch_size == 5000
    assert m.options.retries == Retries(attempts=8, backoff=0.5, max_backoff=10.0)


def test_retries_option() -> None:
    m = parse_mapping(
        "version: 1\noptions:\n  retries: {attempts: 3, backoff: 0.1}\ntables: {a: }\n"
    )
    assert m.options.retries == Retries(attempts=3, backoff=0.1, max_backoff=10.0)


def test_env_expansion() -> None:
    env = {"A": "x", "EMPTY": ""}
    assert expand_env("${A}-${B:-dflt}-${EMPTY:-e}", env) == "x-dflt-e"
    with pytest.raises(KeyError):
        expand_env("${MISSING}", env)


def test_unset_variable_names_it_and_the_line() -> None:
    with pytest.raises(MappingError) as e:
        parse_mapping("version: 1\ntarget: ${NOPE_X}\ntables: {a: }\n", file="m.yaml", environ={})
    assert e.value.line == 2 and "NOPE_X" in str(e.value) and e.value.path == "target"


def test_template_placeholders_and_escapes() -> None:
    t = Template.parse("a{{b}}:{x}:{y}:{x}")
    assert t.columns == ("x", "y")
    assert t.render({"x": "1", "y": "2"}) == "a{b}:1:2:1"
    assert t.glob() == "a{b}:*:*:*"
    assert Template.parse("star*[x]").glob() == "star\\*\\[x\\]"
    with pytest.raises(ValueError):
        Template.parse("emp:{id")


@pytest.mark.parametrize(
    ("text", "path", "line", "words"),
    [
        ("version: 1\ntables:\n  emp:\n    indexs: [a]\n", "tables.emp.indexs", 4,
         ["unknown key 'indexs'", "did you mean 'indexes'"]),
        ("version: 1\ntables:\n  emp:\n    as: hsh\n", "tables.emp.as", 4,
         ["hsh", "did you mean 'hash'"]),
        ("version: 1\ntables:\n  emp:\n    indexes:\n      - a\n      - {}\n",
         "tables.emp.indexes[1]", 6, ["'columns' is required"]),
        ("version: 1\noptions:\n  batch_size: -5\ntables: {a: }\n", "options.batch_size", 3,
         ["positive integer"]),
        ("version: 1\ntables:\n  emp:\n    key: 'emp:{id'\n", "tables.emp.key", 4,
         ["bad key template"]),
        ("version: 1\ntables:\n  emp:\n    latest:\n      - key: l\n        order_by: d\n"
         "        limit: 0\n", "tables.emp.latest[0].limit", 7, ["positive integer"]),
        ("version: 2\ntables: {a: }\n", "version", 1, ["unsupported version"]),
        ("version: 1\noptions:\n  retries:\n    attempts: -1\ntables: {a: }\n",
         "options.retries.attempts", 4, ["whole number"]),
        ("version: 1\noptions:\n  retries:\n    tries: 3\ntables: {a: }\n",
         "options.retries.tries", 4, ["unknown key 'tries'"]),
        ("version: 1\ntables:\n  emp:\n    counter: 'emp:{id}'\n", "tables.emp.counter", 4,
         ["cannot have placeholders", "counter: false"]),
        ("tables: {a: }\n", "", None, ["'version' is required"]),
        ("version: 1\ntables: {}\n", "tables", 2, ["no tables"]),
    ],
)  # fmt: skip
def test_errors_name_path_line_and_fix(
    text: str, path: str, line: int | None, words: list[str]
) -> None:
    with pytest.raises(MappingError) as e:
        parse_mapping(text, file="m.yaml")
    assert e.value.path == path
    assert e.value.line == line
    message = str(e.value)
    assert message.startswith("m.yaml")
    for w in words:
        assert w in message


def test_bad_yaml_names_line_and_column() -> None:
    with pytest.raises(MappingError) as e:
        parse_mapping("version: 1\ntables:\n  emp: [a\n", file="m.yaml")
    assert e.value.line is not None and e.value.line >= 3 and "not valid YAML" in str(e.value)


def test_missing_file_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(MappingError) as e:
        load_mapping(tmp_path / "nope.yaml")
    assert "not found" in str(e.value) and "migrator init" in str(e.value)


def test_load_mapping_takes_the_name_from_the_file(tmp_path: Path) -> None:
    p = tmp_path / "company.yaml"
    p.write_text("version: 1\ntables:\n  emp:\n", encoding="utf-8")
    m = load_mapping(p)
    assert m.name == "company" and m.file == str(p) and m.line_of("tables.emp.key") == 3
