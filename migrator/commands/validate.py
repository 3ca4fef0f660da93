"""``migrator validate``: check a mapping file, and against the live schema if a source is known."""

from __future__ import annotations

import os
from typing import Any

from migrator.errors import MappingError, MappingErrors
from migrator.mapping.loader import load_mapping
from migrator.mapping.validate import ValidateReport, check_schema, problem_from
from migrator.source.mysql import Source
from migrator.urls import mask_source


def validate(
    path: str | os.PathLike[str], source: str | None = None, environ: Any = None
) -> ValidateReport:
    """Check the mapping file, and against the live schema when a source is known:
    ``source``, else ``$MIGRATOR_SOURCE_URL``, else the mapping's own ``source``.
    Raises ConnectError (exit 3) when a source is given but cannot be reached."""
    report = ValidateReport(str(path))
    try:
        mapping = load_mapping(path, environ=environ)
    except MappingErrors as e:
        report.problems += [problem_from(x) for x in e.errors]
        return report
    except MappingError as e:
        report.problems.append(problem_from(e))
        return report
    report.tables = len(mapping.tables)
    env = os.environ if environ is None else environ
    url = source or env.get("MIGRATOR_SOURCE_URL") or mapping.source
    if not url:
        return report
    with Source(url) as src:
        schema = src.schema()
    report.source = mask_source(url)
    report.problems += check_schema(mapping, schema)
    return report
