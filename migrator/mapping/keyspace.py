"""What keys a template can write: the characters a column's value can hold (by its kind,
as docs/values.md shows it), and whether two templates can write the same key.

``overlap`` decides it exactly for templates whose placeholders stand for strings over a
character class: a value of a checked column never holds the separator (the planner
rejects or escapes it: ``migrator.plan.escape``), integers hold digits and ``-``, and so on.
Two templates overlap when some values make both render the same key; ``example`` then
names such a key, for the error message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import Literal

from migrator.mapping.model import Template

#: kind (``Kind.value``) -> (the characters its text can hold, those it holds a fixed
#: number of times per column); kinds not listed (text, binary, JSON, geometry) hold anything
KIND_TEXT: dict[str, tuple[str, str]] = {
    "integer": ("-0123456789", ""),
    "bit": ("0123456789", ""),
    "decimal": ("-0123456789.", "."),
    "float": ("-+.0123456789eEinfaINF", ""),
    "double": ("-+.0123456789eEinfaINF", ""),
    "date": ("-0123456789", "-"),
    "datetime": ("-0123456789 :.", "- :."),
    "timestamp": ("-0123456789 :.", "- :."),
    "time": ("-0123456789:.", ":."),
    "year": ("0123456789", ""),
}


def kind_name(kind: object) -> str:
    return str(getattr(kind, "value", kind))


def may_hold_separator(kind: object, sep: str) -> bool:
    """Whether a value of this kind may hold a separator character, and not always the same
    number of times (text, JSON, binary; a negative integer's ``-``)."""
    shape = KIND_TEXT.get(kind_name(kind))
    if shape is None:
        return True
    alphabet, fixed = shape
    return any(c in alphabet and c not in fixed for c in sep)


#: kind -> the characters its text holds a fixed number of times, and how many
#: (``.``: once when the column declares a scale or fraction digits, counted by ``_fraction``)
FIXED_COUNTS: dict[str, dict[str, int]] = {
    "date": {"-": 2},
    "datetime": {"-": 2, " ": 1, ":": 2},
    "timestamp": {"-": 2, " ": 1, ":": 2},
    "time": {":": 2},
}
_DIGITS = re.compile(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")


def _fraction(kind: str, column_type: str) -> int:
    """1 if every value of the column holds a ``.`` (a DECIMAL with a scale, a DATETIME(n),
    TIME(n) or TIMESTAMP(n) with n > 0), else 0."""
    m = _DIGITS.search(column_type)
    if m is None:
        return 0
    digits = m.group(2) if kind == "decimal" else m.group(1)
    return int(int(digits or 0) > 0)


def separator_count(kind: object, column_type: str, sep: str) -> int | None:
    """How many separator characters every value of a column holds (0 for an integer with
    ``:``, 2 for a DATETIME or TIME), or None when the number varies from value to value
    (text, JSON, binary): a composite is ambiguous only when two or more of its columns vary
    (``migrator.plan.escape``)."""
    name = kind_name(kind)
    shape = KIND_TEXT.get(name)
    if shape is None:
        return None
    alphabet, fixed = shape
    counts = FIXED_COUNTS.get(name, {})
    n = 0
    for c in dict.fromkeys(sep):
        if c not in alphabet:
            continue
        if c not in fixed:
            return None
        n += counts[c] if c in counts else _fraction(name, column_type)
    return n


def may_need_escape(kind: object, sep: str) -> bool:
    """Whether escaping can change a value of this kind (it may hold ``\\`` or a separator
    character)."""
    shape = KIND_TEXT.get(kind_name(kind))
    return shape is None or any(c in shape[0] for c in sep + "\\")


# -- can two templates write the same key? -------------------------------------------------------
#: a placeholder: the characters its value can hold (None: any character but the separator's;
#: ANY: any character at all, the separator's too)
Chars = frozenset[str] | Literal["any"] | None
_ANY = None
ANY: Literal["any"] = "any"


def value_chars(kind: object) -> Chars:
    """The characters a value of ``kind`` can hold in a key: its alphabet, or, for text,
    anything but the separator's characters (None: true where ``escape`` rejects or escapes
    them; ``plan.collisions`` says ANY where a text value is written with its separators)."""
    shape = KIND_TEXT.get(kind_name(kind))
    return frozenset(shape[0]) if shape is not None else _ANY


_ENUM = re.compile(r"^\s*enum\s*\((.*)\)\s*$", re.I | re.S)


def enum_members(column_type: str) -> list[str] | None:
    """The values an ENUM column can hold (``enum('a','b')`` -> ``['a', 'b']``), else None."""
    m = _ENUM.match(column_type or "")
    if m is None:
        return None
    return [v.replace("''", "'") for v in re.findall(r"'((?:[^']|'')*)'", m.group(1))]


def column_chars(kind: object, column_type: str) -> Chars:
    """``value_chars``, and for an ENUM the characters of its values alone (it is no free
    text: ``status`` of ENUM('active', 'closed') never writes ``t:uniques:email``)."""
    members = enum_members(column_type)
    return frozenset("".join(members)) if members is not None else value_chars(kind)


def may_be_empty(kind: object, column_type: str) -> bool:
    """Whether a value of the column can be the empty string: never a number or a date; an
    ENUM only when '' is one of its values; text can."""
    members = enum_members(column_type)
    if members is not None:
        return "" in members
    return kind_name(kind) not in KIND_TEXT


def _tokens(
    template: Template, chars: Callable[[str], Chars], empty: Callable[[str], bool]
) -> tuple[object, ...]:
    out: list[object] = []
    for p in template.parts:
        if isinstance(p, str):
            out.extend(p)
        else:
            column = template.columns[p]
            out.append(("*", chars(column), empty(column)))
    return tuple(out)


def _holds(cls: Chars, ch: str, sep: str) -> bool:
    return cls == ANY or (ch not in sep if cls is None else ch in cls)


def _readable(ch: str) -> tuple[bool, str]:
    return (not ch.isalnum(), ch)


def _common(a: Chars, b: Chars, sep: str) -> str | None:
    """A character both classes hold, or None."""
    if (a is None or a == ANY) and (b is None or b == ANY):
        return "x"
    if a == ANY or b == ANY:
        cls = b if a == ANY else a
        return next(iter(sorted(cls or (), key=_readable)), None)
    if a is None or b is None:
        cls = b if a is None else a
        return next((c for c in sorted(cls or (), key=_readable) if c not in sep), None)
    both = sorted(a & b, key=_readable)
    return both[0] if both else None


def example(
    t1: Template,
    t2: Template,
    sep: str,
    chars1: Callable[[str], Chars],
    chars2: Callable[[str], Chars],
    empty1: Callable[[str], bool] = lambda column: True,
    empty2: Callable[[str], bool] = lambda column: True,
) -> str | None:
    """A key both templates can render (placeholders holding ``chars``, and standing for
    the empty string only where ``empty`` says a value can be empty), or None.

    A dynamic program over (position in t1, position in t2, whether each side's placeholder
    has taken a character yet): a placeholder may swallow the other side's next literal
    character if its class holds it, meet the other side's placeholder on a character both
    classes hold, and end once it holds a character (or at once, where its value may be
    empty). Any common key can be shortened to one found this way, so None means the
    templates never meet."""
    a, b = _tokens(t1, chars1, empty1), _tokens(t2, chars2, empty2)

    @cache
    def walk(i: int, j: int, ti: bool, tj: bool) -> str | None:
        if i == len(a) and j == len(b):
            return ""
        x = a[i] if i < len(a) else None
        y = b[j] if j < len(b) else None
        options: list[tuple[str, int, int, bool, bool]] = []
        if isinstance(x, str) and isinstance(y, str) and x == y:
            options.append((x, i + 1, j + 1, False, False))
        if isinstance(x, tuple) and isinstance(y, tuple):
            ch = _common(x[1], y[1], sep)
            if ch is not None:  # both take it; then both end, or one goes on
                options.append((ch, i + 1, j + 1, False, False))
                options.append((ch, i, j + 1, True, False))
                options.append((ch, i + 1, j, False, True))
        if isinstance(x, tuple) and isinstance(y, str) and _holds(x[1], y, sep):
            options.append((y, i, j + 1, True, tj))
        if isinstance(y, tuple) and isinstance(x, str) and _holds(y[1], x, sep):
            options.append((x, i + 1, j, ti, True))
        if isinstance(x, tuple) and (ti or x[2]):
            options.append(("", i + 1, j, False, tj))  # x ends
        if isinstance(y, tuple) and (tj or y[2]):
            options.append(("", i, j + 1, ti, False))
        for text, ni, nj, ni_took, nj_took in options:
            rest = walk(ni, nj, ni_took, nj_took)
            if rest is not None:
                return text + rest
        return None

    return walk(0, 0, False, False)


def same_shape(t1: Template, t2: Template) -> bool:
    """The templates differ at most in their placeholders' names: ``item:{id}`` and
    ``item:{item_id}`` (they write the same keys for the same values)."""
    if len(t1.parts) != len(t2.parts):
        return False
    return all(
        (isinstance(p, str) and p == q) or (isinstance(p, int) and isinstance(q, int))
        for p, q in zip(t1.parts, t2.parts)
    )


def gaps_without_separator(template: Template, sep: str) -> list[tuple[str, str]]:
    """Pairs of neighbouring placeholders with no separator between them (``{a}-{b}``,
    ``{a}{b}``): their values cannot be told apart however they are escaped."""
    out: list[tuple[str, str]] = []
    last: int | None = None
    between = ""
    for p in template.parts:
        if isinstance(p, str):
            between += p
            continue
        a, b = template.columns[last] if last is not None else None, template.columns[p]
        if a is not None and a != b and sep not in between:
            out.append((a, b))
        last, between = p, ""
    return out


def literal_prefix(template: Template) -> str:
    first = template.parts[0] if template.parts else ""
    return first if isinstance(first, str) else ""


def pairs(items: Sequence[object]) -> list[tuple[object, object]]:
    return [(items[i], items[j]) for i in range(len(items)) for j in range(i + 1, len(items))]
