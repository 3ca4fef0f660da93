"""YAML -> model: environment expansion, shape checks with file/line/path, the JSON Schema."""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml

from migrator.errors import MappingError, MappingErrors, docs
from migrator.mapping.expiry import Expiry, ExpirySyntaxError
from migrator.mapping.expiry import parse as parse_expiry
from migrator.mapping.model import (
    KINDS,
    NEST_KINDS,
    Index,
    Latest,
    Mapping,
    Nest,
    Options,
    Reference,
    Retries,
    Search,
    SetSpec,
    Sorted,
    Table,
    Template,
    Unique,
)
from migrator.mapping.where import Filter, FilterSyntaxError
from migrator.mapping.where import parse as parse_filter
from migrator.urls import quote_userinfo, userinfo_spans

T = TypeVar("T")

TOP_KEYS = ("version", "source", "target", "options", "tables")
OPTION_KEYS = ("separator", "nulls", "batch_size", "ignore", "retries", "escape")
RETRY_KEYS = ("attempts", "backoff", "max_backoff")
ESCAPES = ("reject", "backslash")  # migrator/plan/escape.py
#: rows per batch above which a batch no longer fits a pipeline sensibly
MAX_BATCH_SIZE = 1_000_000
TABLE_KEYS = (
    "primary_key", "key", "as", "columns", "counter", "unique", "indexes",
    "references", "sorted", "latest", "sets", "where", "fields", "formats", "escape", "expire",
    "search", "nest",
)  # fmt: skip
NEST_KEYS = ("in", "as", "by", "kind", "order")
SEARCH_KEYS = ("name", "index_sets", "tag", "numeric", "text")
#: per-column formats (migrator/plan/values.py: FORMATS)
FORMATS = ("epoch", "epoch_ms", "iso8601", "boolean", "number")
MISPLACED = (
    "indent it under its table, 2 spaces deeper than the table's name "
    "(e.g. 'tables:', '  emp:', '    columns: [...]')"
)
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def suggest(name: str, choices: Any) -> str | None:
    """'did you mean ...?' for the closest valid name, if any is close."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the mapping format, as shipped inside the package."""
    text = resources.files("migrator.mapping").joinpath("mapping.schema.json").read_text("utf-8")
    return dict(json.loads(text))


def expand_env(text: str, environ: Any = None, *, url: bool = False) -> str:
    """Expand ``${VAR}`` and ``${VAR:-default}``; an unset VAR without default is an error.

    ``url``: the text is a server URL; a value expanded inside its user-info part (between
    ``://`` and the last ``@`` of the text as written) is percent-encoded, so a password
    holding ``@ : / ? #`` or ``%`` still reads as the password."""
    env = os.environ if environ is None else environ
    span = userinfo_spans(text) if url else None

    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        value = env.get(name)
        if value is None or (value == "" and default is not None):
            if default is None:
                raise KeyError(name)
            value = default
        value = str(value)
        if span is not None and span[0] <= m.start() and m.end() <= span[1]:
            return quote_userinfo(value)
        return value

    return _ENV.sub(sub, text)


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
    return _Builder(file, lines, environ).mapping(data, name)


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


class _Builder:
    def __init__(self, file: str, lines: dict[str, int], environ: Any) -> None:
        self.file = file
        self.lines = lines
        self.environ = environ

    def error(self, path: str, message: str, hint: str | None = None) -> MappingError:
        line = None
        p = path
        while p and line is None:
            line = self.lines.get(p)
            cut = max(p.rfind("."), p.rfind("["))
            p = p[:cut] if cut > 0 else ""
        return MappingError(message, path=path, file=self.file, line=line, hint=hint)

    # -- scalars ---------------------------------------------------------------------------
    def string(self, value: Any, path: str, *, expand: bool = False) -> str:
        """A scalar as text; ``expand``: a server URL with ``${VAR}`` expanded."""
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            hint = None
            if isinstance(value, dict) and len(value) == 1 and None in value.values():
                hint = f'YAML reads {{...}} as a mapping: quote it, "{{{next(iter(value))}}}"'
            raise self.error(path, f"expected a string, got {_describe(value)}", hint)
        text = str(value)
        if expand:
            try:
                text = expand_env(text, self.environ, url=True)
            except KeyError as e:
                raise self.error(
                    path,
                    f"environment variable {e.args[0]} is not set",
                    f"export {e.args[0]}=..., or give a default: ${{{e.args[0]}:-value}}",
                ) from None
        return text

    def template(self, value: Any, path: str) -> Template:
        text = self.string(value, path)
        if not text:
            raise self.error(path, "a key template cannot be empty")
        try:
            return Template.parse(text)
        except ValueError as e:
            raise self.error(path, f"bad key template {text!r}: {e}") from None

    def names(self, value: Any, path: str) -> tuple[str, ...]:
        """A column name or a list of them."""
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return (str(value),)
        if isinstance(value, list) and value:
            names = tuple(self.string(v, f"{path}[{i}]") for i, v in enumerate(value))
            if len(set(names)) != len(names):
                raise self.error(path, f"a column is listed twice in {list(names)}")
            return names
        raise self.error(path, f"expected a column name or a list of them, got {_describe(value)}")

    def dict_of(self, value: Any, path: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(path, f"expected a mapping of keys, got {_describe(value)}")
        for key in value:
            if key not in allowed:
                raise self.error(
                    f"{path}.{key}" if path else str(key),
                    f"unknown key '{key}'; expected one of: {', '.join(allowed)}",
                    suggest(key, allowed),
                )
        return value

    def list_of(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(path, f"expected a list, got {_describe(value)}")
        return value

    def each(
        self, d: dict[str, Any], key: str, path: str, parse: Callable[[Any, str], T]
    ) -> tuple[T, ...]:
        """``d[key]``, a list (or absent), each item parsed at ``{path}.{key}[i]``."""
        items = self.list_of(d.get(key), f"{path}.{key}")
        return tuple(parse(x, f"{path}.{key}[{i}]") for i, x in enumerate(items))

    def required(self, d: dict[str, Any], key: str, path: str) -> Any:
        if d.get(key) is None:
            raise self.error(path, f"'{key}' is required here")
        return d[key]

    # -- structure -------------------------------------------------------------------------
    def mapping(self, data: Any, name: str) -> Mapping:
        if data is None:
            raise self.error("", "the mapping file is empty", "start from 'migrator init'")
        if isinstance(data, dict):
            for key in data:
                if key in TABLE_KEYS and key not in TOP_KEYS:
                    raise self.error(str(key), f"'{key}' is a table setting, not a top-level key",
                                     MISPLACED)  # fmt: skip
        top = self.dict_of(data, "", TOP_KEYS)
        if "version" not in top:
            raise self.error("", "'version' is required (write 'version: 1' at the top)")
        if top["version"] != 1:
            raise self.error(
                "version",
                f"unsupported version {top['version']!r}; expected 1",
                "this migrator reads mappings of version 1, the only version there is: write "
                f"'version: 1' (the format: {docs('mapping.md')})",
            )
        source = top.get("source")
        target = top.get("target")
        options = self.options(top.get("options"), "options")
        tables_raw = self.dict_of(top.get("tables"), "tables", tuple(top.get("tables") or ()))
        if not tables_raw:
            raise self.error("tables", "no tables: 'tables' must map at least one table")
        tables = []
        errors: list[MappingError] = []
        for tname, tbody in tables_raw.items():  # every table's first error, not only one
            try:
                tables.append(self.table(str(tname), tbody, f"tables.{tname}", options))
            except MappingError as e:
                errors.append(e)
            except MappingErrors as e:
                errors.extend(e.errors)
        if errors:
            raise MappingErrors(errors) if len(errors) > 1 else errors[0]
        return Mapping(
            version=1,
            source=self.string(source, "source", expand=True) if source is not None else None,
            target=self.string(target, "target", expand=True) if target is not None else None,
            options=options,
            tables=tuple(tables),
            name=name,
            file=self.file,
            lines=self.lines,
        )

    def options(self, value: Any, path: str) -> Options:
        d = self.dict_of(value, path, OPTION_KEYS)
        sep = self.string(d.get("separator", ":"), f"{path}.separator")
        if not sep:
            raise self.error(f"{path}.separator", "the separator cannot be empty")
        nulls = d.get("nulls", "omit")
        if nulls != "omit":
            raise self.error(
                f"{path}.nulls", f"unsupported nulls policy {nulls!r}; expected 'omit'"
            )
        batch = d.get("batch_size", 5000)
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise self.error(f"{path}.batch_size", f"expected a positive integer, got {batch!r}")
        if batch > MAX_BATCH_SIZE:
            raise self.error(
                f"{path}.batch_size",
                f"{batch:,} rows per batch is more than the {MAX_BATCH_SIZE:,} allowed",
                "batches of 1,000-20,000 rows load fastest; e.g. batch_size: 5000",
            )
        ignore = d.get("ignore") or []
        if not isinstance(ignore, list) or not all(isinstance(g, str) and g for g in ignore):
            raise self.error(
                f"{path}.ignore",
                f"expected a list of key globs such as ['acct:session:*'], got {ignore!r}",
            )
        escape = self.policy(d.get("escape", "reject"), f"{path}.escape", sep)
        retries = self.retries(d.get("retries"), f"{path}.retries")
        return Options(
            separator=sep,
            nulls="omit",
            batch_size=batch,
            ignore=tuple(ignore),
            retries=retries,
            escape=escape,
        )

    def policy(self, escape: Any, path: str, sep: str) -> str:
        """An ``escape`` policy (options', or a table's own)."""
        if escape not in ESCAPES:
            raise self.error(
                path,
                f"unknown escape policy {escape!r}; expected one of: {', '.join(ESCAPES)}",
                suggest(escape, ESCAPES),
            )
        if escape == "backslash" and "\\" in sep:
            raise self.error(
                path.rsplit(".", 1)[0] + ".separator" if path.startswith("options") else path,
                "with 'escape: backslash' the separator cannot contain a backslash",
            )
        return str(escape)

    def escape(self, value: Any, path: str, options: Options) -> str | None:
        """A table's own ``escape`` (None: the options' applies to it)."""
        return None if value is None else self.policy(value, path, options.separator)

    def retries(self, value: Any, path: str) -> Retries:
        d = self.dict_of(value, path, RETRY_KEYS)
        attempts = d.get("attempts", Retries.attempts)
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
            raise self.error(f"{path}.attempts", f"expected a whole number >= 0, got {attempts!r}")
        seconds = {}
        for key in ("backoff", "max_backoff"):
            v = d.get(key, getattr(Retries, key))
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise self.error(f"{path}.{key}", f"expected seconds >= 0, got {v!r}")
            seconds[key] = float(v)
        return Retries(attempts, **seconds)

    def table(self, name: str, body: Any, path: str, options: Options) -> Table:
        """One table; every key's first error is reported, not only the table's first."""
        if name in TABLE_KEYS and body is not None and not isinstance(body, dict):
            raise self.error(path, f"'{name}' is a table setting, not a table", MISPLACED)
        d = body if isinstance(body, dict) else self.dict_of(body, path, TABLE_KEYS)
        errors = [
            self.unknown_table_key(name, path, k, v) for k, v in d.items() if k not in TABLE_KEYS
        ]
        fields: dict[str, Any] = {}

        def parse(field: str, read: Callable[[], Any]) -> None:
            try:
                fields[field] = read()
            except MappingError as e:
                errors.append(e)

        def optional(key: str, read: Callable[[Any, str], Any]) -> Callable[[], Any]:
            return lambda: read(d[key], f"{path}.{key}") if d.get(key) is not None else None

        parse("kind", lambda: self.kind(d.get("as", "hash"), f"{path}.as"))
        parse("primary_key", optional("primary_key", self.names))
        parse("key", optional("key", self.template))
        parse("columns", lambda: self._columns(d, path))
        parse("counter", lambda: self.counter(d, path, name))
        parse("escape", lambda: self.escape(d.get("escape"), f"{path}.escape", options))
        parse("where", optional("where", self.where))
        parse("expire", optional("expire", self.expire))
        parse("fields", lambda: self.fields(d.get("fields"), f"{path}.fields"))
        parse("formats", lambda: self.formats(d.get("formats"), f"{path}.formats"))
        parse("search", optional("search", self.search))
        parse("nest", optional("nest", self.nest))
        for key, read in (
            ("unique", self.unique), ("indexes", self.index), ("references", self.reference),
            ("sorted", self.sorted), ("latest", self.latest), ("sets", self.set_spec),
        ):  # fmt: skip
            parse(key, lambda key=key, read=read: self.each(d, key, path, read))  # type: ignore[misc]
        if errors:
            raise errors[0] if len(errors) == 1 else MappingErrors(errors)
        return Table(name=name, **fields)

    def unknown_table_key(self, table: str, path: str, key: Any, value: Any) -> MappingError:
        hint = suggest(key, TABLE_KEYS)
        if hint is None and (value is None or isinstance(value, dict)):
            hint = f"if '{key}' is a table, indent it as much as '{table}'"
        expected = ", ".join(TABLE_KEYS)
        return self.error(
            f"{path}.{key}", f"unknown key '{key}'; expected one of: {expected}", hint
        )

    def kind(self, value: Any, path: str) -> str:
        if value not in KINDS:
            raise self.error(
                path, f"unknown 'as: {value}'; expected one of: {', '.join(KINDS)}",
                suggest(value, KINDS),
            )  # fmt: skip
        return str(value)

    def counter(self, d: dict[str, Any], path: str, name: str) -> Template | bool | None:
        if "counter" not in d or d["counter"] is True or d["counter"] is None:
            return None
        if d["counter"] is False:
            return False
        counter = self.template(d["counter"], f"{path}.counter")
        if not counter.is_literal:
            raise self.error(
                f"{path}.counter",
                "a counter key cannot have placeholders (one counter per table)",
                f"write a fixed name such as '{name}:id', or 'counter: false'",
            )
        return counter

    def _columns(self, d: dict[str, Any], path: str) -> tuple[str, ...] | None:
        if "columns" not in d or d["columns"] is None:
            return None
        if d["columns"] == []:
            return ()
        return self.names(d["columns"], f"{path}.columns")

    def fields(self, value: Any, path: str) -> tuple[tuple[str, str], ...]:
        """``{column: field name}``: the names of hash fields and column strings."""
        d = self.dict_of(value, path, tuple(value or ()) if isinstance(value, dict) else ())
        out = []
        for column, name in d.items():
            text = self.string(name, f"{path}.{column}")
            if not text:
                raise self.error(f"{path}.{column}", "a field name cannot be empty")
            out.append((str(column), text))
        names = [n for _, n in out]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise self.error(
                path,
                f"two columns would be written as the field '{twice[0]}'",
                "give each column a field name of its own",
            )
        return tuple(out)

    def formats(self, value: Any, path: str) -> tuple[tuple[str, str], ...]:
        """``{column: format}``: how a column's value is written in the row hash / strings."""
        d = self.dict_of(value, path, tuple(value or ()) if isinstance(value, dict) else ())
        out = []
        for column, name in d.items():
            if name not in FORMATS:
                raise self.error(
                    f"{path}.{column}",
                    f"unknown format {name!r}; expected one of: {', '.join(FORMATS)}",
                    suggest(name, FORMATS),
                )
            out.append((str(column), str(name)))
        return tuple(out)

    def where(self, value: Any, path: str) -> Filter:
        text = self.string(value, path)
        try:
            return parse_filter(text)
        except FilterSyntaxError as e:
            raise self.error(
                path,
                f"bad filter {text!r}: {e}",
                "e.g. where: \"status = 'active' AND created >= DATE '2024-01-01'\" "
                f"({docs('mapping.md#where')})",
            ) from None

    def expire(self, value: Any, path: str) -> Expiry:
        try:
            return parse_expiry(value)
        except ExpirySyntaxError as e:
            raise self.error(
                path,
                f"bad expire: {e}",
                f"e.g. expire: 1h, or expire: {{column: ends_at, offset: 1d}} "
                f"({docs('mapping.md#expire')})",
            ) from None

    def unique(self, value: Any, path: str) -> Unique:
        if isinstance(value, dict):
            d = self.dict_of(value, path, ("columns", "key"))
            cols = self.names(self.required(d, "columns", path), f"{path}.columns")
            key = self.template(d["key"], f"{path}.key") if d.get("key") is not None else None
            missing = [c for c in cols if key is not None and c not in key.columns]
            if key is not None and missing:
                raise self.error(
                    f"{path}.key",
                    f"the key {key.text!r} has no placeholder for {', '.join(missing)}: every "
                    "row would write the same key, each overwriting the one before",
                    "name each unique column in the key, e.g. "
                    + repr(_with_placeholders(key.text, cols)),
                )
            return Unique(cols, key)
        return Unique(self.names(value, path))

    def index(self, value: Any, path: str) -> Index:
        if isinstance(value, dict):
            d = self.dict_of(value, path, ("columns",))
            return Index(self.names(self.required(d, "columns", path), f"{path}.columns"))
        return Index(self.names(value, path))

    def reference(self, value: Any, path: str) -> Reference:
        d = self.dict_of(value, path, ("columns", "table", "parent_columns"))
        cols = self.names(self.required(d, "columns", path), f"{path}.columns")
        parent = self.string(self.required(d, "table", path), f"{path}.table")
        pcols = (
            self.names(d["parent_columns"], f"{path}.parent_columns")
            if d.get("parent_columns") is not None
            else None
        )
        if pcols is not None and len(pcols) != len(cols):
            raise self.error(
                f"{path}.parent_columns",
                f"{len(cols)} column(s) refer to {len(pcols)} parent column(s); counts must match",
            )
        return Reference(cols, parent, pcols)

    def sorted(self, value: Any, path: str) -> Sorted:
        d = self.dict_of(value, path, ("key", "score"))
        return Sorted(
            self.template(self.required(d, "key", path), f"{path}.key"),
            self.string(self.required(d, "score", path), f"{path}.score"),
        )

    def latest(self, value: Any, path: str) -> Latest:
        d = self.dict_of(value, path, ("key", "order_by", "limit"))
        key = self.template(self.required(d, "key", path), f"{path}.key")
        if not key.is_literal:
            raise self.error(
                f"{path}.key", "a latest list key cannot have placeholders (one list per table)"
            )
        limit = d.get("limit", 100)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise self.error(f"{path}.limit", f"expected a positive integer, got {limit!r}")
        order_by = self.string(self.required(d, "order_by", path), f"{path}.order_by")
        return Latest(key, order_by, limit)

    def search(self, value: Any, path: str) -> Search:
        d = self.dict_of(value, path, SEARCH_KEYS)
        name = self.string(self.required(d, "name", path), f"{path}.name")
        if not name or any(c.isspace() for c in name):
            raise self.error(f"{path}.name", f"bad index name {name!r}: no spaces, not empty")
        index_sets = d.get("index_sets", True)
        if not isinstance(index_sets, bool):
            raise self.error(f"{path}.index_sets", f"expected true or false, got {index_sets!r}")
        lists = {
            k: self.names(d[k], f"{path}.{k}") if d.get(k) is not None else ()
            for k in ("tag", "numeric", "text")
        }
        return Search(name, index_sets, **lists)

    def nest(self, value: Any, path: str) -> Nest:
        d = self.dict_of(value, path, NEST_KEYS)
        parent = self.string(self.required(d, "in", path), f"{path}.in")
        name = self.string(self.required(d, "as", path), f"{path}.as")
        if not name:
            raise self.error(f"{path}.as", "the field's name is empty: e.g. as: tags")
        kind = d.get("kind", "array")
        if kind not in NEST_KINDS:
            raise self.error(
                f"{path}.kind", f"expected one of {', '.join(NEST_KINDS)}, got {kind!r}"
            )
        by = self.names(d["by"], f"{path}.by") if d.get("by") is not None else None
        order = self.names(d["order"], f"{path}.order") if d.get("order") is not None else ()
        if order and kind != "array":
            raise self.error(f"{path}.order", f"only an array has an order (kind: {kind})")
        return Nest(parent, name, by, kind, order)

    def set_spec(self, value: Any, path: str) -> SetSpec:
        d = self.dict_of(value, path, ("key", "member"))
        return SetSpec(
            self.template(self.required(d, "key", path), f"{path}.key"),
            self.template(self.required(d, "member", path), f"{path}.member"),
        )


def _with_placeholders(text: str, columns: tuple[str, ...]) -> str:
    """``emp:uniques:email`` -> ``emp:uniques:email:{email}`` (a key that names each column)."""
    return text + "".join(f":{{{c}}}" for c in columns if f"{{{c}}}" not in text)


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def _yaml_in(directory: str) -> str:
    """The hint for a directory given as the mapping: the YAML files it holds, if any."""
    try:
        found = sorted(p for p in Path(directory).iterdir() if p.suffix in (".yaml", ".yml"))
    except OSError:
        found = []
    if not found:
        return "name the mapping's YAML file, not a directory (this one holds none)"
    return "name a YAML file in it: " + ", ".join(str(p) for p in found[:5])
