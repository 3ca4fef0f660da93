"""``migrator validate`` of a sharded mapping (``sources:``, docs/sharding.md): the checks of
one server run against every shard, and the shards compared with each other
(mapping/shard_schemas.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from migrator.commands.shards import connect
from migrator.mapping.model import Mapping
from migrator.mapping.schema import Schema
from migrator.mapping.shard_schemas import differences
from migrator.mapping.validate import Problem, ValidateReport
from migrator.source.mysql import Source
from migrator.urls import mask

Against = Callable[[Mapping, Source, Schema], list[Problem]]


def check_shards(report: ValidateReport, mapping: Mapping, against: Against) -> ValidateReport:
    """Every shard checked as one server is (``against``); a problem met on some shards only
    names them. A shard that cannot be reached raises ConnectError (exit 3) naming it."""
    found: dict[Problem, list[str]] = {}
    schemas: dict[str, Schema] = {}
    for shard in mapping.sources:
        src, schemas[shard.name] = connect(shard.name, shard.url)
        with src:
            for problem in against(mapping, src, schemas[shard.name]):
                found.setdefault(problem, []).append(shard.name)
    report.source = ", ".join(f"{s.name}: {mask(s.url)}" for s in mapping.sources)
    for problem, names in found.items():
        if len(names) < len(mapping.sources):
            problem = dataclasses.replace(
                problem,
                message=f"on shard {', '.join(names)}: {problem.message}",
                brief=None if problem.brief is None else f"on {', '.join(names)}: {problem.brief}",
            )
        report.problems.append(problem)
    report.problems += differences(mapping, schemas)
    return report
