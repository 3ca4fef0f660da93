"""The metric names a PromQL expression reads, and whether a scrape exports them — for the tests
of the operations assets (ops/grafana, ops/prometheus; tests/test_ops.py and
tests/sync/test_ops_live.py).

:func:`metric_names` lexes an expression as Prometheus does (strings, label matchers, ranges and
subqueries, ``by``/``without``/``on``/``ignoring``/``group_left``/``group_right`` label lists,
functions and aggregation operators, ``offset`` and ``@``, numbers, durations and Grafana's
``$variables``) and returns the names of its selectors: ``foo{a="b"}``, ``foo[5m]``, a bare
``foo``, and ``{__name__="foo"}`` (``{__name__=~"f.*"}`` gives the regex as written, which
names no metric: a check of the names then fails, as it should for a query it cannot check).
It does not judge the syntax: promtool does (tests/test_ops.py checks every expression with
``promtool check rules``).

:func:`exported` says whether a name is one a scrape's metric family yields, with the suffixes
of the family's type: a counter ``x`` gives ``x_total`` (and ``x_created``), a histogram
``x_bucket``, ``x_sum``, ``x_count``, a summary ``x``, ``x_sum``, ``x_count``, a gauge, untyped
or info family its own name (``x_info`` for an OpenMetrics info family). So ``x_count`` of a
gauge ``x`` is not exported, and ``x_bucket`` of a summary is not either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

AGGREGATIONS = frozenset(
    ["sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
     "bottomk", "topk", "quantile", "limitk", "limit_ratio"]
)  # fmt: skip
#: keywords followed by a parenthesized list of label names (not selectors)
LABEL_LISTS = frozenset(["by", "without", "on", "ignoring", "group_left", "group_right"])
KEYWORDS = frozenset(["and", "or", "unless", "bool", "offset", "atan2"]) | LABEL_LISTS
NUMBER_WORDS = frozenset({"inf", "nan"})
#: per family type, the sample-name suffixes it yields ("" is the family's own name)
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "untyped": ("",),
    "unknown": ("",),
    "stateset": ("",),
    "info": ("_info",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "summary": ("", "_sum", "_count", "_created"),
}

_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F]+|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
    r"(?:(?:ms|[smhdwy])(?:[0-9]+(?:ms|[smhdwy]))*)?"
)
_VARIABLE = re.compile(r"\$\{[^}]*\}|\$[A-Za-z0-9_]+|\[\[[A-Za-z0-9_:.]+\]\]")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', re.S)
_NAME_MATCHER = re.compile(r'__name__\s*=~?\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`)')


class PromQLError(ValueError):
    """The expression cannot be lexed (an unclosed string, brace or bracket)."""


def _string_value(quoted: str) -> str:
    if quoted[0] == "`":
        return quoted[1:-1]
    return re.sub(r"\\(.)", r"\1", quoted[1:-1])


def _closing(expr: str, i: int, opening: str, closing: str) -> int:
    """The index just past the ``closing`` that matches ``expr[i] == opening`` (strings
    skipped)."""
    depth = 0
    while i < len(expr):
        m = _STRING.match(expr, i)
        if m:
            i = m.end()
            continue
        c = expr[i]
        if c in "\"'`":
            raise PromQLError(f"unclosed string at {i}: {expr[i : i + 20]!r}")
        depth += (c == opening) - (c == closing)
        i += 1
        if depth == 0:
            return i
    raise PromQLError(f"unclosed {opening!r} in {expr!r}")


def _skip_space(expr: str, i: int) -> int:
    while i < len(expr):
        if expr[i].isspace():
            i += 1
        elif expr[i] == "#":  # a comment, to the end of the line
            end = expr.find("\n", i)
            i = len(expr) if end < 0 else end
        else:
            break
    return i


def metric_names(expr: str) -> set[str]:
    """The names of the metrics ``expr`` selects."""
    names: set[str] = set()
    i = _skip_space(expr, 0)
    previous = ""  # the last identifier or keyword, lower-cased
    while i < len(expr):
        c = expr[i]
        m = _VARIABLE.match(expr, i)
        if m:
            i, previous = m.end(), "$"
        elif c in "\"'`":
            m = _STRING.match(expr, i)
            if not m:
                raise PromQLError(f"unclosed string at {i}: {expr[i : i + 20]!r}")
            i, previous = m.end(), ""
        elif c == "{":  # label matchers: of the name before, or of none ({__name__="x"})
            end = _closing(expr, i, "{", "}")
            for quoted in _NAME_MATCHER.findall(expr[i:end]):
                names.add(_string_value(quoted))
            i, previous = end, ""
        elif c == "[":  # a range or a subquery: durations, variables, a colon
            i, previous = _closing(expr, i, "[", "]"), ""
        elif c == "(" and previous in LABEL_LISTS:  # label names, not selectors
            i, previous = _closing(expr, i, "(", ")"), ""
        elif c.isdigit() or (c == "." and expr[i + 1 : i + 2].isdigit()):
            m = _NUMBER.match(expr, i)
            assert m is not None
            i, previous = m.end(), ""
        elif _IDENT.match(expr, i):
            m = _IDENT.match(expr, i)
            assert m is not None
            word, i = m.group(), m.end()
            after = _skip_space(expr, i)
            lower = word.lower()
            calls = after < len(expr) and expr[after] == "("
            if lower in KEYWORDS or lower in NUMBER_WORDS or lower in AGGREGATIONS:
                pass  # `sum by (x) (...)`, `sum(...)`, `x offset 5m`, `a and b`, `inf`
            elif calls or previous == "@":  # a function; `@ start()`
                pass
            else:
                names.add(word)
            previous = lower
        elif c == "@":
            i, previous = i + 1, "@"
        else:  # operators, parentheses, commas
            i, previous = i + 1, ""
        i = _skip_space(expr, i)
    return names


@dataclass(frozen=True)
class Family:
    name: str
    type: str
    sampled: frozenset[str]  # the sample names the scrape held for it


def families(exposition: str) -> dict[str, Family]:
    """A scrape (the Prometheus text format, or OpenMetrics) -> its families by name, with
    the sample names each held."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        f.name: Family(f.name, f.type, frozenset(s.name for s in f.samples))
        for f in text_string_to_metric_families(exposition)
    }


def exported(name: str, scraped: dict[str, Family]) -> Family | None:
    """The family of ``scraped`` that yields samples named ``name``, by its type's suffixes."""
    for family in scraped.values():
        for suffix in SUFFIXES.get(family.type, ("",)):
            if name == family.name + suffix:
                return family
    return None


# -- Grafana: the queries of a dashboard -------------------------------------------------------
_LABEL_VALUES = re.compile(
    r"^\s*label_values\(\s*(.*?)\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$", re.S
)
_QUERY_RESULT = re.compile(r"^\s*query_result\(\s*(.*)\)\s*$", re.S)
_TIME_VARIABLE = re.compile(r"\$\{?__(?:rate_interval|interval|range)(?::\w+)?\}?")


def grafana_queries(dashboard: dict[str, object]) -> list[tuple[str, str]]:
    """(where, PromQL) of every query a Grafana dashboard runs: each target of each panel
    (panels inside rows too), and each query variable of its templating (the selector of
    ``label_values(SELECTOR, label)``, the expression of ``query_result(EXPR)``;
    ``label_values(label)`` reads no metric and is left out)."""
    out: list[tuple[str, str]] = []

    def walk(panels: object) -> None:
        for panel in panels if isinstance(panels, list) else []:
            for target in panel.get("targets", []):
                if target.get("expr"):
                    out.append((f"panel {panel.get('title')!r} {target.get('refId')}",
                                target["expr"]))  # fmt: skip
            walk(panel.get("panels"))

    walk(dashboard.get("panels"))
    templating = dashboard.get("templating")
    for var in templating.get("list", []) if isinstance(templating, dict) else []:
        if var.get("type") != "query":
            continue
        query = var.get("query")
        text = query.get("query", "") if isinstance(query, dict) else str(query or "")
        m = _LABEL_VALUES.match(text) or _QUERY_RESULT.match(text)
        if m:
            out.append((f"variable {var.get('name')!r}", m.group(1)))
    return out


def as_promql(query: str) -> str:
    """A Grafana query as plain PromQL, for promtool: ``$__rate_interval``, ``$__interval``
    and ``$__range`` -> ``5m``; other variables (inside label matchers' strings) -> ``x``."""
    return _VARIABLE.sub("x", _TIME_VARIABLE.sub("5m", query))
