"""Affected-key analysis: how a change to one upstream row reaches the model's output keys (pure).

For every scan of an upstream in the model (an *occurrence*), the model is rewritten so that it
reads that upstream's change rows (pre- and post-images) instead of the table, with every other
scan pinned at a version the caller picks (analysis.affected_keys_sql: the scans before it new,
the ones after it old), and projects only the unique key. The result is a superset
of the output keys whose rows the change can alter: a superset only costs work, a missed key
would be a wrong answer, so every step below errs on the side of more keys.

Rules, applied to each SELECT on the way from the changed scan up to the output:

* joins keep mapping change rows to their partners (other upstreams at the pinned versions);
  an outer join whose null-supplying side changed becomes inner (a row appearing there changes
  the preserved row it matches), the NULL-extended rows of the preserved rows it matches are
  added beside (nullext.py), and the WHERE of that SELECT is dropped;
* a LEFT ANTI JOIN / NOT EXISTS against the changed side becomes a semi join / EXISTS: a change
  there adds or removes exactly the rows it matches; `x NOT IN (sub)` becomes `x IN (sub) OR
  EXISTS (sub's rows with a NULL value) OR x IS NULL` (a NULL entering or leaving the subquery
  turns the predicate for every row; a NULL x turns with the subquery's emptiness);
* a scalar aggregate subquery compared in a WHERE (or HAVING) conjunct, `x < (SELECT avg(y)
  FROM t WHERE t.k = o.k)`: its value for an outer row is a function of the subquery rows that
  row selects, so it can change only for the outer rows for which a change row passes the
  subquery's own WHERE. The conjunct becomes `EXISTS (SELECT 1 FROM t WHERE t.k = o.k)` over
  the change rows (a correlated subquery: the outer rows of the changed correlation values; an
  uncorrelated one: every outer row, once a change row passes its filter). The subquery stays
  where it was, so every name in it resolves as before; one in a HAVING moves to the WHERE
  (it reads no aggregate of the outer query: an uncorrelated scalar is a constant there);
* below a GROUP BY only the group keys are real: aggregate outputs, computed over change rows
  alone, are "partial", so predicates and HAVING over them are dropped, and grouping or keying
  on them falls back;
* window functions: a change to one row can alter every row of its window partition, and no
  other. A SELECT with windows (all partitioned by plain columns, over one source) first passes
  on only the PARTITION BY columns it projects as they are; every other output is partial,
  which drops the filters above it (`WHERE rn = 1`). When the key is among those columns, the
  partitions the change rows touch are the affected keys. Otherwise the walk is redone with the
  window reading those partitions whole (its source at pinned versions, semi-joined to the
  partition values of the change rows), once at the old and once at the new versions: exact
  values, so every filter above stays. Without PARTITION BY every row depends on every input
  row: fall back;
* set operations: the other UNION branches contribute no change (`WHERE false`); INTERSECT and
  EXCEPT fall back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Set, Tuple

import sqlglot
from sqlglot import exp

from dbt.adapters.spark_batch_refresh.sql import nullext
from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.sqltree import NotIncremental, Occurrence


class _KeyOffPartition(NotIncremental):
    """The key is not among a window's PARTITION BY columns: the change rows alone do not name
    the keys of their partitions."""


@dataclass(frozen=True)
class KeyPath:
    """How change rows of one scan reach the output keys (for explain and the run log)."""

    occurrence: Occurrence
    joined: Tuple[str, ...]  # other upstreams the change rows are joined to
    notes: Tuple[str, ...]  # rewrites applied on the way (joins made inner, filters dropped)
    # How its affected output rows are recomputed: the keys the change rows reach, or whole
    # window partitions the change rows touch.
    rule: str = "affected-key recompute"
    # A window whose partitions do not hold the key: its touched partitions are read whole at
    # the old and at the new versions (two key queries), not from the change rows alone.
    whole_partitions: bool = False

    def describe(self) -> str:
        via = f" joined to {', '.join(self.joined)}" if self.joined else " directly"
        notes = "; ".join(self.notes)
        return f"{self.occurrence.upstream} (as {self.occurrence.alias}): keys from its change rows{via}" + (
            f"; {notes}" if notes else "")


# ------------------------------------------------------------------------------ rewrite
def affected_keys(
    tree: exp.Expression,
    occurrence: int,
    key: Sequence[str],
    change_source: exp.Expression,
    pins: Optional[Mapping[int, int]] = None,
    partitions_at: Optional[int] = None,
) -> Tuple[exp.Expression, KeyPath]:
    """SELECT <key> over the model with scan `occurrence` replaced by `change_source`.

    `tree` must have its CTEs inlined. `pins` pins the other scans `VERSION AS OF`, by scan
    index (two scans of one table may be read at different versions). A window
    whose partitions do not hold the key reads the partitions its change rows touch whole, with
    the changed scan at version `partitions_at` (None: such a window falls back); the caller
    asks for the old and the new versions, so the keys of both states are covered.
    """
    try:
        return _affected_keys(tree, occurrence, key, change_source, pins, None)
    except NotIncremental:
        # Read from the change rows alone, a window's values are partial (a key, a GROUP BY or
        # a join on them cannot be bounded); read whole, its partitions are exact.
        if partitions_at is None or tree.find(exp.Window) is None:
            raise
        return _affected_keys(tree, occurrence, key, change_source, pins, partitions_at)


def _affected_keys(
    tree: exp.Expression,
    occurrence: int,
    key: Sequence[str],
    change_source: exp.Expression,
    pins: Optional[Mapping[int, int]],
    partitions_at: Optional[int],
) -> Tuple[exp.Expression, KeyPath]:
    tree = tree.copy()
    found = st.scans(tree)
    target = found[occurrence]
    occ = Occurrence(occurrence, st.table_name(target), target.alias_or_name)
    for i, scan in enumerate(found):
        version = (pins or {}).get(i)
        if i != occurrence and version is not None and not scan.args.get("version"):
            st.pin(scan, version)
    whole: Optional[exp.Expression] = None
    if partitions_at is not None:
        whole = tree.copy()  # the model itself, every scan pinned: whole partitions come from it
        st.pin(st.scans(whole)[occurrence], partitions_at)
    if target.args.get("joins") or (isinstance(target.parent, exp.Join)
                                    and isinstance(target.parent.parent, exp.Table)):
        raise NotIncremental(
            f"reads a changing upstream ({occ.upstream}) inside a parenthesised join group "
            "(write the group as a subquery)")
    replacement = st.aliased(change_source.copy(), occ.alias)
    target.replace(replacement)
    notes = _scalars_as_exists(replacement)
    walk = _Walk(replacement, whole)
    walk.notes.extend(notes)
    root = walk.run()
    if not isinstance(root, exp.Query):  # a rewrite lost the path: a defect, caught by analyze
        raise RuntimeError(f"the key walk ended at {type(root).__name__}, not at a query")
    for column in key:
        if column.lower() in walk.partial:
            if isinstance(walk.partial, _AllBut):
                raise _KeyOffPartition(
                    f"keys its rows by {column}, which is not a PARTITION BY column of its "
                    f"window function (a change in a partition can alter every row of it)")
            # Read as "the model <reason>" (planner, explain).
            raise NotIncremental(f"keys its rows by {column}, a value computed by an aggregate")
    cols = ", ".join(f"`{k}`" for k in key)
    query = sqlglot.parse_one(f"SELECT {cols} FROM (SELECT 1) _br_ak", read=st.DIALECT)
    query.args["from_"].set("this", st.aliased(root, "_br_ak"))
    joined = tuple(sorted({st.table_name(t) for t in st.scans(tree) if not st.in_empty_branch(t)}
                          - {occ.upstream}))
    return query, KeyPath(occ, joined, tuple(walk.notes), walk.rule, whole is not None)


class _Walk:
    """Walks from the replaced scan up to the root, rewriting each SELECT on the path."""

    def __init__(self, start: exp.Expression, whole: Optional[exp.Expression] = None) -> None:
        self.start = start
        self.whole = whole
        self.partial: Set[str] = set()  # output columns of the current node that are partial
        self.notes: List[str] = []
        self.rule = "affected-key recompute"
        self.on_path = {id(n) for n in st.ancestors(start)} | {id(start)}

    def run(self) -> exp.Expression:
        node = self.start
        while node.parent is not None:
            parent = node.parent
            if isinstance(parent, exp.Select):
                parent = self._select(parent, node)
            elif isinstance(parent, (exp.Intersect, exp.Except)):
                raise NotIncremental("applies INTERSECT or EXCEPT to a changing upstream")
            elif isinstance(parent, exp.Union):
                self._union(parent, node)
            node = parent
        return node

    # -------------------------------------------------------------- one SELECT
    def _select(self, select: exp.Select, child: exp.Expression) -> exp.Expression:
        """Rewrites `select` for the change rows flowing in through `child`; returns the node
        the walk goes on from (`select`, or the union that adds its NULL-extended rows)."""
        clause = child.arg_key
        extended: Optional[exp.Select] = None
        unconditioned: Optional[exp.Select] = None
        flag: Optional[str] = None  # the output an IN / EXISTS of the change rows computes
        membership = (_membership_on_path(child, self.on_path) if clause == "expressions"
                      else None)
        windowed = st.own(select, exp.Window)
        if clause == "joins" and id(child.this) not in self.on_path and child.this is not self.start:
            raise NotIncremental("reads a changing upstream in a subquery in a JOIN condition")
        if clause in ("from_", "joins"):
            extended = nullext.null_extended(select, child, self.partial)
            alias: Optional[str]
            alias, unconditioned = self._through_source(select, child)
            if unconditioned is not None and extended is not None:
                raise NotIncremental(
                    "joins on an aggregated value of a changing upstream in an outer join's "
                    "condition and reads it on the NULL-supplying side of another")
            source_partial = self.partial
        elif clause == "where":
            self._through_predicate(select)
            alias, source_partial = None, set()
        elif membership is not None:
            flag = self._through_membership(select, child, membership)
            alias, source_partial = None, set()
        else:
            where = {"expressions": "SELECT list", "having": "HAVING", "group": "GROUP BY",
                     "order": "ORDER BY"}.get(clause or "", clause or "an expression")
            raise NotIncremental(f"reads a changing upstream in a subquery in its {where}")
        if windowed and self.whole is not None:
            self._whole_partitions(select, child, self._partitions(select, alias, source_partial))
            self.partial = set()  # every row of a touched partition, at one version: all real
        elif windowed:
            self.partial = self._window_outputs(select, alias, source_partial)
        else:
            self.partial = self._outputs(select, alias, source_partial)
        if flag is not None:
            self.partial = self.partial | {flag}
        if extended is not None:
            self.notes.append(f"the NULL-extended rows its change rows make or unmake on the "
                              f"preserved side of the outer join with {alias} added")
        extended = extended if extended is not None else unconditioned
        if extended is None:
            return select
        return nullext.with_branch(select, extended)

    def _through_source(self, select: exp.Select,
                        child: exp.Expression) -> Tuple[str, Optional[exp.Select]]:
        """Rewrites the joins and WHERE of `select` for the change rows of `child`; returns
        its alias and, when an outer join's condition lost a conjunct over an aggregated value,
        the branch of that join's NULL-extended rows (nullext.unmatched)."""
        alias = child.this.alias_or_name.lower()
        joins: List[exp.Join] = list(select.args.get("joins") or [])
        position = 0 if child.arg_key == "from_" else next(
            i for i, j in enumerate(joins, start=1) if j is child)
        null_side = False
        for i, join in enumerate(joins, start=1):
            side, kind = (join.side or "").upper(), (join.kind or "").upper()
            if i == position:
                if kind == "ANTI":
                    join.set("kind", "SEMI")
                    self.notes.append(f"anti join against {alias} read as a semi join")
                elif side == "LEFT" and kind != "SEMI":
                    _make_inner(join)
                    null_side = True
                elif side == "FULL":
                    join.set("side", "RIGHT")
                    null_side = True
            elif i > position and kind not in ("SEMI", "ANTI"):
                if side == "RIGHT":
                    _make_inner(join)
                    null_side = True
                elif side == "FULL":
                    join.set("side", "LEFT")
                    null_side = True
        if null_side:
            self.notes.append(f"outer join on the null-supplying side {alias} made inner")
        partial = self.partial
        loosened: List[exp.Join] = []
        for join in joins:
            on = join.args.get("on")
            if on is None or not partial:
                continue
            conjuncts = st.conjuncts(on)
            kept = st.exact_conjuncts(on, alias, partial)
            if not kept:
                raise NotIncremental("joins on an aggregated value of a changing upstream")
            if len(kept) != len(conjuncts):
                join.set("on", exp.and_(*kept))
                self.notes.append("join conditions on aggregated values dropped")
                if (join.side or "").upper() in ("LEFT", "RIGHT", "FULL"):
                    loosened.append(join)
        where = select.args.get("where")
        if where is not None:
            # A row of the change rows joined to the other sources at their pinned versions
            # is the model's own row (its NULL-extended twin is nullext's branch), so the
            # WHERE judges it exactly, across an outer join made inner too; only what reads
            # an aggregated value of the change rows cannot be judged. (Dropping the whole
            # WHERE there made comma joins cross products: TPC-DS Q40's key query, 300 s.)
            conjuncts = st.conjuncts(where.this)
            kept = st.exact_conjuncts(where.this, alias, partial)
            if len(kept) != len(conjuncts):
                self.notes.append("WHERE dropped" if not kept
                                  else "WHERE predicates on aggregated values dropped")
                select.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
        if not loosened:
            return alias, None
        if len(loosened) > 1:
            raise NotIncremental("joins on an aggregated value of a changing upstream in the "
                                 "conditions of more than one outer join of one SELECT")
        # Dropped from an outer join, the conjunct no longer decides between a changed row's
        # match and its NULL-extended row, and a key reading the NULL-supplying side differs
        # between them (fuzz seed 5324, fz09): both are affected keys.
        self.notes.append("the NULL-extended rows of the outer join whose condition lost an "
                          "aggregated value added")
        return alias, nullext.unmatched(select, loosened[0])

    def _through_predicate(self, select: exp.Select) -> None:
        where = select.args["where"]
        conjunct = next(c for c in st.conjuncts(where.this) if id(c) in self.on_path)
        if isinstance(conjunct, exp.Not) and isinstance(conjunct.this, exp.Exists):
            conjunct.replace(conjunct.this)
            self.notes.append("NOT EXISTS read as EXISTS")
        elif isinstance(conjunct, exp.Not) and isinstance(conjunct.this, exp.In):
            conjunct.replace(self._membership_bound(conjunct.this, "filters with NOT IN"))
            self.notes.append("NOT IN read as IN, or every row when a NULL changed")
        elif isinstance(conjunct, exp.In) and conjunct.args.get("query") is not None:
            if self.partial:
                raise NotIncremental("filters with IN over an aggregated value of a changing upstream")
        elif not isinstance(conjunct, exp.Exists):
            raise NotIncremental(
                "reads a changing upstream in a subquery inside a WHERE expression "
                "(only IN, EXISTS and NOT EXISTS conjuncts can be bounded)")

    def _through_membership(self, select: exp.Select, projection: exp.Expression,
                            membership: exp.Expression) -> str:
        """`x IN (sub)` or `EXISTS (sub)` in a SELECT-list expression, the subquery over change
        rows: the outer rows whose value can change are the ones its WHERE bound selects (for
        IN the same bound as NOT IN's: its truth turns exactly where NOT IN's does), so that
        bound joins the SELECT's WHERE and the expression's output is partial. Returns that
        output's name."""
        if st.own(select, exp.Window):
            raise NotIncremental("reads a changing upstream in an IN or EXISTS subquery of a "
                                 "SELECT list with window functions")
        if select.args.get("group") is not None and not _under_aggregate(membership, projection):
            raise NotIncremental("groups by a value read from an IN or EXISTS subquery over a "
                                 "changing upstream")
        if isinstance(membership, exp.Exists):
            bound: exp.Expression = membership.copy()
        else:
            if self.partial:
                raise NotIncremental(
                    "tests IN over an aggregated value of a changing upstream in its SELECT list")
            bound = self._membership_bound(membership.copy(), "tests IN")
        select.where(bound, copy=False)
        self.notes.append("the rows whose SELECT-list IN / EXISTS a change row can turn")
        index = next(i for i, p in enumerate(select.expressions) if p is projection)
        return _output_name(projection, index)

    def _membership_bound(self, predicate: exp.In, what: str) -> exp.Expression:
        """`x NOT IN (sub)`, the subquery over change rows: its truth for an outer row can change
        only when a change row's value equals x, when a NULL enters or leaves the subquery's
        rows (then it turns for every x), or, for a NULL x, when the subquery empties or fills.
        So: `x IN (sub) OR EXISTS (sub's rows with a NULL value) OR x IS NULL`. x stays in
        its own scope and the subquery in place, so no name changes what it binds to; the IN
        nested in an OR is evaluated two-valued by Spark, which is what this bound needs (a
        NULL among the values is the EXISTS's case)."""
        query = predicate.args.get("query")
        inner = query.this if isinstance(query, exp.Subquery) else None
        if (not isinstance(inner, exp.Select) or len(inner.expressions) != 1
                or inner.expressions[0].is_star or isinstance(predicate.this, exp.Tuple)):
            raise NotIncremental(
                f"{what} over a changing upstream in a form that cannot be bounded "
                "(several columns, a set operation or a star in the subquery); write it as "
                "EXISTS")
        if self.partial:
            raise NotIncremental(f"{what} over an aggregated value of a changing upstream")
        value = inner.expressions[0]
        value = value.this if isinstance(value, exp.Alias) else value
        nulls = inner.copy()
        nulls.set("expressions", [exp.Literal.number(1)])
        nulls.where(exp.Is(this=value.copy(), expression=exp.Null()), copy=False)
        outer = predicate.this
        return exp.Paren(this=exp.or_(
            exp.In(this=outer.copy(), query=query), exp.Exists(this=nulls),
            exp.Is(this=outer.copy(), expression=exp.Null()), copy=False))

    def _outputs(self, select: exp.Select, alias: Optional[str], source_partial: Set[str]) -> Set[str]:
        """Output names of `select` that are partial: aggregates over the restricted rows, or
        anything computed from a partial column of the source on the path."""
        group = select.args.get("group")
        aggregates = any(st.own_in(p, select, exp.AggFunc) for p in select.expressions)
        if select.args.get("having") is not None:
            select.set("having", None)
            self.notes.append("HAVING dropped")
        if group is None and aggregates:
            raise NotIncremental(
                "aggregates a changing upstream without GROUP BY (its one row depends on "
                "every input row)")
        if group is not None and any(st.refs(g, alias, source_partial) for g in group.expressions):
            raise NotIncremental("groups by an aggregated value of a changing upstream")
        if isinstance(source_partial, _AllBut):
            return self._outputs_above_window(select, alias, source_partial)
        out: Set[str] = set()
        for i, projection in enumerate(select.expressions):
            name = _output_name(projection, i)
            if projection.is_star:
                if _own_star(projection, alias):
                    out |= source_partial
            elif (group is not None and st.own_in(projection, select, exp.AggFunc)) or st.refs(
                    projection, alias, source_partial):
                out.add(name)
        return out

    def _outputs_above_window(self, select: exp.Select, alias: Optional[str],
                              source_partial: "_AllBut") -> Set[str]:
        """The same rule as `_outputs`, kept as the complement: what is real stays listed."""
        group = select.args.get("group")
        real: Set[str] = set()
        for i, projection in enumerate(select.expressions):
            if projection.is_star:
                if _own_star(projection, alias):
                    real |= set(source_partial)
            elif not ((group is not None and st.own_in(projection, select, exp.AggFunc))
                      or st.refs(projection, alias, source_partial)):
                real.add(_output_name(projection, i))
        return _AllBut(real)

    def _window_outputs(self, select: exp.Select, alias: Optional[str],
                        source_partial: Set[str]) -> Set[str]:
        """Partial outputs of a SELECT with window functions: all but the PARTITION BY columns
        it passes through."""
        partitions = self._partitions(select, alias, source_partial)
        real: Set[str] = set()
        for i, projection in enumerate(select.expressions):
            column = projection.this if isinstance(projection, exp.Alias) else projection
            if _own_star(projection, alias):
                real |= partitions  # `*` passes the partition columns through
            elif (isinstance(column, exp.Column) and not column.is_star
                    and column.name.lower() in partitions
                    and (not column.table or column.table.lower() == alias)):
                real.add(_output_name(projection, i))
        self.rule = "partition recompute"
        self.notes.append(
            f"window function recomputed for the partitions the change touches "
            f"(PARTITION BY {', '.join(sorted(partitions))})")
        return _AllBut(real)

    def _whole_partitions(self, select: exp.Select, child: exp.Expression,
                          partitions: Set[str]) -> None:
        """The window reads every row of the partitions the change rows touch: its source at
        the pinned versions, semi-joined (NULL-safe) to the partition values flowing up."""
        assert self.whole is not None
        original = st.at(self.whole, st.path(child.this))
        # The window's input is exact now: a filter on it dropped as partial on the way in
        # must apply again, or the window would rank rows the model filters out.
        where = st.at(self.whole, st.path(select)).args.get("where")
        select.set("where", where.copy() if where is not None else None)
        alias = child.this.alias_or_name
        match = " AND ".join(f"_br_c.`{p}` <=> _br_w.`{p}`" for p in sorted(partitions))
        query = sqlglot.parse_one(
            f"SELECT * FROM (SELECT 1) AS _br_w WHERE EXISTS (SELECT 1 FROM (SELECT 1) AS _br_c "
            f"WHERE {match})", read=st.DIALECT)
        query.args["from_"].set("this", st.wrapped(original.copy(), "_br_w"))
        exists = query.find(exp.Exists)
        assert exists is not None
        exists.this.args["from_"].set("this", st.wrapped(child.this.copy(), "_br_c"))
        child.set("this", st.aliased(query, alias))
        self.rule = "partition recompute"
        self.notes.append(
            f"window partitions the change touches read whole at the old and the new versions "
            f"(PARTITION BY {', '.join(sorted(partitions))})")

    def _partitions(self, select: exp.Select, alias: Optional[str],
                    source_partial: Set[str]) -> Set[str]:
        """The PARTITION BY columns all of `select`'s windows share (raises when the
        partitions cannot bound the change)."""
        if alias is None or select.args.get("joins") or select.args.get("group") is not None:
            raise NotIncremental(
                "uses a window function over a join, an aggregate or a subquery filter of a "
                "changing upstream")
        partitions: Optional[Set[str]] = None
        for window in select.find_all(exp.Window):
            if st.nearest_query(window) is not select:
                continue
            by = window.args.get("partition_by") or []
            if not by:
                raise NotIncremental(
                    "uses a window function without PARTITION BY over a changing upstream "
                    "(every row depends on every input row)")
            if not all(isinstance(e, exp.Column) and not st.refs(e, alias, source_partial)
                       for e in by):
                raise NotIncremental("partitions a window by an expression, not by columns")
            names = {e.name.lower() for e in by}
            partitions = names if partitions is None else partitions & names
        if not partitions:
            raise NotIncremental(
                "uses window functions with no PARTITION BY column in common over a changing "
                "upstream (a change can alter every row of the union of their partitions)")
        return partitions

    # -------------------------------------------------------------- UNION
    def _union(self, union: exp.Union, child: exp.Expression) -> None:
        st.empty(union.expression if child is union.this else union.this)
        self.notes.append("other UNION branches contribute no change")
        if self.partial and child is not union.this:
            first, mine = st.first_leaf(union), st.first_leaf(child)
            if first is not None and mine is not None and not any(
                    p.is_star for p in first.expressions + mine.expressions):
                names = [_output_name(p, i) for i, p in enumerate(mine.expressions)]
                firsts = [_output_name(p, i) for i, p in enumerate(first.expressions)]
                self.partial = {firsts[i] for i, n in enumerate(names)
                                if n in self.partial and i < len(firsts)}


def _membership_on_path(projection: exp.Expression, on_path: Set[int]) -> Optional[exp.Expression]:
    """The `x IN (subquery)` or `EXISTS (subquery)` of `projection` whose subquery the walk
    came up through, when its own SELECT is the one `projection` belongs to."""
    for node in projection.find_all(exp.In, exp.Exists):
        sub = node.args.get("query") if isinstance(node, exp.In) else node.this
        if sub is not None and id(sub) in on_path and st.nearest_query(node) is st.nearest_query(projection):
            return node
    return None


def _under_aggregate(node: exp.Expression, top: exp.Expression) -> bool:
    while node is not top and node.parent is not None:
        node = node.parent
        if st.is_aggregate(node):
            return True
    return False


def _output_name(projection: exp.Expression, position: int) -> str:
    """The name the walk tracks an output column by. An unaliased expression (`sum(qty)` in a
    later UNION branch) has no name in the parse; all of them sharing "" made a UNION map every
    unnamed column of a branch to every unnamed one's partiality, so its position stands in."""
    return (projection.alias_or_name or "").lower() or f"#{position}"


# ------------------------------------------------------------------------------ scalars
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ)


def _scalars_as_exists(start: exp.Expression) -> List[str]:
    """Every scalar aggregate subquery the change rows of `start` flow out of, compared in a
    WHERE or HAVING conjunct, becomes an EXISTS of its rows (module docstring); the rest of
    the walk reads it as any EXISTS."""
    notes: List[str] = []
    while True:
        found = next(((sub, sub.parent) for sub in st.ancestors(start)
                      if isinstance(sub, exp.Subquery) and _scalar_aggregate(sub)
                      and isinstance(sub.parent, _COMPARISONS)), None)
        if found is None:
            return notes
        sub, comparison = found
        clause = _conjunct_of(comparison)
        if clause is None:
            return notes  # under an OR, a CASE, a function: the walk names the fallback
        inner = sub.this
        inner.set("expressions", [exp.Literal.number(1)])
        exists = exp.Exists(this=inner)
        outer = clause.parent
        if isinstance(clause, exp.Having):
            comparison.replace(exp.true())
            where = outer.args.get("where")
            # copy=False: a copy would leave the change rows' scan outside the tree
            outer.set("where", exp.Where(
                this=exp.and_(where.this, exists, copy=False) if where else exists))
        else:
            comparison.replace(exists)
        notes.append("a scalar subquery's comparison read as EXISTS of its rows")


def _scalar_aggregate(sub: exp.Subquery) -> bool:
    """`sub` is `(SELECT <one aggregate expression> FROM ... [WHERE ...])`."""
    inner = sub.this
    if not isinstance(inner, exp.Select) or len(inner.expressions) != 1:
        return False
    if any(inner.args.get(k) for k in ("group", "having", "limit", "distinct", "qualify")):
        return False
    return st.own_in(inner.expressions[0], inner, exp.AggFunc) and not st.own(inner, exp.Window)


def _conjunct_of(node: exp.Expression) -> Optional[exp.Expression]:
    """The WHERE or HAVING clause `node` is a top-level conjunct of, else None."""
    parent = node.parent
    while isinstance(parent, (exp.And, exp.Paren)):
        parent = parent.parent
    if isinstance(parent, (exp.Where, exp.Having)) and isinstance(parent.parent, exp.Select):
        return parent
    return None


# ------------------------------------------------------------------------------ helpers


class _AllBut(frozenset):  # type: ignore[type-arg]
    """Partial output names given by their complement: every column except these (above a
    window, only the PARTITION BY columns passed through are real)."""

    def __contains__(self, name: object) -> bool:
        return not frozenset.__contains__(self, name)

    def __bool__(self) -> bool:
        return True


def _own_star(projection: exp.Expression, alias: Optional[str]) -> bool:
    """`*`, or `<alias>.*` of the source on the path (another table's `*` brings none of it)."""
    if not projection.is_star:
        return False
    table = projection.table.lower() if isinstance(projection, exp.Column) else ""
    return not table or table == alias


def _make_inner(join: exp.Join) -> None:
    """An outer join as an inner one: without its side and, when spelt `LEFT OUTER JOIN`, its
    OUTER too (a bare `OUTER JOIN` is not Spark SQL)."""
    join.set("side", None)
    if (join.kind or "").upper() == "OUTER":
        join.set("kind", None)
