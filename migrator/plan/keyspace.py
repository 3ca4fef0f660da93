"""The keys a mapping owns: every pattern each table writes, and each table's key space.

Every key a table can write is described by a :class:`KeyPattern`: a template (from the
planner, so there is one definition of the key names) and a *family*:

* ``row``: one key per source row (row hashes, ``as: columns`` strings, unique strings);
* ``keyed``: a key per distinct value (index and tag sets, sorted sets, counters, unique
  hashes, latest lists).

A table's *key space* is wider than its patterns, so that stray keys of any shape are found
(``orderdetails:10100`` when rows are ``orderdetails:{orderNumber}:{productCode}``,
``employee_privileges:x`` under a join table): each templated pattern claims the literal
text before its first placeholder, cut after the first separator (its namespace:
``orderdetails:``, ``employee_privileges:``, ``tag:``); a pattern with no placeholder claims
only its own key (``emp:id``). A key belongs to the table of the most specific pattern it
fits (``emp:indices:mgr_id:8`` is an index set, not the row ``emp:{emp_id}``); a key that
fits no pattern belongs to the table whose namespace is the longest prefix of it, as a key
that no data can produce. Keys matching the mapping's ``options.ignore`` globs, and the
tool's own ``migrator:`` keys, belong to no table.

Used by verify (stale keys), ``verify --fix`` and ``migrate --replace`` (what to remove).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from migrator.mapping.model import DOCUMENTS, Template

if TYPE_CHECKING:
    from migrator.plan.planner import TablePlan

Family = Literal["row", "keyed"]
#: the tool's own keys (checkpoints): never a table's
TOOL_PREFIX = b"migrator:"


@dataclass(frozen=True)
class KeyPattern:
    table: str
    family: Family
    template: Template
    what: str  # structure name, for notes: hash, columns, unique-string, index, ...

    @property
    def literal_chars(self) -> int:
        return sum(len(p) for p in self.template.parts if isinstance(p, str))

    @property
    def head(self) -> bytes:
        """The literal text before the first placeholder (all of it for a literal key)."""
        first = self.template.parts[0] if self.template.parts else ""
        return first.encode() if isinstance(first, str) else b""

    def regex(self) -> re.Pattern[bytes]:
        return template_regex(self.template)


@functools.cache
def template_regex(template: Template) -> re.Pattern[bytes]:
    """A regex that matches every key the template renders; group ``g<i>`` is the value of
    placeholder ``i`` (a placeholder used twice must have the same value both times)."""
    out = []
    seen: set[int] = set()
    for p in template.parts:
        if isinstance(p, str):
            out.append(re.escape(p.encode()))
        elif p in seen:
            out.append(b"(?P=g%d)" % p)
        else:
            seen.add(p)
            out.append(b"(?P<g%d>.*)" % p)
    return re.compile(b"".join(out), re.DOTALL)


def _loose(template: Template) -> bytes:
    """The template's regex without groups (every placeholder ``.*``), for alternations."""
    return b"".join(re.escape(p.encode()) if isinstance(p, str) else b".*" for p in template.parts)


def literal(text: str) -> Template:
    return Template.parse(text.replace("{", "{{").replace("}", "}}"))


def table_patterns(plan: TablePlan) -> list[KeyPattern]:
    """Every key pattern a table's plan writes, by family."""
    r, t, name = plan.resolved, plan.table, plan.table.name
    out: list[KeyPattern] = []
    if t.kind == "hash":
        out.append(KeyPattern(name, "row", r.key, "hash"))
    elif t.kind in DOCUMENTS:
        out.append(KeyPattern(name, "row", r.key, "document"))
    elif t.kind == "columns":
        sep = plan.table_sep.replace("{", "{{").replace("}", "}}")
        for c in (*r.columns, *r.primary_key):
            field = plan.field_names.get(c, c)
            text = r.key.text + sep + field.replace("{", "{{").replace("}", "}}")
            out.append(KeyPattern(name, "row", Template.parse(text), "columns"))
    for u in t.unique:
        if u.key is not None:
            out.append(KeyPattern(name, "row", u.key, "unique-string"))
        else:
            key = plan.unique_hash_key(u.columns).decode()
            out.append(KeyPattern(name, "keyed", literal(key), "unique"))
    for ix in r.index_sets():
        out.append(KeyPattern(name, "keyed", plan.index_template(ix.columns), "index"))
    out += [KeyPattern(name, "keyed", s.key, "sorted") for s in t.sorted]
    out += [KeyPattern(name, "keyed", s.key, "set") for s in t.sets]
    out += [KeyPattern(name, "keyed", x.key, "latest") for x in t.latest]
    out += [KeyPattern(name, "keyed", v.key, "vector") for v in t.vector_sets]
    if r.counter is not None:
        out.append(KeyPattern(name, "keyed", r.counter, "counter"))
    return out


def namespace(pattern: KeyPattern, separator: bytes) -> bytes:
    """What a templated pattern claims: its head up to and including the first separator
    (the whole head when it has none); b"" for a literal key or a key starting with a
    placeholder (those claim nothing beyond their own keys)."""
    if pattern.template.is_literal:
        return b""
    head = pattern.head
    at = head.find(separator) if separator else -1
    return head[: at + len(separator)] if at >= 0 else head


class KeySpace:
    """All tables' patterns and key spaces; says which table (and pattern) a key is."""

    def __init__(self, plans: Sequence[TablePlan], ignore: Iterable[str] = ()) -> None:
        self.all = [p for plan in plans for p in table_patterns(plan)]
        self.compiled = {p: p.regex() for p in self.all}
        self.tables = [plan.table.name for plan in plans]
        self.plans = {plan.table.name: plan for plan in plans}
        self.seps = seps = {plan.table.name: plan.sep for plan in plans}
        # most specific first: one regex of alternatives tried in that order, so one C call
        # classifies a key (a placeholder used twice is checked again with its own regex)
        self.ordered = sorted(self.all, key=lambda p: -p.literal_chars)
        self._classify = re.compile(
            b"|".join(b"(?P<p%d>%b)" % (i, _loose(p.template)) for i, p in enumerate(self.ordered)),
            re.DOTALL,
        ).fullmatch
        self._exact_repeats = {
            f"p{i}": self.compiled[p].fullmatch
            for i, p in enumerate(self.ordered)
            if len(p.template.columns) < sum(isinstance(x, int) for x in p.template.parts)
        }
        self._by_group = {f"p{i}": p for i, p in enumerate(self.ordered)}
        #: row patterns ``literal{one placeholder}``: a key starting with the literal is theirs
        #: unless a pattern before them in ``ordered`` fits it; those patterns' keys start with
        #: their heads, so a key starting with one of those heads is left to the regex. A
        #: pattern before them whose head is a proper prefix of the literal (or empty) could
        #: fit any such key: then the row pattern takes the regex path only.
        self._prefixed_rows: list[tuple[bytes, tuple[bytes, ...], str]] = []
        for i, p in enumerate(self.ordered):
            parts = p.template.parts
            if p.family != "row" or len(parts) != 2 or not isinstance(parts[0], str):
                continue
            literal = parts[0].encode()
            before = self.ordered[:i]
            if any(literal.startswith(q.head) and len(q.head) < len(literal) for q in before):
                continue
            heads = tuple(q.head for q in before if q.head.startswith(literal))
            self._prefixed_rows.append((literal, heads, p.table))
        spaces: dict[bytes, str] = {}
        for p in self.all:
            ns = namespace(p, seps[p.table])
            if ns:
                spaces.setdefault(ns, p.table)
        #: namespace -> table, longest first
        self.spaces = sorted(spaces.items(), key=lambda kv: -len(kv[0]))
        self.exact = {p.template.text.encode(): p for p in self.all if p.template.is_literal}
        globs = [glob_regex(g).pattern for g in ignore]
        self._ignore = re.compile(b"|".join(globs), re.DOTALL).fullmatch if globs else None
        self._paged = _PageCounts(self._prefixed_rows, [glob_head(g) for g in ignore])

    # -- one key -----------------------------------------------------------------------------
    def ignored(self, key: bytes) -> bool:
        return key.startswith(TOOL_PREFIX) or (
            self._ignore is not None and self._ignore(key) is not None
        )

    def owner(self, key: bytes) -> tuple[str, KeyPattern | None] | None:
        """(table, the most specific pattern the key fits, or None when it fits none but lies
        in the table's key space); None when the key is not the mapping's."""
        if self.ignored(key):
            return None
        m = self._classify(key)
        if m is not None:
            group = m.lastgroup or ""
            exact = self._exact_repeats.get(group)
            if exact is None or exact(key):
                p = self._by_group[group]
                return p.table, p
            for p in self.ordered:  # a repeated placeholder differed: the slow way
                if self.compiled[p].fullmatch(key):
                    return p.table, p
        for ns, table in self.spaces:
            if key.startswith(ns):
                return table, None
        return None

    def invert(self, pattern: KeyPattern, key: bytes) -> dict[str, bytes] | None:
        """The placeholder values a key was rendered from (None if it does not match): read
        as the table's plan writes them (``TablePlan.read``: a value of a fixed-count column
        holds exactly its separators, the one varying value of a composite may hold more;
        unescaped under ``escape: backslash``)."""
        return self.plans[pattern.table].read(pattern.template, key, True)

    def tally(
        self, keys: Sequence[bytes], tables: Iterable[str]
    ) -> tuple[Counter[str], list[tuple[bytes, str, KeyPattern | None]]]:
        """For a page of scanned keys: how many per-row keys each of ``tables`` owns, and every
        other key those tables own (with its table and pattern, None when it fits none). The
        per-row keys, nearly all of a page, are classified and counted without a Python step
        per key beyond one regex call (verify's stale-key scan of a million keys)."""
        wanted = set(tables)
        rows = {f"p{i}": p.table for i, p in enumerate(self.ordered)
                if p.family == "row" and p.table in wanted
                and f"p{i}" not in self._exact_repeats}  # fmt: skip
        paged = self._paged.split(keys, wanted)
        if paged is not None:  # the whole page at once: counts, and the few keys left
            counts, keys = paged
        else:
            counts, keys = self._prefix_tested(keys, wanted)
        classify = self._classify
        groups = [m.lastgroup if m is not None else None for m in map(classify, keys)]
        for group, n in Counter(groups).items():
            if group in rows:
                counts[rows[group]] += n
        others = []
        for key in [k for k, g in zip(keys, groups) if g not in rows]:
            got = self.owner(key)
            if got is not None and got[0] in wanted:
                others.append((key, got[0], got[1]))
        return counts, others

    def _prefix_tested(
        self, keys: Sequence[bytes], wanted: set[str]
    ) -> tuple[Counter[str], list[bytes]]:
        """``tally``'s first step key by key: ignored keys left out, then ``literal{pk}`` rows
        of ``wanted`` tables counted by a prefix test, no regex; the counts and the keys left."""
        keys = [k for k in keys if not k.startswith(TOOL_PREFIX)]
        if self._ignore is not None:
            ignore = self._ignore
            keys = [k for k in keys if ignore(k) is None]
        counts: Counter[str] = Counter()
        for literal, beaten_by, table in self._prefixed_rows:
            if table in wanted and keys:
                rest = [k for k in keys if not k.startswith(literal) or k.startswith(beaten_by)]
                counts[table] += len(keys) - len(rest)
                keys = rest
        return counts, keys

    # -- SCAN --------------------------------------------------------------------------------
    def globs(self, tables: Iterable[str] | None = None) -> list[str]:
        """SCAN MATCH globs that cover the key spaces of ``tables`` (default: all), none
        covered by another: a namespace gives ``ns*``, a literal key itself."""
        wanted = set(self.tables if tables is None else tables)
        candidates = [glob_escape(ns) + "*" for ns, t in self.spaces if t in wanted]
        candidates += [
            p.template.glob()
            for p in self.all
            if p.table in wanted and not namespace(p, self.seps[p.table])
        ]
        out: list[str] = []
        for g in sorted(set(candidates), key=lambda g: (len(g.rstrip("*")), g)):
            sample = glob_sample(g)
            if not any(glob_regex(o).fullmatch(sample) for o in out):
                out.append(g)
        return out

    def owned(
        self, pages: Iterable[list[bytes]], tables: Iterable[str] | None = None
    ) -> Iterator[list[tuple[bytes, str, KeyPattern | None]]]:
        """For pages of scanned keys, the keys owned by ``tables`` (default: any) with their
        table and pattern, a page at a time."""
        wanted = None if tables is None else set(tables)
        for keys in pages:
            out = []
            for key in keys:
                got = self.owner(key)
                if got is not None and (wanted is None or got[0] in wanted):
                    out.append((key, got[0], got[1]))
            if out:
                yield out


#: what joins a page of keys for _PageCounts (a page with a key that holds it goes key by key)
SEP = b"\n"


class _PageCounts:
    """``tally``'s prefix test for ``literal{pk}`` rows, done on a whole page at once: the
    page joined by newlines, the keys starting with a text counted by ``bytes.count`` of
    newline + text, and only the keys that start with a more specific pattern's head picked
    out (a literal search) for the regex. It applies to a page where every key starts with
    some row literal, and no key holds a newline, the tool's prefix or an ignore glob's
    literal head; ``split`` answers None for any other page (tally goes key by key)."""

    def __init__(
        self, prefixed_rows: list[tuple[bytes, tuple[bytes, ...], str]], ignore_heads: list[bytes]
    ) -> None:
        self.rows = prefixed_rows
        self.literals = _shortest(literal for literal, _, _ in prefixed_rows)
        self.beaten = [_shortest(heads) for _, heads, _ in prefixed_rows]
        heads = _shortest(h for beaten in self.beaten for h in beaten)
        self.pick = {SEP + h: re.compile(re.escape(SEP + h) + b"[^\n]*").findall for h in heads}
        self.guards = (
            None
            if not all(ignore_heads)  # a glob starting with a wildcard could match any key
            else [SEP + h for h in (TOOL_PREFIX, *ignore_heads)]
        )

    def split(
        self, keys: Sequence[bytes], wanted: set[str]
    ) -> tuple[Counter[str], list[bytes]] | None:
        """The row keys each of ``wanted`` tables owns by the prefix test, and the keys that
        no prefix test claims; None when the page must go key by key."""
        if not self.rows or self.guards is None or not keys:
            return None
        page = SEP + SEP.join(keys)
        found: dict[bytes, int] = {}  # keys per (newline +) text: each text counted once

        def count(text: bytes) -> int:
            n = found.get(text)
            if n is None:
                n = found[text] = page.count(text)
            return n

        if count(SEP) != len(keys) or any(map(count, self.guards)):
            return None
        if sum(count(SEP + literal) for literal in self.literals) != len(keys):
            return None  # a key that starts with no row literal
        counts: Counter[str] = Counter()
        claimed = 0
        for (literal, _, table), beaten in zip(self.rows, self.beaten):
            n = count(SEP + literal) - sum(count(SEP + h) for h in beaten)
            claimed += n
            if n and table in wanted:
                counts[table] += n
        picked = [k[1:] for h, pick in self.pick.items() if count(h) for k in pick(page)]
        left = [k for k in picked if not self._claimed(k)]
        if claimed + len(left) != len(keys):  # pragma: no cover - the counts disagree
            return None
        return counts, left

    def _claimed(self, key: bytes) -> bool:
        return any(key.startswith(lit) and not key.startswith(b) for lit, b, _ in self.rows)


def _shortest(texts: Iterable[bytes]) -> tuple[bytes, ...]:
    """The texts that no other one starts with: a key starts with at most one of them."""
    unique = sorted(set(texts), key=len)
    out: list[bytes] = []
    for t in unique:
        if not t.startswith(tuple(out)):
            out.append(t)
    return tuple(out)


def glob_head(glob: str) -> bytes:
    """The literal text every key a glob matches starts with (up to its first wildcard)."""
    out, i = [], 0
    while i < len(glob) and glob[i] not in "*?[":
        if glob[i] == "\\" and i + 1 < len(glob):
            i += 1
        out.append(glob[i])
        i += 1
    return "".join(out).encode("utf-8", "surrogateescape")


def glob_escape(text: bytes | str) -> str:
    raw = text.decode("utf-8", "surrogateescape") if isinstance(text, bytes) else text
    return re.sub(r"([*?\[\]\\])", r"\\\1", raw)


def glob_sample(glob: str) -> bytes:
    """A key the glob matches, with a character no literal text holds for each wildcard."""
    out, i = [], 0
    while i < len(glob):
        ch = glob[i]
        if ch == "\\" and i + 1 < len(glob):
            out.append(glob[i + 1])
            i += 2
            continue
        out.append("\x00" if ch in "*?" else ch)
        i += 1
    return "".join(out).encode("utf-8", "surrogateescape")


def glob_regex(glob: str) -> re.Pattern[bytes]:
    """A regex for a Redis glob: ``*``, ``?``, ``[...]`` (``[^...]`` too) and ``\\`` escapes."""
    out, i = [], 0
    while i < len(glob):
        ch = glob[i]
        if ch == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
            continue
        if ch == "[":
            end = glob.find("]", i + 2)
            if end > 0:
                body = glob[i + 1 : end]
                neg = body.startswith("^")
                body = body[1:] if neg else body
                out.append("[" + ("^" if neg else "") + body.replace("\\", "\\\\") + "]")
                i = end + 1
                continue
        out.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
        i += 1
    return re.compile("".join(out).encode("utf-8", "surrogateescape"), re.DOTALL)
