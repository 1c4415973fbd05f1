"""A grouped SELECT with window functions, split into its aggregate and the windows over it (pure).

`SELECT k, sum(v) AS s, rank() OVER (ORDER BY sum(v) DESC) AS r FROM t GROUP BY k` computes
its windows over the groups, after the aggregate. Written as two SELECTs it means the same:

    SELECT _br_g0 AS k, _br_m0 AS s, rank() OVER (ORDER BY _br_m0 DESC) AS r
    FROM (SELECT k AS _br_g0, sum(v) AS _br_m0 FROM t GROUP BY k) AS _br_split

and the inner one is then an intermediate aggregate (analysis._intermediate) that delta upkeep
can keep in a sidecar. HAVING becomes the outer WHERE, QUALIFY and ORDER BY stay outside.
A SELECT this cannot rewrite faithfully (GROUPING SETS, ROLLUP, CUBE, GROUP BY ALL, DISTINCT, a
WINDOW clause, an unnamed computed output, a subquery in an expression, a GROUP BY name that may
be an output alias) is left as it is; the analysis then gives its own reason.

An ungrouped SELECT whose windows read a join (or rows a subquery filter keeps) is split the same
way (split_joined_windows): the join, its WHERE and every column the windows and outputs read
in the inner SELECT, the windows over it. The affected-key walk then meets the windows over one
relation, and recomputes the partitions the change touches.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

from sqlglot import exp

from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.sqltree import is_aggregate

GROUP_PREFIX = "_br_g"
AGG_PREFIX = "_br_m"
COLUMN_PREFIX = "_br_c"
SPLIT_ALIAS = "_br_split"



def split_windowed(tree: exp.Expression) -> exp.Expression:
    """A copy of `tree` with every grouped SELECT that computes window functions split in two."""
    return _split_each(tree, _windowed_group, _split)


def _split_each(tree: exp.Expression, applies: Callable[[exp.Select], bool],
                split: Callable[[exp.Select], Optional[exp.Select]]) -> exp.Expression:
    """A copy of `tree` with each SELECT that `applies` to replaced by its `split` (where one
    can be made)."""
    tree = tree.copy()
    for select in list(tree.find_all(exp.Select)):
        made = split(select) if applies(select) else None
        if made is None:
            continue
        if select is tree:
            tree = made
        else:
            select.replace(made)
    return tree


def _windowed_group(select: exp.Select) -> bool:
    group = select.args.get("group")
    return bool(group is not None and group.expressions) and st.own(select, exp.Window)


def window_function(node: exp.Expression) -> bool:
    """The function a window computes (its `this`, under a FILTER too), not a group aggregate."""
    holder = node.parent
    if isinstance(holder, exp.Filter) and node.arg_key == "this":
        node, holder = holder, holder.parent
    return isinstance(holder, exp.Window) and node.arg_key == "this"


def _group_exprs(select: exp.Select) -> Optional[List[exp.Expression]]:
    """The GROUP BY expressions with ordinals resolved; None where a name may be an alias."""
    group = select.args["group"]
    if any(group.args.get(a) for a in ("grouping_sets", "cube", "rollup", "totals", "all")):
        return None
    aliases = {p.alias.lower(): p.unalias() for p in select.expressions if isinstance(p, exp.Alias)}
    resolved: List[exp.Expression] = []
    for expr in group.expressions:
        if isinstance(expr, exp.Literal) and expr.is_int:
            position = int(expr.name) - 1
            if not 0 <= position < len(select.expressions):
                return None
            expr = select.expressions[position].unalias()
        elif isinstance(expr, exp.Column) and not expr.table and expr.name.lower() in aliases:
            body = aliases[expr.name.lower()]
            # Spark reads the name as an input column first: only the same column is certain
            if not (isinstance(body, exp.Column) and body.name.lower() == expr.name.lower()):
                return None
        if isinstance(expr, (exp.Rollup, exp.Cube, exp.GroupingSets)) or _contains_aggregate(expr):
            return None
        resolved.append(expr)
    return resolved


def _contains_aggregate(expr: exp.Expression) -> bool:
    return any(is_aggregate(n) for n in expr.walk())


def _same_group_expr(node: exp.Expression, group: exp.Expression) -> bool:
    if node == group:
        return True
    # a column named with and without its table (valid SQL makes either unambiguous)
    return (isinstance(node, exp.Column) and isinstance(group, exp.Column)
            and node.name.lower() == group.name.lower()
            and (not node.table or not group.table or node.table.lower() == group.table.lower()))


def _split(select: exp.Select) -> Optional[exp.Select]:
    if any(select.args.get(a) for a in ("distinct", "windows", "limit", "offset")):
        return None
    if any(p.is_star for p in select.expressions):
        return None
    found = _group_exprs(select)
    if found is None:
        return None
    groups: List[exp.Expression] = found
    # A grouped column keeps its name (the sidecar's key columns, explain); an expression, or
    # a name taken twice, gets a generated one.
    names: List[str] = []
    for i, group in enumerate(groups):
        plain = isinstance(group, exp.Column) and not group.name.lower().startswith("_br_")
        taken = plain and group.name.lower() in {n.lower() for n in names}
        names.append(group.name if plain and not taken else f"{GROUP_PREFIX}{i}")
    aggregates: Dict[str, str] = {}  # a group aggregate's SQL -> its inner column
    inner_aggs: List[exp.Expression] = []

    def lift(node: exp.Expression) -> exp.Expression:
        # a group aggregate (a FILTER with it) becomes a column of the inner SELECT; pre-order,
        # so `sum(sum(v)) OVER ()` lifts the inner sum and keeps the window's own
        unit = node.this if isinstance(node, exp.Filter) else node
        if not is_aggregate(unit) or window_function(node):
            return node
        name = aggregates.get(node.sql())
        if name is None:
            name = aggregates[node.sql()] = f"{AGG_PREFIX}{len(inner_aggs)}"
            inner_aggs.append(node.copy())
        return exp.column(name)

    def keyed(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and (node.name.startswith(AGG_PREFIX)
                                             or node.this.quoted and not node.table):
            return node  # a lifted aggregate, or a group key already replaced
        for i, group in enumerate(groups):
            if _same_group_expr(node, group):
                return exp.column(names[i], quoted=True)
        return node

    clauses = {arg: select.args[arg] for arg in ("having", "qualify", "order")
               if select.args.get(arg) is not None}
    outer_parts: List[exp.Expression] = []
    for part in [*select.expressions, *clauses.values()]:
        if any(isinstance(n, exp.Subquery) for n in part.walk()):
            return None
        outer_parts.append(part.transform(lift).transform(keyed))
    projections = _named(select.expressions, outer_parts)
    if projections is None:
        return None
    outputs = {p.alias_or_name.lower() for p in select.expressions}
    rest = dict(zip(clauses, outer_parts[len(projections):]))
    for arg, part in [("", p) for p in projections] + list(rest.items()):
        for column in part.find_all(exp.Column):
            if column.name.startswith(AGG_PREFIX) or column.name in names:
                continue
            if arg in ("qualify", "order") and not column.table and column.name.lower() in outputs:
                continue  # an output's name
            return None  # a column outside the aggregates and the group keys
    inner = select.copy()
    for arg in ("having", "qualify", "order", "with_"):
        inner.set(arg, None)
    inner.set("expressions", [g.copy().as_(n, quoted=True) for n, g in zip(names, groups)]
              + [a.as_(f"{AGG_PREFIX}{i}") for i, a in enumerate(inner_aggs)])
    inner.set("group", exp.Group(expressions=[g.copy() for g in groups]))
    outer = _over(inner, projections, select)
    if "having" in rest:
        outer.set("where", exp.Where(this=rest["having"].this))
    for arg in ("qualify", "order"):
        if arg in rest:
            outer.set(arg, rest[arg])
    return outer


def split_joined_windows(tree: exp.Expression) -> exp.Expression:
    """A copy of `tree` with every ungrouped SELECT that computes window functions over a join
    (or over a WHERE with a subquery) split in two: the windows over the joined rows."""
    return _split_each(tree, _windowed_join, _split_join)


def _windowed_join(select: exp.Select) -> bool:
    group = select.args.get("group")
    where = select.args.get("where")
    return (not (group is not None and group.expressions) and st.own(select, exp.Window)
            and bool(select.args.get("joins") or where is not None and any(
                isinstance(n, (exp.Subquery, exp.Exists)) for n in where.walk())))


def _split_join(select: exp.Select) -> Optional[exp.Select]:
    if any(select.args.get(a) for a in ("distinct", "windows", "limit", "offset", "sort",
                                        "cluster", "distribute", "group", "having")):
        return None
    if any(is_aggregate(n) and not window_function(n) for p in select.expressions
           for n in p.walk()):
        return None  # a global aggregate beside the windows
    if any(p.is_star for p in select.expressions):
        return _split_star_join(select)
    clauses = {arg: select.args[arg] for arg in ("qualify", "order")
               if select.args.get(arg) is not None}
    parts = [*select.expressions, *clauses.values()]
    if any(isinstance(n, (exp.Subquery, exp.Exists)) for part in parts for n in part.walk()):
        return None
    lifter = _Lifter(select)
    outer_parts: List[exp.Expression] = []
    for arg, part in [("", p) for p in select.expressions] + list(clauses.items()):
        lifted = lifter.part(part, arg)
        if lifted is None:
            return None
        outer_parts.append(lifted)
    if not lifter.columns:
        return None
    projections = _named(select.expressions, outer_parts)
    if projections is None:
        return None
    inner = select.copy()
    for arg in ("qualify", "order", "with_"):
        inner.set(arg, None)
    inner.set("expressions", [c.as_(lifter.names[_sql(c)], quoted=True) for c in lifter.columns])
    outer = _over(inner, projections, select)
    for arg, part in zip(clauses, outer_parts[len(projections):]):
        outer.set(arg, part)
    return outer


def _split_star_join(select: exp.Select) -> Optional[exp.Select]:
    """`SELECT *, <windows> FROM a JOIN b ... WHERE ...` split with the star kept inside.

    The star's columns are not known here, but a model that builds has no two outputs of one
    name, so every column of the join's rows is in the star under its own name: the windows
    and outputs read them by that name over the inner SELECT, whose star the outer one passes
    through in place. Left as written where a name might not be the star's column: a qualified
    key of a USING join (the star has the coalesced one), a NATURAL join, a column of a
    relation this SELECT does not join (a struct's field), a hidden `_metadata` column, or a
    lateral alias."""
    stars = [p for p in select.expressions if p.is_star]
    if len(stars) != 1 or not isinstance(stars[0], exp.Star):
        return None  # `t.*`, or more than one star
    if not _star_reaches_output(select):
        return None  # a CTE's star may hold two columns of one name its reader never reads
    joins = select.args.get("joins") or []
    if any(str(j.args.get("method") or "").upper() == "NATURAL" for j in joins):
        return None
    using = {u.name.lower() for j in joins for u in (j.args.get("using") or [])}
    source = select.args.get("from_")
    if source is None:
        return None
    relations = {r.alias_or_name.lower() for r in [source.this, *(j.this for j in joins)]}
    originals = [p for p in select.expressions if not p.is_star]
    outputs = {p.alias_or_name.lower() for p in originals}

    def by_name(column: exp.Column, arg: str) -> Optional[exp.Expression]:
        name = column.name.lower()
        if column.args.get("db") or name.startswith("_metadata"):
            return None
        if not column.table:
            if name in outputs:
                # QUALIFY and ORDER BY read an output; in the SELECT list it may be a lateral alias
                return column if arg else None
            return column
        if column.table.lower() not in relations or name in using:
            return None
        return exp.column(column.this.copy())

    clauses = {arg: select.args[arg] for arg in ("qualify", "order")
               if select.args.get(arg) is not None}
    parts: List[exp.Expression] = []
    for arg, part in [("", p) for p in originals] + list(clauses.items()):
        read = _columns_replaced(part, lambda column: by_name(column, arg))
        if read is None:
            return None
        parts.append(read)
    named = _named(originals, parts[:len(originals)])
    if named is None:
        return None
    lifted = iter(named)
    projections = [exp.Star() if p.is_star else next(lifted) for p in select.expressions]
    inner = select.copy()
    for arg in ("qualify", "order", "with_"):
        inner.set(arg, None)
    inner.set("expressions", [exp.Star()])
    outer = _over(inner, projections, select)
    for arg, part in zip(clauses, parts[len(originals):]):
        outer.set(arg, part)
    return outer


def _star_reaches_output(select: exp.Select) -> bool:
    """Whether every column of `select`'s star is an output of the model: it is the model's
    SELECT, or the one relation of a single reader that selects `*` and reaches it too (a CTE
    read once, a derived table). Names the model outputs twice fail its build, so such a
    star's names are unique."""
    node: exp.Expression = select
    while True:
        parent = node.parent
        if parent is None:
            return isinstance(node, exp.Select)
        if isinstance(parent, exp.CTE):
            name = parent.alias_or_name.lower()
            root = node.root()
            readers = [t for t in root.find_all(exp.Table)
                       if not t.args.get("db") and t.name.lower() == name]
            if len(readers) != 1:
                return False
            relation: exp.Expression = readers[0]
        elif isinstance(parent, exp.Subquery):
            relation = parent
        else:
            return False  # a set operation, an expression's subquery
        reader = relation.parent
        if not isinstance(reader, exp.From):
            return False  # a joined relation
        consumer = reader.parent
        if not isinstance(consumer, exp.Select) or consumer.args.get("joins") or not any(
                isinstance(p, exp.Star) for p in consumer.expressions):
            return False
        node = consumer


class _Lifter:
    """The columns a split SELECT's outer part reads, each moved into the inner SELECT once."""

    def __init__(self, select: exp.Select) -> None:
        # each output's name -> the SQL of the column it projects plainly ("": an expression)
        self.outputs = {p.alias_or_name.lower(): _sql(p.unalias())
                        if isinstance(p.unalias(), exp.Column) else ""
                        for p in select.expressions}
        self.computed = {n for n, c in self.outputs.items() if c.split(".")[-1] != n}
        self.names: Dict[str, str] = {}  # a column's SQL -> its inner column
        self.columns: List[exp.Expression] = []

    def part(self, part: exp.Expression, arg: str) -> Optional[exp.Expression]:
        """`part` (a SELECT-list item, or the QUALIFY / ORDER BY named by `arg`) reading the
        inner columns; None where a name cannot be placed."""
        return _columns_replaced(part, lambda column: self._column(column, arg))

    def _column(self, column: exp.Column, arg: str) -> Optional[exp.Expression]:
        name = column.name.lower()
        if not column.table and name in (self.outputs if arg else self.computed):
            # QUALIFY and ORDER BY read an output by its name; in the SELECT list a name
            # that is another output's alias may be a lateral alias, or an input column
            return column if arg else None
        key = _sql(column)
        if key not in self.names:
            # its own name where QUALIFY and ORDER BY would not read another output by it
            # (explain then names the partitions as written), else a generated one
            free = name not in self.names.values() and self.outputs.get(name, key) == key
            self.names[key] = name if free else f"{COLUMN_PREFIX}{len(self.columns)}"
            self.columns.append(column.copy())
        return exp.column(self.names[key], quoted=True)


def _columns_replaced(part: exp.Expression,
                      read: Callable[[exp.Column], Optional[exp.Expression]]
                      ) -> Optional[exp.Expression]:
    """A copy of `part` with each column as `read` places it; None where one cannot be."""
    part = part.copy()
    for column in list(part.find_all(exp.Column)):
        new = read(column)
        if new is None:
            return None
        if new is not column:
            if column is part:
                part = new
            else:
                column.replace(new)
    return part


def _named(originals: List[exp.Expression],
           parts: List[exp.Expression]) -> Optional[List[exp.Expression]]:
    """The outer SELECT list: each of `parts` under its original output's name."""
    named: List[exp.Expression] = []
    for original, part in zip(originals, parts):
        if isinstance(original, exp.Alias):
            named.append(part)
        elif isinstance(original, exp.Column):
            named.append(exp.alias_(part, original.name, quoted=original.this.quoted))
        else:
            return None  # Spark's generated name for a computed output cannot be kept
    return named


def _over(inner: exp.Select, projections: List[exp.Expression],
          select: exp.Select) -> exp.Select:
    """The outer SELECT of `projections` over `inner`, with `select`'s CTEs."""
    outer = exp.Select(expressions=projections).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(SPLIT_ALIAS))))
    if select.args.get("with_") is not None:
        outer.set("with_", select.args["with_"].copy())
    return outer


def _sql(column: exp.Expression) -> str:
    return column.sql(dialect=st.DIALECT).lower()
