"""migrator: move a MySQL schema and its data into Redis, and prove nothing was lost."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from migrator.errors import MappingError, MigratorError
    from migrator.mapping.loader import load_mapping

__all__ = ["MappingError", "MigratorError", "__version__", "load_mapping"]


def __getattr__(name: str) -> Any:
    """The re-exports, imported when first asked for: ``migrator --version`` and the console
    entry point (``migrator/__main__.py``) import this package and nothing else first."""
    if name in ("MappingError", "MigratorError"):
        from migrator import errors

        return getattr(errors, name)
    if name == "load_mapping":
        from migrator.mapping.loader import load_mapping

        return load_mapping
    raise AttributeError(f"module 'migrator' has no attribute {name!r}")
