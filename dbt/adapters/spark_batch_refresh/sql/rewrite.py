"""The model's SQL rewritten for one refresh: pinned to upstream versions, or evaluated over
an upstream's change rows (pure: statement text only)."""

from __future__ import annotations

from typing import List, Mapping, Optional, Sequence, Tuple

import sqlglot
from sqlglot import exp

from dbt.adapters.spark_batch_refresh.sql import deltajoin as dj
from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.sqltree import DIALECT


def quote_relation(name: str) -> str:
    return ".".join(f"`{part}`" for part in name.split("."))


def pin_versions(sql: str, versions: Mapping[str, int]) -> str:
    """The model as the user wrote it, with only `VERSION AS OF v` inserted after each listed
    upstream's name: a backfill, a full recompute, a recompute of affected keys and `verify`
    run the user's SQL, not a regeneration of it that may read differently. Where the parser
    gives no position for a name, the model is regenerated from its tree instead."""
    tree = st.parse(sql)
    edits: List[Tuple[int, str]] = []
    for table in st.physical_tables(tree):
        version = versions.get(st.table_name(table))
        if version is None or table.args.get("version"):
            continue
        end = name_end(sql, table)
        if end is None:
            return _pin_regenerated(tree, versions)
        edits.append((end, f" VERSION AS OF {int(version)}"))
    for position, text in sorted(edits, reverse=True):
        sql = sql[:position] + text + sql[position:]
    return sql


def name_end(sql: str, table: exp.Table) -> Optional[int]:
    """Where the table's name ends in `sql` (after its closing quote), when the parser says."""
    span = identifier_span(sql, table.this)
    return None if span is None else span[1]


def name_start(sql: str, table: exp.Table) -> Optional[int]:
    """Where the table's qualified name (its catalog or database first) starts in `sql`."""
    first = next((p for p in (table.args.get("catalog"), table.args.get("db"), table.this)
                  if isinstance(p, exp.Identifier)), None)
    span = identifier_span(sql, first)
    return None if span is None else span[0]


def identifier_span(sql: str, name: Optional[exp.Expression]) -> Optional[Tuple[int, int]]:
    """[start, end) of an identifier in `sql`, quotes included, when the parser gives its
    position and the text there is that name."""
    if not isinstance(name, exp.Identifier):
        return None
    start, end = name.meta.get("start"), name.meta.get("end")
    if start is None or end is None or sql[start:end + 1].strip("`\"").lower() != name.name.lower():
        return None
    return start, end + 1


def _pin_regenerated(tree: exp.Expression, versions: Mapping[str, int]) -> str:
    for table in st.physical_tables(tree):
        version = versions.get(st.table_name(table))
        if version is not None and not table.args.get("version"):
            st.pin(table, version)
    return tree.sql(dialect=DIALECT)


# Change rows that add an upstream row to the table, and those that take one away.
PLUS_CHANGES = dj.PLUS
MINUS_CHANGES = dj.MINUS
_UNGROUPABLE = ("map<", "variant")


def groupable_type(spark_type: str) -> bool:
    """Whether Spark can GROUP BY a column of this type (DESCRIBE's type text)."""
    text = spark_type.lower()
    return not any(part in text for part in _UNGROUPABLE)


def change_rows_sql(upstream: str, start: int, end: int, change_types: Tuple[str, ...],
                    columns: Optional[Sequence[str]] = None) -> str:
    """Those change rows of `upstream`; with `columns`, only the table's own columns."""
    types = ", ".join(f"'{t}'" for t in change_types)
    cols = ", ".join(f"`{c}`" for c in columns) if columns else "*"
    return (
        f"SELECT {cols} FROM table_changes('{upstream}', {start}, {end}) "
        f"WHERE _change_type IN ({types})"
    )


def over_changes(
    sql: str,
    upstream: str,
    start: int,
    end: int,
    change_types: Tuple[str, ...] = ("insert", "update_preimage", "update_postimage", "delete"),
    pinned: Optional[Mapping[str, int]] = None,
) -> str:
    """The model evaluated over `upstream`'s change rows in [start, end] instead of the table.

    Pre- and post-images both flow through the model, so a row-wise model yields every output
    key that existed before or after some change: a superset of the keys whose rows changed.
    """
    tree = st.parse(sql)
    for table in st.physical_tables(tree):
        name = st.table_name(table)
        if name == upstream:
            alias = table.alias or table.name
            change_sql = change_rows_sql(upstream, start, end, change_types)
            table.replace(st.aliased(sqlglot.parse_one(change_sql, read=DIALECT), alias))
        elif pinned and pinned.get(name) is not None and not table.args.get("version"):
            st.pin(table, pinned[name])
    return tree.sql(dialect=DIALECT)
