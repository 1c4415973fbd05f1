"""The key a model's own tests and constraints declare (pure).

A dbt project states its models' keys where dbt users already write them: a `unique` and a
`not_null` test on one column, a `dbt_utils.unique_combination_of_columns` test, or a
`primary_key` constraint. A model with no `unique_key` whose query infers none (a join of
sources whose keys the plugin cannot know, jaffle_shop's `customers`) replays by that key.
It is trusted as an inferred key is, not as a configured one: NULL or repeated in the output,
the model refreshes without a key (executor.py), it does not fail. A test restricted by a
`where` config declares nothing about the rows outside it, so it is skipped.

The records are read from dbt's graph (`declared_keys`, called by the materialization and
`explain` with the `graph` context variable), one per test or constraint: {"kind": "unique" |
"not_null" | "unique_combination_of_columns" | "primary_key" | "unique_constraint" |
"not_null_constraint", "columns": [...], "where": ...}; for the model itself and for each
upstream it reads (by relation name); an upstream `batch_refresh` model's configured
unique_key is a record of its own ("configured_key", configured_key), which the plugin checks
on that model's writes: a key through it counts as one the query proves.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Set, Tuple

_NOT_NULL = ("not_null", "not_null_constraint", "primary_key")


def tested_key(records: Sequence[Mapping[str, Any]]) -> Tuple[str, ...]:
    """The first key the records prove: a primary key constraint, then one column that is
    both unique and not null, then a unique combination of columns."""
    usable = [r for r in records if isinstance(r, Mapping) and not r.get("where")
              and _columns(r)]
    not_null: Set[str] = {c.lower() for r in usable if r.get("kind") in _NOT_NULL
                          for c in _columns(r)}
    for record in usable:
        if record.get("kind") == "primary_key":
            return tuple(_columns(record))
    for record in usable:
        columns = _columns(record)
        if (record.get("kind") in ("unique", "unique_constraint")
                and all(c.lower() in not_null for c in columns)):
            return tuple(columns)
    for record in usable:
        if record.get("kind") == "unique_combination_of_columns":
            return tuple(_columns(record))
    return ()


def configured_key(records: Sequence[Mapping[str, Any]]) -> Tuple[str, ...]:
    """An upstream `batch_refresh` model's configured unique_key, from its records."""
    for record in records:
        if isinstance(record, Mapping) and record.get("kind") == "configured_key":
            return tuple(_columns(record))
    return ()


def _columns(record: Mapping[str, Any]) -> List[str]:
    columns = record.get("columns")
    if isinstance(columns, str):
        columns = [columns]
    if not isinstance(columns, (list, tuple)):
        return []
    # a quoted name in the YAML (`column_name: '"id"'`) names the same column
    names = [c.strip().strip('`"') for c in columns if isinstance(c, str)]
    return [n for n in names if n]


def declared_keys(graph: Mapping[str, Any], node: Mapping[str, Any]) -> Dict[str, Any]:
    """{"model": records of `node`, "upstreams": {relation: records}} from dbt's flat graph."""
    tests = _tests_by_node(graph)
    nodes: Mapping[str, Any] = graph.get("nodes") or {}
    sources: Mapping[str, Any] = graph.get("sources") or {}
    upstreams: Dict[str, List[Dict[str, Any]]] = {}
    for parent_id in (node.get("depends_on") or {}).get("nodes") or []:
        parent = sources.get(parent_id) or nodes.get(parent_id)
        if not parent:
            continue
        records = _records(parent, tests)
        config = parent.get("config") or {}
        if parent.get("resource_type") == "model" and config.get("materialized") == "batch_refresh":
            configured = config.get("unique_key")
            if configured:
                records.append({"kind": "configured_key", "columns": (
                    [configured] if isinstance(configured, str) else list(configured))})
        name = parent.get("identifier") or parent.get("alias") or parent.get("name")
        upstreams[f"{parent.get('schema')}.{name}".lower()] = records
    return {"model": _records(node, tests), "upstreams": upstreams}


# graph (by identity) -> its tests by the node they test; one invocation asks once per model
_INDEX: Dict[str, Any] = {}


def _tests_by_node(graph: Mapping[str, Any]) -> Mapping[str, List[Mapping[str, Any]]]:
    if _INDEX.get("graph") is graph:
        return _INDEX["tests"]
    tests: Dict[str, List[Mapping[str, Any]]] = {}
    for test in (graph.get("nodes") or {}).values():
        if test.get("resource_type") != "test" or not test.get("test_metadata"):
            continue
        # dbt attaches no node to a source's tests: the one node such a test reads is it
        parents = (test.get("depends_on") or {}).get("nodes") or []
        tested = test.get("attached_node") or (parents[0] if len(parents) == 1 else None)
        if tested:
            tests.setdefault(tested, []).append(test)
    _INDEX.update(graph=graph, tests=tests)
    return tests


def _records(node: Mapping[str, Any],
             tests: Mapping[str, List[Mapping[str, Any]]]) -> List[Dict[str, Any]]:
    found: List[Dict[str, Any]] = []
    for test in tests.get(node.get("unique_id") or "", []):
        meta = test["test_metadata"]
        kwargs = meta.get("kwargs") or {}
        found.append({"kind": meta.get("name"),
                      "columns": kwargs.get("combination_of_columns")
                      or [test.get("column_name") or kwargs.get("column_name")],
                      "where": (test.get("config") or {}).get("where")})
    constraints = [(c, c.get("columns")) for c in node.get("constraints") or []]
    for name, column in (node.get("columns") or {}).items():
        constraints += [(c, [column.get("name") or name]) for c in column.get("constraints") or []]
    for constraint, columns in constraints:
        kind = constraint.get("type")
        found.append({"kind": kind if kind == "primary_key" else f"{kind}_constraint",
                      "columns": columns})
    return found
