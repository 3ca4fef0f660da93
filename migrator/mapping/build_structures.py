"""The structures a table maps to besides its row (unique, indexes, references, sorted,
latest, sets), its search index and its place in a nesting tree, each read from the mapping
into the model (``Builder`` in ``build`` reads the rest of a table)."""

from __future__ import annotations

from typing import Any

from migrator.mapping.model import (
    NEST_KINDS,
    QUANTS,
    VECTOR_ALGORITHMS,
    VECTOR_METRICS,
    VECTOR_PARAMS,
    Index,
    Latest,
    Nest,
    Reference,
    Search,
    SetSpec,
    Sorted,
    Unique,
    VectorField,
    VectorSet,
)
from migrator.mapping.shape import ShapeReader

NEST_KEYS = ("in", "as", "by", "kind", "order")
VECTOR_SET_KEYS = ("key", "vector", "dim", "attributes", "quant", "m", "ef")
SEARCH_KEYS = ("name", "index_sets", "tag", "numeric", "text", "vector")
VECTOR_KEYS = (
    "metric",
    "algorithm",
    "dim",
    *dict.fromkeys(k for v in VECTOR_PARAMS.values() for k in v),
)


class StructureReader(ShapeReader):
    """The parts of a table that are read the same wherever they stand."""

    def unique(self, value: Any, path: str) -> Unique:
        if isinstance(value, dict):
            d = self.dict_of(value, path, ("columns", "key"))
            cols = self.names(self.required(d, "columns", path), f"{path}.columns")
            key = self.template(d["key"], f"{path}.key") if d.get("key") is not None else None
            missing = [c for c in cols if key is not None and c not in key.columns]
            if key is not None and missing:
                raise self.error(
                    f"{path}.key",
                    f"the key {key.text!r} has no placeholder for {', '.join(missing)}: every "
                    "row would write the same key, each overwriting the one before",
                    "name each unique column in the key, e.g. "
                    + repr(_with_placeholders(key.text, cols)),
                )
            return Unique(cols, key)
        return Unique(self.names(value, path))

    def index(self, value: Any, path: str) -> Index:
        if isinstance(value, dict):
            d = self.dict_of(value, path, ("columns",))
            return Index(self.names(self.required(d, "columns", path), f"{path}.columns"))
        return Index(self.names(value, path))

    def reference(self, value: Any, path: str) -> Reference:
        d = self.dict_of(value, path, ("columns", "table", "parent_columns"))
        cols = self.names(self.required(d, "columns", path), f"{path}.columns")
        parent = self.string(self.required(d, "table", path), f"{path}.table")
        pcols = (
            self.names(d["parent_columns"], f"{path}.parent_columns")
            if d.get("parent_columns") is not None
            else None
        )
        if pcols is not None and len(pcols) != len(cols):
            raise self.error(
                f"{path}.parent_columns",
                f"{len(cols)} column(s) refer to {len(pcols)} parent column(s); counts must match",
            )
        return Reference(cols, parent, pcols)

    def sorted(self, value: Any, path: str) -> Sorted:
        d = self.dict_of(value, path, ("key", "score"))
        return Sorted(
            self.template(self.required(d, "key", path), f"{path}.key"),
            self.string(self.required(d, "score", path), f"{path}.score"),
        )

    def latest(self, value: Any, path: str) -> Latest:
        d = self.dict_of(value, path, ("key", "order_by", "limit"))
        key = self.template(self.required(d, "key", path), f"{path}.key")
        if not key.is_literal:
            raise self.error(
                f"{path}.key", "a latest list key cannot have placeholders (one list per table)"
            )
        limit = d.get("limit", 100)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise self.error(f"{path}.limit", f"expected a positive integer, got {limit!r}")
        order_by = self.string(self.required(d, "order_by", path), f"{path}.order_by")
        return Latest(key, order_by, limit)

    def vector_set(self, value: Any, path: str) -> VectorSet:
        d = self.dict_of(value, path, VECTOR_SET_KEYS)
        quant = str(d.get("quant") or "noquant").lower()
        if quant not in QUANTS:
            raise self.error(
                f"{path}.quant", f"unknown quantization {d.get('quant')!r}; expected one of "
                f"{', '.join(QUANTS)}", "noquant (the default) keeps every float exact",
            )  # fmt: skip
        numbers = {}
        for name, low in (("dim", 1), ("m", 2), ("ef", 1)):
            v = d.get(name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
                raise self.error(
                    f"{path}.{name}", f"expected an integer of {low} or more, got {v!r}"
                )
            numbers[name] = v
        attributes = d.get("attributes")
        return VectorSet(
            self.template(self.required(d, "key", path), f"{path}.key"),
            self.string(self.required(d, "vector", path), f"{path}.vector"),
            numbers["dim"],
            () if attributes is None else self.names(attributes, f"{path}.attributes"),
            quant,
            numbers["m"],
            numbers["ef"],
        )

    def search(self, value: Any, path: str) -> Search:
        d = self.dict_of(value, path, SEARCH_KEYS)
        name = self.string(self.required(d, "name", path), f"{path}.name")
        if not name or any(c.isspace() for c in name):
            raise self.error(f"{path}.name", f"bad index name {name!r}: no spaces, not empty")
        index_sets = d.get("index_sets", True)
        if not isinstance(index_sets, bool):
            raise self.error(f"{path}.index_sets", f"expected true or false, got {index_sets!r}")
        lists = {
            k: self.names(d[k], f"{path}.{k}") if d.get(k) is not None else ()
            for k in ("tag", "numeric", "text")
        }
        vectors = d.get("vector") or {}
        if not isinstance(vectors, dict):
            raise self.error(
                f"{path}.vector",
                "expected a mapping of columns to their vector fields",
                "e.g. vector: {embedding: {metric: cosine, algorithm: hnsw}}",
            )
        fields = tuple(self.vector(c, v, f"{path}.vector.{c}") for c, v in vectors.items())
        return Search(name, index_sets, **lists, vector=fields)

    def vector(self, column: Any, value: Any, path: str) -> VectorField:
        """``embedding: {metric: cosine, algorithm: hnsw, m: 16}`` under ``search.vector``."""
        d = self.dict_of(value, path, VECTOR_KEYS)
        metric = str(self.required(d, "metric", path)).upper()
        if metric not in VECTOR_METRICS:
            raise self.error(
                f"{path}.metric",
                f"unknown distance metric {d['metric']!r}",
                f"write one of {', '.join(m.lower() for m in VECTOR_METRICS)}",
            )
        algorithm = str(d.get("algorithm", "flat")).upper()
        if algorithm not in VECTOR_ALGORITHMS:
            raise self.error(
                f"{path}.algorithm",
                f"unknown algorithm {d['algorithm']!r}",
                "write flat (exact) or hnsw (approximate, faster on many vectors)",
            )
        dim = d.get("dim")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise self.error(f"{path}.dim", f"expected a positive integer, got {dim!r}")
        known = VECTOR_PARAMS[algorithm]
        params = []
        for key in VECTOR_KEYS[3:]:
            if key not in d:
                continue
            if key not in known:
                raise self.error(
                    f"{path}.{key}",
                    f"{key} is not a parameter of {algorithm}",
                    f"{algorithm} takes {', '.join(known)}",
                )
            v = d[key]
            if key == "epsilon":
                good = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                want = "a positive number"
            else:
                good = isinstance(v, int) and not isinstance(v, bool) and v >= 1
                want = "a positive integer"
            if not good:
                raise self.error(f"{path}.{key}", f"expected {want}, got {v!r}")
            params.append((key, v))
        return VectorField(str(column), metric, algorithm, dim, tuple(params))

    def nest(self, value: Any, path: str) -> Nest:
        d = self.dict_of(value, path, NEST_KEYS)
        parent = self.string(self.required(d, "in", path), f"{path}.in")
        name = self.string(self.required(d, "as", path), f"{path}.as")
        if not name:
            raise self.error(f"{path}.as", "the field's name is empty: e.g. as: tags")
        kind = d.get("kind", "array")
        if kind not in NEST_KINDS:
            raise self.error(
                f"{path}.kind", f"expected one of {', '.join(NEST_KINDS)}, got {kind!r}"
            )
        by = self.names(d["by"], f"{path}.by") if d.get("by") is not None else None
        order = self.names(d["order"], f"{path}.order") if d.get("order") is not None else ()
        if order and kind != "array":
            raise self.error(f"{path}.order", f"only an array has an order (kind: {kind})")
        return Nest(parent, name, by, kind, order)

    def set_spec(self, value: Any, path: str) -> SetSpec:
        d = self.dict_of(value, path, ("key", "member"))
        return SetSpec(
            self.template(self.required(d, "key", path), f"{path}.key"),
            self.template(self.required(d, "member", path), f"{path}.member"),
        )


def _with_placeholders(text: str, columns: tuple[str, ...]) -> str:
    """``emp:uniques:email`` -> ``emp:uniques:email:{email}`` (a key that names each column)."""
    return text + "".join(f":{{{c}}}" for c in columns if f"{{{c}}}" not in text)
