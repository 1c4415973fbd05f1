"""Delta joins: a join model's change as signed change rows, without recomputing its keys (pure).

A model built only of scans, filters, projections, inner joins and UNION ALL is linear in each
of its upstreams: evaluated over a multiset difference of one input (the others held fixed), it
yields the difference of its output. So, with the moved upstreams U1..Uk in a fixed order,

    M(new) - M(old) = sum over i of  M(U1..U(i-1) at new, dUi, U(i+1)..Uk at old)

where dUi is Ui's change rows signed (+ inserts and post-images, - deletes and pre-images) and
every upstream that did not move is read at its one version. Each term is the model with one
upstream replaced by its change rows and the others pinned `VERSION AS OF`: the standard
`dA join B_new + A_old join dB`, for any number of inputs. Netting the signed output rows by key
(sqlgen.staging_from_changes) leaves the rows that appeared and the keys whose row went away.

An outer join is linear in its preserved side only: whether a preserved row is NULL-extended
depends on all of the other side. So the inputs on a NULL-supplying side (the right of a LEFT
join, the left of a RIGHT join, both of a FULL join, the right of a SEMI or ANTI join) are
*fixed*: while they have not moved, the delta join holds; a run where one of them moved
recomputes the affected keys instead (analysis.affected_keys_sql), and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, FrozenSet, List, Mapping, Optional, Sequence, Tuple

import sqlglot
from sqlglot import exp

from dbt.adapters.spark_batch_refresh import sqltree as st
from dbt.adapters.spark_batch_refresh.sqltree import DIALECT

RULE = "delta join"

# Change rows that add an upstream row, and those that take one away.
PLUS = ("insert", "update_postimage")
MINUS = ("delete", "update_preimage")

# Query nodes over which a model is not linear in its inputs.
_NONLINEAR: Tuple[Tuple[type, str], ...] = (
    (exp.AggFunc, "aggregates"),
    (exp.Group, "has GROUP BY"),
    (exp.Distinct, "uses DISTINCT"),
    (exp.Window, "uses a window function"),
    (exp.Limit, "has LIMIT"),
    (exp.Intersect, "has INTERSECT"),
    (exp.Except, "has EXCEPT"),
    (exp.Exists, "has an EXISTS subquery"),
)


@dataclass(frozen=True)
class DeltaJoin:
    """A model that replays as a sum of one-upstream-changed terms."""

    upstreams: Tuple[str, ...]
    # Upstreams on a NULL-supplying side: while one of them moves, the delta join does not hold.
    fixed: FrozenSet[str] = frozenset()
    # The model selects `*` somewhere: the change rows must carry only the table's own columns
    # (the change feed's _change_type, ... would shift a term's columns against the others').
    star: bool = False

    def blocker(self, moved: Collection[str]) -> Optional[str]:
        """Why this run cannot replay by delta join (None when it can)."""
        held = sorted(set(moved) & self.fixed)
        if held:
            return (f"{', '.join(held)} moved, and "
                    f"{'it is' if len(held) == 1 else 'they are'} on the NULL-supplying side "
                    "of an outer (or semi/anti) join, where the model is not linear")
        return None

    def terms(self, sql: str, change_rows: Callable[[str, Tuple[str, ...]], str],
              moved: Collection[str], new: Mapping[str, int], old: Mapping[str, int],
              ) -> Tuple[str, str]:
        """The plus and the minus side of the sum, each one query (UNION ALL of the terms).

        `change_rows(upstream, change_types)` is the SQL of those change rows of `upstream`
        in the run's range. Every other upstream of a term is pinned: the ones before it in
        the order at the new version, the ones after it at the old."""
        order = sorted(moved)
        plus: List[str] = []
        minus: List[str] = []
        for i, upstream in enumerate(order):
            pins = {u: new[u] for u in self.upstreams if u != upstream}
            pins.update({u: old[u] for u in order[i + 1:]})
            plus.append(_term(sql, upstream, change_rows(upstream, PLUS), pins))
            minus.append(_term(sql, upstream, change_rows(upstream, MINUS), pins))
        return _union_all(plus), _union_all(minus)


def _term(sql: str, upstream: str, change_sql: str, pins: Mapping[str, int]) -> str:
    """The model with `upstream` read from `change_sql` and the others at `pins`. A UNION ALL
    branch that does not read `upstream` contributes nothing to this term's difference (its
    rows are the same on the plus and the minus side), so it is emptied, not scanned twice."""
    tree = st.inline_ctes(sqlglot.parse_one(sql, read=DIALECT))
    for union in list(tree.find_all(exp.Union)):
        for branch in (union.this, union.expression):
            if not any(st.table_name(s) == upstream for s in st.scans(branch)):
                st.empty(branch)
    for scan in st.scans(tree):
        name = st.table_name(scan)
        if name == upstream:
            scan.replace(st.aliased(sqlglot.parse_one(change_sql, read=DIALECT),
                                    scan.alias_or_name))
        elif name in pins:
            st.pin(scan, pins[name])
    return tree.sql(dialect=DIALECT)


def _union_all(queries: Sequence[str]) -> str:
    return "\nUNION ALL\n".join(f"SELECT * FROM (\n{q}\n) _br_t{i}" for i, q in enumerate(queries))


def derive(tree: exp.Expression) -> Tuple[Optional[DeltaJoin], Optional[str]]:
    """The model's delta join, or why it has none. Only for models that read two or more
    upstreams (one upstream read once is the row-wise replay)."""
    try:
        inlined = st.inline_ctes(tree)
    except st.NotIncremental as exc:
        return None, str(exc)
    scans = st.occurrences(inlined)
    names = [o.upstream for o in scans]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        return None, f"reads {', '.join(repeated)} more than once (self-join or repeated scan)"
    if len(names) < 2:
        return None, "reads fewer than two upstreams"
    reason = nonlinear(inlined)
    if reason:
        return None, reason
    for union in inlined.find_all(exp.Union):
        if union.args.get("distinct"):
            return None, "has UNION (distinct)"
        if any(isinstance(s, exp.Select) and any(p.is_star for p in s.expressions)
               for s in union.find_all(exp.Select)):
            return None, "has * under UNION ALL (the change rows carry extra columns)"
    if any(t.args.get("version") for t in st.scans(inlined)):
        return None, "pins an upstream with its own time travel clause"
    star = any(p.is_star for sel in inlined.find_all(exp.Select) for p in sel.expressions)
    return DeltaJoin(tuple(sorted(set(names))), frozenset(_null_supplying(inlined)), star), None


def nonlinear(tree: exp.Expression) -> Optional[str]:
    """Why the query is not linear in its inputs, joins and UNION ALL aside (None when it is):
    also what keeps a one-upstream model from the row-wise replay (analysis.py)."""
    for node_type, reason in _NONLINEAR:
        if tree.find(node_type) is not None:
            return reason
    for sub in tree.find_all(exp.Subquery):
        if not isinstance(sub.parent, (exp.From, exp.Join)):
            return "has a subquery in an expression"
    for node in tree.find_all(exp.In):
        if node.args.get("query") is not None:
            return "has an IN subquery"
    return None


def _null_supplying(tree: exp.Expression) -> List[str]:
    """Upstreams read on a NULL-supplying side of some join (or under a semi/anti join)."""
    fixed: List[str] = []
    for select in tree.find_all(exp.Select):
        seen: List[exp.Expression] = [select.args["from_"]] if select.args.get("from_") else []
        for join in select.args.get("joins") or []:
            side = (join.side or "").upper()
            kind = (join.kind or "").upper()
            if side == "FULL":
                fixed += _tables(seen) + _tables([join])
            elif side == "RIGHT":
                fixed += _tables(seen)
            elif side == "LEFT" or kind in ("SEMI", "ANTI"):
                fixed += _tables([join])
            seen.append(join)
    return fixed


def _tables(nodes: List[exp.Expression]) -> List[str]:
    return [st.table_name(t) for n in nodes for t in st.scans(n)]
