"""The key a model's query proves, when it configures none (pure).

A GROUP BY's keys (or all columns of a SELECT DISTINCT or a UNION), when all are projected;
the plain columns of a SELECT DISTINCT whose windows aggregate whole partitions by them; the
partition columns of a dedup (`row_number() over (partition by ...) = 1` in a WHERE over the
relation that numbers the rows, or in a QUALIFY);
or the key of the relation a plain SELECT reads, passed through its filter and projection
(dbt's `with ... final as (...) select * from final`) and through joins that cannot repeat a
row of it: an inner or left join whose ON equates every column of the joined relation's own
key (`left join customer_orders co on co.customer_id = c.customer_id`, the CTE grouped by
customer_id). A join that may repeat rows adds the joined relation's key (the pair of
both keys; a LEFT join's part NULL in its NULL-extended rows: `Inferred.outer_key`; a RIGHT
join is that LEFT join seen from its preserved side), or stands in for the key before it
where each joined row matches at most one row before it (`bills join bill_lines` on the
bills' key), and a LATERAL VIEW posexplode its position. A key column an inner join's ON
equates to another column may come out as that one. A physical relation's key is the one
its dbt tests declare (`upstream_keys`, collected from the graph by the materialization): a
key that rests on one is as good as those tests, so `Inferred.declared` says so, and the
refresh treats such a key as it treats the model's own tests' key (NULL or repeated: the
model refreshes without it). Wherever a key column must be projected, a one-to-one image of
it counts as the column (`image_of`: its cast to string, or a concat of it with literals).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Set, Tuple

from sqlglot import exp

from dbt.adapters.spark_batch_refresh.sql import sqltree as st


@dataclass
class Inferred:
    """One inference: the keys the tests of the model's upstreams declare, and whether the
    answer used one."""

    upstream_keys: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    declared: bool = False
    # Keys of upstream `batch_refresh` models: configured (checked on their writes), or
    # proved by their queries at both versions a refresh reads (recorded in their commits:
    # commit_log.recorded_key). As good as a key this query proves: using one leaves
    # `declared` alone.
    proven_keys: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    proven_used: List[str] = field(default_factory=list)  # the upstreams whose proven key served
    # Per SELECT (by id) whose key `_passed` gave: the key's output names that a LEFT JOIN's
    # NULL extension leaves NULL (`outer_key`).
    outer: Dict[int, Tuple[str, ...]] = field(default_factory=dict)

    def outer_key(self, tree: exp.Expression) -> Tuple[str, ...]:
        """The columns of `tree`'s key (as `key` gave it) that may be NULL where a LEFT JOIN
        that can match several rows found none: the joined relation's key beside the
        preserved one's (`journals left join journal_lines`: journal_line_id). The pair is
        unique under `<=>` all the same: a preserved row gives either its matches, told apart
        by the joined key, or one row with that key NULL."""
        return self.outer.get(id(tree), ())

    def key(self, tree: exp.Expression) -> Tuple[str, ...]:
        if isinstance(tree, exp.Union):
            return _distinct_union_key(tree) or self._tagged_union_key(tree)
        select = tree if isinstance(tree, exp.Select) else None
        if select is None:
            return ()
        if any(p.is_star for p in select.expressions):
            return self._passed(select) or _qualified_first_key(select)
        group = select.args.get("group")
        if group is not None and group.expressions:
            return _group_key(select, group)
        if select.args.get("distinct") is not None:
            if not select.find(exp.AggFunc):
                return tuple(p.alias_or_name for p in select.expressions)
            return _distinct_partition_key(select)
        return self._passed(select) or _qualified_first_key(select)

    def _tagged_union_key(self, union: exp.Union) -> Tuple[str, ...]:
        """A UNION ALL whose branches each have a key among their outputs and a column that
        is a different constant in each (`'order' as kind`, dbt_utils.union_relations'
        `_dbt_source_relation`): that column and the columns at every position a branch's
        key takes. Branches cannot share a row's key when their constants differ, and
        columns added to a branch's key leave it a key (dbt_artifacts' lineage edges: a
        DISTINCT of all three columns beside a branch keyed by its first)."""
        branches = _union_all_branches(union)
        if branches is None or any(p.is_star for b in branches for p in b.expressions):
            return ()
        width = len(branches[0].expressions)
        if any(len(b.expressions) != width for b in branches):
            return ()
        names = [p.alias_or_name for p in branches[0].expressions]
        tag = next((i for i in range(width) if names[i] and _distinct_constants(
            [b.expressions[i].unalias() for b in branches])), None)
        if tag is None:
            return ()
        positions: Set[int] = set()
        for branch in branches:
            key = self.key(branch)
            outputs = [p.alias_or_name.lower() for p in branch.expressions]
            if not key or any(k.lower() not in outputs for k in key):
                return ()
            # the tag is one constant within a branch: a key without it is still a key
            positions |= {outputs.index(k.lower()) for k in key} - {tag}
        if not positions or not all(names[i] for i in positions):
            return ()
        return tuple([names[tag]] + [names[i] for i in sorted(positions)])

    def _passed(self, select: exp.Select) -> Tuple[str, ...]:
        """The key of the relation `select` reads first, when each row of it makes at most
        one output row (a filter, a projection, a window or QUALIFY, joins that match at most
        one row: no GROUP BY, aggregate, DISTINCT or generator in the SELECT list at this
        level) and every key column comes out as a plain column (or through `*`). An inner
        join that may match several rows adds its relation's key: each output row is one
        pair of matched rows, so the pair of both keys is unique (a LEFT join counts as inner
        where the WHERE rejects its NULL-extended rows), less the joined key's columns its ON
        fixes (`_unfixed`); where its ON equates the whole key before it, the joined key
        alone. A LEFT join that keeps them adds it too, as an outer part (`outer_key`). A key
        column may come out as a column an inner join's ON equates it to
        (`_inner_equalities`). A LATERAL VIEW posexplode adds its position: one row per
        element."""
        if (any(select.args.get(a) for a in ("group", "distinct", "having"))
                or st.generates_rows(select)):
            return ()
        positions = _positions(select)
        if positions is None:
            return ()
        if any(agg.find_ancestor(exp.Select, exp.Window) is select
               for agg in select.find_all(exp.AggFunc)):
            return ()  # an aggregate at this level (one under a window keeps the rows)
        source = select.args.get("from_") or select.args.get("from")
        if source is None:
            return ()
        shared = self._joined_on_shared_key(select, source.this)
        if shared:
            names = shared + positions
            return tuple(names) if len({n.lower() for n in names}) == len(names) else ()
        parts = [(source.this, self._relation_key(select, source.this), False)]
        joins = select.args.get("joins") or []
        for i, join in enumerate(joins):
            if self._at_most_one(select, join):
                continue
            joined = (join.this, self._relation_key(select, join.this), False)
            # Where the ON equates the FROM relation's whole key to columns of B alone (and
            # nothing before multiplied its rows), each B row matches at most one row before
            # it: B's key alone is the key of an inner join (jaffle's `orders o join
            # payments p on p.order_id = o.order_id`, quickbooks' `bills inner join
            # bill_lines`) and of a RIGHT join.
            one_each = len(parts) == 1 and _equates_key(
                join.args.get("on"), parts[0][0], parts[0][1], only=join.this)
            if _right_outer(join):
                # B RIGHT JOIN'd: each B row comes out once per matching row before it, or
                # once with everything before it NULL: the LEFT join seen from B.
                parts = [joined] if one_each else (
                    [(relation, key, True) for relation, key, _ in parts] + [joined])
                continue
            extends = _left_outer(join)
            if not (_pairs(join) or extends):
                return ()
            if one_each and not extends:
                parts = [joined]
                continue
            before = {r.this.alias_or_name.lower() for r in [source, *joins[:i]]}
            parts.append((join.this, _unfixed(join, joined[1], before), extends))
        names: List[str] = []
        outer: List[str] = []
        equal = _inner_equalities(select)
        for relation, key, extends in parts:
            alias = relation.alias_or_name.lower()
            if not key or (len(parts) > 1 and not alias):
                return ()
            nullable = self._relation_outer(select, relation)
            for column in key:
                name = _output_name(select, alias, column, alone=len(parts) == 1) or next(
                    (n for t, c in equal.get((alias, column.lower()), ())
                     for n in [_output_name(select, t, c, alone=False)] if n), None)
                if name is None:
                    return ()
                names.append(name)
                if extends or column.lower() in nullable:
                    outer.append(name)
        names += positions
        if len({n.lower() for n in names}) != len(names):
            return ()
        self.outer[id(select)] = tuple(outer)
        return tuple(names)

    def _relation_outer(self, select: exp.Select, source: exp.Expression) -> Set[str]:
        """The key columns of a CTE or subquery `select` reads that its own LEFT JOINs may
        leave NULL (`outer_key`), lower-case."""
        inner = _read_select(select, source)
        return {c.lower() for c in self.outer.get(id(inner), ())} if inner is not None else set()

    def _joined_on_shared_key(self, select: exp.Select, first: exp.Expression) -> List[str]:
        """Two relations keyed by the same columns, joined on exactly them (inner, LEFT, RIGHT
        or FULL OUTER: spend and revenue per month and source, each aggregated, then joined),
        any later join matching at most one row: a key value is one row on each side at most,
        so one output row at most. Joined USING the key, its columns are the output's key as
        Spark coalesces them (a bare `*`, or the unqualified names); joined ON `a.k = b.k`
        for each key column (Fivetran's daily_shop: two daily aggregates by FULL OUTER JOIN),
        the key is each pair's `coalesce(a.k, b.k)` (either order) as projected. NULL keys
        never match and may repeat: a refresh whose staging finds the key repeated recomputes
        without it (analysis.keyless_if_null)."""
        joins = select.args.get("joins") or []
        if not joins or (joins[0].args.get("kind") or "").upper() not in ("", "INNER", "OUTER"):
            return []
        join = joins[0]
        names = (self._using_names(select, first, join) if join.args.get("using")
                 else self._coalesced_pairs(select, first, join))
        # later joins only where the first one gives a key: each reads its relation's key
        if not names or any(not self._at_most_one(select, j) for j in joins[1:]):
            return []
        return names

    def _using_names(self, select: exp.Select, first: exp.Expression,
                     join: exp.Join) -> List[str]:
        """The output names of the USING columns, each side keyed by exactly them."""
        using = [u.name for u in join.args.get("using") or []]
        wanted = {u.lower() for u in using}
        for relation in (first, join.this):
            key = self._relation_key(select, relation)
            if not key or {k.lower() for k in key} != wanted:
                return []
        star = any(isinstance(p, exp.Star) for p in select.expressions)
        names: List[str] = []
        for column in using:
            name = column if star else _projected(select, "", column)
            if name is None:
                return []
            names.append(name)
        return names

    def _coalesced_pairs(self, select: exp.Select, first: exp.Expression,
                         join: exp.Join) -> List[str]:
        """The output names of `coalesce(a.k, b.k)` for each pair of key columns a FULL
        OUTER JOIN's ON equates (and nothing else: another condition leaves rows of one key
        unmatched on both sides), each side keyed by exactly its columns of the pairs."""
        on = join.args.get("on")
        left, right = first.alias_or_name.lower(), join.this.alias_or_name.lower()
        if (join.side or "").upper() != "FULL" or on is None or not left or not right \
                or left == right:
            return []
        pairs: List[Tuple[str, str]] = []
        for conjunct in st.conjuncts(on):
            if not isinstance(conjunct, exp.EQ):
                return []
            sides = (conjunct.this, conjunct.expression)
            if not all(isinstance(c, exp.Column) for c in sides):
                return []
            by_table = {c.table.lower(): c.name.lower() for c in sides}
            if set(by_table) != {left, right}:
                return []
            pairs.append((by_table[left], by_table[right]))
        for relation, mine in ((first, [a for a, _ in pairs]), (join.this, [b for _, b in pairs])):
            key = self._relation_key(select, relation)
            if not key or len(set(mine)) != len(mine) or {k.lower() for k in key} != set(mine):
                return []
        names: List[str] = []
        for a, b in pairs:
            name = next((p.alias_or_name for p in select.expressions
                         if _coalesce_of(p.unalias(), {(left, a), (right, b)})), None)
            if not name:
                return []
            names.append(name)
        return names

    def _relation_key(self, select: exp.Select, source: exp.Expression) -> Tuple[str, ...]:
        inner = _read_select(select, source)
        if inner is not None:
            return _filtered_first_key(select, source, inner) or self.key(inner)
        # dbt writes every relation it resolves with its schema; a bare name is a CTE's
        if (isinstance(source, exp.Table) and source.name and source.args.get("db")
                and not source.args.get("version")):
            proven = _declared(self.proven_keys, st.table_name(source))
            if proven:
                if st.table_name(source) not in self.proven_used:
                    self.proven_used.append(st.table_name(source))
                return proven
            declared = _declared(self.upstream_keys, st.table_name(source))
            if declared:
                self.declared = True
            return declared
        return ()

    def _at_most_one(self, select: exp.Select, join: exp.Join) -> bool:
        """`join` matches each row of the relations before it with at most one row: a semi or
        anti join, or an inner / left join whose ON equates every column of the joined
        relation's key to an expression that does not read the joined relation, or whose
        USING names every column of it (segment's sessions `left join id_stitching using
        (anonymous_id)`)."""
        kind = (join.args.get("kind") or "").upper()
        if kind in ("SEMI", "ANTI"):
            return True
        side = (join.side or "").upper()
        if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER"):
            return False
        using = {u.name.lower() for u in join.args.get("using") or []}
        if using:
            key = self._relation_key(select, join.this)
            return bool(key) and all(k.lower() in using for k in key)
        return _equates_key(join.args.get("on"), join.this,
                            self._relation_key(select, join.this))


def _positions(select: exp.Select) -> Optional[List[str]]:
    """The output names of the positions of `select`'s LATERAL VIEWs, each a posexplode
    (not _outer: an empty array's one row has a NULL position) whose position is projected
    by name; None when a LATERAL VIEW is anything else (explode repeats equal elements)."""
    names: List[str] = []
    for lateral in select.args.get("laterals") or []:
        alias = lateral.args.get("alias")
        columns = alias.columns if alias is not None else []
        if not isinstance(lateral.this, exp.Posexplode) or lateral.args.get("outer"):
            return None
        position = columns[0].name if columns else "pos"
        name = _projected(select, alias.name.lower() if alias is not None else "", position)
        if name is None:
            return None
        names.append(name)
    return names


def _projected(select: exp.Select, table: str, column: str) -> Optional[str]:
    """The output name of a projection of `table`.`column` (or of the bare column): a plain
    one, else a one-to-one image of it (`image_of`; the plain column serves more rules)."""
    images = [p for p in select.expressions if image_of(p.unalias(), table, column)]
    out = next((p for p in images if isinstance(p.unalias(), exp.Column)), None) or next(
        iter(images), None)
    return out.alias_or_name if out is not None else None


def _coalesce_of(expr: exp.Expression, columns: Set[Tuple[str, str]]) -> bool:
    """Whether `expr` is `coalesce(x, y)` of exactly the two (table, column) pairs."""
    if not isinstance(expr, exp.Coalesce) or len(expr.expressions) != 1:
        return False
    args = [expr.this, expr.expressions[0]]
    return (all(isinstance(a, exp.Column) for a in args)
            and {(a.table.lower(), a.name.lower()) for a in args} == columns)


def image_of(expr: exp.Expression, table: str, column: str) -> bool:
    """`expr` is `table`.`column` (or the bare column), or an image of it that keeps distinct
    values distinct: a cast to string (Fivetran's staging models write `cast(id as
    {{ dbt.type_string() }}) as account_id`; Spark prints each value of a key's types its own
    way, and casts to CHAR/VARCHAR as to STRING), or a concat of it with string literals
    (`concat('inv', id)`, `cast(id as string) || ':user'`), NULL where it is NULL."""
    if isinstance(expr, exp.Column):
        return expr.name.lower() == column.lower() and expr.table.lower() in ("", table)
    if isinstance(expr, exp.Cast):  # TryCast too: a cast to string does not fail
        return expr.to.this == exp.DataType.Type.TEXT and image_of(expr.this, table, column)
    if isinstance(expr, exp.Concat) and not expr.args.get("coalesce"):
        parts = list(expr.expressions)
    elif isinstance(expr, exp.DPipe):
        parts = [expr.this, expr.expression]
    else:
        return False
    others = [p for p in parts if not (isinstance(p, exp.Literal) and p.is_string)]
    return len(others) == 1 and image_of(others[0], table, column)


def _output_name(select: exp.Select, alias: str, column: str, alone: bool) -> Optional[str]:
    """The output name of `alias`.`column`: a plain projection of it, or a `*` that covers
    it (an unqualified one only where it is the one relation with a key part: with two, a
    `*` would repeat the key's name). An unqualified column is this relation's: were it
    another's too, Spark would refuse it as ambiguous."""
    for p in select.expressions:
        if p.is_star and (p.table.lower() == alias if isinstance(p, exp.Column) and p.table
                          else alone):
            return column
    return _projected(select, alias, column)


def _left_outer(join: exp.Join) -> bool:
    """`join` is a LEFT (OUTER) join with a condition: each row before it comes out once per
    matching row, or once NULL-extended (a WHERE that rejects the NULL-extended rows made it
    inner already: st.parse)."""
    return (st.is_left_outer(join) and not join.args.get("method")
            and (join.args.get("on") is not None or bool(join.args.get("using"))))


def _right_outer(join: exp.Join) -> bool:
    """`join` is a RIGHT (OUTER) join with an ON condition."""
    return (st.is_outer(join, "RIGHT") and not join.args.get("method")
            and join.args.get("on") is not None)


def _equates_key(on: Optional[exp.Expression], relation: exp.Expression,
                 key: Tuple[str, ...], only: Optional[exp.Expression] = None) -> bool:
    """`on` equates every column of `relation`'s key to an expression that does not read
    `relation` (with `only`: that reads no relation but `only`): each row on the other side
    matches at most one of its rows."""
    alias = relation.alias_or_name.lower()
    if not key:
        return False
    others = {only.alias_or_name.lower()} if only is not None else None
    if others is not None and not all(others):
        return False
    equated = _equated(on, alias, lambda read: not read & {"", alias}
                       and (others is None or read <= others))
    return all(k.lower() in equated for k in key)


def _unfixed(join: exp.Join, key: Tuple[str, ...], before: Set[str]) -> Tuple[str, ...]:
    """The joined relation's `key` but the columns `join`'s ON equates to an expression of
    the relations before it alone (`bills left join bill_lines on bills.bill_id =
    bill_lines.bill_id`: bill_id): the rows before fix each, so the rest tells the matches
    of one row apart (and is NULL in its NULL-extended row, as the whole key would be)."""
    if "" in before:
        return key
    fixed = _equated(join.args.get("on"), join.this.alias_or_name.lower(),
                     lambda read: read <= before)
    return tuple(k for k in key if k.lower() not in fixed) or key


def _equated(on: Optional[exp.Expression], alias: str,
             reads: Callable[[Set[str]], bool]) -> Set[str]:
    """The columns of relation `alias` (lower-case) that a conjunct of `on` equates to an
    expression whose relations (by alias, "" for an unqualified column) `reads` accepts."""
    equated: Set[str] = set()
    if on is None or not alias:
        return equated
    for conjunct in st.conjuncts(on):
        if not isinstance(conjunct, exp.EQ):
            continue
        for mine, other in ((conjunct.this, conjunct.expression),
                            (conjunct.expression, conjunct.this)):
            if (isinstance(mine, exp.Column) and mine.table.lower() == alias
                    and reads({c.table.lower() for c in other.find_all(exp.Column)})):
                equated.add(mine.name.lower())
    return equated


def _inner_equalities(select: exp.Select) -> Dict[Tuple[str, str], List[Tuple[str, str]]]:
    """The qualified columns each inner join's ON equates (`bills.bill_id =
    bill_lines.bill_id`), both ways: equal in every output row (a later outer join
    NULL-extends both together), so either serves as the other's key column."""
    equal: Dict[Tuple[str, str], List[Tuple[str, str]]] = {}
    for join in select.args.get("joins") or []:
        if not _pairs(join) or join.args.get("on") is None:
            continue
        for conjunct in st.conjuncts(join.args["on"]):
            if not isinstance(conjunct, exp.EQ):
                continue
            sides = [(c.table.lower(), c.name.lower()) for c in (conjunct.this, conjunct.expression)
                     if isinstance(c, exp.Column) and c.table]
            if len(sides) == 2 and sides[0][0] != sides[1][0]:
                equal.setdefault(sides[0], []).append(sides[1])
                equal.setdefault(sides[1], []).append(sides[0])
    return equal


def _pairs(join: exp.Join) -> bool:
    """`join` keeps only matched pairs: an inner or cross join (a LEFT join whose
    NULL-extended rows the WHERE rejects is one already: st.parse)."""
    kind = (join.args.get("kind") or "").upper()
    return not join.side and kind in ("", "INNER", "CROSS")


def infer_key(tree: exp.Expression,
              upstream_keys: Optional[Mapping[str, Tuple[str, ...]]] = None) -> Tuple[str, ...]:
    return Inferred(upstream_keys or {}).key(tree)


def _declared(upstream_keys: Mapping[str, Tuple[str, ...]], name: str) -> Tuple[str, ...]:
    """An upstream's declared (or proven) key, by its schema and name as the model writes them (the
    catalog may be left out on either side: `spark_catalog.raw.orders` is `raw.orders`)."""
    parts = name.split(".")[-2:]
    for relation, key in upstream_keys.items():
        if relation.lower().replace("`", "").split(".")[-2:] == parts:
            return tuple(key)
    return ()


def _union_all_branches(union: exp.Union) -> Optional[List[exp.Select]]:
    """The SELECTs a chain of UNION ALLs stacks, in order; None for any other set operation
    or a branch that is not a plain SELECT (or one with a LIMIT over the union)."""
    if type(union) is not exp.Union or union.args.get("distinct") or any(
            union.args.get(a) for a in ("limit", "offset")):
        return None
    branches: List[exp.Select] = []
    for side in (union.this, union.expression):
        while isinstance(side, exp.Subquery):
            side = side.this
        if isinstance(side, exp.Union):
            inner = _union_all_branches(side)
            if inner is None:
                return None
            branches.extend(inner)
        elif isinstance(side, exp.Select):
            branches.append(side)
        else:
            return None
    return branches


def _distinct_constants(values: List[exp.Expression]) -> bool:
    """Each value a literal (a cast of one too), all different."""
    seen: Set[Tuple[bool, str]] = set()
    for value in values:
        while isinstance(value, exp.Cast):
            value = value.this
        if not isinstance(value, exp.Literal):
            return False
        seen.add((value.is_string, value.name))
    return len(seen) == len(values)


def _group_key(select: exp.Select, group: exp.Group) -> Tuple[str, ...]:
    if st.generates_rows(select):
        return ()  # `select g, explode(collect_list(v)) ... group by g`: rows per group
    names: List[str] = []
    for expr in group.expressions:
        if isinstance(expr, exp.Literal) and expr.is_int:  # GROUP BY 1: an ordinal
            position = int(expr.name) - 1
            if not 0 <= position < len(select.expressions):
                return ()
            names.append(select.expressions[position].alias_or_name)
            continue
        match = next((p for p in select.expressions
                      if p.unalias() == expr or (isinstance(expr, exp.Column) and not expr.table
                                                 and p.alias_or_name.lower() == expr.name.lower()
                                                 and not p.find(exp.AggFunc))), None)
        name = match.alias_or_name if match is not None else (
            _projected(select, expr.table.lower(), expr.name)  # its image, `cast(g as string)`
            if isinstance(expr, exp.Column) else None)
        if name is None:
            return ()
        names.append(name)
    return tuple(dict.fromkeys(names))


def _distinct_union_key(union: exp.Union) -> Tuple[str, ...]:
    """All output columns of a `UNION` (distinct): each row is there once, as in a SELECT
    DISTINCT. Not for UNION ALL, nor with a LIMIT (which keeps some rows only), nor where an
    output column has no name here (a `*`, or an expression Spark names by its text)."""
    first = st.first_leaf(union)
    if (not union.args.get("distinct") or first is None
            or any(union.args.get(a) for a in ("limit", "offset"))
            or any(p.is_star or not p.alias_or_name for p in first.expressions)):
        return ()
    names = tuple(p.alias_or_name for p in first.expressions)
    return names if len({n.lower() for n in names}) == len(names) else ()


def _first_row_partition(window: exp.Expression) -> Optional[List[exp.Column]]:
    """The PARTITION BY columns of `row_number() over (partition by ...)`; None for any other
    window (rank and dense_rank give 1 to every tie) or a partition by an expression."""
    if not isinstance(window, exp.Window) or not isinstance(window.this, exp.RowNumber):
        return None
    columns = window.args.get("partition_by") or []
    if not columns or not all(isinstance(c, exp.Column) for c in columns):
        return None
    return list(columns)


def _is_one(value: exp.Expression) -> bool:
    return isinstance(value, exp.Literal) and value.is_int and int(value.name) == 1


def _first_rows(condition: Optional[exp.Expression],
                behind: Callable[[exp.Column], Optional[exp.Expression]]) -> List[exp.Expression]:
    """The expressions X that `condition` holds at 1: its conjuncts `X = 1` (either way round),
    and the flags it tests (`where is_most_recent_record`, `= true`) defined as `X = 1`
    (Fivetran's `row_number() over (...) = 1 as is_most_recent_record`). `behind` gives the
    expression a column names, or None."""
    def resolved(value: exp.Expression) -> Optional[exp.Expression]:
        return behind(value) if isinstance(value, exp.Column) else value

    def held_at_one(value: Optional[exp.Expression]) -> List[exp.Expression]:
        while isinstance(value, exp.Paren):
            value = value.this
        if not isinstance(value, exp.EQ):
            return []
        return [mine for mine, other in ((value.this, value.expression),
                                         (value.expression, value.this)) if _is_one(other)]

    found: List[exp.Expression] = []
    for conjunct in st.conjuncts(condition) if condition is not None else []:
        flag: Optional[exp.Expression] = None
        if isinstance(conjunct, exp.Column):
            flag = conjunct
        elif isinstance(conjunct, (exp.EQ, exp.Is)):
            for mine, other in ((conjunct.this, conjunct.expression),
                                (conjunct.expression, conjunct.this)):
                if isinstance(other, exp.Boolean) and other.this is True:
                    flag = mine
        if isinstance(flag, exp.Column):
            found += [x for x in map(resolved, held_at_one(behind(flag))) if x is not None]
        found += [x for x in map(resolved, held_at_one(conjunct)) if x is not None]
    return found


def _partition_names(select: exp.Select, columns: List[exp.Column]) -> Tuple[str, ...]:
    """The output names of `select` under which the partition `columns` come out unchanged."""
    alone = not select.args.get("joins")
    names: List[str] = []
    for column in columns:
        name = _output_name(select, column.table.lower(), column.name, alone)
        if name is None:
            return ()
        names.append(name)
    return tuple(names) if len({n.lower() for n in names}) == len(names) else ()


def _first_row_key(condition: Optional[exp.Expression],
                   behind: Callable[[exp.Column], Optional[exp.Expression]],
                   numbering: exp.Select) -> Tuple[str, ...]:
    """The partition columns of a `row_number()` window that `condition` holds at 1, as the
    SELECT that computes the window (`numbering`) names them."""
    for window in _first_rows(condition, behind):
        columns = _first_row_partition(window)
        key = _partition_names(numbering, columns) if columns else ()
        if key:
            return key
    return ()


def _filtered_first_key(select: exp.Select, source: exp.Expression,
                        inner: exp.Query) -> Tuple[str, ...]:
    """The dedup that staging models write: `select * from numbered where rn = 1`, where
    `numbered` projects `row_number() over (partition by id order by ...) as rn`. The rows
    the filter keeps from `source` have one row per partition: its columns, as `inner`
    names them, are the relation's key. Not for a generator in `inner` (its rows are made
    after the window)."""
    if not isinstance(inner, exp.Select) or st.generates_rows(inner):
        return ()
    alias = source.alias_or_name.lower()
    where = select.args.get("where")

    def behind(column: exp.Column) -> Optional[exp.Expression]:
        if column.table.lower() not in ("", alias) or (
                not column.table and select.args.get("joins")):
            return None  # which relation's column it is, the catalog knows; this module does not
        named = next((p for p in inner.expressions
                      if p.alias_or_name.lower() == column.name.lower()), None)
        return named.unalias() if named is not None else None

    return _first_row_key(where.this if where is not None else None, behind, inner)


def _qualified_first_key(select: exp.Select) -> Tuple[str, ...]:
    """`... qualify row_number() over (partition by id order by ...) = 1` (or the alias of
    such a projection): the QUALIFY keeps one row per partition of the rows this SELECT
    makes (after its joins and WHERE), so the partition columns, projected unchanged, are
    its key."""
    if st.generates_rows(select):
        return ()
    qualify = select.args.get("qualify")

    def behind(column: exp.Column) -> Optional[exp.Expression]:
        named = None if column.table else next(
            (p for p in select.expressions if isinstance(p, exp.Alias)
             and p.alias.lower() == column.name.lower()), None)
        return named.unalias() if named is not None else None

    return _first_row_key(qualify.this if qualify is not None else None, behind, select)


# window functions of a row's place in its partition (sqlglot files them as aggregates)
_BY_POSITION = (exp.Lag, exp.Lead, exp.Rank, exp.DenseRank, exp.Ntile, exp.PercentRank,
                exp.CumeDist)


def _whole_partition(window: exp.Window) -> bool:
    """An aggregate (min, max, count, first_value, ...) over a whole partition: no ORDER BY
    (whose default frame ends at the current row), or a frame from UNBOUNDED PRECEDING to
    UNBOUNDED FOLLOWING. Its value is the same on every row of the partition."""
    function = window.this
    while isinstance(function, (exp.IgnoreNulls, exp.RespectNulls)):
        function = function.this
    if not isinstance(function, exp.AggFunc) or isinstance(function, _BY_POSITION):
        return False
    spec = window.args.get("spec")
    if spec is None:
        return window.args.get("order") is None
    return (str(spec.args.get("start", "")).upper() == "UNBOUNDED"
            and str(spec.args.get("start_side", "")).upper() == "PRECEDING"
            and str(spec.args.get("end", "")).upper() == "UNBOUNDED"
            and str(spec.args.get("end_side", "")).upper() == "FOLLOWING")


def _distinct_partition_key(select: exp.Select) -> Tuple[str, ...]:
    """A SELECT DISTINCT of plain columns and of aggregates over whole partitions by some of
    them (segment's user stitching: `select distinct anonymous_id, last_value(user_id) ignore
    nulls over (partition by anonymous_id order by ... rows between unbounded preceding and
    unbounded following), min(tstamp) over (partition by anonymous_id) ...`): rows that agree
    on the plain columns agree on every window, so DISTINCT leaves one; the plain columns are
    the key. Nothing for any other projection (an expression of the row varies within them)
    or for an aggregate outside a window."""
    if st.generates_rows(select) or any(
            agg.find_ancestor(exp.Select, exp.Window) is select
            for agg in select.find_all(exp.AggFunc)):
        return ()
    plain: Set[Tuple[str, str]] = set()
    names: List[str] = []
    windows: List[exp.Window] = []
    for projection in select.expressions:
        value = projection.unalias()
        if isinstance(value, exp.Column) and not projection.is_star:
            plain.add((value.table.lower(), value.name.lower()))
            names.append(projection.alias_or_name)
        elif isinstance(value, exp.Window) and _whole_partition(value):
            windows.append(value)
        else:
            return ()
    for window in windows:
        for column in window.args.get("partition_by") or []:
            if not (isinstance(column, exp.Column)
                    and (column.table.lower(), column.name.lower()) in plain):
                return ()
    return tuple(names) if names and len({n.lower() for n in names}) == len(names) else ()


def _read_select(select: exp.Select, source: exp.Expression) -> Optional[exp.Query]:
    """The query behind a FROM source (a SELECT or a UNION): a subquery's, or a CTE's of this
    or an outer query."""
    if isinstance(source, exp.Subquery):
        inner = source.this
        return inner if isinstance(inner, (exp.Select, exp.Union)) else None
    if not isinstance(source, exp.Table) or source.args.get("db"):
        return None
    scope: Optional[exp.Expression] = select
    enclosing = set()
    while scope is not None:
        enclosing.add(id(scope))
        with_ = scope.args.get("with_") or scope.args.get("with")
        for cte in (with_.expressions if with_ is not None else []):
            # inside its own body a CTE's name is the table it shadows
            if cte.alias_or_name.lower() == source.name.lower() and id(cte) not in enclosing:
                return cte.this if isinstance(cte.this, (exp.Select, exp.Union)) else None
        scope = scope.parent
    return None
