"""Surgery on a parsed model (pure sqlglot): its scans, CTEs inlined, a scan pinned or replaced,
a set-operation branch emptied, and where a node sits in its tree.

Shared by the affected-key walk (keypath.py), delta joins (deltajoin.py), delta aggregates
(aggdelta.py) and the analysis that chooses between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

import sqlglot
from sqlglot import exp, transforms
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError


class SparkBatchRefresh(Spark):
    """sqlglot's Spark dialect, writing back what Spark 4 reads with the meaning it had.

    sqlglot's Spark generator targets older Sparks: it rewrites `percentile_cont(p) WITHIN
    GROUP (ORDER BY x)` (exact) as `percentile_approx(x, p)` (approximate) and QUALIFY as a
    subquery that adds a `_w` column to a `SELECT *`. Spark 4 reads both as written.
    """

    class Generator(Spark.Generator):
        TRANSFORMS = {
            **{k: v for k, v in Spark.Generator.TRANSFORMS.items() if k is not exp.WithinGroup},
            exp.Select: transforms.preprocess([
                transforms.eliminate_distinct_on,
                transforms.unnest_to_explode,
                transforms.any_to_exists,
            ]),
        }


DIALECT = SparkBatchRefresh


class NotIncremental(Exception):
    """The model cannot be replayed by affected keys; the message says why."""


@dataclass(frozen=True)
class Occurrence:
    index: int  # position among the model's physical scans (stable across copies)
    upstream: str
    alias: str


def table_name(table: exp.Table) -> str:
    parts = [p for p in (table.catalog, table.db, table.name) if p]
    return ".".join(p.lower() for p in parts)


def parse(sql: str) -> exp.Expression:
    """The one statement of a model's SQL, parsed as Spark SQL, read as Spark's optimizer
    reads it: `GROUP BY ALL` spelled out (expand_group_all) and a LEFT join whose
    NULL-extended rows the WHERE drops made inner (inner_rejected_left_joins). Every rule (key
    inference, the affected-key walk, delta joins) then sees the one form."""
    return inner_rejected_left_joins(parse_written(sql))


def parse_written(sql: str) -> exp.Expression:
    """The model as written, `GROUP BY ALL` spelled out: what its fingerprint is taken of (a
    rewrite added to `parse` later must not read as an edit of every model it applies to)."""
    parsed = sqlglot.parse(sql, read=DIALECT)
    statements = [p for p in parsed if p is not None]
    if len(statements) != 1:
        raise ParseError(f"expected one SELECT statement, found {len(statements)}")
    return expand_group_all(statements[0])


def inner_rejected_left_joins(tree: exp.Expression) -> exp.Expression:
    """Each LEFT (OUTER) join whose NULL-extended rows a conjunct of its SELECT's WHERE rejects
    (rejects_nulls: `where p.method = 'card'`) made an inner join, in place. Equal results:
    every output row where the joined side is NULL is dropped by the WHERE either way, and
    the rows where it is not come from matched pairs, the same under both joins, whatever
    joins follow. Spark's optimizer makes the same rewrite (EliminateOuterJoin)."""
    for select in tree.find_all(exp.Select):
        for join in select.args.get("joins") or []:
            if is_left_outer(join) and rejects_nulls(select, join.this.alias_or_name):
                join.set("side", None)
                join.set("kind", None)
    return tree


def is_left_outer(join: exp.Join) -> bool:
    """`join` is a LEFT (OUTER) join: not a semi or anti one, which keep no joined row."""
    return is_outer(join, "LEFT")


def is_outer(join: exp.Join, side: str) -> bool:
    """`join` is a `side` (LEFT or RIGHT) (OUTER) join: not a semi or anti one."""
    return (join.side or "").upper() == side and (join.kind or "").upper() in ("", "OUTER")


# Spark aggregates sqlglot may parse as plain functions: moved into the inner SELECT as
# aggregates (where delta upkeep then names them as not maintained), never left outside.
_SPARK_AGGREGATES = frozenset({
    "any", "any_value", "approx_count_distinct", "approx_percentile", "array_agg", "avg",
    "bit_and", "bit_or", "bit_xor", "bitmap_construct_agg", "bitmap_or_agg", "bool_and",
    "bool_or", "collect_list", "collect_set", "corr", "count", "count_if", "count_min_sketch",
    "covar_pop", "covar_samp", "every", "first", "first_value", "grouping", "grouping_id",
    "histogram_numeric", "hll_sketch_agg", "hll_union_agg", "kurtosis", "last", "last_value",
    "listagg", "max", "max_by", "mean", "median", "min", "min_by", "mode", "percentile",
    "percentile_approx", "percentile_cont", "percentile_disc", "regr_avgx", "regr_avgy",
    "regr_count", "regr_intercept", "regr_r2", "regr_slope", "regr_sxx", "regr_sxy", "regr_syy",
    "skewness", "some", "std", "stddev", "stddev_pop", "stddev_samp", "string_agg", "sum",
    "try_avg", "try_sum", "var_pop", "var_samp", "variance",
})


def is_aggregate(node: exp.Expression) -> bool:
    if isinstance(node, exp.AggFunc):
        return True
    return isinstance(node, exp.Anonymous) and str(node.this).lower() in _SPARK_AGGREGATES


def expand_group_all(tree: exp.Expression) -> exp.Expression:
    """Each `GROUP BY ALL` replaced by what Spark groups by for it: the SELECT-list expressions
    (aliases trimmed) that contain no aggregate, or no GROUP BY at all where every expression
    aggregates (a global aggregate). Every rule that reads a GROUP BY (the inferred key, the
    affected-key walk, delta upkeep) then sees the groups. Left as written where the meaning
    is not certain: a `*` in the SELECT list (its columns are unknown here), a column named
    `all` (Spark may read `ALL` as that column), an integer constant (an ordinal once
    written in a GROUP BY), or a lateral alias (`a as x, x + 1 as y`: `x + 1` written in a
    GROUP BY does not resolve `x`)."""
    for select in list(tree.find_all(exp.Select)):
        group = select.args.get("group")
        if group is None or not group.args.get("all") or group.expressions:
            continue
        projections = select.expressions
        if any(p.is_star for p in projections) or any(
                c.name.lower() == "all" for p in projections for c in p.find_all(exp.Column)):
            continue
        keys = [p.unalias().copy() for p in projections
                if not any(is_aggregate(n) or isinstance(n, exp.Window) for n in p.walk())]
        if any(isinstance(k, exp.Literal) and k.is_int for k in keys):
            continue  # written out, `GROUP BY 2` would be an ordinal
        if _reads_lateral_alias(projections):
            continue
        select.set("group", exp.Group(expressions=keys) if keys else None)
    return tree


def _reads_lateral_alias(projections: Sequence[exp.Expression]) -> bool:
    """A projection names, unqualified, an alias an earlier projection gives to something
    other than that column (`a as x, x + 1 as y`)."""
    renamed: Set[str] = set()
    for p in projections:
        if any(not c.table and c.name.lower() in renamed for c in p.find_all(exp.Column)):
            return True
        if isinstance(p, exp.Alias) and not (
                isinstance(p.this, exp.Column) and p.this.name.lower() == p.alias.lower()):
            renamed.add(p.alias.lower())
    return False


def cte_names(tree: exp.Expression) -> set[str]:
    return {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}


def physical_tables(tree: exp.Expression) -> List[exp.Table]:
    """The relations the query reads from the catalog (not its CTEs, not functions)."""
    ctes = cte_names(tree)
    tables = []
    for table in tree.find_all(exp.Table):
        if not table.name:
            continue  # table-valued functions and the like
        if not table.db and table.name.lower() in ctes:
            continue
        tables.append(table)
    return tables


def inline_ctes(tree: exp.Expression) -> exp.Expression:
    """The query with every CTE reference replaced by a copy of its body.

    A CTE read twice (a self-join through a CTE) must become two scans: replacing the changed
    table inside a shared CTE would feed change rows to both sides of the join.
    """
    tree = tree.copy()
    for with_ in reversed(list(tree.find_all(exp.With))):
        if with_.args.get("recursive"):
            raise NotIncremental("uses a recursive CTE")
        owner = with_.parent
        bodies: Dict[str, exp.Expression] = {}
        for cte in with_.expressions:
            body = cte.this
            _replace_refs(body, bodies)
            bodies[cte.alias_or_name.lower()] = body
        with_.pop()
        _replace_refs(owner, bodies)
    return tree


def _replace_refs(scope: exp.Expression, bodies: Mapping[str, exp.Expression]) -> None:
    if not bodies:
        return
    for table in list(scope.find_all(exp.Table)):
        name = table.name.lower() if table.name else ""
        if table.db or name not in bodies:
            continue
        alias = table.alias or table.name
        table.replace(aliased(bodies[name].copy(), alias))


def occurrences(tree: exp.Expression) -> List[Occurrence]:
    """Physical scans in a stable order (the order survives `copy()`)."""
    found = []
    for table in scans(tree):
        found.append(Occurrence(len(found), table_name(table), table.alias_or_name))
    return found


def scans(tree: exp.Expression) -> List[exp.Table]:
    return [t for t in tree.find_all(exp.Table) if t.name and isinstance(t.this, exp.Identifier)]


def aliased(query: exp.Expression, alias: str) -> exp.Subquery:
    """`query` as a FROM item named `alias` (a scan replaced by change rows, a CTE body
    inlined, a query wrapped)."""
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def pin(scan: exp.Table, version: int) -> None:
    """Read `scan` `VERSION AS OF version`."""
    scan.set("version", exp.Version(this="VERSION", kind="AS OF",
                                    expression=exp.Literal.number(version)))


def path(node: exp.Expression) -> List[Tuple[str, Optional[int]]]:
    """Where `node` sits under its root (argument names and list positions): the same place in
    a copy of the tree the walk has not rewritten."""
    steps: List[Tuple[str, Optional[int]]] = []
    while node.parent is not None:
        value = node.parent.args.get(node.arg_key)
        index = next(i for i, v in enumerate(value) if v is node) if isinstance(value, list) else None
        steps.append((node.arg_key, index))
        node = node.parent
    return list(reversed(steps))


def at(root: exp.Expression, steps: List[Tuple[str, Optional[int]]]) -> exp.Expression:
    node = root
    for key, index in steps:
        value = node.args[key]
        node = value[index] if index is not None else value
    return node


def wrapped(source: exp.Expression, alias: str) -> exp.Subquery:
    """`(SELECT * FROM <source>) AS alias` for a FROM item (a table or an aliased subquery)."""
    return exp.Subquery(this=exp.select("*").from_(source),
                        alias=exp.TableAlias(this=exp.to_identifier(alias)))


def ancestors(node: exp.Expression) -> List[exp.Expression]:
    out = []
    while node.parent is not None:
        node = node.parent
        out.append(node)
    return out


def nearest_query(node: exp.Expression) -> Optional[exp.Expression]:
    return node if isinstance(node, exp.Select) else node.find_ancestor(exp.Select)


def empty(branch: exp.Expression) -> None:
    """Make a set-operation branch return no rows (Spark prunes `WHERE false` statically)."""
    if isinstance(branch, exp.Select):
        branch.where("false", copy=False)
        branch.meta[EMPTIED] = True
    elif isinstance(branch, exp.Subquery):
        empty(branch.this)
    elif isinstance(branch, exp.Union):
        empty(branch.this)
        empty(branch.expression)


def conjuncts(predicate: exp.Expression) -> List[exp.Expression]:
    while isinstance(predicate, exp.Paren):
        predicate = predicate.this
    if isinstance(predicate, exp.And):
        return [c for part in (predicate.this, predicate.expression) for c in conjuncts(part)]
    return [predicate]


_NULL_REJECTING = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike,
                   exp.In, exp.Between)


def rejects_nulls(select: exp.Select, alias: str) -> bool:
    """A conjunct of the WHERE is NULL (so false) when `alias`'s columns are all NULL, as in
    a LEFT join's NULL-extended rows: a comparison, IN, LIKE or BETWEEN with a column of
    `alias` as an operand, or `alias.c IS NOT NULL`."""
    where = select.args.get("where")
    alias = alias.lower()
    if where is None or not alias:
        return False

    def of_alias(e: Optional[exp.Expression]) -> bool:
        return isinstance(e, exp.Column) and e.table.lower() == alias

    for conjunct in conjuncts(where.this):
        if isinstance(conjunct, exp.Not) and isinstance(conjunct.this, exp.Is):
            if of_alias(conjunct.this.this) and isinstance(conjunct.this.expression, exp.Null):
                return True
        elif isinstance(conjunct, _NULL_REJECTING):
            # IN's and BETWEEN's other operands are lists and bounds, not the tested value
            if of_alias(conjunct.this) or (not isinstance(conjunct, (exp.In, exp.Between))
                                           and of_alias(conjunct.expression)):
                return True
    return False


EMPTIED = "batch_refresh_emptied"


def in_empty_branch(node: exp.Expression) -> bool:
    return any(a.meta.get(EMPTIED) for a in ancestors(node) if isinstance(a, exp.Select))


def first_leaf(node: exp.Expression) -> Optional[exp.Select]:
    while isinstance(node, (exp.Union, exp.Subquery)):
        node = node.this
    return node if isinstance(node, exp.Select) else None


def own(select: exp.Select, kind: type) -> bool:
    """`select` itself (not a nested query) contains a node of `kind`."""
    return any(nearest_query(n) is select for n in select.find_all(kind))


def own_in(expr: exp.Expression, select: exp.Select, kind: type) -> bool:
    return any(nearest_query(n) is select for n in expr.find_all(kind))


# Spark generators sqlglot parses as a plain call rather than an exp.UDTF.
_GENERATOR_CALLS = frozenset({"inline_outer"})


def generates_rows(select: exp.Select) -> bool:
    """`select`'s own projection calls a generator (explode, posexplode, inline, stack and
    their _outer forms): one input row (or group) makes any number of output rows."""
    return any(nearest_query(n) is select
               and (isinstance(n, exp.UDTF) or n.name.lower() in _GENERATOR_CALLS)
               for p in select.expressions for n in p.find_all(exp.UDTF, exp.Anonymous))


def change_source(upstream: str, start: int, end: int,
                  columns: Optional[Sequence[str]] = None) -> exp.Expression:
    """Change rows of `upstream` in [start, end]: inserts, deletes, pre- and post-images."""
    cols = ", ".join(f"`{c}`" for c in columns) if columns else "*"
    return sqlglot.parse_one(f"SELECT {cols} FROM table_changes('{upstream}', {start}, {end})",
                             read=DIALECT)


def star_on_path(tree: exp.Expression, occurrence: int) -> bool:
    """A `*` could carry the change feed's own columns to a set operation or the output."""
    scan = scans(tree)[occurrence]
    return any(isinstance(n, exp.Select) and any(p.is_star for p in n.expressions)
               for n in ancestors(scan))


def refs(expr: exp.Expression, alias: Optional[str], partial: Set[str]) -> bool:
    """`expr` reads a partial column (qualified by `alias`, or unqualified)."""
    if not partial:
        return False
    for column in expr.find_all(exp.Column):
        if column.is_star:
            continue
        table = column.table.lower() if column.table else ""
        if column.name.lower() in partial and (not table or alias is None or table == alias):
            return True
    return False


def exact_conjuncts(predicate: exp.Expression, alias: Optional[str],
                    partial: Set[str]) -> List[exp.Expression]:
    """The conjuncts of `predicate` that read no partial column (refs): those a key query over
    change rows can still judge exactly; the rest are dropped where it filters."""
    return [c for c in conjuncts(predicate) if not refs(c, alias, partial)]
