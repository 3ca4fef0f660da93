"""What a schema change of a mapped table does to the mapping, decided from the table's
columns before and after the statement (issue 19 item 1, first part). Pure: no server.

``decide`` answers one ``Effect``:

* ``apply``: every value the mapping writes keeps its key role and text (an index added or
  dropped, a column the mapping does not draw from added or dropped, a wider ``VARCHAR`` or
  integer, a comment, an engine, a column moved): sync goes on, the change is noted;
* ``truncate``: the table's rows are gone (``TRUNCATE``): its keys are removed;
* ``resnapshot``: what the mapping writes for rows already in Redis changes (a column added
  to a table mapped with all its columns, a type whose text may change, a primary key the
  mapping took from the table): that table, and only it, is read again;
* ``stop``: a column or table the mapping names is removed or renamed (``places`` are the
  mapping lines to change).

The table swap of gh-ost (``RENAME TABLE t TO _t_del, _t_gho TO t``) and of
pt-online-schema-change (``RENAME TABLE t TO _t_old, _t_new TO t``) is a ``swap``: the table
keeps its name and takes the shadow's columns, so it is decided as an ``ALTER`` of ``t``
(``kind_of``). A rename that takes ``t`` away without putting a table in its place stops.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from migrator.mapping.model import Mapping
from migrator.mapping.resolve import column_uses
from migrator.plan.planner import TablePlan

#: a table's columns as (name, type as MySQL spells it: "varchar(40)", "int(11) unsigned")
Shape = tuple[tuple[str, str], ...]

Action = Literal["apply", "truncate", "resnapshot", "stop"]


@dataclass(frozen=True)
class TableUse:
    """How the mapping uses one table."""

    name: str
    drawn: frozenset[str]  # every column the mapping reads (key, fields, structures)
    all_columns: bool  # ``columns`` omitted: every column is a field, an added one too
    # (mapping place, column), e.g. ("tables.t.columns (line 7)", "a")
    uses: tuple[tuple[str, str], ...] = ()
    place: str = ""  # the table's own mapping place: "tables.t (line 5)"
    introspected_key: bool = False  # ``primary_key`` omitted: the table's key is the mapping's


@dataclass(frozen=True)
class Effect:
    action: Action
    what: str  # one line: what changed and what sync does
    places: tuple[str, ...] = ()  # the mapping lines to change (a stop, a re-snapshot)


_VERB = re.compile(
    r"^\s*(alter|truncate|rename|drop\s+(?:online\s+|offline\s+)?index"
    r"|drop(?=\s+(?:temporary\s+)?tables?\b)|create\s+or\s+replace)\b",
    re.IGNORECASE,
)
_COMMENT = re.compile(r"/\*.*?\*/|--[^\n]*|#[^\n]*", re.DOTALL)


def without_comments(query: str) -> str:
    """``query`` with its comments (``/* */``, ``-- ``, ``#``) replaced by a space each: what
    the log's statements are matched against, here and by the binary-log reader."""
    return _COMMENT.sub(" ", query)


def verb(query: str) -> str:
    """The statement's kind, lower case with single spaces: ``alter``, ``truncate``,
    ``rename``, ``drop index``, ``drop`` (a table), ``create or replace``; "" for others
    (``DROP TRIGGER``, ``DROP VIEW``...)."""
    m = _VERB.match(without_comments(query))
    if not m:
        return ""
    kind = " ".join(m.group(1).lower().split())
    return "drop index" if kind.startswith("drop") and kind.endswith("index") else kind


_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_QUALIFIED = re.compile(rf"^({_NAME})(?:\s*\.\s*({_NAME}))?$")
_RENAME = re.compile(r"^\s*rename\s+tables?\s+(?:if\s+exists\s+)?", re.IGNORECASE)
_WAIT = re.compile(r"\s+(?:wait\s+\d+|nowait)(?=\s+to\s)", re.IGNORECASE)
_TO = re.compile(r"\s+to\s+", re.IGNORECASE)


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def _qualified(text: str, default: str) -> tuple[str, str] | None:
    m = _QUALIFIED.match(text.strip())
    if m is None:
        return None
    if m.group(2) is None:
        return default, _unquote(m.group(1))
    return _unquote(m.group(1)), _unquote(m.group(2))


def renames(query: str, default: str) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """The ((database, table) -> (database, table)) pairs of a ``RENAME TABLE`` statement, in
    order (``default``: the statement's default database); [] for other statements."""
    text = without_comments(query)
    m = _RENAME.match(text)
    if m is None:
        return []
    pairs = []
    for part in re.split(r",(?=(?:[^`]*`[^`]*`)*[^`]*$)", text[m.end() :]):
        halves = _TO.split(_WAIT.sub("", part), maxsplit=1)
        if len(halves) != 2:
            return []
        old, new = _qualified(halves[0], default), _qualified(halves[1], default)
        if old is None or new is None:
            return []
        pairs.append((old, new))
    return pairs


def kind_of(query: str, table: str, database: str, default: str) -> str:
    """``verb(query)``, except ``swap`` for a ``RENAME TABLE`` that leaves a table named
    ``database.table`` in place of the one it moved away (gh-ost's and pt-osc's cut-over)."""
    kind = verb(query)
    if kind == "rename":
        here = (database, table)
        after = {here}
        for old, new in renames(query, default):  # applied left to right, as MySQL does
            if old in after:
                after.discard(old)
            if new == here:
                after.add(here)
        if here in after:
            return "swap"
    return kind


def decide(
    kind: str,
    use: TableUse,
    before: Shape,
    after: Shape | None,
    key_before: Sequence[str] = (),
    key_after: Sequence[str] = (),
) -> Effect:
    """The effect on the mapping of a statement of ``kind`` (see ``verb``) that names
    ``use.name``: ``before`` is the table's columns as its rows were logged until then,
    ``after`` as the server has them after it (None: the table is gone)."""
    t = use.name
    if kind == "truncate":
        return Effect("truncate", f"TRUNCATE {t}: its keys removed")
    if kind in ("drop", "rename", "create or replace") or after is None:
        gone = "replaced" if kind == "create or replace" else "dropped or renamed"
        places = (use.place, *_places(use, {c for _, c in use.uses}))
        return Effect("stop", f"table '{t}' was {gone}", tuple(dict.fromkeys(places)))
    was, now = dict(before), dict(after)
    removed = [c for c in was if c not in now]
    added = [c for c in now if c not in was]
    drawn_removed = [c for c in removed if c in use.drawn]
    if drawn_removed:
        places = _places(use, set(drawn_removed)) or (use.place,)
        what = f"column(s) {', '.join(drawn_removed)} of '{t}' that the mapping uses were dropped"
        return Effect("stop", what + " or renamed", places)
    if added and use.all_columns:
        what = f"column(s) {', '.join(added)} added to '{t}', mapped with all its columns"
        return Effect("resnapshot", what + " (`columns` omitted)", (use.place,))
    retyped = [c for c in was if c in now and c in use.drawn and not _same_text(was[c], now[c])]
    if retyped:
        what = ", ".join(f"{c} {was[c]} -> {now[c]}" for c in retyped)
        what = f"the type of '{t}' column(s) the mapping uses changed ({what})"
        return Effect("resnapshot", what, (use.place,))
    if use.introspected_key and tuple(key_before) != tuple(key_after):
        what = f"the primary key of '{t}' changed ({', '.join(key_before)} -> "
        what += f"{', '.join(key_after)}), which keys its rows"
        return Effect("resnapshot", what, (use.place,))
    head = f"table swap of {t} (gh-ost, pt-online-schema-change)" if kind == "swap" else ""
    head = head or f"{kind.upper() or 'DDL'} {t}"
    return Effect("apply", f"{head}: " + _summary(added, removed, was, now))


def unlogged(use: TableUse, missing: Sequence[str]) -> Effect:
    """Rows of the table were logged without columns the mapping draws from (a change sync
    judged by a newer schema, or one it did not see): a stop before them."""
    what = f"rows of '{use.name}' were logged without column(s) {', '.join(missing)}"
    return Effect("stop", what, _places(use, set(missing)) or (use.place,))


def _places(use: TableUse, columns: set[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(place for place, c in use.uses if c in columns))


def _summary(added: list[str], removed: list[str], was: dict[str, str], now: dict[str, str]) -> str:
    parts = []
    if added:
        parts.append(f"column(s) {', '.join(added)} added, not mapped")
    if removed:
        parts.append(f"column(s) {', '.join(removed)} dropped, not mapped")
    widened = [c for c in was if c in now and was[c] != now[c]]
    if widened:
        parts.append("type of " + ", ".join(widened) + " changed, same text")
    if not parts:
        parts.append("no mapped value changes (index, comment, engine, order)")
    return "; ".join(parts) + "; applied, no reload"


_SIZED = re.compile(r"^(varchar|varbinary)\((\d+)\)(.*)$")
_INTS = ("tinyint", "smallint", "mediumint", "int", "bigint")
_INT = re.compile(r"^(tinyint|smallint|mediumint|int|bigint)(?:\(\d+\))?(.*)$")


def _same_text(old: str, new: str) -> bool:
    """Whether every value of type ``old`` reads as the same text under type ``new`` (a wider
    VARCHAR/VARBINARY, a wider integer of the same signedness, a display width)."""
    a, b = old.strip().lower(), new.strip().lower()
    if a == b:
        return True
    sa, sb = _SIZED.match(a), _SIZED.match(b)
    if sa and sb:
        return sa[1] == sb[1] and sa[3] == sb[3] and int(sb[2]) >= int(sa[2])
    ia, ib = _INT.match(a), _INT.match(b)
    if ia and ib:
        return ia[2].strip() == ib[2].strip() and _INTS.index(ib[1]) >= _INTS.index(ia[1])
    return False


def table_use(mapping: Mapping, plan: TablePlan) -> TableUse:
    """How ``mapping`` uses the table of ``plan`` (its places named with their YAML lines)."""
    name = plan.table.name
    declared = mapping.table(name)

    def place(path: str) -> str:
        line = mapping.line_of(path)
        if line is None:
            return path
        return f"{path} ({mapping.file}:{line})" if mapping.file else f"{path} (line {line})"

    return TableUse(
        name,
        frozenset(plan.select),
        declared.columns is None,
        tuple((place(path), column) for path, column in column_uses(declared)),
        place(f"tables.{name}"),
        declared.primary_key is None,
    )
