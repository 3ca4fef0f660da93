"""Where ``dry-run`` puts what it plans (commands/dryrun.py): ``PlanSink`` counts the keys each
structure of a table creates and sizes them (plan/estimate.py), and writes the RESP export;
``Classifier`` tells which structure wrote a command, from its name and its key."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import IO, ClassVar

from migrator.mapping.model import Template
from migrator.plan.estimate import Limits, MemoryModel
from migrator.plan.planner import Command, TablePlan
from migrator.plan.resp import resp


class Classifier:
    """Which structure of a table wrote a command, from the command name and its key."""

    ONCE: ClassVar[set[str]] = {
        "hash", "columns", "document", "unique-string", "counter", "latest",
    }  # fmt: skip

    def __init__(self, plan: TablePlan) -> None:
        rules: dict[bytes, list[tuple[str, re.Pattern[bytes] | None]]] = {}
        by_command = {
            "hash": b"HSET", "unique": b"HSET", "columns": b"SET", "unique-string": b"SET",
            "counter": b"SET", "index": b"SADD", "set": b"SADD", "sorted": b"ZADD",
            "latest": b"RPUSH", "rows": b"HSET", "stream": b"XADD", "vector": b"VADD",
            "shard": b"HSET",  # a sharded source's owner hash (plan/owners.py)
            "document": b"JSON.SET" if plan.table.kind == "json" else b"SET",
        }  # fmt: skip
        literal = {"unique", "rows", "stream", "shard"}  # plain key names, not templates
        # exact names first, so a template cannot claim them
        order = ["unique", "rows", "shard", "counter", "latest", *by_command]
        patterns = dict(plan.patterns())
        if plan.table.streams is not None:  # the first load's snapshot entries
            patterns["stream"] = [plan.table.streams.key]
        sets = [t for t in patterns.get("rows", []) if t.endswith("{values}")]
        for text in sets:  # row images' SETs per foreign-key value (plan/row_images.py)
            rules.setdefault(b"SADD", []).append(("rows", _template(text)))
        for name in dict.fromkeys(order):
            for text in [t for t in patterns.get(name, []) if t not in sets]:
                rx = _literal(text) if name in literal else _template(text)
                rules.setdefault(by_command[name], []).append((name, rx))
        self.rules = rules

    def __call__(self, command: Command) -> str | None:
        rules = self.rules.get(command[0].upper())
        if not rules:
            return None
        if len(rules) == 1:
            return rules[0][0]
        key = command[1]
        for name, rx in rules:
            if rx is None or rx.fullmatch(key):
                return name
        return rules[-1][0]


def _literal(text: str) -> re.Pattern[bytes]:
    return re.compile(re.escape(text.encode()), re.S)


def _template(text: str) -> re.Pattern[bytes] | None:
    try:
        t = Template.parse(text)
    except ValueError:
        return None
    parts = [re.escape(p.encode()) if isinstance(p, str) else b".*" for p in t.parts]
    return re.compile(b"".join(parts), re.S)


class PlanSink:
    """The dry-run's sink for one table: counts and sizes keys, optionally writes RESP."""

    def __init__(self, plan: TablePlan, out: IO[bytes] | None, limits: Limits) -> None:
        self.classify = Classifier(plan)
        self.models: dict[str, MemoryModel] = {}
        self.limits = limits
        self.out = out
        self.commands = 0
        self.bytes = 0

    def write(self, commands: Sequence[Command], packed: bytes | None = None) -> None:
        """Count and size ``commands``; with a RESP file, append them to it (``packed``:
        their bytes as ``TablePlan.pack`` made them)."""
        self.commands += len(commands)
        if self.out is not None and commands:
            data = resp(commands) if packed is None else packed
            self.out.write(data)
            self.bytes += len(data)
        for cmd in commands:
            name = self.classify(cmd)
            if name is None:  # MULTI, DEL, EXEC around a latest list
                continue
            model = self.models.get(name)
            if model is None:
                model = self.models[name] = MemoryModel(self.limits)
            model.add(cmd, once=name in Classifier.ONCE)
