"""Coarse affected keys: a key column whose values a change row names itself (pure).

The affected-key walk (keypath.py) maps each change row through the model's joins to the full
output key: for a report over `lineitem` joined to `orders` and `customer` that is a join of the
change rows with every other table, and on TPC-H it was most of a replay's time. Often one
column of the key is in the change row, or one join away from it. In

    select l_orderkey, o_orderdate, sum(...) from customer, orders, lineitem
    where c_custkey = o_custkey and l_orderkey = o_orderkey group by l_orderkey, o_orderdate

every output row a changed line item (or order) can alter has `l_orderkey` equal to that change
row's `l_orderkey` (or `o_orderkey`), and every one a changed customer can alter has the
`o_orderkey` of one of that customer's orders. So the refresh recomputes every output row whose
`l_orderkey` is among those values (a superset of the affected rows, never fewer), and deletes
the target's rows with those values that the recompute no longer yields. The value query of
such a scan reads its change rows, joined along the shortest chain of equalities to a source
holding the column (`customer` -> `orders`), never the rest of the model; a scan no chain
reaches keeps the walk, projecting only the coarse column.

The *scope* is the output SELECT's FROM, with each FROM subquery that is itself a plain SELECT
(no aggregate, window, DISTINCT, LIMIT, set operation or `*`) read through: its sources join
the scope and its projections stand for their expressions. A key column is usable when the
output SELECT projects it as a column or a deterministic expression of one source of the scope
(a GROUP BY key, when it groups), and a changed scan of the scope reaches that source through
`a = b` conjuncts of WHERE clauses and inner joins' ON conditions (they hold, not NULL, on every
row the output comes from). Neither may be on the NULL-supplying side of an outer join (a row
appearing there removes a NULL-extended row, whose key column is not the change row's), and the
output SELECT has no window function, QUALIFY, LIMIT, GROUPING SETS / ROLLUP / CUBE or LATERAL
VIEW (each lets one input row reach output rows of other key values), nor a set operation above
it. A change row then reaches only output rows built from it, and on those rows the key column
is the value its chain yields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from sqlglot import exp
from sqlglot.errors import ParseError

from dbt.adapters.spark_batch_refresh.sql import sqltree as st

ColumnsOf = Callable[[str], Sequence[str]]
Col = Tuple[str, str]  # (source alias, column name), lower case


@dataclass(frozen=True)
class Route:
    """From a changed scan to a source holding the key column: its alias first, that source's
    alias last (the scan itself when it holds the column), each next one equal to one before
    it through a conjunct `a.x = b.y`."""

    aliases: Tuple[str, ...]
    value: str  # the key column's value on the last source's row (Spark SQL, qualified)

    @property
    def direct(self) -> bool:
        return len(self.aliases) == 1


@dataclass(frozen=True)
class Coarse:
    """The key column the refresh restricts by, and how each changed scan's rows name its values."""

    column: str  # an output column of the unique key
    traced: Mapping[int, Route]  # scan index -> its route to the column

    def describe(self, upstreams: Mapping[int, str]) -> str:
        scans = ", ".join(
            f"{upstreams[i]} ({'its own' if r.direct else 'through ' + ', '.join(r.aliases[1:])})"
            for i, r in sorted(self.traced.items()))
        return f"affected rows by {self.column}, its values from the change rows of {scans}"


@dataclass(frozen=True)
class _Source:
    alias: str
    node: exp.Expression  # exp.Table (a scan) or exp.Subquery
    null_supplied: bool


@dataclass
class _Scope:
    """A SELECT's FROM, plain subqueries read through: the leaf sources by alias, and the
    column equalities that hold on every row of it."""

    leaves: Dict[str, _Source] = field(default_factory=dict)
    edges: List[Tuple[Col, Col]] = field(default_factory=list)


class _Unreadable(Exception):
    """A FROM this module does not read (the model keeps the walk)."""


def coarse_key(tree: exp.Expression, key: Sequence[str], columns_of: ColumnsOf,
               moved: Optional[Set[str]] = None) -> Optional[Coarse]:
    """The key column the most changed scans reach (see the module doc), or None.

    `tree` has its CTEs inlined (scan indexes are those of st.scans). `moved` limits the count
    to scans of these upstreams (all scans when None). Of two columns reaching as many scans,
    the one more of them hold themselves wins, then the shorter routes, then the earlier."""
    read = _read(tree, columns_of)
    if read is None:
        return None
    top, scope, reader = read
    classes = _classes(scope.edges)
    neighbours = _neighbours(classes)
    index = {id(t): i for i, t in enumerate(st.scans(tree))}
    scans = {i: a for a, src in scope.leaves.items() if isinstance(src.node, exp.Table)
             and not src.null_supplied for i in [index.get(id(src.node))] if i is not None
             and (moved is None or st.table_name(src.node) in moved)}
    best: Optional[Coarse] = None
    best_rank: Tuple[int, int, int] = (0, 0, 0)
    for column in key:
        holders = _holders(top, column, reader, scope, classes)
        if not holders:
            continue
        traced = {i: route for i, alias in scans.items()
                  for route in [_route(alias, holders, neighbours)] if route is not None}
        rank = (len(traced), sum(r.direct for r in traced.values()),
                -sum(len(r.aliases) for r in traced.values()))
        if traced and rank > best_rank:
            best, best_rank = Coarse(column, traced), rank
    return best


def coarse_part(tree: exp.Expression, occurrence: int, coarse: Coarse,
                change_source: exp.Expression, pins: Mapping[int, int],
                columns_of: ColumnsOf, column_type: Optional[str] = None) -> exp.Expression:
    """The key column's values one changed scan's rows name: its value on the change rows, or
    on the rows of the route's last source reached from them through its equalities, every
    other source read at its pinned version (by scan index, as the key walk pins them). Cast
    to `column_type`, the output column's, as the equality that joined them compared them: the
    values of several scans then meet in one column of the output's type (a value the cast
    refuses is NULL: at worst a NULL tombstone, sqlgen.staging_coarse)."""
    route = coarse.traced[occurrence]
    tree = tree.copy()
    for i, scan in enumerate(st.scans(tree)):
        if i != occurrence and i in pins and not scan.args.get("version"):
            st.pin(scan, pins[i])
    read = _read(tree, columns_of)
    assert read is not None  # read when the Coarse was
    _, scope, _ = read
    value = exp.maybe_parse(route.value, dialect=st.DIALECT)
    if column_type:
        try:
            to = exp.DataType.build(column_type, dialect=st.DIALECT)
        except (ParseError, ValueError):
            to = None  # a type sqlglot does not read: compared as the equality compared it
        if to is not None:
            # TRY_: a change row the model filters out may hold a value the cast refuses
            # (under ANSI, an error); a row that reaches the output casts, as its join did
            value = exp.TryCast(this=value, to=to, safe=True)
    changed = st.aliased(change_source.copy(), route.aliases[0])
    query = exp.select(exp.alias_(value, coarse.column, quoted=True)).from_(changed)
    classes = _classes(scope.edges)
    joined = [route.aliases[0]]
    for alias in route.aliases[1:]:
        on = [exp.EQ(this=_qualified(mine), expression=_qualified(theirs))
              for members in _distinct(classes)
              for mine in [_member_of(members, alias)] if mine is not None
              for theirs in [next((m for j in joined for m in [_member_of(members, j)]
                                   if m is not None), None)] if theirs is not None]
        query = query.join(scope.leaves[alias].node.copy(), on=exp.and_(*on), join_type="inner")
        joined.append(alias)
    return query


# ------------------------------------------------------------------------------ reading
def _read(tree: exp.Expression, columns_of: ColumnsOf
          ) -> Optional[Tuple[exp.Select, _Scope, "_Reader"]]:
    top = tree
    while isinstance(top, exp.Subquery):
        top = top.this
    if not isinstance(top, exp.Select) or _blocked(top):
        return None
    scope = _Scope()
    try:
        reader = _Reader(top, scope, columns_of, False)
    except _Unreadable:
        return None
    return top, scope, reader


def _blocked(select: exp.Select) -> bool:
    group = select.args.get("group")
    if group is not None and any(group.args.get(a) for a in ("grouping_sets", "rollup", "cube")):
        return True
    if any(select.args.get(a) for a in ("qualify", "limit", "offset", "laterals")):
        return True
    return st.own(select, exp.Window)


def _plain(select: exp.Expression) -> bool:
    """A FROM subquery read through: its rows are its FROM's rows, filtered and projected."""
    return (isinstance(select, exp.Select) and not _blocked(select)
            and select.args.get("group") is None and not select.args.get("distinct")
            and not select.args.get("having") and not st.own(select, exp.AggFunc)
            and not any(p.is_star for p in select.expressions)
            and select.args.get("from_") is not None)


class _Reader:
    """One SELECT of the scope: its FROM items, and its columns as expressions over leaves."""

    def __init__(self, select: exp.Select, scope: _Scope, columns_of: ColumnsOf,
                 null_supplied: bool) -> None:
        self._select, self._columns_of = select, columns_of
        self._items: Dict[str, _Source] = {}
        self._inner: Dict[str, _Reader] = {}
        self._names: Dict[str, Set[str]] = {}
        for node, nulls in _items(select):
            alias = node.alias_or_name.lower()
            if not alias or alias in self._items:
                raise _Unreadable(alias)
            source = _Source(alias, node, nulls or null_supplied)
            self._items[alias] = source
            if isinstance(node, exp.Subquery) and _plain(node.this):
                self._inner[alias] = _Reader(node.this, scope, columns_of, source.null_supplied)
            else:
                if alias in scope.leaves:
                    raise _Unreadable(alias)
                scope.leaves[alias] = source
        predicates = [select.args["where"].this] if select.args.get("where") else []
        predicates += [j.args["on"] for j in select.args.get("joins") or []
                       if not (j.side or "") and j.args.get("on") is not None]
        for predicate in predicates:
            for conjunct in st.conjuncts(predicate):
                if isinstance(conjunct, exp.EQ):
                    left, right = self.leaf(conjunct.this), self.leaf(conjunct.expression)
                    if isinstance(left, exp.Column) and isinstance(right, exp.Column):
                        a, b = _col(left), _col(right)
                        if a != b:
                            scope.edges.append((a, b))

    def leaf(self, node: exp.Expression) -> Optional[exp.Expression]:
        """`node` (an expression of this SELECT) over leaf sources' qualified columns; None
        when a column cannot be placed on exactly one source, or it holds a subquery."""
        if node.find(exp.Subquery, exp.Exists, exp.Select) is not None:
            return None
        out = node.copy()
        for column in list(out.find_all(exp.Column)):
            placed = self._place(column)
            if placed is None:
                return None
            if column is out:
                return placed
            column.replace(placed)
        return out

    def projection(self, name: str) -> Optional[exp.Expression]:
        for p in self._select.expressions:
            if p.alias_or_name.lower() == name:
                return p.this if isinstance(p, exp.Alias) else p
        return None

    def _place(self, column: exp.Column) -> Optional[exp.Expression]:
        if column.is_star:
            return None
        name = column.name.lower()
        if column.table:
            alias = column.table.lower()
            if alias not in self._items or name not in self._names_of(alias):
                return None
        else:
            owners = [a for a in self._items if name in self._names_of(a)]
            if len(owners) != 1:
                return None
            alias = owners[0]
        inner = self._inner.get(alias)
        if inner is None:
            return exp.column(name, table=alias, quoted=True)
        projected = inner.projection(name)
        return None if projected is None else inner.leaf(projected)

    def _names_of(self, alias: str) -> Set[str]:
        if alias not in self._names:
            node = self._items[alias].node
            if isinstance(node, exp.Table):
                names = {c.lower() for c in self._columns_of(st.table_name(node))}
            elif isinstance(node.this, exp.Query):
                names = {s.lower() for s in node.this.named_selects}
                if any(isinstance(p, exp.Star) or p.is_star for p in
                       getattr(node.this, "expressions", [])):
                    names = _Everything()
            else:
                names = set()
            self._names[alias] = names
        return self._names[alias]


class _Everything(set):  # type: ignore[type-arg]
    """The columns of a subquery with `*`: not known here, so any name may be one."""

    def __contains__(self, item: object) -> bool:
        return True


def _items(select: exp.Select) -> List[Tuple[exp.Expression, bool]]:
    """The SELECT's FROM items, each with whether an outer join NULL-supplies it."""
    from_ = select.args.get("from_")
    if from_ is None:
        raise _Unreadable("no FROM")
    items: List[Tuple[exp.Expression, bool]] = [(from_.this, False)]
    for join in select.args.get("joins") or []:
        side, kind = (join.side or "").upper(), (join.kind or "").upper()
        if kind in ("SEMI", "ANTI") or join.args.get("method"):
            raise _Unreadable("semi, anti or natural join")
        if side in ("RIGHT", "FULL"):
            items = [(node, True) for node, _ in items]
        items.append((join.this, side in ("LEFT", "FULL")))
    for node, _ in items:
        if not isinstance(node, (exp.Table, exp.Subquery)) or (
                isinstance(node, exp.Table) and not isinstance(node.this, exp.Identifier)):
            raise _Unreadable("a table function or a parenthesised join")
    return items


# ------------------------------------------------------------------------------ routes
def _col(column: exp.Column) -> Col:
    return column.table.lower(), column.name.lower()


def _qualified(col: Col) -> exp.Column:
    return exp.column(col[1], table=col[0], quoted=True)


def _classes(edges: Sequence[Tuple[Col, Col]]) -> Dict[Col, Set[Col]]:
    """The columns equal to each column through a chain of equalities."""
    classes: Dict[Col, Set[Col]] = {}
    for left, right in edges:
        merged = classes.get(left, {left}) | classes.get(right, {right})
        for member in merged:
            classes[member] = merged
    return classes


def _distinct(classes: Mapping[Col, Set[Col]]) -> List[Set[Col]]:
    seen: List[Set[Col]] = []
    for members in classes.values():
        if not any(members is s for s in seen):
            seen.append(members)
    return seen


def _member_of(members: Set[Col], alias: str) -> Optional[Col]:
    return min((m for m in members if m[0] == alias), default=None)


def _holders(top: exp.Select, column: str, reader: _Reader, scope: _Scope,
             classes: Mapping[Col, Set[Col]]) -> Dict[str, str]:
    """The sources whose rows hold output `column`'s value, each with that value (SQL)."""
    written = reader.projection(column.lower())
    if written is None or not _grouped_by(top, column, written, reader):
        return {}
    value = reader.leaf(written)
    if value is None:
        return {}
    if isinstance(value, exp.Column):
        members = classes.get(_col(value), {_col(value)})
        return {a: _qualified((a, c)).sql(dialect=st.DIALECT) for a, c in sorted(members)
                if not scope.leaves[a].null_supplied}
    aliases = {_col(c)[0] for c in value.find_all(exp.Column)}
    if len(aliases) != 1 or value.find(exp.AggFunc, exp.Window) is not None:
        return {}
    alias, = aliases
    if scope.leaves[alias].null_supplied:
        return {}
    return {alias: value.sql(dialect=st.DIALECT)}


def _grouped_by(select: exp.Select, column: str, written: exp.Expression,
                reader: _Reader) -> bool:
    """A grouping SELECT groups by the projection (as written, by position, by alias, or as
    the same source column)."""
    group = select.args.get("group")
    if group is None:
        return not st.own(select, exp.AggFunc)
    for position, projection in enumerate(select.expressions, start=1):
        if projection.alias_or_name.lower() != column.lower():
            continue
        for g in group.expressions:
            if g == written or (isinstance(g, exp.Literal) and g.is_int
                                and int(g.this) == position):
                return True
            if isinstance(g, exp.Column) and not g.table and g.name.lower() == column.lower():
                return True
            if isinstance(g, exp.Column) and isinstance(written, exp.Column):
                placed = reader.leaf(g)
                if placed is not None and placed == reader.leaf(written):
                    return True
    return False


def _neighbours(classes: Mapping[Col, Set[Col]]) -> Dict[str, Set[str]]:
    """The sources each source is equal-joined to (through any class of equal columns)."""
    neighbours: Dict[str, Set[str]] = {}
    for members in classes.values():
        aliases = {a for a, _ in members}
        for a in aliases:
            neighbours.setdefault(a, set()).update(aliases - {a})
    return neighbours


def _route(start: str, holders: Mapping[str, str],
           neighbours: Mapping[str, Set[str]]) -> Optional[Route]:
    """The shortest chain of equalities from `start` to a holder (breadth first)."""
    paths: Dict[str, Tuple[str, ...]] = {start: (start,)}
    frontier = [start]
    while frontier:
        nxt: List[str] = []
        for alias in frontier:
            if alias in holders:
                return Route(paths[alias], holders[alias])
            for there in sorted(neighbours.get(alias, ())):
                if there not in paths:
                    paths[there] = paths[alias] + (there,)
                    nxt.append(there)
        frontier = nxt
    return None
