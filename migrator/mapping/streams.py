"""Change streams (``streams:``, docs/sync.md#change-streams): each committed row change of a
table that ``sync`` applies is also appended to a Redis STREAM, in the same MULTI/EXEC as the
data and the position (plan/stream.py writes the entries).

``options.streams`` gives every table a stream; a table's own ``streams:`` (true, false, or
the same keys) takes precedence for that table:

* ``key``: the stream's name, a template whose only placeholder is ``{table}`` (one stream for
  all tables: a key without it); default ``{table}<separator>changes``;
* ``ops``: which changes are appended, of ``insert``, ``update``, ``delete`` (default: all);
* ``columns``: ``all`` (the primary key and every column the row hash holds), ``keys`` (the
  primary key only), or a list of the table's columns (with the primary key);
* ``maxlen``: trim to about that many entries (``XADD ... MAXLEN ~ n``), or ``maxage``: trim
  the entries older than that (a duration, ``7d``; ``XADD ... MINID ~ id``); default: none;
* ``snapshot``: true to have the first load append one ``snapshot`` entry per row it writes
  (default false);
* ``form``: ``fields`` (each column an entry field, the default) or ``json`` (one field per
  image holding a JSON object).

Parsed here into ``Streams``; columns are checked against the schema by validate (as every
column a table names, mapping/resolve.py ``column_uses``).
"""

from __future__ import annotations

from typing import Any

from migrator.mapping.expiry import ExpirySyntaxError, duration
from migrator.mapping.model import FORMS, OPS, StreamDefaults, Streams, Template

KEYS = ("key", "ops", "columns", "maxlen", "maxage", "snapshot", "form")
COLUMN_SETS = ("all", "keys")
TABLE_PLACEHOLDER = "table"


class StreamsSyntaxError(ValueError):
    """A ``streams:`` the loader refuses: ``key`` names the setting, the message the fix."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def default_template(separator: str) -> Template:
    return Template.parse(f"{{{TABLE_PLACEHOLDER}}}{separator}changes")


def _template(value: Any) -> Template:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value):
        raise StreamsSyntaxError("key", "key: the stream's name, e.g. '{table}:changes'")
    try:
        t = Template.parse(str(value))
    except ValueError as e:
        raise StreamsSyntaxError("key", f"bad stream key {value!r}: {e}") from None
    other = [c for c in t.columns if c != TABLE_PLACEHOLDER]
    if other or t.lowered:
        raise StreamsSyntaxError(
            "key",
            f"bad stream key {value!r}: its only placeholder is {{table}} (a stream holds the "
            f"changes of whole tables, in commit order), not {{{(other or t.columns)[0]}}}",
        )
    return t


def _ops(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise StreamsSyntaxError("ops", f"ops: a list of {', '.join(OPS)}, got {value!r}")
    for op in items:
        if op not in OPS:
            raise StreamsSyntaxError(
                "ops", f"unknown operation {op!r}; expected some of: {', '.join(OPS)}"
            )
    return tuple(op for op in OPS if op in items)


def _columns(value: Any, table: bool) -> str | tuple[str, ...]:
    if value in COLUMN_SETS:
        return str(value)
    if table and isinstance(value, list) and value and all(isinstance(c, str) for c in value):
        if len(set(value)) != len(value):
            raise StreamsSyntaxError("columns", "a column is named twice")
        return tuple(value)
    what = "all, keys, or a list of the table's columns" if table else "all or keys"
    raise StreamsSyntaxError("columns", f"columns: {what}, got {value!r}")


def _maxlen(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StreamsSyntaxError("maxlen", f"maxlen: a positive number of entries, got {value!r}")
    return value


def _maxage(value: Any) -> float | None:
    if value is None:
        return None
    try:
        seconds = duration(value, "maxage")
    except ExpirySyntaxError as e:
        raise StreamsSyntaxError("maxage", str(e)) from None
    if seconds <= 0:
        raise StreamsSyntaxError("maxage", f"maxage must be above zero (got {value!r})")
    return seconds


def _snapshot(value: Any) -> bool:
    if not isinstance(value, bool):
        raise StreamsSyntaxError(
            "snapshot", f"snapshot: true or false (entries of the first load's rows), got {value!r}"
        )
    return value


def _form(value: Any) -> str:
    if value not in FORMS:
        raise StreamsSyntaxError("form", f"form: {' or '.join(FORMS)}, got {value!r}")
    return str(value)


def _trim(maxlen: int | None, maxage: float | None) -> tuple[int | None, float | None]:
    if maxlen is not None and maxage is not None:
        raise StreamsSyntaxError("maxage", "a stream is trimmed by maxlen or by maxage, not both")
    return maxlen, maxage


def _unknown(d: dict[str, Any]) -> None:
    for k in d:
        if k not in KEYS:
            raise StreamsSyntaxError(
                str(k), f"unknown key {k!r}; expected one of: {', '.join(KEYS)}"
            )


def parse_defaults(value: Any, separator: str) -> StreamDefaults | None:
    """``options.streams``: true (every default), false/absent (none), or a mapping."""
    if value is None or value is False:
        return None
    if value is True:
        value = {}
    if not isinstance(value, dict):
        raise StreamsSyntaxError("", f"streams: true, false or a mapping, got {value!r}")
    _unknown(value)
    if isinstance(value.get("columns"), list):
        raise StreamsSyntaxError("columns", "options.streams.columns: all or keys (a list of "
                                 "columns goes under a table's own streams:)")  # fmt: skip
    maxlen, maxage = _trim(_maxlen(value.get("maxlen")), _maxage(value.get("maxage")))
    return StreamDefaults(
        template=_template(value["key"]) if "key" in value else default_template(separator),
        ops=_ops(value["ops"]) if "ops" in value else OPS,
        columns=str(_columns(value.get("columns", "all"), table=False)),
        maxlen=maxlen,
        maxage=maxage,
        snapshot=_snapshot(value["snapshot"]) if "snapshot" in value else False,
        form=_form(value["form"]) if "form" in value else "fields",
    )


def parse_table(
    value: Any, table: str, defaults: StreamDefaults | None, separator: str
) -> Streams | None:
    """A table's stream: its own ``streams:`` (``value``, None when absent) over the
    options' defaults."""
    if value is False or (value is None and defaults is None):
        return None
    base = defaults or StreamDefaults(default_template(separator))
    if value is None or value is True:
        value = {}
    if not isinstance(value, dict):
        raise StreamsSyntaxError("", f"streams: true, false or a mapping, got {value!r}")
    _unknown(value)
    template = _template(value["key"]) if "key" in value else base.template
    if "maxlen" in value or "maxage" in value:  # the table's own trimming replaces the options'
        maxlen, maxage = _trim(_maxlen(value.get("maxlen")), _maxage(value.get("maxage")))
    else:
        maxlen, maxage = base.maxlen, base.maxage
    return Streams(
        key=template.render({TABLE_PLACEHOLDER: table}) if template.columns else template.text,
        ops=_ops(value["ops"]) if "ops" in value else base.ops,
        columns=_columns(value["columns"], table=True) if "columns" in value else base.columns,
        maxlen=maxlen,
        maxage=maxage,
        template=template.text,
        snapshot=_snapshot(value["snapshot"]) if "snapshot" in value else base.snapshot,
        form=_form(value["form"]) if "form" in value else base.form,
    )
