"""YAML -> model: the file read, the YAML parsed with the line of every path (a key given
twice refused), hints for indentation and quoting mistakes, the JSON Schema. The document's
shape is checked and built by ``build``."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from migrator.errors import MappingError
from migrator.mapping.build import Builder
from migrator.mapping.model import Mapping


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the mapping format, as shipped inside the package."""
    text = resources.files("migrator.mapping").joinpath("mapping.schema.json").read_text("utf-8")
    return dict(json.loads(text))


def load_mapping(path: str | os.PathLike[str], environ: Any = None) -> Mapping:
    """Read, expand and check a mapping file. Raises MappingError naming file, line and path."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MappingError(
            "mapping file not found",
            file=file,
            hint="check the path, or draft one with 'migrator init --source URL -o FILE'",
        ) from None
    except IsADirectoryError:
        raise MappingError(
            "this is a directory, not a mapping file", file=file, hint=_yaml_in(file)
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise MappingError(f"cannot read the mapping file: {e}", file=file) from None
    return parse_mapping(text, file=file, name=Path(path).stem, environ=environ)


def parse_mapping(
    text: str, *, file: str = "<mapping>", name: str = "mapping", environ: Any = None
) -> Mapping:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e)
        raise MappingError(
            f"not valid YAML: {problem}",
            file=file,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            hint=yaml_hint(e, problem, mark.line + 1 if mark else None),
        ) from None
    lines: dict[str, int] = {}
    if node is not None:
        _record_lines(node, "", lines, file)
    return Builder(file, lines, environ).mapping(data, name)


INDENTATION = ("expected <block end>", "mapping values are not allowed", "did not find expected")


def yaml_hint(e: yaml.YAMLError, problem: str, line: int | None) -> str | None:
    """What to look at for the YAML errors that indentation and quoting mistakes cause."""
    context = str(getattr(e, "context", None) or "")
    opened = getattr(e, "context_mark", None)
    if "\\t" in problem or "\t" in problem:  # PyYAML writes the tab as \\t
        return "indent with spaces, not tabs"
    if "quoted scalar" in context and opened is not None:
        return f"the quote opened on line {opened.line + 1} is not closed"
    if "mapping values are not allowed" in problem:
        return (
            "a value holding ': ' needs quotes (key: \"emp: {id}\"); otherwise check the "
            f"indentation of line {line} and the lines above it"
        )
    if any(p in problem for p in INDENTATION):
        where = f"line {line} and the lines above it" if line else "the lines above"
        return (
            f"check the indentation of {where}: the keys of one table line up exactly, and "
            "a table's settings sit 2 spaces deeper than its name (e.g. 'tables:', '  emp:', "
            "'    columns: [...]'); indent with spaces, not tabs"
        )
    where = f"line {line} and the line above it" if line else "the file"
    return (
        f"check {where}: a value that starts with {{ [ * & ! | > % @ or a backquote, or holds "
        "': ' or ' #', needs quotes (key: \"emp:{id}\"); brackets and braces must be closed"
    )


def _record_lines(node: yaml.Node, path: str, lines: dict[str, int], file: str) -> None:
    """The YAML line of every mapping path; a key given twice in one mapping is an error
    (YAML loaders keep the last silently: a second ``emp:`` would replace the first)."""
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = f"{path}.{key_node.value}" if path else str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise MappingError(
                    f"'{key_node.value}' is given twice (first on line {seen[key]}); "
                    "YAML would keep only the last one",
                    path=key,
                    file=file,
                    line=line,
                    column=key_node.start_mark.column + 1,
                    hint="merge the two entries into one, or rename one of them",
                )
            seen[key] = line
            lines[key] = line
            _record_lines(value_node, key, lines, file)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _record_lines(item, f"{path}[{i}]", lines, file)


def _yaml_in(directory: str) -> str:
    """The hint for a directory given as the mapping: the YAML files it holds, if any."""
    try:
        found = sorted(p for p in Path(directory).iterdir() if p.suffix in (".yaml", ".yml"))
    except OSError:
        found = []
    if not found:
        return "name the mapping's YAML file, not a directory (this one holds none)"
    return "name a YAML file in it: " + ", ".join(str(p) for p in found[:5])
