"""A seeded generator of dbt models over the fuzz upstreams (tests/fuzz/data.py).

Every model is a SELECT whose from-scratch evaluation is deterministic (no LIMIT, no rand(), a
row_number's ORDER BY ends with a unique id) and whose unique key is really unique and never
NULL in its output:

* a row of a join is identified by the ids of its sides: the key is either the tuple of every
  side's id (`concat_ws` of coalesced ids), or the first non-NULL id in an order where each side
  determines the ones after it (`coalesce(concat('i:', i.id), concat('o:', o.id), ...)`: an item
  has one order, an order one customer), or the FROM side's id when every join is an inner or
  left join to a side it determines;
* a GROUP BY's keys are coalesced where a model configures them (a NULL in a configured key is
  a user error the plugin refuses) or another model reads the aggregate; an aggregate whose key
  is inferred may keep them nullable (`null_group`: a NULL group, matched null-safely);
* UNION ALL branches prefix their ids with the branch's tag.

The one exception to "never NULL": where the seed's sources' ids are tested (tested_sources), a
keyless join model may key by each side's bare id (`key_ids`), NULL where an outer join matched
nothing (`null_key_ids`): unique under `<=>`, what the plugin infers from the tests.

Joins are on keys and foreign keys only (a side's id, or a column holding ids of another table:
`Col.domain`), so the generator knows which side determines which.
"""

from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Sequence, Set, Tuple

import sqlglot
from sqlglot import exp

from tests.fuzz.data import CATEGORIES, FOREIGN_KEYS, REGIONS, SCHEMA, STATUSES, TIERS, sql_literal

NUMERIC = ("int", "bigint", "decimal(10,2)")
VALUES: Dict[str, Sequence[str]] = {
    "region": [sql_literal(v, "string") for v in REGIONS],
    "tier": [sql_literal(v, "string") for v in TIERS],
    "category": [sql_literal(v, "string") for v in CATEGORIES],
    "status": [sql_literal(v, "string") for v in STATUSES],
    "price": ["5", "10", "15", "20"],
    "amount": ["2.50", "5.00", "10.00", "15.00"],
    "qty": ["0", "1", "2", "3"],
    "ts": ["timestamp'2024-01-01 12:00:00'", "timestamp'2024-01-02 00:00:00'"],
    "customer_id": ["1", "2", "3", "5"],
    "product_id": ["1", "2", "4"],
    "order_id": ["1", "2", "3", "10"],
    "id": ["3", "10", "40", "100"],
}
ALIASES = {"customers": "c", "products": "p", "orders": "o", "items": "i"}
# features of a model whose key may hold NULL by design (matched null-safely, unique under <=>)
NULL_KEYS = frozenset({"null_group", "null_key_ids"})


@dataclass(frozen=True)
class Col:
    type: str  # int, bigint, decimal(10,2), string, timestamp, double
    nullable: bool = True
    domain: Optional[str] = None  # the table whose ids this column holds
    base: str = ""  # the upstream column it comes from (for literal pools)


@dataclass
class Side:
    """A FROM item: a source, a subquery over one, or another generated model."""

    alias: str
    sql: str
    cols: Dict[str, Col]
    ident: Optional[str]  # a column unique and non-NULL within the side
    source: str  # which upstream it reads (a side per upstream per join)
    form: str  # table, filtered, projected, agg, model

    @property
    def domain(self) -> Optional[str]:
        return self.cols[self.ident].domain if self.ident else None


@dataclass
class Join:
    kind: str  # inner, left, right, full
    side: Side
    on: str  # the ON text, or "using (col)"
    left: Side  # the side already in the tree the new side joins to
    determines: Tuple[bool, bool]  # (left determines side, side determines left)
    using: bool = False


@dataclass
class Model:
    name: str
    kind: str
    body: str  # the SELECT, with {{ source }} / {{ ref }}
    cols: Dict[str, Col]
    key: List[str]  # the output columns that are unique (empty: a global aggregate)
    config: Dict[str, object] = field(default_factory=dict)  # batch_refresh configs
    features: Set[str] = field(default_factory=set)
    ident: Optional[str] = None  # a single-column key downstream models can join on
    refs: List[str] = field(default_factory=list)  # the generated models it reads (twins too)
    # Its `table` twin is created by CREATE OR REPLACE (file_format='delta': a new version, a
    # change feed of the whole replacement) rather than dropped and created again (dbt-spark's
    # default: version 0 again), so a model over the twin tests both kinds of table upstream.
    twin_replaced: bool = False

    def config_text(self, materialized: str) -> str:
        if materialized != "batch_refresh":
            if self.twin_replaced:
                return "{{ config(materialized='table', file_format='delta') }}"
            return "{{ config(materialized='table') }}"
        parts = ["materialized='batch_refresh'"] + [f"{k}={v!r}" for k, v in self.config.items()]
        return "{{ config(" + ", ".join(parts) + ") }}"

    def file(self, materialized: str) -> str:
        return f"{self.config_text(materialized)}\n{self.body.strip()}\n"


def source(table: str) -> str:
    return f"{{{{ source('raw', '{table}') }}}}"


def table_cols(table: str) -> Dict[str, Col]:
    cols = {}
    for name, kind in SCHEMA[table]:
        if name == "id":
            cols[name] = Col(kind, False, table, name)
        else:
            cols[name] = Col(kind, True, FOREIGN_KEYS.get((table, name)), name)
    return cols


KINDS = ["rowwise", "join", "join_sub", "agg", "agg_join", "global", "distinct", "union",
         "window", "dedup", "downstream", "union_agg", "window_join", "union_distinct", "self_join",
         "agg_report"]
WEIGHTS = [2, 4, 4, 3, 3, 1, 2, 2, 2, 2, 3, 1, 1, 1, 2, 2]


TWIN_SUFFIX = "_tbl"


def tested_sources(seed: int) -> bool:
    """Whether the seed's sources declare `id` with dbt's unique and not_null tests, as a dbt
    project's sources do (tests/fuzz/harness.py writes them): two seeds in three, by hash so the
    seeded draws stay; seed 372, the CI budget's, is one without, its models as before."""
    return zlib.crc32(f"tested:{seed}".encode()) % 3 != 1


def twin_name(name: str) -> str:
    """The `table` twin of a generated model (tests/fuzz/harness.py builds both)."""
    return name + TWIN_SUFFIX


def model_name(ref: str) -> str:
    """The generated model a ref names: itself, or the model whose twin it is."""
    return ref[: -len(TWIN_SUFFIX)] if ref.endswith(TWIN_SUFFIX) else ref


class Generator:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.models: List[Model] = []

    # -- helpers ------------------------------------------------------------------------
    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def literal(self, col: Col) -> str:
        pool = VALUES.get(col.base)
        if pool:
            return self.rng.choice(list(pool))
        if col.type in NUMERIC:
            return str(self.rng.choice([0, 1, 2, 5]))
        return "'x'"

    def predicate(self, ref: str, col: Col) -> str:
        r = self.rng
        if col.type in NUMERIC or col.type == "timestamp":
            op = r.choice([">", "<=", "<>", ">="])
            choice = r.random()
            if choice < 0.15 and col.nullable:
                return f"{ref} is not null"
            if choice < 0.25 and col.nullable:
                return f"coalesce({ref}, 0) {op} {self.literal(col)}" if col.type != "timestamp" \
                    else f"{ref} is null"
            return f"{ref} {op} {self.literal(col)}"
        if col.type == "string":
            choice = r.random()
            if choice < 0.1 and col.base in VALUES:
                return f"{ref} not in ({', '.join(sorted(set(r.choice(list(VALUES[col.base])) for _ in range(2))))})"
            if choice < 0.3:
                return f"{ref} in ({', '.join(sorted(set(r.choice(list(VALUES.get(col.base, ['x']))) for _ in range(2))))})" \
                    if col.base in VALUES else f"{ref} is not null"
            if choice < 0.5 and col.nullable:
                return f"{ref} is {r.choice(['', 'not '])}null"
            if choice < 0.7:
                return f"coalesce({ref}, '?') <> {self.literal(col)}"
            return f"{ref} <> {self.literal(col)}"
        return f"{ref} is not null"

    def filters(self, sides: Sequence[Side], n: int, qualify: bool = True) -> List[str]:
        out = []
        for _ in range(n):
            side = self.rng.choice(list(sides))
            name = self.rng.choice(sorted(side.cols))
            ref = f"{side.alias}.{name}" if qualify else name
            out.append(self.predicate(ref, side.cols[name]))
        return out

    def non_null(self, ref: str, col: Col) -> Tuple[str, Col]:
        """An expression over the column that is never NULL (a group or partition key)."""
        if not col.nullable:
            return ref, col
        if col.type == "string":
            return f"coalesce({ref}, '?')", replace(col, nullable=False)
        if col.type == "timestamp":
            return f"coalesce(date_format({ref}, 'yyyy-MM-dd'), '?')", Col("string", False, None, "")
        return f"coalesce({ref}, -1)", replace(col, nullable=False)

    # -- sides --------------------------------------------------------------------------
    def table_side(self, table: str, forms: Sequence[str] = ("table", "filtered", "projected")) -> Side:
        alias = ALIASES[table]
        cols = table_cols(table)
        form = self.rng.choice(list(forms))
        if form == "table":
            return Side(alias, source(table), cols, "id", table, "table")
        if form == "filtered":
            name = self.rng.choice([c for c in cols if c != "id"])
            pred = self.predicate(name, cols[name])
            return Side(alias, f"(select * from {source(table)} where {pred})", cols, "id", table, "filtered")
        # projected: ids and foreign keys kept, some columns dropped, one derived column
        keep = {n: c for n, c in cols.items() if n == "id" or c.domain or self.chance(0.6)}
        others = [n for n, c in cols.items() if n != "id" and not c.domain]
        derived = ""
        if others:
            name = self.rng.choice(others)
            col = cols[name]
            if col.type in NUMERIC:
                derived, dcol = f"coalesce({name}, 0) * 2 as {name}_x", Col(col.type, False, None, "")
            elif col.type == "string":
                derived, dcol = f"upper({name}) as {name}_x", Col("string", True, None, "")
            else:
                derived, dcol = f"date_format({name}, 'yyyy-MM-dd') as {name}_x", Col("string", True, None, "")
            keep[f"{name}_x"] = dcol
        select = ", ".join([n for n in keep if not n.endswith("_x")] + ([derived] if derived else []))
        where = ""
        if self.chance(0.5):
            name = self.rng.choice([n for n in cols if n != "id"])
            where = f" where {self.predicate(name, cols[name])}"
        return Side(alias, f"(select {select} from {source(table)}{where})", keep, "id", table, "projected")

    def agg_side(self, child: str) -> Side:
        """A child table grouped by its foreign key (or its distinct foreign keys): one row per
        parent id."""
        (table, column), parent = next((k, v) for k, v in FOREIGN_KEYS.items() if k[0] == child)
        if self.chance(0.25):
            pred = "qty > 1" if table == "items" else "status in ('paid', 'shipped')"
            sql = f"(select distinct {column} from {source(table)} where {column} is not null and {pred})"
            # Never a column's name: items' "id" made `count(id.id)` a field access on an INT.
            alias = ALIASES[table] + "d"
            if any(alias == c for cols in SCHEMA.values() for c, _ in cols):
                alias += "d"
            return Side(alias, sql, {column: Col("int", False, parent, column)}, column,
                        table + "_agg", "agg")
        if table == "items":
            aggs = {"n_items": ("count(*)", Col("bigint", False)), "qty_sum": ("sum(qty)", Col("bigint")),
                    "qty_max": ("max(qty)", Col("int"))}
            where = self.rng.choice(["", " and qty > 0"])
        else:
            aggs = {"n_orders": ("count(*)", Col("bigint", False)),
                    "amount_sum": ("sum(amount)", Col("decimal(20,2)")),
                    "last_ts": ("max(ts)", Col("timestamp"))}
            where = self.rng.choice(["", " and status <> 'cancelled'"])
        cols = {column: Col("int", False, parent, column)}
        cols.update({n: c for n, (_, c) in aggs.items()})
        select = ", ".join([column] + [f"{e} as {n}" for n, (e, _) in aggs.items()])
        sql = (f"(select {select} from {source(table)} where {column} is not null{where} "
               f"group by {column})")
        return Side(ALIASES[table] + "g", sql, cols, column, table + "_agg", "agg")

    def model_side(self, alias: str = "m") -> Optional[Side]:
        usable = [m for m in self.models if m.ident]
        if not usable:
            return None
        m = self.rng.choice(usable)
        # A third of the reads go to the model's `table` twin, an upstream that a dbt `table`
        # model rewrites on every run. Chosen by hash, not by self.rng, so that adding this
        # left every other draw of a seed as it was.
        name = m.name
        if zlib.crc32(f"{len(self.models)}:{alias}:{m.name}".encode()) % 3 == 0:
            name = twin_name(m.name)
        return Side(alias, f"{{{{ ref('{name}') }}}}", dict(m.cols), m.ident, name, "model")

    def base_side(self, allow_model: bool = True, forms=("table", "filtered", "projected")) -> Side:
        if allow_model and self.chance(0.2):
            side = self.model_side()
            if side:
                return side
        return self.table_side(self.rng.choice(list(SCHEMA)), forms)

    # -- joins --------------------------------------------------------------------------
    def candidates(self, sides: Sequence[Side], subqueries: bool) -> List[Tuple[Side, Side, str, str]]:
        """(existing side, new side, existing column, new column) pairs joinable on ids."""
        used = {s.source for s in sides}
        out = []
        news: List[Side] = []
        for table in SCHEMA:
            if table in used:
                continue
            forms = ("table", "filtered", "projected") if subqueries else ("table",)
            news.append(self.table_side(table, forms))
        if subqueries:
            for child in ("items", "orders"):
                if child + "_agg" not in used and child not in used:
                    news.append(self.agg_side(child))
        for new in news:
            for old in sides:
                for name, col in old.cols.items():
                    # the existing side references the new side's id (or they share one)
                    if col.domain and col.domain == new.domain:
                        out.append((old, new, name, new.ident))
                if old.ident:
                    for name, col in new.cols.items():
                        if col.domain and col.domain == old.domain and name != new.ident:
                            out.append((old, new, old.ident, name))
        return out

    def join_tree(self, n_sides: int, subqueries: bool, base: Optional[Side] = None) -> Tuple[List[Side], List[Join]]:
        sides = [base or self.base_side(forms=("table", "filtered", "projected") if subqueries else ("table",))]
        joins: List[Join] = []
        for _ in range(n_sides - 1):
            options = self.candidates(sides, subqueries)
            if not options:
                break
            old, new, old_col, new_col = self.rng.choice(options)
            kind = self.rng.choices(["inner", "left", "right", "full"], weights=[3, 4, 2, 2])[0]
            determines = (new_col == new.ident, old_col == old.ident)
            using = False
            on = f"{old.alias}.{old_col} = {new.alias}.{new_col}"
            left_names = [n for s in sides for n in s.cols]
            if subqueries and new.form != "model" and self.chance(0.25) and left_names.count(old_col) == 1:
                # USING (old_col): the new side is a subquery naming its column like ours
                new = self.renamed(new, new_col, old_col)
                using = True
                on = f"using ({old_col})"
                new_col = old_col
            else:
                spelling = self.rng.random()
                if spelling < 0.08:
                    on = f"{old.alias}.{old_col} <=> {new.alias}.{new_col}"  # NULL-safe
                elif spelling < 0.16:
                    on = f"coalesce({old.alias}.{old_col}, -1) = {new.alias}.{new_col}"  # an expression
                if self.chance(0.15):
                    extra = [n for n, c in new.cols.items() if n != new_col and c.type in NUMERIC + ("string",)]
                    if extra:
                        name = self.rng.choice(extra)
                        on += f" and {self.predicate(f'{new.alias}.{name}', new.cols[name])}"
                elif self.chance(0.1):
                    # a condition relating both sides beyond the key
                    mine = [n for n, c in new.cols.items() if n != new_col and c.type in NUMERIC]
                    theirs = [n for n, c in old.cols.items() if n != old_col and c.type in NUMERIC]
                    if mine and theirs:
                        on += (f" and {new.alias}.{self.rng.choice(mine)} "
                               f"{self.rng.choice(['<=', '>', '<>'])} {old.alias}.{self.rng.choice(theirs)}")
            joins.append(Join(kind, new, on, old, determines, using))
            sides.append(new)
        return sides, joins

    def renamed(self, side: Side, column: str, to: str) -> Side:
        """The side as a subquery whose `column` is called `to` (for USING)."""
        parts, cols = [], {}
        for name, col in side.cols.items():
            if name == column:
                parts.append(f"{name} as {to}")
                cols[to] = col
            elif name == to:
                parts.append(f"{name} as {side.alias}_{name}")
                cols[f"{side.alias}_{name}"] = col
            else:
                parts.append(name)
                cols[name] = col
        ident = to if side.ident == column else (f"{side.alias}_{side.ident}" if side.ident == to else side.ident)
        inner = side.sql if side.sql.startswith("(") else side.sql
        return Side(side.alias, f"(select {', '.join(parts)} from {inner} {side.alias}0)", cols, ident,
                    side.source, side.form if side.form != "table" else "using")

    def from_where(self, name: str, sides: Sequence[Side], joins: Sequence[Join],
                   where: Sequence[str] = ()) -> str:
        """The FROM and WHERE of a model. Where every join is inner (no USING), a third of the
        models (by name, so no other draw of a seed moves) write it as a comma join, its ON
        conditions in the WHERE, as TPC-H / TPC-DS do: key queries that lost the WHERE made
        cross products of them (TPC-DS Q40, session 59) and no fuzz model drew one."""
        if (joins and all(j.kind == "inner" and not j.using for j in joins)
                and zlib.crc32(f"comma:{name}".encode()) % 3 == 0):
            text = "from " + ", ".join(f"{s.sql} {s.alias}" for s in sides)
            where = [f"({j.on})" for j in joins] + list(where)
        else:
            text = self.from_text(sides, joins)
        return text + (f"\nwhere {' and '.join(where)}" if where else "")

    def from_text(self, sides: Sequence[Side], joins: Sequence[Join]) -> str:
        text = f"from {sides[0].sql} {sides[0].alias}"
        for j in joins:
            jt = {"inner": "join", "left": "left join", "right": "right join", "full": "full join"}[j.kind]
            cond = j.on if j.using else f"on {j.on}"
            text += f"\n{jt} {j.side.sql} {j.side.alias} {cond}"
        return text

    @staticmethod
    def nullable_sides(sides: Sequence[Side], joins: Sequence[Join]) -> Set[str]:
        """Aliases of the sides some outer join NULL-extends."""
        out: Set[str] = set()
        for i, j in enumerate(joins):
            if j.kind in ("left", "full"):
                out.add(j.side.alias)
            if j.kind in ("right", "full"):
                out.update(s.alias for s in sides[: i + 1])
        return out

    def nulled(self, sides: Sequence[Side], joins: Sequence[Join]) -> List[Side]:
        """The sides as the join's output has them: an outer join's NULL-supplying sides'
        columns are nullable, ids included."""
        nullable = self.nullable_sides(sides, joins)
        return [replace(s, cols={n: replace(c, nullable=True) for n, c in s.cols.items()})
                if s.alias in nullable else s for s in sides]

    def join_key(self, sides: Sequence[Side], joins: Sequence[Join], features: Set[str]) -> Tuple[str, str, Col, List[str]]:
        """(key expression, key name, its column, aliases whose ids it reads)."""
        nullable = self.nullable_sides(sides, joins)
        # determination graph: a -> b when each row of a matches at most one row of b
        edges: Dict[str, Set[str]] = {s.alias: set() for s in sides}
        for j in joins:
            if j.determines[0]:
                edges[j.left.alias].add(j.side.alias)
            if j.determines[1]:
                edges[j.side.alias].add(j.left.alias)

        def reach(start: str) -> List[str]:
            order, todo = [], [start]
            while todo:
                a = todo.pop(0)
                if a not in order:
                    order.append(a)
                    todo.extend(sorted(edges[a]))
            return order

        by_alias = {s.alias: s for s in sides}
        roots = [s.alias for s in sides if len(reach(s.alias)) == len(sides) and s.ident]
        styles = ["tuple"]
        if roots and all(by_alias[a].ident for a in reach(roots[0])):
            styles.append("coalesce")
        base = sides[0]
        if base.ident and base.alias in roots and all(j.kind in ("inner", "left") for j in joins):
            styles.append("base")
        style = self.rng.choice(styles)
        if style == "base":
            return f"{base.alias}.{base.ident}", f"{base.alias}_{base.ident}", base.cols[base.ident], [base.alias]
        if style == "coalesce":
            order = reach(self.rng.choice(roots))
            parts = ", ".join(f"concat('{a}:', cast({a}.{by_alias[a].ident} as string))" for a in order)
            features.add("key_coalesce")
            return f"coalesce({parts})", "k", Col("string", False), order
        parts = ", ".join(f"coalesce(cast({s.alias}.{s.ident} as string), '~')" if s.ident else "'~'"
                          for s in sides)
        features.add("key_tuple")
        return f"concat_ws('|', {parts})", "k", Col("string", False), [s.alias for s in sides]

    def join_features(self, sides: Sequence[Side], joins: Sequence[Join], key_sides: Sequence[str],
                      features: Set[str]) -> None:
        nullable = self.nullable_sides(sides, joins)
        for i, j in enumerate(joins):
            features.add(f"join_{j.kind}")
            if j.using:
                features.add("using")
            if j.side.form in ("filtered", "projected", "agg"):
                features.add(f"side_{j.side.form}")
        fixed = set()
        for i, j in enumerate(joins):
            if j.kind in ("left", "full") and (j.using or j.side.form not in ("table", "model")):
                fixed.add(j.side.alias)
            if j.kind in ("right", "full"):
                left = sides[: i + 1]
                if len(left) > 1 or left[0].form not in ("table", "model") or j.using:
                    fixed.update(s.alias for s in left)
        if fixed & set(key_sides) & nullable:
            features.add("KNOWN_oj_key_fixed_side")
        if nullable & set(key_sides):
            features.add("key_reads_null_supplying_side")

    def projection_besides(self, sides: Sequence[Side], n: int, key_name: str) -> Tuple[List[str], Dict[str, Col]]:
        """A projection beside a join key: the key's own name (`m_k` for `m.k`) is selected once."""
        items, cols = self.projection(sides, n)
        cols.pop(key_name, None)
        return [i for i in items if not i.endswith(f" as {key_name}")], cols

    def projection(self, sides: Sequence[Side], n: int) -> Tuple[List[str], Dict[str, Col]]:
        items, cols = [], {}
        pool = [(s, name) for s in sides for name in s.cols]
        for side, name in self.rng.sample(pool, min(n, len(pool))):
            col = side.cols[name]
            out = f"{side.alias}_{name}"
            if out in cols:
                continue
            ref = f"{side.alias}.{name}"
            if col.type in NUMERIC and self.chance(0.3):
                items.append(f"{ref} * 2 as {out}")
                cols[out] = replace(col, domain=None)
            elif col.type == "string" and self.chance(0.2):
                items.append(f"upper({ref}) as {out}")
                cols[out] = replace(col, domain=None)
            else:
                items.append(f"{ref} as {out}")
                cols[out] = col
        return items, cols

    # -- model kinds --------------------------------------------------------------------
    def gen_rowwise(self, name: str, features: Set[str]) -> Model:
        side = self.base_side()
        if side.form == "model":
            features.add("ref")
        key = side.ident
        others = [n for n in side.cols if n != key]
        keep = self.rng.sample(others, min(len(others), self.rng.randint(1, 4)))
        items, cols = [key], {key: side.cols[key]}
        for n in keep:
            col = side.cols[n]
            if col.type in NUMERIC and self.chance(0.3):
                items.append(f"coalesce({n}, 0) + 1 as {n}")
                cols[n] = replace(col, nullable=False, domain=None)
            elif col.type == "string" and self.chance(0.3):
                items.append(f"case when {n} is null then 'none' else lower({n}) end as {n}")
                cols[n] = replace(col, nullable=False)
            else:
                items.append(n)
                cols[n] = col
        where = self.filters([side], self.rng.randint(0, 2), qualify=False)
        where_text = f"\nwhere {' and '.join(where)}" if where else ""
        style = self.rng.choice(["plain", "cte", "nested"])
        if style == "cte":
            features.add("cte")
            body = (f"with base as (select * from {side.sql} {side.alias}{where_text}),\n"
                    f"shaped as (select {', '.join(items)} from base)\nselect * from shaped")
        elif style == "nested":
            features.add("nested")
            body = f"select * from (\n  select {', '.join(items)} from {side.sql} {side.alias}{where_text}\n) x"
        else:
            body = f"select {', '.join(items)}\nfrom {side.sql} {side.alias}{where_text}"
        return Model(name, "rowwise", body, cols, [key], {"unique_key": key}, features, key)

    def gen_join(self, name: str, features: Set[str], subqueries: bool) -> Model:
        sides, joins = self.join_tree(self.rng.choice([2, 2, 3]), subqueries)
        if any(s.form == "model" for s in sides):
            features.add("ref")
        key_expr, key_name, key_col, key_sides = self.join_key(sides, joins, features)
        self.join_features(sides, joins, key_sides, features)
        items, cols = self.projection_besides(self.nulled(sides, joins), self.rng.randint(2, 5), key_name)
        for n, j in enumerate(joins):
            merged = j.on[len("using ("):-1] if j.using else ""
            # unqualified, the name is ambiguous once a later side has a column of that name
            later = any(merged in later_join.side.cols for later_join in joins[n + 1:])
            if merged and self.chance(0.6) and not later:
                # the merged column of a USING join: coalesce(left, right) under a FULL join
                items.append(f"{merged} as using_{merged}")
                cols[f"using_{merged}"] = Col("int", True, j.side.cols[merged].domain, merged)
                features.add("using_merged_column")
        where = self.filters(self.nulled(sides, joins), self.rng.choice([0, 0, 1, 2]))
        if where:
            features.add("where")
        outer = [j.side for j in joins if j.kind == "left"]
        if outer and self.chance(0.15):
            side = self.rng.choice(outer)
            where.append(f"{side.alias}.{side.ident} is null")  # rows without a match only
            features.add("anti_join_where")
        if len(where) == 2 and self.chance(0.4):
            where = [f"({where[0]} or {where[1]})"]
            features.add("where_or")
        where += self.semi_filters(sides, features)
        star = [s for s in sides if s.form == "agg" and not set(s.cols) & (set(cols) | {key_name})]
        if star and self.chance(0.5):
            side = self.rng.choice(star)
            items.append(f"{side.alias}.*")
            cols.update(self.nulled(sides, joins)[sides.index(side)].cols)
            features.add("star")
        key_cols = {key_name: key_col}
        key_items = [f"{key_expr} as {key_name}"]
        # Where the sources' ids are tested, a model that leaves its key to inference keeps, in
        # two of three, each side's id as it is (NULL where an outer join matched nothing): the
        # tuple is unique under `<=>`, and the plugin may infer it from the tests (a LEFT JOIN
        # that matches several rows keys the pair). Chosen by hash; the seeded draw below is
        # always made.
        bare = (key_name == "k" and tested_sources(self.seed) and self.keyless_draw(name) < 3
                and zlib.crc32(f"bare:{name}".encode()) % 3 != 0)
        if key_name == "k" and (self.chance(0.25) or bare):
            # the same key as a list: one (coalesced) id column per side
            nullable = self.nullable_sides(sides, joins)
            key_cols, key_items = {}, []
            for side in sides:
                col = side.cols[side.ident]
                if bare:
                    expr = f"{side.alias}.{side.ident}"
                    out = replace(col, nullable=col.nullable or side.alias in nullable)
                else:
                    expr, out = self.non_null(f"{side.alias}.{side.ident}", replace(col, nullable=True))
                key_items.append(f"{expr} as key_{side.alias}")
                key_cols[f"key_{side.alias}"] = out
            features.discard("key_tuple")
            features.discard("key_coalesce")
            features.add("key_ids" if bare else "key_list")
            if bare and nullable:
                features.add("null_key_ids")  # NULL in the key by design, unique under <=>
            if bare and any(j.kind == "left" and not j.determines[0] for j in joins):
                features.add("left_join_pairs")  # a LEFT JOIN matching several rows
        body = f"select {', '.join(key_items + items)}\n{self.from_where(name, sides, joins, where)}"
        out = {**key_cols, **cols}
        key = list(key_cols)
        return Model(name, "join_sub" if subqueries else "join", body, out, key,
                     {"unique_key": key[0] if len(key) == 1 else key}, features,
                     key[0] if len(key) == 1 else None)

    def semi_filters(self, sides: Sequence[Side], features: Set[str]) -> List[str]:
        """EXISTS / NOT EXISTS / IN / NOT IN (subquery) against a table the model does not join."""
        if not self.chance(0.3):
            return []
        used = {s.source for s in sides}
        options = []
        for side in sides:
            for (child, column), parent in FOREIGN_KEYS.items():
                # side holds parent ids: children exist or not
                if side.ident and side.domain == parent and child not in used:
                    options.append((side, child, column, f"{side.alias}.{side.ident}", True))
                # side references a parent: the parent exists or not
                for name, col in side.cols.items():
                    if col.domain == parent and name != side.ident and parent not in used and child == side.source:
                        options.append((side, parent, "id", f"{side.alias}.{name}", False))
        for side in sides:
            if side.source in SCHEMA:
                for name, col in side.cols.items():
                    if col.domain and name != side.ident and name in dict(SCHEMA[side.source]):
                        # the same upstream again: rows whose foreign key some other row shares
                        options.append((side, side.source, name, f"{side.alias}.{name}", False))
        if not options:
            return []
        side, table, column, ref, _ = self.rng.choice(options)
        if table == side.source:
            features.add("semi_self")
        cols = table_cols(table)
        name = self.rng.choice([n for n in cols if n != "id" and not cols[n].domain] or ["id"])
        pred = self.predicate(f"x.{name}", cols[name])
        form = self.rng.choice(["exists", "not exists", "in", "not in"])
        features.add(f"semi_{form.replace(' ', '_')}")
        if form in ("in", "not in"):
            return [f"{ref} {form} (select x.{column} from {source(table)} x where {pred})"]
        return [f"{form} (select 1 from {source(table)} x where x.{column} = {ref} and {pred})"]

    def aggregates(self, sides: Sequence[Side], qualify: bool = True) -> Tuple[List[str], Dict[str, Col]]:
        pool = [(s, n) for s in sides for n in s.cols]
        numeric = [(s, n) for s, n in pool if s.cols[n].type in NUMERIC]
        items, cols = ["count(*) as n"], {"n": Col("bigint", False)}
        for i in range(self.rng.randint(1, 4)):
            fn = self.rng.choice(["sum", "count", "count_distinct", "min", "max", "avg", "sum_case",
                                  "count_filter"])
            if fn in ("sum", "avg", "sum_case") and not numeric:
                fn = "max"
            if fn in ("sum_case", "count_filter"):
                s, n = self.rng.choice(numeric if fn == "sum_case" else pool)
                cs, cn = self.rng.choice(pool)
                cond = self.predicate(f"{cs.alias}.{cn}" if qualify else cn, cs.cols[cn])
                ref = f"{s.alias}.{n}" if qualify else n
                alias = f"a{i}_{fn}_{n}"
                if fn == "sum_case":
                    items.append(f"sum(case when {cond} then {ref} else 0 end) as {alias}")
                    cols[alias] = Col("bigint" if s.cols[n].type in ("int", "bigint") else "decimal(20,2)")
                else:
                    items.append(f"count({ref}) filter (where {cond}) as {alias}")
                    cols[alias] = Col("bigint", False)
                continue
            s, n = self.rng.choice(numeric if fn in ("sum", "avg") else pool)
            ref = f"{s.alias}.{n}" if qualify else n
            col = s.cols[n]
            alias = f"a{i}_{fn}_{n}"
            if fn == "count_distinct":
                items.append(f"count(distinct {ref}) as {alias}")
                cols[alias] = Col("bigint", False)
            elif fn == "count":
                items.append(f"count({ref}) as {alias}")
                cols[alias] = Col("bigint", False)
            elif fn == "avg":
                items.append(f"avg({ref}) as {alias}")
                cols[alias] = Col("double" if col.type != "decimal(10,2)" else "decimal(14,6)")
            elif fn == "sum":
                expr = f"sum({ref})"
                if self.chance(0.2):
                    expr = f"coalesce(sum({ref}), 0) * 2"
                items.append(f"{expr} as {alias}")
                cols[alias] = Col("bigint" if col.type in ("int", "bigint") else "decimal(20,2)")
            else:
                items.append(f"{fn}({ref}) as {alias}")
                cols[alias] = replace(col, domain=None)
        if numeric and self.chance(0.3):
            s, n = self.rng.choice(numeric)
            ref = f"{s.alias}.{n}" if qualify else n
            if self.chance(0.5):
                items.append(f"max({ref}) - min({ref}) as spread_{n}")
                cols[f"spread_{n}"] = Col(s.cols[n].type)
            else:
                items.append(f"sum({ref}) / nullif(count({ref}), 0) as ratio_{n}")
                cols[f"ratio_{n}"] = Col("double")
        return items, cols

    def having(self, agg_items: Sequence[str], sides: Sequence[Side] = ()) -> str:
        options = ["count(*) > 1", "count(*) >= 3", "max(1) = 1"]
        if len(agg_items) > 1:
            options.append(f"{agg_items[1].rsplit(' as ', 1)[0]} is not null")
        numeric = [(s, n) for s in sides for n, c in s.cols.items() if c.type in NUMERIC]
        if numeric:
            # aggregates only the HAVING reads
            s, n = self.rng.choice(numeric)
            ref = f"{s.alias}.{n}"
            options += [f"sum({ref}) > {self.rng.choice([5, 20, 60])}", f"min({ref}) < {self.rng.choice([2, 10])}",
                        f"count(distinct {ref}) > 1", f"max({ref}) - min({ref}) >= 1"]
        return self.rng.choice(options)

    def gen_agg(self, name: str, features: Set[str], join: bool,
                null_groups: bool = False) -> Model:
        """A GROUP BY of one side or a join. With `null_groups` (a model no other model reads
        by its key), an inferred key may keep its nullable group columns as they are: a NULL
        group, matched null-safely. Decided by the name's hash, so a seed's other draws stay."""
        if join:
            sides, joins = self.join_tree(self.rng.choice([2, 3]), subqueries=self.chance(0.5))
            self.join_features(sides, joins, [], features)
            sides = self.nulled(sides, joins)
        else:
            sides, joins = [self.base_side()], []
        if any(s.form == "model" for s in sides):
            features.add("ref")
        pool = [(s, n) for s in sides for n in s.cols
                if s.cols[n].type in ("int", "string", "timestamp", "decimal(10,2)")]
        # a side of bigint columns only (a model of counts, agg_report's) still has a group key
        pool = pool or [(s, n) for s in sides for n in s.cols if s.cols[n].type == "bigint"]
        groups, cols, raw = [], {}, {}
        picked = self.rng.sample(pool, min(len(pool), self.rng.choice([1, 1, 2])))
        if join:
            picked = self.join_column_first(name, picked, pool, joins)
        for i, (s, n) in enumerate(picked):
            if s.cols[n].type == "timestamp" and self.chance(0.5):
                expr, col = f"coalesce(to_date({s.alias}.{n}), date'1970-01-01')", Col("date", False)
                features.add("date_key")
            else:
                expr, col = self.non_null(f"{s.alias}.{n}", s.cols[n])
                if s.cols[n].nullable and s.cols[n].type != "timestamp":
                    raw[i] = (f"{s.alias}.{n}", s.cols[n])
            groups.append(expr)
            cols[f"g{i}"] = col
        agg_items, agg_cols = self.aggregates(sides)
        where = self.filters(sides, self.rng.choice([0, 1]))
        having = self.having(agg_items, sides) if self.chance(0.3) else ""
        if having:
            features.add("having")
        key = list(cols)
        config: Dict[str, object] = {}
        if self.chance(0.6):
            config["unique_key"] = key[0] if len(key) == 1 else key
        else:
            features.add("key_inferred")
            if null_groups and raw and zlib.crc32(f"null:{name}".encode()) % 3 != 0:
                features.add("null_group")
                for i, (ref, col) in raw.items():
                    groups[i], cols[f"g{i}"] = ref, col
        select = ", ".join([f"{g} as g{i}" for i, g in enumerate(groups)] + agg_items)
        body = (f"select {select}\n{self.from_where(name, sides, joins, where)}"
                + f"\ngroup by {', '.join(groups)}" + (f"\nhaving {having}" if having else ""))
        if self.chance(0.5):
            config["aggregate_upkeep"] = "delta"
            features.add("agg_delta")
        if any(i.startswith("count(distinct") for i in agg_items):
            features.add("count_distinct")
        out = {**cols, **agg_cols}
        # a NULL group's key is no key another model can configure: not read by it
        ident = key[0] if len(key) == 1 and "null_group" not in features else None
        return Model(name, "agg_join" if join else "agg", body, out, key, config, features, ident)

    @staticmethod
    def join_column_first(name: str, picked: List[Tuple[Side, str]],
                          pool: Sequence[Tuple[Side, str]],
                          joins: Sequence[Join]) -> List[Tuple[Side, str]]:
        """For half of the joined GROUP BYs (by the name's hash, so no draw of any seed moves)
        the first group column is a join column, which the change rows of the joined tables
        reach by equalities: the coarse affected keys' shape (sql/coarse.py), which random
        group columns seldom are."""
        if not joins or zlib.crc32(f"coarse:{name}".encode()) % 2:
            return picked
        join = joins[zlib.crc32(f"coarse-join:{name}".encode()) % len(joins)]
        found = (re.search(r"using \((\w+)\)", join.on) if join.using
                 else re.search(r"(\w+)\.(\w+)", join.on))
        if found is None:
            return picked
        alias, column = (join.left.alias, found.group(1)) if join.using else found.groups()
        matches = [(s, n) for s, n in pool if s.alias == alias and n == column]
        if not matches or matches[0] in picked:
            return picked
        return [matches[0]] + picked[1:]

    def gen_global(self, name: str, features: Set[str]) -> Model:
        side = self.base_side(allow_model=True)
        agg_items, agg_cols = self.aggregates([side])
        where = self.filters([side], self.rng.choice([0, 1]))
        body = (f"select {', '.join(agg_items)}\nfrom {side.sql} {side.alias}"
                + (f"\nwhere {' and '.join(where)}" if where else ""))
        config: Dict[str, object] = {}
        if self.chance(0.6):
            config["aggregate_upkeep"] = "delta"
            features.add("agg_delta")
        return Model(name, "global", body, agg_cols, [], config, features)

    def gen_distinct(self, name: str, features: Set[str]) -> Model:
        if self.chance(0.5):
            sides, joins = self.join_tree(2, subqueries=self.chance(0.5))
            self.join_features(sides, joins, [], features)
            sides = self.nulled(sides, joins)
        else:
            sides, joins = [self.base_side()], []
        pool = [(s, n) for s in sides for n in s.cols
                if s.cols[n].type in ("int", "string", "bigint", "date", "decimal(10,2)")]
        if not pool:
            return self.gen_rowwise(name, features)
        items, cols = [], {}
        for i, (s, n) in enumerate(self.rng.sample(pool, min(len(pool), self.rng.choice([1, 2, 2, 3])))):
            expr, col = self.non_null(f"{s.alias}.{n}", s.cols[n])
            items.append(f"{expr} as d{i}")
            cols[f"d{i}"] = col
        where = self.filters(sides, self.rng.choice([0, 1]))
        body = f"select distinct {', '.join(items)}\n{self.from_where(name, sides, joins, where)}"
        config: Dict[str, object] = {}
        if self.chance(0.5):
            config["unique_key"] = list(cols) if len(cols) > 1 else next(iter(cols))
        else:
            features.add("key_inferred")
        return Model(name, "distinct", body, cols, list(cols), config, features,
                     next(iter(cols)) if len(cols) == 1 else None)

    def union_branches(self, features: Set[str]) -> Tuple[List[str], Dict[str, Col]]:
        branches = []
        for tag in ["a", "b", "c"][: self.rng.choice([2, 2, 3])]:
            side = self.base_side(forms=("table", "filtered"))
            if side.form == "model":
                features.add("ref")
            numeric = [n for n, c in side.cols.items() if c.type in NUMERIC and n != side.ident]
            strings = [n for n, c in side.cols.items() if c.type == "string" and n != side.ident]
            value = f"cast({self.rng.choice(numeric)} as decimal(20,2))" if numeric else "cast(null as decimal(20,2))"
            text = f"cast({self.rng.choice(strings)} as string)" if strings else "cast(null as string)"
            where = self.filters([side], self.rng.choice([0, 1]), qualify=False)
            branches.append(
                f"select concat('{tag}{side.alias}:', cast({side.ident} as string)) as k, {value} as v, "
                f"{text} as s, '{side.source}' as src\nfrom {side.sql} {side.alias}"
                + (f"\nwhere {' and '.join(where)}" if where else ""))
        cols = {"k": Col("string", False), "v": Col("decimal(20,2)"), "s": Col("string"),
                "src": Col("string", False)}
        return branches, cols

    def gen_union(self, name: str, features: Set[str]) -> Model:
        cols = {"k": Col("string", False), "v": Col("decimal(20,2)"), "s": Col("string"),
                "src": Col("string", False)}
        if self.chance(0.3):
            # one CTE read by both branches, with different (overlapping) filters
            side = self.base_side(forms=("table", "filtered"))
            numeric = [n for n, c in side.cols.items() if c.type in NUMERIC and n != side.ident] or [side.ident]
            strings = [n for n, c in side.cols.items() if c.type == "string" and n != side.ident]
            text = self.rng.choice(strings) if strings else "cast(null as string)"
            branches = []
            for tag in ("a", "b"):
                where = self.filters([side], 1, qualify=False)
                branches.append(f"select concat('{tag}:', cast({side.ident} as string)) as k, "
                                f"cast({self.rng.choice(numeric)} as decimal(20,2)) as v, cast({text} as string) as s, "
                                f"'{tag}' as src from base where {where[0]}")
            features.add("cte_twice")
            body = (f"with base as (select * from {side.sql} {side.alias})\n"
                    + "\nunion all\n".join(branches))
            return Model(name, "union", body, cols, ["k"], {"unique_key": "k"}, features, "k")
        branches, cols = self.union_branches(features)
        body = "\nunion all\n".join(branches)
        return Model(name, "union", body, cols, ["k"], {"unique_key": "k"}, features, "k")

    def gen_self_join(self, name: str, features: Set[str]) -> Model:
        """One upstream read twice: rows sharing a foreign key (many to many), or the same row."""
        table = self.rng.choice(["orders", "items"])
        cols = table_cols(table)
        fks = [n for n, c in cols.items() if c.domain and n != "id"]
        column = self.rng.choice(fks + ["id"])
        a = Side("a", source(table), cols, "id", table, "table")
        b = self.table_side(table, ("table", "filtered"))
        b.alias = "b"
        kind = self.rng.choice(["join", "left join", "full join"])
        on = f"a.{column} = b.{column}"
        if column != "id" and self.chance(0.5):
            on += " and a.id < b.id"
        others = [n for n in cols if n not in ("id", column)]
        picks = self.rng.sample(others, min(2, len(others)))
        items = [f"a.{n} as a_{n}" for n in picks] + [f"b.{n} as b_{n}" for n in picks]
        out = {"k": Col("string", False)}
        out.update({f"a_{n}": replace(cols[n], nullable=True) for n in picks})
        out.update({f"b_{n}": replace(cols[n], nullable=True) for n in picks})
        where = self.filters([a], self.rng.choice([0, 1]))
        features.update({"self_join", f"join_{kind.split()[0]}"})
        body = (f"select concat_ws('|', coalesce(cast(a.id as string), '~'), coalesce(cast(b.id as string), '~')) as k, "
                f"{', '.join(items)}\nfrom {a.sql} a\n{kind} {b.sql} b on {on}"
                + (f"\nwhere {where[0]}" if where else ""))
        return Model(name, "self_join", body, out, ["k"], {"unique_key": "k"}, features, "k")

    def gen_union_distinct(self, name: str, features: Set[str]) -> Model:
        """UNION (distinct) of non-NULL values of string columns: keyed by all its columns."""
        branches = []
        for _ in range(self.rng.choice([2, 3])):
            side = self.base_side(forms=("table", "filtered"))
            strings = [n for n, c in side.cols.items() if c.type == "string"]
            ints = [n for n, c in side.cols.items() if c.type == "int"]
            text = f"coalesce({self.rng.choice(strings)}, '?')" if strings else "'-'"
            num = f"coalesce({self.rng.choice(ints)} % 3, -1)" if ints else "-1"
            where = self.filters([side], self.rng.choice([0, 1]), qualify=False)
            branches.append(f"select {text} as u, {num} as r from {side.sql} {side.alias}"
                            + (f" where {where[0]}" if where else ""))
        features.add("union_distinct")
        body = "\nunion\n".join(branches)
        cols = {"u": Col("string", False), "r": Col("int", False)}
        return Model(name, "union_distinct", body, cols, ["u", "r"], {"unique_key": ["u", "r"]}, features)

    def gen_union_agg(self, name: str, features: Set[str]) -> Model:
        branches, _ = self.union_branches(features)
        body = ("select src, count(*) as n, sum(v) as total, max(s) as top\nfrom (\n"
                + "\nunion all\n".join(branches) + "\n) u\ngroup by src")
        config: Dict[str, object] = {"unique_key": "src"}
        if self.chance(0.5):
            config["aggregate_upkeep"] = "delta"
            features.add("agg_delta")
        cols = {"src": Col("string", False), "n": Col("bigint", False), "total": Col("decimal(30,2)"),
                "top": Col("string")}
        return Model(name, "union_agg", body, cols, ["src"], config, features, "src")

    def window_side(self) -> Side:
        side = self.base_side(forms=("table", "filtered"))
        return side

    def windows(self, side: Side, partition: Optional[str], order: str, features: Set[str],
                qualify: str = "") -> Tuple[List[str], Dict[str, Col]]:
        ident = f"{qualify}{side.ident}"
        numeric = [n for n, c in side.cols.items() if c.type in NUMERIC and n != side.ident]
        items, cols = [], {}
        fns = self.rng.sample(["row_number", "rank", "sum", "sum_all", "lag", "dense_rank", "lead", "max_all"],
                              self.rng.randint(1, 3))
        part_pool = [n for n, c in side.cols.items() if n != side.ident and c.type in ("int", "string")]
        for number, fn in enumerate(fns):
            part = partition
            if partition and len(fns) > 1 and self.chance(0.15) and part_pool:
                part = self.rng.choice(part_pool)  # another PARTITION BY in the same SELECT
            over_part = f"partition by {qualify}{part} " if part else ""
            if part != partition:
                features.add("KNOWN_two_partitions")
            if fn == "row_number":
                items.append(f"row_number() over ({over_part}order by {order}, {ident}) as w_rn{number}")
                cols[f"w_rn{number}"] = Col("int", False)
            elif fn == "rank":
                items.append(f"rank() over ({over_part}order by {order}) as w_rank{number}")
                cols[f"w_rank{number}"] = Col("int", False)
            elif fn == "sum" and numeric:
                n = self.rng.choice(numeric)
                items.append(f"sum({qualify}{n}) over ({over_part}order by {order}, {ident}) as w_running{number}")
                cols[f"w_running{number}"] = Col("decimal(20,2)" if side.cols[n].type.startswith("decimal") else "bigint")
            elif fn == "sum_all" and numeric:
                n = self.rng.choice(numeric)
                items.append(f"sum({qualify}{n}) over ({over_part.strip() or ''}) as w_total{number}")
                cols[f"w_total{number}"] = Col("decimal(20,2)" if side.cols[n].type.startswith("decimal") else "bigint")
            elif fn == "dense_rank":
                items.append(f"dense_rank() over ({over_part}order by {order}) as w_drank{number}")
                cols[f"w_drank{number}"] = Col("int", False)
            elif fn == "lead":
                other = self.rng.choice(sorted(side.cols))
                items.append(f"lead({qualify}{other}, 2) over ({over_part}order by {order}, {ident}) as w_next{number}")
                cols[f"w_next{number}"] = replace(side.cols[other], nullable=True)
            elif fn == "max_all":
                other = self.rng.choice(sorted(side.cols))
                items.append(f"max({qualify}{other}) over ({over_part.strip()}) as w_max{number}")
                cols[f"w_max{number}"] = replace(side.cols[other], nullable=True, domain=None)
            elif fn == "lag" and numeric:
                n = self.rng.choice(numeric)
                items.append(f"lag({qualify}{n}) over ({over_part}order by {order}, {ident}) as w_prev{number}")
                cols[f"w_prev{number}"] = side.cols[n]
            else:
                items.append(f"count(*) over ({over_part.strip()}) as w_count{number}")
                cols[f"w_count{number}"] = Col("bigint", False)
        return items, cols

    def gen_window(self, name: str, features: Set[str]) -> Model:
        side = self.window_side()
        if side.form == "model":
            features.add("ref")
        part_pool = [n for n, c in side.cols.items() if n != side.ident and c.type in ("int", "string")]
        partition = self.rng.choice(part_pool) if part_pool and self.chance(0.8) else None
        if not partition:
            features.add("window_unpartitioned")
        order_pool = [n for n, c in side.cols.items() if n != side.ident]
        order = self.rng.choice(order_pool) if order_pool else side.ident
        order += self.rng.choice(["", " desc", " nulls last", " desc nulls first"])
        items, cols = self.windows(side, partition, order, features)
        keep = [n for n in side.cols if n != side.ident and not n.startswith("w_") and self.chance(0.5)]
        where = self.filters([side], self.rng.choice([0, 1]), qualify=False)
        body = (f"select {', '.join([side.ident] + keep + items)}\nfrom {side.sql} {side.alias}"
                + (f"\nwhere {' and '.join(where)}" if where else ""))
        out = {side.ident: side.cols[side.ident], **{n: side.cols[n] for n in keep}, **cols}
        return Model(name, "window", body, out, [side.ident], {"unique_key": side.ident}, features, side.ident)

    def gen_dedup(self, name: str, features: Set[str]) -> Model:
        side = self.window_side()
        if side.form == "model":
            features.add("ref")
        part_pool = [n for n, c in side.cols.items() if n != side.ident and c.type in ("int", "string")]
        if not part_pool:
            return self.gen_window(name, features)
        part = self.rng.choice(part_pool)
        order_pool = [n for n, c in side.cols.items() if n != side.ident]
        order = self.rng.choice(order_pool) + self.rng.choice([" desc", "", " desc nulls last"])
        keep = [n for n in side.cols
                if n not in (side.ident, part, "g", "picked") and self.chance(0.5)]
        select = ", ".join([f"{part} as g", f"{side.ident} as picked"] + keep)
        rn = f"row_number() over (partition by {part} order by {order}, {side.ident} desc)"
        if self.chance(0.4):
            features.add("qualify")
            body = (f"select {select}\nfrom {side.sql} {side.alias}\nwhere {part} is not null\n"
                    f"qualify {rn} = 1")
        else:
            body = (f"select {select}\nfrom (select *, {rn} as rn\n"
                    f"      from {side.sql} {side.alias} where {part} is not null) d\nwhere rn = 1")
        out = {"g": replace(side.cols[part], nullable=False), "picked": side.cols[side.ident],
               **{n: side.cols[n] for n in keep}}
        return Model(name, "dedup", body, out, ["g"], {"unique_key": "g"}, features, "g")

    def gen_window_join(self, name: str, features: Set[str]) -> Model:
        sides, joins = self.join_tree(2, subqueries=False)
        key_expr, key_name, key_col, key_sides = self.join_key(sides, joins, features)
        self.join_features(sides, joins, key_sides, features)
        part_pool = [(x, n) for x in sides for n, c in x.cols.items()
                     if c.type in ("int", "string", "bigint", "date", "decimal(10,2)")]
        s, part = self.rng.choice(part_pool or [(sides[0], sides[0].ident)])
        items, cols = self.projection_besides(self.nulled(sides, joins), 2, key_name)
        numeric = [(x, n) for x in sides for n, c in x.cols.items() if c.type in NUMERIC]
        if numeric:
            xs, n = self.rng.choice(numeric)
            items.append(f"sum({xs.alias}.{n}) over (partition by {s.alias}.{part}) as w_total")
            cols["w_total"] = Col("decimal(20,2)" if xs.cols[n].type.startswith("decimal") else "bigint")
        else:
            items.append(f"count(*) over (partition by {s.alias}.{part}) as w_total")
            cols["w_total"] = Col("bigint", False)
        features.add("window_over_join")
        body = f"select {key_expr} as {key_name}, {', '.join(items)}\n{self.from_where(name, sides, joins)}"
        return Model(name, "window_join", body, {key_name: key_col, **cols}, [key_name],
                     {"unique_key": key_name}, features, key_name)

    def gen_downstream(self, name: str, features: Set[str]) -> Model:
        upstream = self.model_side()
        if upstream is None:
            return self.gen_rowwise(name, features)
        features.add("ref")
        kind = self.rng.choice(["join", "agg", "window", "rowwise"])
        if kind == "join":
            sides, joins = self.join_tree(2, subqueries=self.chance(0.5), base=upstream)
            if len(sides) > 1:
                key_expr, key_name, key_col, key_sides = self.join_key(sides, joins, features)
                self.join_features(sides, joins, key_sides, features)
                items, cols = self.projection_besides(self.nulled(sides, joins), self.rng.randint(2, 4), key_name)
                body = f"select {key_expr} as {key_name}, {', '.join(items)}\n{self.from_where(name, sides, joins)}"
                return Model(name, "downstream_join", body, {key_name: key_col, **cols}, [key_name],
                             {"unique_key": key_name}, features, key_name)
        if kind == "agg":
            pool = [n for n, c in upstream.cols.items() if c.type in ("int", "string") and n != upstream.ident]
            if pool:
                g = self.rng.choice(pool)
                expr, col = self.non_null(f"m.{g}", upstream.cols[g])
                agg_items, agg_cols = self.aggregates([upstream])
                body = (f"select {expr} as g0, {', '.join(agg_items)}\nfrom {upstream.sql} m\n"
                        f"group by {expr}")
                config: Dict[str, object] = {"unique_key": "g0"}
                if self.chance(0.5):
                    config["aggregate_upkeep"] = "delta"
                    features.add("agg_delta")
                return Model(name, "downstream_agg", body, {"g0": col, **agg_cols}, ["g0"], config,
                             features, "g0")
        if kind == "window":
            part_pool = [n for n, c in upstream.cols.items() if n != upstream.ident and c.type in ("int", "string")]
            if part_pool:
                partition = self.rng.choice(part_pool)
                order = self.rng.choice([n for n in upstream.cols if n != upstream.ident] or [upstream.ident])
                items, cols = self.windows(upstream, partition, order, features)
                body = f"select {upstream.ident}, {', '.join(items)}\nfrom {upstream.sql} m"
                return Model(name, "downstream_window", body,
                             {upstream.ident: upstream.cols[upstream.ident], **cols},
                             [upstream.ident], {"unique_key": upstream.ident}, features, upstream.ident)
        where = self.filters([upstream], 1, qualify=False)
        body = f"select *\nfrom {upstream.sql} m\nwhere {where[0]}"
        return Model(name, "downstream_rowwise", body, dict(upstream.cols), [upstream.ident],
                     {"unique_key": upstream.ident}, features, upstream.ident)

    def gen_agg_report(self, name: str, features: Set[str]) -> Model:
        """A report over an aggregate (in a CTE or a FROM subquery): ranks and totals over
        every group, or an aggregate of the aggregate; mostly with aggregate_upkeep='delta',
        which keeps the inner GROUP BY as an intermediate aggregate."""
        for _ in range(10):  # an aggregate with group keys (a side without groupable columns
            drawn: Set[str] = set()  # gives none)
            inner = self.gen_agg(name, drawn, join=self.chance(0.4))
            if inner.key:
                break
        features |= drawn
        config: Dict[str, object] = {}
        if self.chance(0.8):
            config["aggregate_upkeep"] = "delta"
        keys = list(inner.key)
        counts = [n for n, c in inner.cols.items() if c.type == "bigint" and not c.nullable]
        values = [n for n, c in inner.cols.items() if n not in keys and c.type in NUMERIC]
        value = self.rng.choice(values)
        if self.chance(0.3):
            same = self.windows_in_grouped_select(inner, keys, value, counts)
            if same is not None:
                features.add("report_same_select")
                body, cols = same
                config["unique_key"] = keys[0] if len(keys) == 1 else keys
                return Model(name, "agg_report", body, {**inner.cols, **cols}, keys, config,
                             features, keys[0] if len(keys) == 1 else None)
        cte = self.chance(0.5)
        source = "grouped" if cte else f"(\n{inner.body}\n) grouped"
        head = f"with grouped as (\n{inner.body}\n)\n" if cte else ""
        if self.chance(0.6):
            features.add("report_rank")
            by = ", ".join(keys)
            part = f"partition by {keys[0]} " if len(keys) > 1 and self.chance(0.4) else ""
            items = [f"rank() over ({part}order by {value} desc nulls last) as w_rank",
                     f"row_number() over (order by {value}, {by}) as w_rn",
                     f"sum({self.rng.choice(counts)}) over () as w_all"]
            cols = {"w_rank": Col("int", False), "w_rn": Col("int", False),
                    "w_all": Col("bigint", False)}
            if self.chance(0.5):
                items.append(f"ntile(3) over (order by {value} nulls first, {by}) as w_third")
                cols["w_third"] = Col("int", False)
            body = (f"{head}select {by}, {value}, {', '.join(items)}\nfrom {source}")
            config["unique_key"] = keys[0] if len(keys) == 1 else keys
            out = {**{k: inner.cols[k] for k in keys}, value: inner.cols[value], **cols}
            return Model(name, "agg_report", body, out, keys, config, features,
                         keys[0] if len(keys) == 1 else None)
        features.add("report_agg_of_agg")
        band = f"least({self.rng.choice(counts)}, {self.rng.choice([2, 3, 5])})"
        body = (f"{head}select {band} as band, count(*) as groups, sum({value}) as total\n"
                f"from {source}\ngroup by {band}")
        total = inner.cols[value]
        out = {"band": Col("bigint", False), "groups": Col("bigint", False),
               "total": Col("decimal(30,2)" if total.type.startswith("decimal") else
                            "double" if total.type == "double" else "bigint")}
        return Model(name, "agg_report", body, out, ["band"], config, features, "band")

    def windows_in_grouped_select(self, inner: Model, keys: List[str], value: str,
                                  counts: List[str]) -> Optional[Tuple[str, Dict[str, Col]]]:
        """The report's windows written into the aggregate's own SELECT, over its aggregate
        expressions (as reports often are), or None when the body is not one grouped SELECT."""
        sources = re.findall(r"\{\{ [^}]* \}\}", inner.body)
        text = inner.body
        for i, jinja in enumerate(sources):  # parsed as table names, put back after
            text = text.replace(jinja, f"__jinja_{i}")
        tree = sqlglot.parse_one(text, read="spark")
        if not isinstance(tree, exp.Select) or tree.args.get("group") is None:
            return None
        exprs = {p.alias_or_name: p.unalias() for p in tree.expressions}
        by = ", ".join(exprs[k].sql(dialect="spark") for k in keys)
        ranked = exprs[value].sql(dialect="spark")
        part = (f"partition by {exprs[keys[0]].sql(dialect='spark')} "
                if len(keys) > 1 and self.chance(0.4) else "")
        items = [f"rank() over ({part}order by {ranked} desc nulls last) as w_rank",
                 f"row_number() over (order by {ranked}, {by}) as w_rn",
                 f"sum({exprs[self.rng.choice(counts)].sql(dialect='spark')}) over () as w_all"]
        cols = {"w_rank": Col("int", False), "w_rn": Col("int", False),
                "w_all": Col("bigint", False)}
        tree.set("expressions", tree.expressions + [
            sqlglot.parse_one(i, read="spark") for i in items])
        body = tree.sql(dialect="spark", pretty=True)
        for i, jinja in reversed(list(enumerate(sources))):
            body = body.replace(f"__jinja_{i}", jinja)
        return body, cols

    # -- the catalogue ------------------------------------------------------------------
    def model(self, name: str, kind: str) -> Model:
        features: Set[str] = set()
        if kind == "rowwise":
            m = self.gen_rowwise(name, features)
        elif kind == "join":
            m = self.gen_join(name, features, subqueries=False)
        elif kind == "join_sub":
            m = self.gen_join(name, features, subqueries=True)
        elif kind in ("agg", "agg_join"):
            m = self.gen_agg(name, features, join=kind == "agg_join", null_groups=True)
        elif kind == "global":
            m = self.gen_global(name, features)
        elif kind == "distinct":
            m = self.gen_distinct(name, features)
        elif kind == "union":
            m = self.gen_union(name, features)
        elif kind == "union_agg":
            m = self.gen_union_agg(name, features)
        elif kind == "union_distinct":
            m = self.gen_union_distinct(name, features)
        elif kind == "self_join":
            m = self.gen_self_join(name, features)
        elif kind == "window":
            m = self.gen_window(name, features)
        elif kind == "dedup":
            m = self.gen_dedup(name, features)
        elif kind == "window_join":
            m = self.gen_window_join(name, features)
        elif kind == "agg_report":
            m = self.gen_agg_report(name, features)
        else:
            m = self.gen_downstream(name, features)
        m.refs = sorted({p.split("'")[1] for p in m.body.split("{{ ref(")[1:]})
        if any(r.endswith(TWIN_SUFFIX) for r in m.refs):
            m.features.add("over_table")
        m.twin_replaced = zlib.crc32(f"twin:{name}".encode()) % 2 == 0
        if m.key and self.chance(0.15):
            # several MERGE commits, a few dozen at most: at 1 row a chunk a replay of ~220
            # staged rows made 221 commits, a quarter of a `make fuzz` run in one model
            m.config["merge_chunk_rows"] = self.rng.choice([7, 25, 60])
            m.features.add("chunked")
        if self.chance(0.05):
            m.config["refresh_mode"] = "full"
            m.features.add("refresh_full")
        if isinstance(m.config.get("unique_key"), str) and self.chance(0.1):
            m.config["unique_key"] = m.config["unique_key"].upper()  # Spark names ignore case
            m.features.add("key_upper")
        for keyless in self.keyless(m):
            # left to inference: from the query, or for a model over models from the keys the
            # upstream batch_refresh models record (a keyless chain passes its key down)
            del keyless.config["unique_key"]
            keyless.features.add("keyless")
        return m

    def keyless_draw(self, name: str) -> int:
        """keyless()'s draw for the model `name`, known while it is generated: below 3 it leaves
        its key unset (and never gets it back)."""
        return zlib.crc32(f"keyless:{self.seed}:{name}".encode()) % 9

    def keyless(self, m: Model) -> List[Model]:
        """The models that leave their key unset: one in three, and in one of the rest in three
        a model over batch_refresh models together with them (a keyless chain). Chosen by a
        hash of the seed and the name, not by the seeded draws, so a seed's SQL stays what it
        was."""
        if "unique_key" not in m.config:
            return []
        drawn = self.keyless_draw(m.name)
        upstreams = [u for u in self.models if u.name in m.refs and "unique_key" in u.config]
        if drawn < 3:
            return [m]
        return [m, *upstreams] if upstreams and drawn < 5 else []

    def catalogue(self, n: int, avoid_known: bool = False) -> List[Model]:
        """n models: the kinds in a seeded order, every kind once before any repeats. With
        `avoid_known`, a model with a known defect's shape (a feature named KNOWN_...) is drawn
        again (up to 20 times), to spend the budget on finding new ones."""
        order = list(KINDS)
        self.rng.shuffle(order)
        # a downstream model needs an upstream: never first
        if order[0] == "downstream":
            order.append(order.pop(0))
        kinds = order[:n] + self.rng.choices(KINDS, weights=WEIGHTS, k=max(0, n - len(order)))
        for i, kind in enumerate(kinds):
            model = self.model(f"fz{i:02d}", kind)
            for _ in range(20 if avoid_known else 0):
                if not any(f.startswith("KNOWN_") for f in model.features):
                    break
                model = self.model(f"fz{i:02d}", kind)
            self.models.append(model)
        return self.models


def generate(seed: int, n: int, avoid_known: bool = False) -> List[Model]:
    return Generator(seed).catalogue(n, avoid_known)
