"""The shape checks every part of a mapping goes through: scalars, key templates, column
names, mappings of known keys and lists, each error placed at its mapping path and YAML line;
``${VAR}`` expansion; 'did you mean' suggestions. ``build`` reads the document with them."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from typing import Any, TypeVar

from migrator.errors import MappingError
from migrator.mapping.model import Template
from migrator.urls import quote_userinfo, userinfo_spans

T = TypeVar("T")

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def suggest(name: str, choices: Any) -> str | None:
    """'did you mean ...?' for the closest valid name, if any is close."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


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


class ShapeReader:
    """Reads the values of one mapping file; ``error`` places a message at a path's line."""

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
