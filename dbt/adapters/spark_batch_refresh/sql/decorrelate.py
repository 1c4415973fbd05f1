"""Correlated scalar subqueries of a SELECT list, written as LEFT JOINs of grouped aggregates (pure).

`SELECT o.id, (SELECT count(*) FROM items i WHERE i.order_id = o.id AND i.qty > 0) AS n FROM
orders o` computes, per outer row, one aggregate over the inner rows whose correlated columns
equal the outer row's. Grouped once by those columns and joined, it means the same:

    SELECT o.id, coalesce(_br_sq0._br_v, 0) AS n FROM orders o
    LEFT JOIN (SELECT i.order_id AS _br_c0, count(*) AS _br_v FROM items i WHERE i.qty > 0
               GROUP BY i.order_id) AS _br_sq0 ON _br_sq0._br_c0 = o.id

The derived table has one row per key, so the join keeps the outer rows as they are; an outer
row with no inner rows (or a NULL key, which `=` matches to nothing in both forms) gets NULL,
which is what sum, avg, min and max of no rows are, and count's 0 by the coalesce; an
`EXISTS (...)` in the SELECT list is the same join's `IS NOT NULL`. The key walk
then reads the join as any LEFT JOIN of an aggregate. Rewritten only where that equivalence is
plain: the outer SELECT has no GROUP BY, aggregate or `*`; the subquery reads one source, every
column in it is qualified (an unqualified name may be either side's: without the schema which
one is unknown), its WHERE is AND-ed conjuncts each of which is either its own or one `=`
between an inner and an outer column, and it selects one count, sum, avg, min or max of inner
columns, without GROUP BY, HAVING, ORDER BY, LIMIT or a nested query. Anything else
stays as written (and the analysis gives its own reason).
"""

from __future__ import annotations

from typing import List, Optional, Set, Tuple

from sqlglot import exp

from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.winsplit import is_aggregate

ALIAS_PREFIX = "_br_sq"
KEY_PREFIX = "_br_c"
VALUE = "_br_v"
# Aggregates whose value over no rows is NULL, or 0 (count), so a missed join reads right.
_NULL_WHEN_EMPTY = (exp.Sum, exp.Avg, exp.Min, exp.Max)


def scalar_joins(tree: exp.Expression) -> exp.Expression:
    """A copy of `tree` with each qualifying scalar subquery of a SELECT list made a join."""
    tree = tree.copy()
    taken = 0
    for select in list(tree.find_all(exp.Select)):
        if not _outer_ok(select):
            continue
        for sub in [s for p in select.expressions for s in p.find_all(exp.Subquery, exp.Exists)
                    if st.nearest_query(s.parent) is select]:
            alias = f"{ALIAS_PREFIX}{taken}"
            rewritten = _as_join(select, sub, alias)
            if rewritten is None:
                continue
            join, value = rewritten
            select.append("joins", join)
            sub.replace(value)
            taken += 1
    return tree


def _outer_ok(select: exp.Select) -> bool:
    group = select.args.get("group")
    return (select.args.get("from_") is not None and (group is None or not group.expressions)
            and not any(p.is_star for p in select.expressions)
            and not st.own(select, exp.AggFunc) and not st.own(select, exp.Window))


def _sources(select: exp.Select) -> Set[str]:
    """The names the outer SELECT's own columns are qualified by."""
    found = [select.args["from_"].this, *(j.this for j in select.args.get("joins") or [])]
    return {(s.alias_or_name or "").lower() for s in found}


def _as_join(outer: exp.Select, sub: exp.Expression,
             alias: str) -> Optional[Tuple[exp.Join, exp.Expression]]:
    inner = sub.this
    exists = isinstance(sub, exp.Exists)
    if not exists and (sub.arg_key == "query"
                       or isinstance(sub.parent, (exp.SubqueryPredicate, exp.Exists))):
        return None  # `x IN (...)`, `x > ANY (...)`: a set, not a scalar
    if not isinstance(inner, exp.Select) or any(
            inner.args.get(k) for k in ("group", "having", "order", "limit", "distinct",
                                        "joins", "qualify", "windows", "with_")):
        return None
    source = inner.args.get("from_")
    if source is None or not isinstance(source.this, exp.Table) or len(inner.expressions) != 1:
        return None
    mine = (source.this.alias_or_name or "").lower()
    theirs = _sources(outer)
    if not mine or mine in theirs:
        return None
    projection = inner.expressions[0]
    value = projection.this if isinstance(projection, exp.Alias) else projection
    if exists:
        # EXISTS of an aggregate without GROUP BY is always true (one row): not this form
        if any(is_aggregate(n) for n in inner.find_all(exp.Func)):
            return None
        value = exp.Count(this=exp.Star())
    counting = isinstance(value, exp.Count)
    if not (counting or isinstance(value, _NULL_WHEN_EMPTY)):
        return None
    if any(isinstance(n, (exp.Subquery, exp.Select)) for n in inner.find_all(exp.Expression)
           if n is not inner):
        return None
    if not all(_qualifier(c) in (mine, *theirs) for c in inner.find_all(exp.Column)):
        return None
    if any(_qualifier(c) != mine for c in value.find_all(exp.Column)):
        return None
    where = inner.args.get("where")
    own: List[exp.Expression] = []
    pairs: List[Tuple[exp.Column, exp.Column]] = []
    for conjunct in st.conjuncts(where.this) if where is not None else []:
        sides = {_qualifier(c) for c in conjunct.find_all(exp.Column)}
        if sides <= {mine}:
            own.append(conjunct)
            continue
        pair = _correlation(conjunct, mine)
        if pair is None:
            return None
        pairs.append(pair)
    if not pairs:
        return None
    keys = [exp.alias_(i.copy(), f"{KEY_PREFIX}{n}") for n, (i, _) in enumerate(pairs)]
    grouped = exp.select(*keys, exp.alias_(value.copy(), VALUE)).from_(source.this.copy())
    if own:
        grouped = grouped.where(exp.and_(*(c.copy() for c in own)))
    grouped = grouped.group_by(*(i.copy() for i, _ in pairs))
    on = exp.and_(*(exp.EQ(this=exp.column(f"{KEY_PREFIX}{n}", table=alias), expression=o.copy())
                    for n, (_, o) in enumerate(pairs)))
    join = exp.Join(this=st.aliased(grouped, alias), side="LEFT", on=on)
    read: exp.Expression = exp.column(VALUE, table=alias)
    if exists:
        read = exp.Paren(this=exp.Not(this=exp.Paren(this=exp.Is(this=read, expression=exp.Null()))))
    elif counting:
        read = exp.func("coalesce", read, exp.Literal.number(0))
    return join, read


def _qualifier(column: exp.Column) -> str:
    return (column.table or "").lower()


def _correlation(conjunct: exp.Expression,
                 mine: str) -> Optional[Tuple[exp.Column, exp.Column]]:
    """(inner column, outer column) of an `inner = outer` conjunct; None for any other form."""
    if not isinstance(conjunct, exp.EQ):
        return None
    left, right = conjunct.this, conjunct.expression
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
        return None
    if _qualifier(left) == mine and _qualifier(right) not in ("", mine):
        return left, right
    if _qualifier(right) == mine and _qualifier(left) not in ("", mine):
        return right, left
    return None
