"""``sources:``: a sharded source's servers in the mapping, and which of them a command reads
(commands/session.py ``shards``). Pure: no server is reached."""

from __future__ import annotations

import pytest

from migrator.commands.session import shards, source_url
from migrator.errors import MappingError, MigratorError
from migrator.mapping.loader import load_mapping

TWO = """version: 1
sources:
  - {name: east, url: "mysql+pymysql://app:${SHARD_PW:-pw}@east:3306/shop"}
  - {name: west, url: "mysql+pymysql://app@west:3306/shop"}
tables:
  t: {}
"""


def _load(tmp_path, text):
    f = tmp_path / "m.yaml"
    f.write_text(text)
    return load_mapping(f)


def test_sources_are_read_in_order_with_variables_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("SHARD_PW", "s3cret")
    m = _load(tmp_path, TWO)
    assert [s.name for s in m.sources] == ["east", "west"]
    assert m.sources[0].url == "mysql+pymysql://app:s3cret@east:3306/shop"
    assert m.source is None
    assert [s.name for s in shards(m)] == ["east", "west"]
    assert [s.url for s in shards(m, only="west")] == ["mysql+pymysql://app@west:3306/shop"]


def test_one_server_is_one_unnamed_shard(tmp_path):
    m = _load(tmp_path, "version: 1\nsource: mysql+pymysql://root@h/db\ntables: {t: {}}\n")
    assert [(s.name, s.url) for s in shards(m)] == [("", "mysql+pymysql://root@h/db")]
    with pytest.raises(MigratorError, match="--shard east names a shard"):
        shards(m, only="east")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("sources: []", "lists no server"),
        ("sources: [{name: a}]", "a shard needs 'url'"),
        ("sources: [{url: x}]", "a shard needs 'name'"),
        ("sources: [{name: 'a b', url: x}]", "is not 1-32 letters"),
        ("sources: [{name: a, url: x}, {name: a, url: y}]", "two shards are named 'a'"),
        ("sources: [{name: a, url: x, port: 3}]", "port"),
        ("source: x\nsources: [{name: a, url: x}]", "exclude each other"),
    ],
)
def test_bad_sources_are_refused_with_their_line(tmp_path, body, message):
    tables = "" if "tables:" in body else "\ntables: {t: {}}"
    with pytest.raises(MappingError, match=message) as e:
        _load(tmp_path, f"version: 1\n{body}{tables}\n")
    assert e.value.line is not None


def test_a_command_of_one_server_names_the_fix(tmp_path):
    m = _load(tmp_path, TWO)
    with pytest.raises(MappingError, match="sharded source \\(east, west\\)") as e:
        source_url(m)
    assert "--shard" in (e.value.hint or "")
    with pytest.raises(MigratorError, match="--source names one server"):
        shards(m, override="mysql+pymysql://root@h/db")
    with pytest.raises(MigratorError, match="no shard of that name") as e2:
        shards(m, only="eas")
    assert "east" in (e2.value.hint or "")


def test_nested_documents_are_kept_over_a_sharded_source(tmp_path):
    """``nest:`` with ``sources:`` loads (docs/sharding.md#nested-documents): each document is
    built from its top row's shard (tests/test_shard_nesting.py runs it)."""
    m = _load(
        tmp_path, TWO.replace("  t: {}", "  t: {as: json}\n  c: {as: none, nest: {in: t, as: cs}}")
    )
    assert [t.name for t in m.tables if t.nest is not None] == ["c"]
    assert [s.name for s in m.sources] == ["east", "west"]
