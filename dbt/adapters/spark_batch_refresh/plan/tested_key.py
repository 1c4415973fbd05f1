"""The key a model's own tests and constraints declare (pure).

A dbt project states its models' keys where dbt users already write them: a `unique` and a
`not_null` test on one column, a `dbt_utils.unique_combination_of_columns` test, or a
`primary_key` constraint. A model with no `unique_key` whose query infers none (a join of
sources whose keys the plugin cannot know, jaffle_shop's `customers`) replays by that key.
It is trusted as an inferred key is, not as a configured one: NULL or repeated in the output,
the model refreshes without a key (executor.py), it does not fail. A test restricted by a
`where` config declares nothing about the rows outside it, so it is skipped.

The records come from the materialization (macro spark_batch_refresh__tested_keys), one per
test or constraint: {"kind": "unique" | "not_null" | "unique_combination_of_columns" |
"primary_key" | "unique_constraint" | "not_null_constraint", "columns": [...], "where": ...}.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Sequence, Set, Tuple

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


def _columns(record: Mapping[str, Any]) -> List[str]:
    columns = record.get("columns")
    if isinstance(columns, str):
        columns = [columns]
    if not isinstance(columns, (list, tuple)):
        return []
    # a quoted name in the YAML (`column_name: '"id"'`) names the same column
    names = [c.strip().strip('`"') for c in columns if isinstance(c, str)]
    return [n for n in names if n]
