"""The shipped JSON Schema agrees with the loader: the same keys, and the same verdict on a
set of documents that probe every key. Checked by a small validator for the subset of
draft 2020-12 the schema uses (no jsonschema dependency)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from migrator.errors import MappingError
from migrator.mapping import build, loader
from migrator.mapping.loader import json_schema

REPO = Path(__file__).resolve().parent.parent
USED = {
    "$schema", "$id", "$defs", "$ref", "title", "description", "type", "const", "enum",
    "anyOf", "required", "properties", "additionalProperties", "minProperties", "items",
    "minItems", "maxItems", "uniqueItems", "pattern", "minLength", "minimum",
    "default",  # an annotation for editors: nothing to check
}  # fmt: skip


def _type_ok(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    raise AssertionError(f"unknown type {name}")


def errors(value: Any, schema: dict[str, Any], root: dict[str, Any], path: str = "$") -> list[str]:
    """Why ``value`` does not match ``schema`` (empty when it does)."""
    unknown = set(schema) - USED
    assert not unknown, f"the checker does not implement {unknown}"
    out: list[str] = []
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        out += errors(value, root["$defs"][name], root, path)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_type_ok(value, t) for t in types):
            return [f"{path}: not {types}"]
    if "const" in schema and not (value == schema["const"] and type(value) is not bool):
        out.append(f"{path}: not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: not one of {schema['enum']}")
    if "anyOf" in schema and all(errors(value, s, root, path) for s in schema["anyOf"]):
        out.append(f"{path}: matches none of anyOf")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            out.append(f"{path}: too short")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{path}: does not match {schema['pattern']}")
    if isinstance(value, int) and "minimum" in schema and value < schema["minimum"]:
        out.append(f"{path}: below {schema['minimum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{path}: too few items")
        if len(value) > schema.get("maxItems", len(value)):
            out.append(f"{path}: too many items")
        if schema.get("uniqueItems") and len({repr(v) for v in value}) != len(value):
            out.append(f"{path}: items not unique")
        for i, item in enumerate(value):
            if "items" in schema:
                out += errors(item, schema["items"], root, f"{path}[{i}]")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                out.append(f"{path}: '{key}' is required")
        if len(value) < schema.get("minProperties", 0):
            out.append(f"{path}: too few properties")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                out += errors(item, props[key], root, f"{path}.{key}")
            elif extra is False:
                out.append(f"{path}: unknown key {key!r}")
            elif isinstance(extra, dict):
                out += errors(item, extra, root, f"{path}.{key}")
    return out


def schema_errors(document: Any) -> list[str]:
    schema = json_schema()
    return errors(document, schema, schema)


def test_schema_is_draft_2020_12_and_ships_in_the_package() -> None:
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert (REPO / "migrator" / "mapping" / "mapping.schema.json").is_file()
    assert "mapping.schema.json" in (REPO / "pyproject.toml").read_text()


def test_schema_allows_exactly_the_loaders_keys() -> None:
    schema = json_schema()
    defs = schema["$defs"]

    def keys(node: dict[str, Any]) -> set[str]:
        for option in [node, *node.get("anyOf", ())]:
            if "properties" in option:
                assert option["additionalProperties"] is False
                return set(option["properties"])
        raise AssertionError(f"no object form in {node}")

    assert keys(schema) == set(build.TOP_KEYS)
    assert keys(defs["options"]) == set(build.OPTION_KEYS)
    assert keys(defs["options"]["properties"]["retries"]) == set(build.RETRY_KEYS)
    assert keys(defs["table"]) == set(build.TABLE_KEYS)
    # the object forms' keys, as mapping/build.py and build_structures.py spell them
    assert keys(defs["unique"]) == {"columns", "key"}
    assert keys(defs["index"]) == {"columns"}
    assert keys(defs["reference"]) == {"columns", "table", "parent_columns"}
    assert keys(defs["sorted"]) == {"key", "score"}
    assert keys(defs["latest"]) == {"key", "order_by", "limit"}
    assert keys(defs["set"]) == {"key", "member"}


def _properties(node: Any, where: str = "$") -> list[tuple[str, dict[str, Any]]]:
    """Every (path, schema) under a ``properties`` anywhere in ``node``."""
    out = []
    if isinstance(node, dict):
        for name, sub in node.get("properties", {}).items():
            out.append((f"{where}.{name}", sub))
        for key, sub in node.items():
            out += _properties(sub, f"{where}.{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            out += _properties(sub, f"{where}[{i}]")
    return out


def test_every_key_has_a_description_for_editors() -> None:
    missing = [path for path, sub in _properties(json_schema()) if not sub.get("description")]
    assert not missing


def test_the_mapping_reference_documents_every_key() -> None:
    text = (REPO / "docs" / "mapping.md").read_text(encoding="utf-8")
    headings = {line.removeprefix("### ").strip("` ") for line in text.splitlines()
                if line.startswith("### ")}  # fmt: skip
    assert set(build.TABLE_KEYS) <= headings, set(build.TABLE_KEYS) - headings
    for key in (*build.TOP_KEYS, *build.OPTION_KEYS):
        assert f"`{key}`" in text or f"options.{key}" in text, key
    for key in ("parent_columns", "order_by", "limit", "member", "score"):
        assert f"`{key}`" in text, key


BASE = {"version": 1, "tables": {"emp": {}}}


def table(**body: Any) -> dict[str, Any]:
    return {"version": 1, "tables": {"emp": body}}


# each document: does the loader accept it? The schema must say the same.
DOCUMENTS: list[Any] = [
    BASE,
    None,
    [],
    {"tables": {"emp": {}}},
    {"version": 2, "tables": {"emp": {}}},
    {"version": 1},
    {"version": 1, "tables": {}},
    {"version": 1, "tables": None},
    {"version": 1, "tables": {"emp": None}},
    {"version": 1, "tables": ["emp"]},
    {**BASE, "sources": "x"},
    {**BASE, "source": "mysql://h/db", "target": "redis://h/0"},
    {**BASE, "source": ["x"]},
    {**BASE, "source": True},
    {**BASE, "options": None},
    {**BASE, "options": {"separator": "|", "nulls": "omit", "batch_size": 10}},
    {**BASE, "options": {"separator": ""}},
    {**BASE, "options": {"nulls": "keep"}},
    {**BASE, "options": {"batch_size": 0}},
    {**BASE, "options": {"batch_size": "10"}},
    {**BASE, "options": {"batch_size": True}},
    {**BASE, "options": {"batchsize": 10}},
    {**BASE, "options": {"ignore": ["acct:session:*", "cache:*"]}},
    {**BASE, "options": {"ignore": []}},
    {**BASE, "options": {"ignore": None}},
    {**BASE, "options": {"ignore": "acct:*"}},
    {**BASE, "options": {"ignore": [""]}},
    {**BASE, "options": {"ignore": [1]}},
    {**BASE, "options": {"retries": None}},
    {**BASE, "options": {"retries": {"attempts": 3, "backoff": 0.1, "max_backoff": 2}}},
    {**BASE, "options": {"retries": {"attempts": 0, "backoff": 0, "max_backoff": 0.5}}},
    {**BASE, "options": {"retries": {"attempts": -1}}},
    {**BASE, "options": {"retries": {"attempts": 1.5}}},
    {**BASE, "options": {"retries": {"attempts": True}}},
    {**BASE, "options": {"retries": {"backoff": -1}}},
    {**BASE, "options": {"retries": {"max_backoff": "10"}}},
    {**BASE, "options": {"retries": {"tries": 3}}},
    {**BASE, "options": {"retries": 3}},
    {**BASE, "options": []},
    table(primary_key="id"),
    table(primary_key=["a", "b"]),
    table(primary_key=[]),
    table(primary_key=["a", "a"]),
    table(primary_key=True),
    table(primary_key=None),
    table(key="emp:{id}"),
    table(key="emp:{{literal}}:{id}"),
    table(key="emp:{id"),
    table(key="emp:}"),
    table(key="emp:{}"),
    table(key=""),
    table(key=5),
    table(key=["emp"]),
    table(**{"as": "hash"}),
    table(**{"as": "none"}),
    table(**{"as": "columns"}),
    table(**{"as": "hashes"}),
    table(**{"as": None}),
    table(columns=[]),
    table(columns=["a", "b"]),
    table(columns="a"),
    table(columns=None),
    table(columns=[None]),
    table(columns={"a": 1}),
    table(counter=False),
    table(counter=True),
    table(counter=None),
    table(counter="emp:id"),
    table(counter="emp:{x"),
    table(counter=[]),
    table(unique=["email", ["a", "b"], {"columns": ["n"], "key": "emp:{n}:id"}]),
    table(unique=[{"columns": "n"}]),
    table(unique=[{"key": "emp:{n}"}]),
    table(unique=[{"columns": "n", "hash": True}]),
    table(unique="email"),
    table(unique=None),
    table(unique=[True]),
    table(indexes=["mgr_id", ["a", "b"], {"columns": "c"}]),
    table(indexes=[{"column": "c"}]),
    table(indexes=[[]]),
    table(references=[{"columns": "mgr_id", "table": "emp"}]),
    table(references=[{"columns": ["a"], "table": "p", "parent_columns": ["x"]}]),
    table(references=[{"columns": "a"}]),
    table(references=[{"columns": "a", "table": "p", "on": "x"}]),
    table(references=["mgr_id"]),
    table(sorted=[{"key": "emp:by:salary", "score": "salary"}]),
    table(sorted=[{"key": "emp:by:salary"}]),
    table(sorted=[{"key": "emp:by:salary", "score": "s", "limit": 3}]),
    table(latest=[{"key": "emp:latest", "order_by": "hired", "limit": 10}]),
    table(latest=[{"key": "emp:latest", "order_by": "hired"}]),
    table(latest=[{"key": "emp:{x}", "order_by": "hired"}]),
    table(latest=[{"key": "emp:latest", "order_by": "hired", "limit": 0}]),
    table(latest=[{"key": "emp:latest", "order_by": "hired", "limit": None}]),
    table(latest=[{"key": "emp:latest"}]),
    table(sets=[{"key": "tag:{tagname}", "member": "{book_id}"}]),
    table(sets=[{"key": "tag:{tagname}"}]),
    table(sets=[{"key": "tag:{tagname}", "member": "{book_id"}]),
    table(sets={"key": "a", "member": "b"}),
    table(indices=["x"]),
]


def loader_accepts(document: Any) -> bool:
    try:
        loader.parse_mapping(yaml.safe_dump(document), environ={})
    except MappingError:
        return False
    return True


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: repr(d)[:70])
def test_schema_and_loader_agree(document: Any) -> None:
    problems = schema_errors(document)
    assert loader_accepts(document) == (not problems), problems


def test_some_documents_are_rejected_and_some_accepted() -> None:
    verdicts = [loader_accepts(d) for d in DOCUMENTS]
    assert verdicts.count(True) > 20 and verdicts.count(False) > 20


def test_shipped_mappings_match_the_schema() -> None:
    files = sorted((REPO / "mappings").glob("*.yaml"))
    if not files:
        pytest.skip("no mappings/*.yaml yet")
    for f in files:
        document = yaml.safe_load(f.read_text(encoding="utf-8"))
        assert schema_errors(document) == [], f


def test_init_output_matches_the_schema() -> None:
    from migrator.mapping import scaffold
    from tests.test_scaffold import odd_schema, sample_schema

    for schema in (sample_schema(), odd_schema()):
        text = scaffold.draft(schema, source="mysql+pymysql://u:pw@h/db").render()
        assert schema_errors(yaml.safe_load(text)) == []
