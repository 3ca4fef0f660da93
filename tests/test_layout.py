"""The package layout is a contract (docs/architecture.md): one package per pipeline stage,
imports pointing down the pipeline, and no import cycles — imports inside functions and
under ``TYPE_CHECKING`` included, since they are cycles all the same."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "migrator"

GROUND = {"errors", "lifeline", "progress", "retry", "urls"}
# what each part may import from migrator, besides itself and the ground modules
ALLOWED = {
    "ground": set(),
    "mapping": set(),
    "plan": {"mapping"},
    "source": {"mapping", "plan"},
    "store": {"mapping", "plan"},
    "reports": {"mapping", "plan", "source"},
    "verify": {"mapping", "plan", "source", "store"},
    "scaleout": {"mapping", "plan", "source", "store", "reports", "verify"},
    "sync": {"mapping", "plan", "source", "store", "reports"},
    "commands": {"mapping", "plan", "source", "store", "reports", "verify", "scaleout", "sync"},
    "lines": set(),
    "render": {"commands", "lines", "mapping", "reports", "verify"},
    "cli": {"cli", "commands", "mapping", "render", "reports", "sync", "package"},
    "package": {"mapping"},
}
# the parts that may draw on a terminal; every other part reports through progress.Progress
RICH = {"render", "cli", "lines"}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Every migrator module ``path`` imports, wherever the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # "from migrator.x import y": the submodule x.y if there is one, else x itself
            names = [
                sub if (sub := f"{node.module}.{a.name}") in known else node.module
                for a in node.names
            ]
        else:
            continue
        found |= {n for n in names if n in known}
    return found


def part_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "package"
    if parts[1] == "__main__":
        return "cli"
    if parts[1] in GROUND:
        return "ground"
    return parts[1]


@functools.cache
def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(path, known) - {name} for name, path in mods.items()}


def test_every_module_belongs_to_a_known_part() -> None:
    unknown = {m for m in modules() if part_of(m) not in ALLOWED}
    assert not unknown, f"modules outside the documented layout: {sorted(unknown)}"


@pytest.mark.parametrize("module", sorted(modules()))
def test_imports_point_down_the_pipeline(module: str) -> None:
    part = part_of(module)
    bad = sorted(
        target
        for target in graph()[module]
        if (other := part_of(target)) != part and other != "ground" and other not in ALLOWED[part]
    )
    assert not bad, f"{module} ({part}) may not import {bad}"


def test_no_import_cycles() -> None:
    g = graph()
    # the package __init__ re-exports; importing "migrator" itself is not a cycle edge
    g = {m: {t for t in ts if t != "migrator"} for m, ts in g.items()}
    cycles = strongly_connected(g)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in cycles)


def strongly_connected(g: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm; the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in g:
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above must be able to fail."""
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_the_core_never_imports_rich() -> None:
    bad = sorted(m for m, p in modules().items() if part_of(m) not in RICH and _imports_rich(p))
    assert not bad, f"only {sorted(RICH)} may import rich: {bad}"


def _imports_rich(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "rich" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "rich":
            return True
    return False


def test_imports_in_functions_and_under_type_checking_count(tmp_path: Path) -> None:
    """The walk that finds imports must see those inside functions and under TYPE_CHECKING
    (a cycle hidden there is a cycle all the same), and a rich import wherever it stands."""
    path = tmp_path / "m.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from migrator.sync.follow import Follower\n"
        "def f():\n    import migrator.store.sink\n    from rich import print\n"
    )
    known = {"migrator.sync.follow", "migrator.store.sink", "migrator.sync"}
    assert imports_of(path, known) == {"migrator.sync.follow", "migrator.store.sink"}
    assert _imports_rich(path)


#: lines a module of migrator/ may have: STYLE asks for modules of about 400 at most; past
#: this one, split it by what it owns (as mapping/loader.py, render/, sync/follow.py were)
MAX_LINES = 430


def too_long(paths: dict[str, Path], limit: int = MAX_LINES) -> list[str]:
    """``module: N lines`` for each module longer than ``limit``."""
    lengths = {name: len(path.read_text().splitlines()) for name, path in paths.items()}
    return [f"{name}: {n} lines" for name, n in sorted(lengths.items()) if n > limit]


def test_every_module_keeps_to_about_400_lines() -> None:
    long = "; ".join(too_long(modules()))
    assert not long, f"modules over {MAX_LINES} lines (split each by what it owns): {long}"


def test_the_length_rule_can_fail(tmp_path: Path) -> None:
    """The check above must be able to fail, naming the module and its length."""
    path = tmp_path / "big.py"
    path.write_text("x = 1\n" * (MAX_LINES + 1))
    assert too_long({"migrator.big": path}) == [f"migrator.big: {MAX_LINES + 1} lines"]
    assert too_long({"migrator.big": path}, limit=MAX_LINES + 1) == []


def test_the_sync_stage_and_the_store_are_where_the_docs_say() -> None:
    """docs/architecture.md's table names every part this test allows, and no other."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    for part in ALLOWED:
        if part in ("ground", "package", "cli", "render", "lines"):
            continue
        assert f"| `{part}/` |" in text or f"| `{part}.py` |" in text, part
    assert "target/" not in text
