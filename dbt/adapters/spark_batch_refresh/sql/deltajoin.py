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
depends on all of the other side. The telescoping sum above holds for any model, though, linear
or not; only the form of a term changes. When an upstream U is read directly on the
NULL-supplying side of a LEFT (or semi/anti) join, or the left of a first RIGHT join, whose ON
has an equality `<preserved expression> = u.y`, every output row a change of U can alter comes
from a preserved row whose expression is among the y values of U's change rows (pre- and
post-images): the matched/unmatched transitions all happen there, and every other preserved row
joins the same rows of U before and after. So U's term is the model restricted to
`<preserved expression> IN (those y)`, evaluated with U at its new version (plus) and at its
old (minus); the rows both sides share net away. The preserved side is scanned, U is read at
two versions, and no key of the output is recomputed. Each side of a FULL join is such a U
(the left only as the FROM item alone), with U's own changed keys and NULL keys added to the
restriction (_transition).

The upstreams this does not cover are *fixed*: a NULL-supplying side that is a subquery or
join group, or whose ON has no such equality (or is USING). While
they have not moved, the delta join holds; a run where one of them moved recomputes the
affected keys instead (analysis.affected_keys_sql), and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Dict, FrozenSet, List, Mapping, Optional, Sequence, Set, Tuple

import sqlglot
from sqlglot import exp

from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.sqltree import DIALECT

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
    # Upstreams on a NULL-supplying side that replay by transition term (_transition).
    outer: FrozenSet[str] = frozenset()

    def blocker(self, moved: Collection[str]) -> Optional[str]:
        """Why this run cannot replay by delta join (None when it can)."""
        held = sorted(set(moved) & self.fixed)
        if held:
            return (f"{', '.join(held)} moved, and "
                    f"{'it is' if len(held) == 1 else 'they are'} on the NULL-supplying side "
                    "of an outer (or semi/anti) join, where the model is not linear, and not "
                    "as one upstream joined by an equality with the other side (a subquery or "
                    "join group, USING, or no equality in ON)")
        return None

    def key_views(self, view: str) -> Dict[str, str]:
        """The cached view each transition upstream's changed join keys go to, for a staging
        under `view`."""
        return {u: f"{view}_outer{i}" for i, u in enumerate(sorted(self.outer))}

    def transition_keys(self, sql: str, view: str, moved: Collection[str],
                        change_rows: Callable[[str, Tuple[str, ...]], str],
                        ) -> List[Tuple[str, str]]:
        """(view, query) of the distinct join keys of each moved transition upstream's change
        rows (pre- and post-images), to cache before the terms are run: a cached relation's
        size is known, so Spark broadcasts it into the preserved side's semi join. Left a
        subquery of the change feed, its size is unknown and the preserved side is shuffled
        whole (10M rows: twice the affected-key recompute's time, bench/outer_join.py)."""
        views = self.key_views(view)
        found = []
        for upstream in sorted(set(moved) & self.outer):
            _, _, pairs, _ = _outer_join(_reading(sql, upstream), upstream)
            found.append((views[upstream], f"SELECT DISTINCT {_key_columns(pairs)} FROM "
                                           f"({change_rows(upstream, PLUS + MINUS)}) _br_k"))
        return found

    def terms(self, sql: str, change_rows: Callable[[str, Tuple[str, ...]], str],
              moved: Collection[str], new: Mapping[str, int], old: Mapping[str, int],
              keys: Optional[Mapping[str, str]] = None,
              ) -> Tuple[str, str]:
        """The plus and the minus side of the sum, each one query (UNION ALL of the terms).

        `change_rows(upstream, change_types)` is the SQL of those change rows of `upstream`
        in the run's range. Every other upstream of a term is pinned: the ones before it in
        the order at the new version, the ones after it at the old. `keys` names the relation
        holding each moved transition upstream's changed join keys (transition_keys)."""
        order = sorted(moved)
        plus: List[str] = []
        minus: List[str] = []
        for i, upstream in enumerate(order):
            pins = {u: new[u] for u in self.upstreams if u != upstream}
            pins.update({u: old[u] for u in order[i + 1:]})
            if upstream in self.outer:
                assert keys is not None, f"{upstream}: its changed keys are not cached"
                plus.append(_transition(sql, upstream, keys[upstream],
                                        {**pins, upstream: new[upstream]}))
                minus.append(_transition(sql, upstream, keys[upstream],
                                         {**pins, upstream: old[upstream]}))
                continue
            plus.append(_term(sql, upstream, change_rows(upstream, PLUS), pins))
            minus.append(_term(sql, upstream, change_rows(upstream, MINUS), pins))
        return _union_all(plus), _union_all(minus)


def _term(sql: str, upstream: str, change_sql: str, pins: Mapping[str, int]) -> str:
    """The model with `upstream` read from `change_sql` and the others at `pins`."""
    tree = _reading(sql, upstream)
    for scan in st.scans(tree):
        if st.table_name(scan) == upstream:
            scan.replace(st.aliased(sqlglot.parse_one(change_sql, read=DIALECT),
                                    scan.alias_or_name))
    return _pinned(tree, pins)


def _transition(sql: str, upstream: str, keys: str, pins: Mapping[str, int]) -> str:
    """The model with every upstream (`upstream` too) at `pins`, restricted to the preserved
    rows whose join key is in `keys` (the relation of `upstream`'s changed join keys).

    Under a FULL join the other side is NULL-supplying too, and `upstream`'s own unmatched rows
    are output: also kept are its rows with a changed key, and its rows with a NULL key where
    the other side is NULL (unmatched whatever the change, so only a change of such a row
    itself alters the output; the other side's rows with a NULL key come along and net away).
    "The other side is NULL" is asked of the columns its key expressions read, not of the
    expressions: `coalesce(d.id, -1)` is -1 on a NULL-extended row, and asking it dropped
    the change rows with a NULL key (fuzz seed 9007, fz22)."""
    tree = _reading(sql, upstream)
    select, join, pairs, alias = _outer_join(tree, upstream)
    columns = _key_columns(pairs)
    preserved = [expr.sql(dialect=DIALECT) for expr, _ in pairs]
    keyed = f"IN (SELECT {columns} FROM {keys})"
    condition = f"{_tuple(preserved)} {keyed}"
    if (join.side or "").upper() == "FULL":
        own = [exp.column(c, table=alias).sql(dialect=DIALECT) for _, c in pairs]
        read = list(dict.fromkeys(c.sql(dialect=DIALECT) for expr, _ in pairs
                                  for c in expr.find_all(exp.Column)))
        condition = (f"({condition} OR {_tuple(own)} {keyed} OR "
                     f"(({' OR '.join(f'{c} IS NULL' for c in read)}) AND "
                     f"({' OR '.join(f'{o} IS NULL' for o in own)})))")
    select.where(sqlglot.parse_one(condition, read=DIALECT), append=True, copy=False)
    return _pinned(tree, pins)


def _pinned(tree: exp.Expression, pins: Mapping[str, int]) -> str:
    """The tree's SQL with each scan of an upstream in `pins` read at its version there."""
    for scan in st.scans(tree):
        name = st.table_name(scan)
        if name in pins:
            st.pin(scan, pins[name])
    return tree.sql(dialect=DIALECT)


def _key_columns(pairs: List[Tuple[exp.Expression, str]]) -> str:
    """The moved side's join-key columns, as the changed-keys relation names them."""
    return ", ".join(exp.column(c, quoted=True).sql(dialect=DIALECT) for _, c in pairs)


def _tuple(expressions: List[str]) -> str:
    return expressions[0] if len(expressions) == 1 else f"({', '.join(expressions)})"


def _outer_join(tree: exp.Expression, upstream: str,
                ) -> Tuple[exp.Select, exp.Join, List[Tuple[exp.Expression, str]], str]:
    """The SELECT and the join that read `upstream` on a NULL-supplying side, its equalities
    with the other side (derive() made sure there is one), and its alias."""
    scan, = (s for s in st.scans(tree) if st.table_name(s) == upstream)
    # The left of a RIGHT or FULL join is the FROM item, and its join the select's first.
    select = scan.parent.parent
    join = scan.parent if isinstance(scan.parent, exp.Join) else select.args["joins"][0]
    pairs = _join_keys(join, scan.alias_or_name)
    assert isinstance(select, exp.Select) and pairs, f"{upstream}: no transition term"
    return select, join, pairs, scan.alias_or_name


def _reading(sql: str, upstream: str) -> exp.Expression:
    """The model's tree, CTEs inlined. A UNION ALL branch that does not read `upstream`
    contributes nothing to its term's difference (its rows are the same on the plus and the
    minus side), so it is emptied, not scanned twice."""
    tree = st.inline_ctes(st.parse(sql))
    for union in list(tree.find_all(exp.Union)):
        for branch in (union.this, union.expression):
            if not any(st.table_name(s) == upstream for s in st.scans(branch)):
                st.empty(branch)
    return tree


def _join_keys(join: exp.Join, alias: str) -> List[Tuple[exp.Expression, str]]:
    """The ON's equalities `<preserved expression> = <alias>.<column>`, as (expression,
    column): the preserved expression must name columns, each of another table alias. (`<=>`
    also matches NULL keys, which an IN never does, so it does not count.)"""
    on = join.args.get("on")
    if on is None or join.args.get("using"):
        return []
    pairs: List[Tuple[exp.Expression, str]] = []
    for conjunct in st.conjuncts(on):
        if not isinstance(conjunct, exp.EQ):
            continue
        for mine, other in ((conjunct.this, conjunct.expression),
                            (conjunct.expression, conjunct.this)):
            if not (isinstance(mine, exp.Column) and mine.table == alias):
                continue
            names = list(other.find_all(exp.Column))
            if names and all(c.table and c.table != alias for c in names) \
                    and other.find(exp.Subquery) is None:
                pairs.append((other, mine.name))
                break
    return pairs


def _union_all(queries: Sequence[str]) -> str:
    return "\nUNION ALL\n".join(f"SELECT * FROM (\n{q}\n) _br_t{i}" for i, q in enumerate(queries))


def derive(tree: exp.Expression) -> Tuple[Optional[DeltaJoin], Optional[str]]:
    """The model's delta join, or why it has none, from its tree as `st.parse` gives it. Only
    for models that read two or more upstreams (one upstream read once is the row-wise
    replay)."""
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
    fixed, outer = _null_supplying(inlined)
    return DeltaJoin(tuple(sorted(set(names))), frozenset(fixed), star,
                     frozenset(outer - set(fixed))), None


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


def _null_supplying(tree: exp.Expression) -> Tuple[List[str], Set[str]]:
    """Upstreams read on a NULL-supplying side of some join (or under a semi/anti join): the
    fixed ones, and those a transition term replays (scanned directly, joined by an equality
    with the other side; the left of a RIGHT or FULL join only as a SELECT's FROM item alone).
    An upstream also on another such side (a nested one) is fixed, whatever it is at its own
    join."""
    fixed: List[str] = []
    outer: Set[str] = set()
    for select in tree.find_all(exp.Select):
        seen: List[exp.Expression] = [select.args["from_"]] if select.args.get("from_") else []
        for join in select.args.get("joins") or []:
            side = (join.side or "").upper()
            kind = (join.kind or "").upper()
            sides: List[List[exp.Expression]] = []
            if side in ("RIGHT", "FULL"):
                sides.append(list(seen))
            # (a LEFT join whose NULL-extended rows the WHERE drops is inner already: st.parse)
            if side in ("FULL", "LEFT") or kind in ("SEMI", "ANTI"):
                sides.append([join])
            for supplying in sides:
                transitioned = _transitioned(supplying, join)
                if transitioned:
                    outer.add(transitioned)
                else:
                    fixed += _tables(supplying)
            seen.append(join)
    return fixed, outer


def _transitioned(supplying: List[exp.Expression], join: exp.Join) -> Optional[str]:
    """The upstream a transition term replays, when the NULL-supplying side of `join` is that
    one upstream's scan and the ON relates it to the preserved side by an equality."""
    if len(supplying) != 1 or not isinstance(supplying[0].this, exp.Table):
        return None
    scan = supplying[0].this
    return st.table_name(scan) if _join_keys(join, scan.alias_or_name) else None


def _tables(nodes: List[exp.Expression]) -> List[str]:
    return [st.table_name(t) for n in nodes for t in st.scans(n)]
