"""Generated code for ``TableDelta.entries`` (plan/delta.py): one function per table that
computes a row's entries with the row hash, unique hashes, index sets and sorted sets
inlined, instead of one call per structure and per entry (the entries of the module
docstring of plan/delta.py, grouped per key, in the order of the table's structures). The
other structures (``as: columns``, STRING-style uniques, tag sets) keep a collector each
(plan/delta_entries.py), called from the generated code in their turn.

Only positions and constants go into the code; names, keys and functions stay in its
namespace (as in plan/packer.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migrator.mapping.model import Template
from migrator.plan.batch import Row, template_parts
from migrator.plan.planner import TablePlan
from migrator.plan.structures import IndexSets, RowHash, SortedSets, UniqueHashes
from migrator.plan.values import score

#: a row's entries grouped per Redis key: ``(type, key) -> {sub: value}``
Entries = dict[tuple[str, bytes], dict[bytes, bytes]]
Collect = Callable[[Row, Entries], None]


class _Code:
    def __init__(self, plan: TablePlan) -> None:
        self.plan = plan
        self.namespace: dict[str, Any] = {"SCORE": score}
        self.lines: list[str] = []
        #: entry types no code so far can have put in ``out``: their first group is set, not
        #: merged (a collector may put any: after one, every type merges)
        self.fresh = set("HhSz")

    def const(self, value: object) -> str:
        name = f"C{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def key(self, template: Template, fn: Callable[[Row], bytes | None]) -> tuple[str, str]:
        """(a test that the key is NULL, the key's expression): inlined unless a value in it
        is escaped (``escape: backslash``), which calls ``fn``, the compiled template."""
        plan = self.plan
        parts = template_parts(template, plan.pos)
        used = sorted({p for p in parts if isinstance(p, int)})
        if template.lowered or (plan.esc is not None and any(p in plan.escapable for p in used)):
            self.lines.append(f"    k = {self.const(fn)}(row)")
            return "k is None", "k"
        terms = [self.const(p) if isinstance(p, bytes) else f"_{p}" for p in parts]
        return " or ".join(f"_{i} is None" for i in used) or "False", " + ".join(terms) or "b''"

    def merge(self, indent: str, kind: str, kk: str, sub: str, value: str) -> None:
        """``out[kk][sub] = value``, the group made on its first entry."""
        if kind in self.fresh:
            self.fresh.discard(kind)
            self.lines.append(f"{indent}out[{kk}] = {{{sub}: {value}}}")
            return
        self.lines += [
            f"{indent}got = out.get({kk})",
            f"{indent}if got is None:",
            f"{indent}    out[{kk}] = {{{sub}: {value}}}",
            f"{indent}else:",
            f"{indent}    got[{sub}] = {value}",
        ]


def entries_function(
    plan: TablePlan, collectors: Sequence[Collect | None]
) -> Callable[[Row], Entries]:
    """Row -> its entries: the structures above inlined, each other structure of ``plan``
    through its collector (``collectors``: one per structure, in order)."""
    code = _Code(plan)
    lines = code.lines
    width = len(plan.row_names)
    lines += ["def entries(row):", f"    {', '.join(f'_{i}' for i in range(width))}, = row"]
    lines.append("    out = {}")
    pk = plan.resolved.primary_key
    pk_expr = f"_{plan.pos[pk[0]]}" if len(pk) == 1 else f"{code.const(plan.pk_text)}(row)"
    lines.append(f"    pk = {pk_expr}")
    for structure, collect in zip(plan.structures, collectors, strict=True):
        if isinstance(structure, RowHash) and collect is None:  # else formatted: collected
            null, expr = code.key(plan.resolved.key, plan.row_key)  # plan.row_key, inlined
            lines += [f"    if not ({null}):", f"        key = {expr}", "        h = {}"]
            for name, i in structure.fields:
                lines.append(f"        if _{i} is not None: h[{code.const(name)}] = _{i}")
            fallback = ", ".join(f"{code.const(n)}: _{i} or b''" for n, i in structure.pk_fields)
            lines += ["        if not h:", f"            h = {{{fallback}}}"]
            if "H" in code.fresh:
                code.fresh.discard("H")
                lines.append("        out['H', key] = h")
            else:
                lines += [
                    "        got = out.get(('H', key))",
                    "        if got is None:",
                    "            out['H', key] = h",
                    "        else:",
                    "            got.update(h)",
                ]
        elif isinstance(structure, UniqueHashes):
            hashed = [u.columns for u in plan.table.unique if u.key is None]
            for (key, value_of), columns in zip(structure.items, hashed, strict=True):
                kk = code.const(("h", key))
                one = len(columns) == 1  # the value as it is (plan/batch.py: joiner)
                value = f"_{plan.pos[columns[0]]}" if one else f"{code.const(value_of)}(row)"
                lines.append(f"    v = {value}")
                lines.append("    if v is not None and pk is not None:")
                code.merge("        ", "h", kk, "v", "pk")
        elif isinstance(structure, IndexSets):
            for template, key_of in zip(structure.templates, structure.items, strict=True):
                null, expr = code.key(template, key_of)
                lines.append(f"    if pk is not None and not ({null}):")
                lines.append(f"        kk = ('S', {expr})")
                code.merge("        ", "S", "kk", "pk", "b''")
        elif isinstance(structure, SortedSets):
            for (_, key_of, i, kind), s in zip(structure.items, plan.table.sorted, strict=True):
                null, expr = code.key(s.key, key_of)
                lines.append(f"    if pk is not None and _{i} is not None and not ({null}):")
                lines.append(f"        z = SCORE(_{i}, {code.const(kind)})")
                lines.append("        if z is not None:")
                lines.append(f"            kk = ('z', {expr})")
                code.merge("            ", "z", "kk", "pk", "z")
        else:
            assert collect is not None, f"no collector for {structure.name}"
            code.fresh.clear()
            lines.append(f"    {code.const(collect)}(row, out)")
    lines.append("    return out")
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<delta entries {plan.table.name}>", "exec"), code.namespace)
    entries: Callable[[Row], Entries] = code.namespace["entries"]
    return entries
