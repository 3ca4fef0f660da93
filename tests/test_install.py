"""What a plain ``pip install`` gives (issue 16 item 6): the package's metadata names the
documentation, and no message, help text, drafted mapping or JSON Schema description points
at a file of the repository that is not installed (docs/, mappings/, samples/...): they cite
the documentation by its address. ``scripts/check_dist.py`` checks the built wheel's METADATA."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from migrator.errors import DOCS, docs
from migrator.mapping import scaffold
from migrator.mapping.kinds import Kind
from migrator.mapping.schema import Column, Schema, TableSchema

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "migrator"
# a path inside the repository that pip does not install
NOT_INSTALLED = re.compile(
    r"(?<![\w/.:-])(?:docs|notes|mappings|samples|tests|benchmarks|scripts)/[\w.-]+|README\.md"
)


def user_strings(path: Path) -> list[str]:
    """Every string literal of a module (f-string parts included) but its docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in docstrings
    ]  # fmt: skip


def test_the_metadata_names_the_documentation_messages_cite() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["urls"]["Documentation"] == DOCS
    assert docs("connections.md") == f"{DOCS}/connections.md"
    assert (REPO / "docs" / "connections.md").is_file()  # the page the address names


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(REPO))
)
def test_no_message_points_at_a_file_that_is_not_installed(path: Path) -> None:
    found = [s for s in user_strings(path) for m in [NOT_INSTALLED.search(s)] if m]
    assert not found, found


def test_the_json_schema_and_the_drafted_mapping_cite_the_documentation_by_address() -> None:
    schema = (PACKAGE / "mapping" / "mapping.schema.json").read_text(encoding="utf-8")
    assert not NOT_INSTALLED.search(schema.replace(DOCS + "/", "")), "schema cites a file"
    assert f"{DOCS}/mapping.md" in schema
    t = TableSchema("t", (Column("id", Kind.INTEGER, False, "int"),), ("id",), (), ())
    text = scaffold.draft(Schema("db", {"t": t}, ()), source="mysql+pymysql://u@h/db").render()
    assert not NOT_INSTALLED.search(text.replace(DOCS + "/", "")), text
    assert f"# {DOCS}/mapping.md#what-migrator-init-drafts" in text
