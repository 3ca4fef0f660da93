"""The mapping document -> model: the top-level keys, the options, and each table with its
settings, every table's first error reported (not only the file's first). The structures a
table maps to are read by ``build_structures``; the checks of scalars by ``shape``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from migrator.errors import MappingError, MappingErrors, docs
from migrator.mapping.build_structures import StructureReader
from migrator.mapping.expiry import Expiry, ExpirySyntaxError
from migrator.mapping.expiry import parse as parse_expiry
from migrator.mapping.model import KINDS, Mapping, Options, Retries, Shard, Table, Template
from migrator.mapping.shape import suggest
from migrator.mapping.streams import StreamDefaults, Streams, StreamsSyntaxError
from migrator.mapping.streams import parse_defaults as parse_stream_defaults
from migrator.mapping.streams import parse_table as parse_stream
from migrator.mapping.where import Filter, FilterSyntaxError
from migrator.mapping.where import parse as parse_filter

TOP_KEYS = ("version", "source", "sources", "target", "options", "tables")
SHARD_KEYS = ("name", "url")
#: a shard's name: it goes into key names and metric labels
SHARD_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
EXAMPLE = "'sources: [{name: east, url: mysql+pymysql://app@east:3306/shop}, ...]'"
OPTION_KEYS = ("separator", "nulls", "batch_size", "ignore", "retries", "escape", "streams")
RETRY_KEYS = ("attempts", "backoff", "max_backoff")
ESCAPES = ("reject", "backslash")  # migrator/plan/escape.py
#: rows per batch above which a batch no longer fits a pipeline sensibly
MAX_BATCH_SIZE = 1_000_000
TABLE_KEYS = (
    "primary_key", "key", "as", "columns", "counter", "unique", "indexes",
    "references", "sorted", "latest", "sets", "where", "fields", "formats", "escape", "expire",
    "search", "nest", "streams", "vector_sets",
)  # fmt: skip
#: per-column formats (migrator/plan/values.py: FORMATS)
FORMATS = ("epoch", "epoch_ms", "iso8601", "boolean", "number")
MISPLACED = (
    "indent it under its table, 2 spaces deeper than the table's name "
    "(e.g. 'tables:', '  emp:', '    columns: [...]')"
)


class Builder(StructureReader):
    """Reads one mapping file's document into a ``Mapping``."""

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
        sources = self.shards(top.get("sources"), "sources")
        if sources and source is not None:
            raise self.error(
                "sources",
                "'source' and 'sources' exclude each other: 'sources' lists the servers of a "
                "sharded source, 'source' names the one server of an unsharded one",
                "keep one of the two (a single server: 'source: URL')",
            )
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
            sources=sources,
            name=name,
            file=self.file,
            lines=self.lines,
        )

    def shards(self, value: Any, path: str) -> tuple[Shard, ...]:
        """``sources:``: a list of ``{name, url}``, the servers of a sharded source."""
        if value is None:
            return ()
        items = self.list_of(value, path)
        if not items:
            raise self.error(path, "'sources' lists no server", f"name each shard: {EXAMPLE}")
        out: list[Shard] = []
        for i, item in enumerate(items):
            where = f"{path}[{i}]"
            d = self.dict_of(item, where, SHARD_KEYS)
            for key in SHARD_KEYS:
                if key not in d:
                    raise self.error(where, f"a shard needs '{key}'", f"e.g. {EXAMPLE}")
            name = self.string(d["name"], f"{where}.name")
            if not SHARD_NAME.fullmatch(name):
                raise self.error(
                    f"{where}.name",
                    f"shard name {name!r} is not 1-32 letters, digits, '_' or '-'",
                    "it goes into key names and metric labels: e.g. 'east', 'shard-01'",
                )
            if any(s.name == name for s in out):
                raise self.error(f"{where}.name", f"two shards are named {name!r}",
                                 "give each shard a name of its own")  # fmt: skip
            out.append(Shard(name, self.string(d["url"], f"{where}.url", expand=True)))
        return tuple(out)

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
        streams = self.stream_defaults(d.get("streams"), f"{path}.streams", sep)
        return Options(
            separator=sep,
            nulls="omit",
            batch_size=batch,
            ignore=tuple(ignore),
            retries=retries,
            escape=escape,
            streams=streams,
        )

    def stream_defaults(self, value: Any, path: str, sep: str) -> StreamDefaults | None:
        try:
            return parse_stream_defaults(value, sep)
        except StreamsSyntaxError as e:
            raise self._streams_error(path, e) from None

    def streams(self, value: Any, path: str, table: str, options: Options) -> Streams | None:
        try:
            return parse_stream(value, table, options.streams, options.separator)
        except StreamsSyntaxError as e:
            raise self._streams_error(path, e) from None

    def _streams_error(self, path: str, e: StreamsSyntaxError) -> MappingError:
        return self.error(
            f"{path}.{e.key}" if e.key else path,
            str(e),
            f"e.g. streams: {{key: 'orders:changes', ops: [insert, update, delete], "
            f"columns: all, maxlen: 100000}} ({docs('sync.md#change-streams')})",
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
        parse("streams", lambda: self.streams(d.get("streams"), f"{path}.streams", name, options))
        for key, read in (
            ("unique", self.unique), ("indexes", self.index), ("references", self.reference),
            ("sorted", self.sorted), ("latest", self.latest), ("sets", self.set_spec),
            ("vector_sets", self.vector_set),
        ):  # fmt: skip
            parse(key, lambda key=key, read=read: self.each(d, key, path, read))  # type: ignore[misc]
        if fields.get("streams") is not None and fields.get("where") is not None:
            errors.append(self.error(
                f"{path}.streams", "a change stream of a table with where: is not supported: "
                "its entries would not tell the rows the filter keeps from the others",
                "drop where:, or streams: false for this table",
            ))  # fmt: skip
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
