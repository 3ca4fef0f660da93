"""typer's coercion of option values, built only for a value that needs it.

typer 0.29 coerces every parameter's value through a pydantic ``TypeAdapter``, built the first
time the parameter is processed, even when the value is None: ``migrator COMMAND --help`` and
every shell-completion TAB process the app's own ``--help``, ``--install-completion`` and
``--show-completion`` (None when not given), and importing pydantic to return None was most
of their time (0.2-0.3 s). None coerces to None (``()`` for a repeatable option) without it,
as typer's ``RuntimeParam.coerce`` does; and while a word is being completed
(``ctx.resilient_parsing``) the values are left as parsed: completion reads only the mapping
argument, a string. Any other value goes through typer's own coercion, unchanged.

With a typer that has no such coercion (older releases), nothing is patched."""

from typing import Any

from typer import core

_Parameter: Any = getattr(core, "_TyperParameter", None)


class _Unbuilt:
    """Stands for a parameter's coercion until a value needs it."""

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        if ctx.resilient_parsing:  # completing a word: the values are only looked at
            return value
        return _built(param).coerce(value, param=param, ctx=ctx)


def _runtime_param(self: Any) -> Any:
    return getattr(self, "_runtime_param", None) or _UNBUILT


_UNBUILT = _Unbuilt()

if _Parameter is not None and hasattr(_Parameter, "get_runtime_param"):
    _built = _Parameter.get_runtime_param
    _Parameter.get_runtime_param = _runtime_param
