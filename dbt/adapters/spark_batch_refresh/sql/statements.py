"""Which tables a statement of dbt's writes (pure: no I/O).

A `table` model, a seed, a hook or a snapshot sends its own statements through the adapter.
The invocation's shared upstream histories (storage/delta.py) must forget what such a
statement may have changed, and only that: in a DAG that mixes `table` and `batch_refresh`
models, forgetting every history after every table build made each `batch_refresh` model that
followed one read all its upstreams' histories again.
"""

from __future__ import annotations

import re
from typing import FrozenSet, Optional

import sqlglot
from sqlglot import exp

from dbt.adapters.spark_batch_refresh.sql.sqltree import DIALECT

# First words of the statements whose written tables the parser names. Anything else that may
# write (OPTIMIZE, CALL, a statement sqlglot reads only as a command) is answered with None:
# the caller then forgets everything.
# (`REPLACE TABLE` is not among them: sqlglot's Spark dialect cannot parse it.)
_PARSED = frozenset({"insert", "create", "merge", "update", "delete", "drop", "alter",
                     "truncate", "with"})
_FIRST_WORD = re.compile(r"(?:\s|\(|/\*.*?\*/|--[^\n]*\n)*([A-Za-z]+)", re.S)
# Object kinds a CREATE / DROP names whose history a refresh may have read.
_RELATION_KINDS = frozenset({"TABLE", "VIEW"})


def first_word(sql: str) -> Optional[str]:
    """The statement's first keyword, lower case, past leading comments and parentheses."""
    match = _FIRST_WORD.match(sql)
    return match.group(1).lower() if match else None


def written_tables(sql: str) -> Optional[FrozenSet[str]]:
    """The table (or view) names the statements in `sql` write (none for a query), each as its
    last name part in lower case (a catalog or schema prefix may be spelled differently
    elsewhere, so callers match on the table name alone: forgetting too much costs a read, too
    little a stale one). None when it cannot tell: the caller must assume anything changed."""
    if first_word(sql) not in _PARSED:
        return None
    try:
        statements = sqlglot.parse(sql, read=DIALECT)
    except Exception:  # noqa: BLE001 - any parser failure: cannot tell
        return None
    names: set = set()
    for statement in statements:
        if statement is None:
            continue
        targets = _targets(statement)
        if targets is None:
            return None
        names |= targets
    return frozenset(names)


def _targets(statement: exp.Expression) -> Optional[set]:
    if isinstance(statement, exp.Query):
        return set()  # `WITH ... SELECT`: reads only
    if isinstance(statement, (exp.Insert, exp.Merge, exp.Update, exp.Delete)):
        return _named(statement.this)
    if isinstance(statement, (exp.Create, exp.Drop)) and str(
            statement.args.get("kind") or "").upper() not in _RELATION_KINDS:
        return None  # a schema, a function: not a relation whose history was read
    if isinstance(statement, exp.Create):
        return _named(statement.this)
    if isinstance(statement, (exp.Drop, exp.Alter, exp.TruncateTable)):
        # ALTER ... RENAME TO names both tables; DROP and TRUNCATE may name several.
        return {t.name.lower() for t in statement.find_all(exp.Table) if t.name} or None
    return None


def _named(node: Optional[exp.Expression]) -> Optional[set]:
    """The table a write's target clause names (`INSERT INTO t (a, b)` wraps it in a Schema)."""
    if isinstance(node, exp.Schema):
        node = node.this
    if isinstance(node, exp.Table) and node.name:
        return {node.name.lower()}
    return None
