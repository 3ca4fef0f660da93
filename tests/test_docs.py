"""The documentation is the project's own: every link in README.md, docs/ and samples/ points
at a file (and heading) inside the repository, and nothing a user reads cites documents
outside it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from migrator.commands import dry_run
from migrator.mapping.loader import parse_mapping
from tests.services import MySQLDatabase

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted([REPO / "README.md", REPO / "samples" / "README.md", *(REPO / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("#") and not fenced:
            text = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_links_stay_inside_the_repository_and_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "shared/" not in text and "SPEC" not in text
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.is_relative_to(REPO), f"{target} leaves the repository"
        assert resolved.exists(), f"{page.name}: {target} does not exist"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: no heading #{anchor} in {path}"


def test_every_docs_page_is_in_the_index() -> None:
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in (REPO / "docs").glob("*.md"):
        if page.name != "README.md":
            assert f"({page.name})" in index, page.name
            assert f"(docs/{page.name})" in readme, page.name


def test_readme_says_how_to_start_and_to_run_from_the_venv() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for needed in ("make demo", "make test", "source .venv/bin/activate", ".venv/bin/pytest"):
        assert needed in readme, needed


def test_shipped_mappings_and_samples_cite_nothing_outside() -> None:
    for path in [*(REPO / "mappings").glob("*.yaml"), *(REPO / "samples").glob("*.sql")]:
        text = path.read_text(encoding="utf-8")
        assert "seed 0" not in text and "seeds 0" not in text and "shared/" not in text, path


# -- the mapping reference's examples are what the tool does ----------------------------------

COMMAND = re.compile(r"^(HSET|SADD|ZADD|SET|RPUSH|DEL|MULTI|EXEC)\b")


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S)


def _claims(block: str) -> list[str]:
    """The commands a YAML example's comments say it writes (``# HSET ...``; ``a ; b`` is
    two), skipping descriptions such as ``SET tag:ruby {1, 2}`` (a set, not the command)."""
    out = []
    for line in block.splitlines():
        _, hash_, comment = line.partition("#")
        for part in comment.split(" ; ") if hash_ else []:
            part = part.strip()
            if COMMAND.match(part) and "{" not in part and "->" not in part:
                out.append(part)
    return out


def _documented_mappings(tables: set[str]) -> list[tuple[str, dict[str, Any], list[str]]]:
    """(block, mapping document, claimed commands) for each YAML example of docs/mapping.md
    that is a whole mapping or a piece of ``tables:`` naming only the example tables."""
    out = []
    for block in _blocks((REPO / "docs" / "mapping.md").read_text(encoding="utf-8"), "yaml"):
        data = yaml.safe_load(block)
        if not isinstance(data, dict):
            continue
        if "tables" not in data:
            data = {"tables": data}
        if not set(data["tables"] or ()) <= tables:
            continue
        data.setdefault("version", 1)
        out.append((block, data, _claims(block)))
    return out


def test_mapping_examples_write_what_their_comments_say(mysql_db: MySQLDatabase) -> None:
    text = (REPO / "docs" / "mapping.md").read_text(encoding="utf-8")
    mysql_db.run(_blocks(text, "sql")[0])
    examples = _documented_mappings({"customer", "orders", "tag"})
    assert len(examples) >= 8 and sum(len(c) for _, _, c in examples) >= 20
    for block, document, claims in examples:
        mapping = parse_mapping(yaml.safe_dump(document), environ={})
        report = dry_run(mapping, source=mysql_db.url, sample=10)
        written = [line for t in report.tables for line in t.sample]
        for claim in claims:
            if claim.endswith("..."):
                found = any(w.startswith(claim[:-3].rstrip()) for w in written)
            else:
                found = claim in written
            assert found, f"{claim!r} is not written by:\n{block}\nwritten: {written}"


BY_DATA = {"patterns", "keys", "memory_bytes", "skipped", "rejected", "differences"}


def _documented_keys_exist(documented: Any, actual: Any, where: str = "$") -> None:
    """Every key the docs show is in the real output (new keys may be added freely)."""
    if isinstance(documented, dict):
        assert isinstance(actual, dict), where
        for key, value in documented.items():
            assert key in actual, f"{where}.{key} is documented but not in the output"
            if key in BY_DATA:  # keyed by structure names or reasons: the data decides
                continue
            if isinstance(value, (dict, list)) and actual[key]:
                _documented_keys_exist(value, actual[key], f"{where}.{key}")
    elif isinstance(documented, list) and documented and isinstance(documented[0], dict):
        assert isinstance(actual, list) and actual, where
        _documented_keys_exist(documented[0], actual[0], f"{where}[0]")


def test_json_shapes_in_commands_md_are_real(
    mysql_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    from migrator.commands import migrate, validate, verify

    text = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    sections = {s.split("`", 1)[0]: s for s in text.split("\n## `migrator ")[1:]}
    shapes = [  # the first JSON block of each command's section
        json.loads(_blocks(sections[c], "json")[0])
        for c in ("validate", "dry-run", "migrate", "verify")
    ]
    mysql_db.run(
        "CREATE TABLE emp (emp_id INT PRIMARY KEY, ename VARCHAR(9), mgr_id INT, KEY (mgr_id));"
        "INSERT INTO emp VALUES (1, 'SMITH', 8), (2, 'ALLEN', 8), (3, 'WARD', NULL);"
    )
    good = tmp_path / "emp.yaml"
    good.write_text(f"version: 1\nsource: {mysql_db.url}\ntables:\n  emp:\n    indexes: [mgr_id]\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"version: 1\nsource: {mysql_db.url}\ntables:\n  emp:\n    indexes: [mgr]\n")
    outputs = [
        validate(bad).as_dict(),
        dry_run(good, target=redis_url).as_dict(),
        migrate(good, target=redis_url).as_dict(),
    ]
    client = redis.Redis.from_url(redis_url)
    try:
        client.hset("emp:1", "ename", "SMYTH")  # a difference, so that verify shows an example
    finally:
        client.close()
    outputs.append(verify(good, target=redis_url).as_dict())
    assert outputs[3]["tables"][0]["examples"]
    for documented, actual in zip(shapes, outputs):
        _documented_keys_exist(documented, actual)


def test_nothing_in_the_repository_cites_documents_outside_it() -> None:
    """Code, tests, scripts and docs cite docs/ (the design documents beside the repository
    are not shipped): no section numbers of a spec, no paths into ../shared."""
    own = {"tests/test_docs.py", "tests/test_scaffold.py"}  # they assert the absence
    cited = re.compile(r"\bSPEC\b|\.\./shared|shared/(?:SPEC|notes|seeds|testdata)")
    found = []
    for path in REPO.rglob("*"):
        rel = path.relative_to(REPO).as_posix()
        if (
            not path.is_file()
            or path.suffix
            not in {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".sql", ".cfg", ""}
            or rel in own
            or rel.startswith(("tests/data/", ".venv/", ".git/", "dist/", "build/"))
            or ".egg-info/" in rel
        ):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{rel}: {m.group(0)}" for m in cited.finditer(text)]
    assert not found


def test_every_option_of_every_command_is_in_commands_md() -> None:
    import typer

    from migrator.cli import app

    text = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    sections = {s.split("`", 1)[0]: s for s in text.split("\n## `migrator ")[1:]}
    preamble = text.split("\n## `migrator ")[0]  # global and shared options
    group = typer.main.get_command(app)
    missing = [o for p in group.params for o in p.opts if f"`{o}" not in preamble]
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        assert name in sections, f"no section for migrator {name}"
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("-") and f"`{opt}" not in sections[name] + preamble:
                    missing.append(f"{name} {opt}")
    assert not missing


def test_every_environment_variable_is_in_the_table_once() -> None:
    """commands.md's "Environment variables" table names each variable an option reads, on one
    row each (no variable twice)."""
    import typer

    from migrator.cli import app

    text = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    table = text.split("\n## Environment variables\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Z_]+)` \|", table, re.MULTILINE)
    group = typer.main.get_command(app)
    read = {
        name
        for command in group.commands.values()  # type: ignore[attr-defined]
        for param in command.params
        for name in ([param.envvar] if isinstance(param.envvar, str) else param.envvar or [])
    }
    assert sorted(read - set(rows)) == []
    assert sorted(r for r in set(rows) if rows.count(r) > 1) == []
