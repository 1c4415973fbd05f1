"""Outer joins in the affected-key walk (pure): the NULL-extended rows a change makes or unmakes.

A change on the NULL-supplying side of an outer join alters the preserved rows it matches in two
ways: their matched rows (the walk reads the join as inner) and their NULL-extended rows, which
appear when a preserved row loses its last match and vanish when it gains its first. A key that
reads the NULL-supplying side (`coalesce(item_id, order_id)`) differs between the two, so both
are affected keys. Shapes whose NULL-extended rows cannot be bounded raise NotIncremental.
"""

from __future__ import annotations

from typing import List, Optional, Set

from sqlglot import exp

from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.sqltree import NotIncremental

_MATCH = "_br_m"  # the change rows a NULL-extended row's preserved side must match


def _null_supplying(join: exp.Join, changed_at: int, i: int) -> bool:
    """Join `i` NULL-extends rows for want of the source at position `changed_at`."""
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if kind in ("SEMI", "ANTI"):
        return False
    if i == changed_at:
        return side in ("LEFT", "FULL")
    return i > changed_at and side in ("RIGHT", "FULL")


def null_extended(select: exp.Select, child: exp.Expression,
                  partial: Set[str]) -> Optional[exp.Select]:
    """The rows of `select` in which the changed source is NULL-extended, for the preserved
    rows whose match set its change rows touch; None when no outer join NULL-extends it.

    A change on the NULL-supplying side makes or unmakes such rows (an order gains its first
    item, loses its last), and their keys may read that side's columns as NULL. They are the
    same SELECT with the changed source empty (so the outer join NULL-extends every preserved
    row, through ON or USING alike) and the preserved rows semi-joined, on the join's own
    condition, to the change rows. Called before the walk rewrites the SELECT.
    """
    joins: List[exp.Join] = list(select.args.get("joins") or [])
    position = 0 if child.arg_key == "from_" else next(
        i for i, j in enumerate(joins, start=1) if j is child)
    transitions = [i for i, j in enumerate(joins, start=1) if _null_supplying(j, position, i)]
    if not transitions:
        return None
    alias = child.this.alias_or_name
    if len(transitions) > 1:
        raise NotIncremental(
            f"reads a changing upstream ({alias}) on the NULL-supplying side of more than one "
            "outer join of one SELECT")
    at = transitions[0]
    join = joins[at - 1]
    on = join.args.get("on")
    if join.args.get("method") or (on is None and not join.args.get("using")):
        raise NotIncremental(f"outer-joins a changing upstream ({alias}) without ON or USING")
    if on is not None and st.refs(on, alias.lower(), partial):
        # A conjunct over an aggregated value of the change rows cannot be judged (as in the
        # matched branch, dropped): every preserved row matching the rest is a candidate.
        kept = st.exact_conjuncts(on, alias.lower(), partial)
        if not kept:
            raise NotIncremental("joins on an aggregated value of a changing upstream")
        on = exp.and_(*[c.copy() for c in kept])
    if at > position and on is not None:
        _only_between(on, alias, join.this.alias_or_name)
    extended = select.copy()
    ext_joins: List[exp.Join] = list(extended.args.get("joins") or [])
    item = extended.args["from_"] if position == 0 else ext_joins[position - 1]
    changed = item.this
    matcher = changed.copy()
    matcher.set("alias", exp.TableAlias(this=exp.to_identifier(_MATCH)))
    item.set("this", _emptied(changed, alias))
    semi = exp.Join(this=matcher, side="LEFT", kind="SEMI")
    if on is not None:
        semi.set("on", _renamed(on.copy(), alias, _MATCH))
    else:
        semi.set("using", [u.copy() for u in join.args["using"]])
    # Before the join when the changed source is its right side (the preserved rows are the
    # ones left of it); after it when a later RIGHT/FULL join preserves its own right side.
    ext_joins.insert(at - 1 if at == position else at, semi)
    extended.set("joins", ext_joins)
    # The WHERE judges a NULL-extended row as the model does (the changed source's columns
    # are NULL in both), but for what reads an aggregated value of the change rows.
    where = extended.args.get("where")
    kept = st.exact_conjuncts(where.this, alias.lower(), partial) if where is not None else []
    extended.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
    for clause in ("having", "order"):
        extended.set(clause, None)  # judged on partial rows, as in the matched branch
    return extended


def unmatched(select: exp.Select, join: exp.Join) -> exp.Select:
    """The rows of `select` in which outer `join` NULL-extends the changed (preserved) rows.

    Called after the walk dropped a conjunct over an aggregated value from `join`'s condition
    (partial over change rows, its truth unknown): the matched branch then has every candidate
    match, and this branch the NULL-extended row each changed row has when none holds. It is
    the same SELECT with the NULL-supplying side emptied (the right side of a LEFT JOIN, every
    source left of a RIGHT JOIN), so Spark prunes its scans.
    """
    extended = select.copy()
    joins: List[exp.Join] = list(extended.args.get("joins") or [])
    at = next(i for i, j in enumerate(select.args.get("joins") or []) if j is join)
    if (join.side or "").upper() == "LEFT":
        emptied = [joins[at]]
    else:
        emptied = [extended.args["from_"], *joins[:at]]
    for item in emptied:
        item.set("this", _emptied(item.this, item.this.alias_or_name))
    for clause in ("where", "having", "order"):
        extended.set(clause, None)  # judged on partial rows, as in the matched branch
    return extended


def _emptied(source: exp.Expression, alias: str) -> exp.Expression:
    """`source` with no rows, under `alias` (`SELECT * ... WHERE false`: Spark prunes it)."""
    return st.aliased(exp.select("*").from_(source.copy()).where("false"), alias)


def _only_between(on: exp.Expression, alias: str, other: str) -> None:
    """A later RIGHT/FULL join's condition must relate its own side to the changed source
    alone, every column qualified: the semi join placed after it sees the (empty) changed
    source too, and the group's other sources are NULL in those rows."""
    names = {alias.lower(), other.lower()}
    tables = set()
    for column in on.find_all(exp.Column):
        table = column.table.lower() if column.table else ""
        if not table or table not in names:
            raise NotIncremental(
                f"outer-joins {other} to a group holding a changing upstream ({alias}) on a "
                f"condition that does not relate {other} and {alias} alone "
                f"({on.sql(dialect=st.DIALECT)})")
        tables.add(table)
    if alias.lower() not in tables:
        raise NotIncremental(
            f"outer-joins {other} to a group holding a changing upstream ({alias}) on a "
            f"condition that does not read {alias}")


def _renamed(expr: exp.Expression, alias: str, new: str) -> exp.Expression:
    for column in expr.find_all(exp.Column):
        if column.table and column.table.lower() == alias.lower():
            column.set("table", exp.to_identifier(new))
    return expr


def with_branch(select: exp.Select, extended: exp.Select) -> exp.Expression:
    """`select UNION ALL extended`, in `select`'s place."""
    select.set("order", None)
    placeholder = exp.Null()
    if select.parent is not None:
        select.replace(placeholder)
    union = exp.Union(this=select, expression=extended, distinct=False)
    if placeholder.parent is not None:
        placeholder.replace(union)
    return union
