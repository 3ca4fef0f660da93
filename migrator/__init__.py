"""migrator: move a MySQL schema and its data into Redis, and prove nothing was lost."""

from __future__ import annotations

__version__ = "0.1.0"

from migrator.errors import MappingError, MigratorError
from migrator.mapping.loader import load_mapping

__all__ = ["MappingError", "MigratorError", "__version__", "load_mapping"]
