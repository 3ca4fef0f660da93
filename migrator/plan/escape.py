"""Separators inside values: when two or more values are joined into one key, member or field
(``t:{a}:{b}``, the composite primary key ``1:2`` kept as an index member, a composite
unique entry ``v1:v2``), a value holding the separator makes it ambiguous: the rows
``('a:b', 'c')`` and ``('a', 'b:c')`` both become ``t:a:b:c``.

The mapping's ``options.escape`` says what to do (docs/mapping.md, "Separators in values"):

* ``reject`` (the default): a row is not written at all when a value holding the separator
  makes a composite ambiguous. ``migrate`` lists it in its reject report (table, primary key,
  column) and exits 1; ``dry-run`` counts it and exits 1; ``verify`` counts it as a
  difference (exit 1).
* ``backslash``: every value placed in such a composite is escaped: a backslash becomes
  ``\\\\`` and each character of the separator gets a backslash in front (``a:b`` -> ``a\\:b``
  with ``:``). Values without either are unchanged, so most keys look as before. The scheme
  is reversible: split a composite at the separators that have no backslash in front
  (``split``), then ``unescape`` each part.

Which composites are ambiguous. A column *varies* when its text may hold a separator
character a varying number of times (``mapping.keyspace.separator_count``): text, binary,
JSON and geometry do; integers never hold ``:`` and a DATETIME or TIME always holds exactly
two. A composite is ambiguous only when two or more of its columns vary: with one, the
others' separators are counted from either end and the varying value is what is left
(``user:group:{gid}:{member}`` with an integer ``gid`` reads ``user:group:1:bob:smith`` one
way only; ``unrender`` reads it back). ``reject`` looks at the varying columns of the
ambiguous composites only (``checked``), so tables without one pay nothing. ``backslash``
escapes every value of a composite, so that ``split`` recovers each one whatever its type
(a DATETIME's colons are escaped too). Single-value keys (``emp:{email}``) are never
ambiguous: the rest of the key is the value.

Used alike by the planner (``plan.batch``), the packed hot path (``plan.packer``), dry-run,
verify and sync, so all of them agree on every byte.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

from migrator.mapping.keyspace import may_hold_separator, may_need_escape
from migrator.mapping.model import Template

__all__ = ["may_hold_separator", "may_need_escape"]

REJECT = "reject"
BACKSLASH = "backslash"
POLICIES = (REJECT, BACKSLASH)
AMBIGUOUS = "separator inside a value of a composite key"  # the reject reason

BS = b"\\"


def separator_chars(sep: str | bytes) -> list[bytes]:
    """The separator's characters, each as its UTF-8 bytes (``'::'`` -> ``[b':']``)."""
    text = sep.decode() if isinstance(sep, bytes) else sep
    return [c.encode() for c in dict.fromkeys(text)]


def needles(chars: Sequence[bytes]) -> list[int | bytes]:
    """What to look for with ``in``: a one-byte character as its int (``58 in v`` is ~10x
    faster than ``b":" in v``), a longer one as bytes."""
    return [c[0] if len(c) == 1 else c for c in chars]


def escape(value: bytes, sep: bytes) -> bytes:
    """``value`` with ``\\`` doubled and every separator character behind a backslash."""
    if BS in value:
        value = value.replace(BS, BS + BS)
    for c in separator_chars(sep):
        if c in value:
            value = value.replace(c, BS + c)
    return value


def escaper(sep: bytes) -> Callable[[bytes], bytes]:
    """``escape`` for one separator, with the common no-op case first."""
    chars = separator_chars(sep)
    if len(chars) == 1:
        c = chars[0]
        esc = BS + c
        n, bs = needles([c, BS])

        def one(value: bytes) -> bytes:
            if n not in value and bs not in value:
                return value
            return value.replace(BS, BS + BS).replace(c, esc)

        return one
    return lambda value: escape(value, sep)


def _token(sep: bytes) -> re.Pattern[bytes]:
    """A regex for one unit of an escaped text: an escape pair, the separator, or a byte."""
    specials = b"|".join(re.escape(c) for c in [BS, *separator_chars(sep)])
    return re.compile(rb"\\(?:" + specials + rb")|" + re.escape(sep) + rb"|.", re.DOTALL)


def split(text: bytes, sep: bytes) -> list[bytes]:
    """Split an escaped composite at its unescaped separators, each part unescaped:
    ``split(b'a\\\\:b:c', b':') == [b'a:b', b'c']``."""
    parts: list[bytes] = []
    current = bytearray()
    for m in _token(sep).finditer(text):
        unit = m.group(0)
        if unit == sep:
            parts.append(bytes(current))
            current = bytearray()
        elif unit[:1] == BS and len(unit) > 1:
            current += unit[1:]
        else:
            current += unit
    parts.append(bytes(current))
    return parts


def unescape(text: bytes, sep: bytes) -> bytes:
    """One escaped value back to the original (no separator split)."""
    out = bytearray()
    for m in _token(sep).finditer(text):
        unit = m.group(0)
        out += unit[1:] if unit[:1] == BS and len(unit) > 1 else unit
    return bytes(out)


def unrender(
    template: Template,
    key: bytes,
    sep: bytes,
    escaped: bool,
    counts: Sequence[int | None] | None = None,
) -> dict[str, bytes] | None:
    """The values a ``key`` was rendered from by ``template`` (None if it does not fit).

    ``escaped`` (``escape: backslash``): the key is split at unescaped separators and each
    value unescaped. Otherwise ``counts`` gives, per column of the template, how many
    separator characters each of its values holds (``mapping.keyspace.separator_count``;
    None: a varying number; omitted: every column varies): a column with a fixed count holds
    exactly that many; in a single-column template, or the one varying column of a
    composite, the value is whatever the rest of the key leaves (it may hold separators:
    ``user:group:1:bob:smith`` is read ``1``, ``bob:smith``); in a composite with two or
    more varying columns, where ``escape: reject`` lets no such value through, none."""
    got = reader(template, sep, escaped, tuple(counts or [None] * len(template.columns)))
    return matched(template, got.fullmatch(key), sep, escaped)


def matched(
    template: Template, m: re.Match[bytes] | None, sep: bytes, escaped: bool
) -> dict[str, bytes] | None:
    """The values of a ``reader`` match (None: no match, or a placeholder used twice with two
    values)."""
    if m is None:
        return None
    values: dict[str, bytes] = {}
    slots = [p for p in template.parts if isinstance(p, int)]
    for n, slot in enumerate(slots):
        raw = m.group(n + 1)
        v = unescape(raw, sep) if escaped else raw
        if values.setdefault(template.columns[slot], v) != v:
            return None
    return values


@functools.cache
def reader(
    template: Template, sep: bytes, escaped: bool, counts: tuple[int | None, ...]
) -> re.Pattern[bytes]:
    """``unrender``'s regex: a group per placeholder, in order."""
    chars = b"".join(re.escape(c) for c in separator_chars(sep))
    other = b"[^" + chars + b"]*"
    open_ended = len(template.columns) < 2 or counts.count(None) < 2
    parts: list[bytes] = []
    for p in template.parts:
        if isinstance(p, str):
            parts.append(re.escape(p.encode()))
        elif escaped:
            parts.append(rb"((?:\\.|[^\\" + chars + rb"])*)")
        elif (n := counts[p]) is None:
            parts.append(b"(.*)" if open_ended else b"(" + other + b")")
        else:
            parts.append(b"(%s(?:[%s]%s){%d})" % (other, chars, other, n))
    return re.compile(b"".join(parts), re.DOTALL)


def joined(columns: Sequence[str], sep: str) -> Template:
    """The template of the columns' values joined by the separator (a composite unique
    field, a composite primary key written as a member)."""
    parts: list[str | int] = []
    for i in range(len(columns)):
        parts += [sep, i] if i else [i]
    text = sep.replace("{", "{{").replace("}", "}}").join(f"{{{c}}}" for c in columns)
    return Template(text, tuple(parts), tuple(columns))


def composite(template: Template) -> bool:
    """A template whose keys are made of two or more different columns' values."""
    return len(template.columns) >= 2


def first_ambiguous(
    row: Sequence[bytes | None],
    guards: Sequence[tuple[Sequence[int], Sequence[tuple[int, str]]]],
    chars: Sequence[int | bytes],
) -> str | None:
    """The first column whose value holds a separator character inside an ambiguous
    composite that is written (none of its values NULL), or None. ``guards``: per ambiguous
    composite, the positions of its columns and the (position, column) of its varying ones."""
    for positions, looked_at in guards:
        for i, name in looked_at:
            v = row[i]
            if v is not None and any(c in v for c in chars):
                if all(row[j] is not None for j in positions):
                    return name
                break
    return None
