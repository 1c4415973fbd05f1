"""Views seen through (pure): a model's view upstreams replaced by their definitions.

A `batch_refresh` model over a view (a dbt `view` model, or any view in the catalog) reads no
change feed of the view itself: views have no versions. With the view's text inlined where the
model names it, the Delta tables beneath become the model's upstreams, pinned and replayed as
if the model had been written over them. The text is spliced into the model's SQL as written
(as `pin_versions` inserts `VERSION AS OF`), so the SQL a refresh runs, records and verifies
is the user's, with each view name replaced by `(<view text>) <alias>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from sqlglot import exp
from sqlglot.errors import ParseError

from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.rewrite import name_end, name_start

# The session catalog: a name qualified by database only means a table in it, and the model's
# own names are written that way, so a view's unqualified names get the database only.
SESSION_CATALOG = "spark_catalog"
_QUOTED = re.compile(r"`((?:[^`]|``)*)`")


@dataclass(frozen=True)
class ViewDefinition:
    name: str  # as st.table_name writes it: lower-case, qualified
    text: str  # the view's query as stored in the catalog
    namespace: Tuple[str, ...]  # the catalog and database its unqualified names resolve in
    columns: Tuple[str, ...]  # the view's column names
    query_columns: Tuple[str, ...]  # the names its query outputs (differ when renamed)


def describe_rows_view(name: str, rows: Sequence[Mapping[str, object]]) -> Optional[ViewDefinition]:
    """A view's definition from `DESCRIBE TABLE EXTENDED` (None for a table)."""
    columns: List[str] = []
    info: Dict[str, str] = {}
    in_columns = True
    for row in rows:
        key, value = str(row.get("col_name") or ""), str(row.get("data_type") or "")
        if not key.strip() or key.startswith("#"):
            in_columns = False
            continue
        if in_columns:
            columns.append(key)
        else:
            info[key] = value
    if info.get("Type", "").upper() != "VIEW" or not info.get("View Text"):
        return None
    namespace = tuple(p for p in info.get("View Catalog and Namespace", "").split(".") if p)
    query_columns = tuple(m.replace("``", "`") for m in
                          _QUOTED.findall(info.get("View Query Output Columns", "")))
    return ViewDefinition(name, info["View Text"], namespace, tuple(columns),
                          query_columns or tuple(columns))


def view_body(view: ViewDefinition) -> str:
    """The view's query, its unqualified names qualified by the view's namespace and its
    columns renamed as the view renames them (`CREATE VIEW v (a, b) AS ...`)."""
    text = _qualified(view.text, view.namespace)
    renamed = [(q, c) for q, c in zip(view.query_columns, view.columns)]
    if all(q.lower() == c.lower() for q, c in renamed):
        return text
    select = ", ".join(f"`{q}` AS `{c}`" for q, c in renamed)
    return f"SELECT {select} FROM (\n{text}\n) _br_view"


def _qualified(text: str, namespace: Tuple[str, ...]) -> str:
    if not namespace:
        return text
    tree = st.parse(text)
    prefix = namespace[1:] if namespace[0].lower() == SESSION_CATALOG else namespace
    edits: List[Tuple[int, str]] = []
    for table in st.physical_tables(tree):
        if table.db:
            continue
        start = name_start(text, table)
        if start is None:
            raise ParseError(f"no position for {table.name} in the view's text")
        edits.append((start, "".join(f"`{p}`." for p in prefix)))
    for position, qualifier in sorted(edits, reverse=True):
        text = text[:position] + qualifier + text[position:]
    return text


def inline_views(sql: str, views: Mapping[str, ViewDefinition],
                 tree: Optional[exp.Expression] = None) -> str:
    """`sql` with every scan of a listed view replaced by `(<view body>) <alias>`.

    Raises ParseError where the splice cannot be placed (no source position for a name) or
    would change meaning (a column written with the view's database, `db.view.col`, which no
    longer names anything once the view is a subquery): the caller leaves the model as it is.
    `tree` is `sql` parsed, when the caller has it.
    """
    tree = tree if tree is not None else st.parse(sql)
    edits: List[Tuple[int, int, str]] = []
    for table in st.physical_tables(tree):
        view = views.get(st.table_name(table))
        if view is None:
            continue
        if any(c.args.get("db") is not None and c.table.lower() == table.name.lower()
               for c in tree.find_all(exp.Column)):
            raise ParseError(f"a column of {view.name} is qualified by its database")
        start, end = name_start(sql, table), name_end(sql, table)
        if start is None or end is None or table.args.get("version"):
            raise ParseError(f"no position for {view.name} in the model's SQL")
        alias = "" if table.alias else f" `{table.name}`"
        edits.append((start, end, f"(\n{view_body(view)}\n){alias}"))
    for start, end, replacement in sorted(edits, reverse=True):
        sql = sql[:start] + replacement + sql[end:]
    return sql
