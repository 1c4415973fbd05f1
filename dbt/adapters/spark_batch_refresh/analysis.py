"""SQL analysis and rewriting of a compiled model (pure; sqlglot, Spark dialect).

What it answers: which physical relations the model reads (not CTE names), whether its output
rows each derive from one upstream row (so the change feed of that upstream bounds the affected
output keys), and how to rewrite the model: every upstream pinned `VERSION AS OF v`, or one
upstream replaced by its change rows.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

DIALECT = "spark"

# Functions whose value differs between evaluations: a recompute of some keys would not
# reproduce what the backfill wrote, so such models are recomputed in full.
NONDETERMINISTIC = frozenset(
    {
        "rand", "randn", "random", "uuid", "shuffle", "monotonically_increasing_id",
        "spark_partition_id", "input_file_name", "current_timestamp", "current_date",
        "current_time", "now", "localtimestamp", "unix_timestamp", "curdate",
        "current_timezone", "try_reflect", "reflect",
    }
)
_NONDETERMINISTIC_NODES: Tuple[type, ...] = tuple(
    getattr(exp, name)
    for name in ("Rand", "Randn", "Uuid", "CurrentTimestamp", "CurrentDate", "CurrentTime",
                 "UnixTimestamp")
    if hasattr(exp, name)
)
CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


@dataclass(frozen=True)
class Analysis:
    upstreams: Tuple[str, ...]
    shape: str  # "rowwise" | "general" | "unparsed"
    reason: Optional[str]  # why the model cannot replay row-wise (None when it can)
    normalized_sql: str

    @property
    def rowwise(self) -> bool:
        return self.shape == "rowwise"


def _parse(sql: str) -> exp.Expression:
    parsed = sqlglot.parse(sql, read=DIALECT)
    statements = [p for p in parsed if p is not None]
    if len(statements) != 1:
        raise ParseError(f"expected one SELECT statement, found {len(statements)}")
    return statements[0]


def _cte_names(tree: exp.Expression) -> set[str]:
    return {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}


def table_name(table: exp.Table) -> str:
    """Normalized `schema.table` (or `table`) for a physical relation."""
    parts = [p for p in (table.catalog, table.db, table.name) if p]
    return ".".join(p.lower() for p in parts)


def _physical_tables(tree: exp.Expression) -> List[exp.Table]:
    ctes = _cte_names(tree)
    tables = []
    for table in tree.find_all(exp.Table):
        if not table.name:
            continue  # table-valued functions and the like
        if not table.db and table.name.lower() in ctes:
            continue
        tables.append(table)
    return tables


def _rowwise_blocker(tree: exp.Expression, tables: List[exp.Table]) -> Optional[str]:
    names = {table_name(t) for t in tables}
    if len(names) != 1:
        return f"reads {len(names)} upstream relations (row-wise replay needs exactly one)"
    if len(tables) != 1:
        return "reads its upstream more than once (self-join or repeated scan)"
    if tables[0].args.get("version"):
        return "pins its upstream with its own time travel clause"
    checks: List[Tuple[type, str]] = [
        (exp.Join, "has a join"),
        (exp.AggFunc, "aggregates"),
        (exp.Group, "has GROUP BY"),
        (exp.Distinct, "uses DISTINCT"),
        (exp.Window, "uses a window function"),
        (exp.Limit, "has LIMIT"),
        (exp.Union, "has a set operation"),
        (exp.Intersect, "has a set operation"),
        (exp.Except, "has a set operation"),
        (exp.Exists, "has an EXISTS subquery"),
    ]
    for node_type, reason in checks:
        if tree.find(node_type) is not None:
            return reason
    for sub in tree.find_all(exp.Subquery):
        if not isinstance(sub.parent, (exp.From, exp.Join)):
            return "has a subquery in an expression"
    for node in tree.find_all(exp.In):
        if node.args.get("query") is not None:
            return "has an IN subquery"
    blocker = nondeterministic_function(tree)
    if blocker:
        return f"calls the non-deterministic function {blocker}()"
    return None


def nondeterministic_function(tree: exp.Expression) -> Optional[str]:
    for node in tree.find_all(exp.Func):
        if isinstance(node, _NONDETERMINISTIC_NODES):
            return node.sql_name().lower()
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in NONDETERMINISTIC:
            return str(node.this).lower()
    return None


def analyze(sql: str) -> Analysis:
    try:
        tree = _parse(sql)
    except (ParseError, sqlglot.errors.TokenError) as exc:
        return Analysis((), "unparsed", f"the SQL parser cannot read the model: {exc}",
                        " ".join(sql.split()))
    if not isinstance(tree, (exp.Query,)):
        return Analysis((), "unparsed", "the model is not a single SELECT query",
                        " ".join(sql.split()))
    tables = _physical_tables(tree)
    upstreams = tuple(sorted({table_name(t) for t in tables}))
    blocker = _rowwise_blocker(tree, tables)
    normalized = tree.sql(dialect=DIALECT, normalize=True)
    return Analysis(upstreams, "general" if blocker else "rowwise", blocker, normalized)


def fingerprint(analysis: Analysis, parts: Mapping[str, Any]) -> str:
    payload = json.dumps({"sql": analysis.normalized_sql, **parts}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def quote_relation(name: str) -> str:
    return ".".join(f"`{part}`" for part in name.split("."))


def pin_versions(sql: str, versions: Mapping[str, int]) -> str:
    """The model with every listed upstream read `VERSION AS OF` its pinned version."""
    tree = _parse(sql)
    for table in _physical_tables(tree):
        version = versions.get(table_name(table))
        if version is not None and not table.args.get("version"):
            table.set(
                "version",
                exp.Version(this="VERSION", kind="AS OF", expression=exp.Literal.number(version)),
            )
    return tree.sql(dialect=DIALECT)


def _change_rows_sql(upstream: str, start: int, end: int, change_types: Tuple[str, ...]) -> str:
    types = ", ".join(f"'{t}'" for t in change_types)
    return (
        f"SELECT * FROM table_changes('{upstream}', {start}, {end}) "
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
    tree = _parse(sql)
    for table in _physical_tables(tree):
        name = table_name(table)
        if name == upstream:
            alias = table.alias or table.name
            change_sql = _change_rows_sql(upstream, start, end, change_types)
            replacement = exp.Subquery(
                this=sqlglot.parse_one(change_sql, read=DIALECT),
                alias=exp.TableAlias(this=exp.to_identifier(alias)),
            )
            table.replace(replacement)
        elif pinned and pinned.get(name) is not None and not table.args.get("version"):
            table.set(
                "version",
                exp.Version(
                    this="VERSION", kind="AS OF", expression=exp.Literal.number(pinned[name])
                ),
            )
    return tree.sql(dialect=DIALECT)
