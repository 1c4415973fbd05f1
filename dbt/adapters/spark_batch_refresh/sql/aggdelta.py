"""Delta-maintained aggregates: which models qualify, and the SQL of their upkeep (pure).

A model that is one GROUP BY (or a global aggregate) over a row-wise input from one upstream, or
over inner joins of several (their signed change rows from the input's delta join,
deltajoin.py), whose aggregates are all count, sum, avg, min or max, is kept up to date from
the change rows alone: the change rows, signed (+1 insert/post-image, -1 delete/pre-image), give
per-group deltas; added to the per-group state of the previous refresh they give the new state,
and the model's output rows are a projection of that state. The state lives in a sidecar Delta
table next to the state table (row count per group, and per aggregated argument its non-NULL
count, sum, min and max as the model needs them), never in the user's target.

Counts and sums are exact by delta (integers and decimals; a float or double argument of sum or
avg keeps the affected-group recompute, so no rounding drift ever reaches a target). An average
is its sum over its count as Spark's `avg` evaluates it: a double for integers, and for a
decimal(p, s) the decimal division of the decimal(p+10, s) sum by the count, cast to
decimal(p+4, s+4) (`typed`: the types are known once the state is described). That division
keeps a bounded number of digits (38 in all), so it equals `avg` only for groups of fewer
rows than a bound (`DecimalAverage`); a refresh whose groups reach it recomputes them. min and max
follow from the change when the change decides them: the new minimum is least(old minimum,
minimum inserted) unless a deleted value reaches down to it; only such groups read the upstream,
and only for their min/max columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import sqlglot
from sqlglot import exp

from dbt.adapters.spark_batch_refresh.sql import deltajoin as dj
from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.sqltree import DIALECT
from dbt.adapters.spark_batch_refresh.sql.sqlgen import keys_match, q

SIGN = "_br_sign"
ROWS = "_br_n"  # rows per group: a group whose count reaches 0 leaves the model
RECOMPUTE = "_br_recompute"
SIDECAR_SUFFIX = "__br_agg"
# Where an intermediate aggregate's rows enter the rest of its model (DeltaAggregate.outer_sql).
INNER = "_br_inner"
# Prefix of the old state's columns in the new state view (new_state_sql).
WAS = "_br_was"
RULE = "delta aggregate"

# min/max over these compare as values (complex types keep the recompute).
_ORDERABLE = ("tinyint", "smallint", "int", "bigint", "decimal", "float", "double", "string",
              "date", "timestamp", "timestamp_ntz", "boolean", "binary", "varchar", "char")


class NotDelta(Exception):
    """The model is not maintained by delta aggregation; the message says why."""


@dataclass(frozen=True)
class Aggregate:
    kind: str  # count_star | count | sum | avg | min | max
    arg: Optional[int]  # index of the argument column (_br_a<i>), None for count(*)


@dataclass(frozen=True)
class DeltaAggregate:
    """How one model is maintained: its input rows, its state columns, its output."""

    upstreams: Tuple[str, ...]
    keys: Tuple[str, ...]  # output key columns = the group keys (empty: a global aggregate)
    input_sql: str  # SELECT <group keys>, <argument>s AS _br_a<i> FROM ... WHERE ...
    aggregates: Tuple[Aggregate, ...]
    output_sql: str  # the model's projections over the state relation `_br_state`
    args: int
    # An input that joins several upstreams: its signed change rows come from the delta join
    # of the input (deltajoin.py), one term per moved upstream.
    join: Optional[dj.DeltaJoin] = None
    # An intermediate aggregate (a GROUP BY in a subquery or CTE that reads every upstream of
    # the model): the model's SQL with that subquery reading `_br_inner` instead. The sidecar
    # keeps the subquery's groups; the rest of the model is recomputed over them.
    outer_sql: Optional[str] = None
    # (intermediate key column, the output column carrying it) for every key that all windows
    # of the outer part are partitioned by: an output row then depends only on the groups of
    # its own partition, and a refresh recomputes the partitions its touched groups are in.
    # Empty: the outer part is recomputed whole (a window without PARTITION BY, an aggregate).
    outer_partition: Tuple[Tuple[str, str], ...] = ()
    # An outer part that aggregates the intermediate's rows again (GROUP BY, no window, no
    # join): its output keys projected from the intermediate's rows reading `_br_inner`
    # (SELECT DISTINCT, the outer's WHERE, no HAVING). The outer groups a refresh touches are
    # those of the touched groups' rows before and after; only they are recomputed.
    outer_keys_sql: Optional[str] = None
    # Each decimal average (`typed`); an average not among them is a double, as Spark's avg
    # of an integer is.
    decimal_averages: Tuple["DecimalAverage", ...] = ()

    def typed(self, state_types: Mapping[str, str]) -> "DeltaAggregate":
        """This upkeep with its decimal averages' types taken from the described state
        (`state_types`, free of a type_problem)."""
        found = []
        for agg in self.aggregates:
            if agg.kind == "avg" and agg.arg is not None:
                average = DecimalAverage.of(agg.arg, state_types[_sum(agg.arg)])
                if average is not None:
                    found.append(average)
        return replace(self, decimal_averages=tuple(found))

    def inexact_sql(self, cap: Optional[int] = None) -> Optional[str]:
        """A condition on a state row: a decimal average of its group is past the rows its
        division is exact for, or past `cap` (None: the model has no decimal average)."""
        if not self.decimal_averages:
            return None
        return " OR ".join(f"{_count(a.arg)} > {min(a.max_rows, cap or a.max_rows)}"
                           for a in self.decimal_averages)

    # ---------------------------------------------------------------- state columns
    def state_columns(self) -> List[Tuple[str, str]]:
        """(sidecar column, aggregate over the input) for every state the outputs need."""
        cols: Dict[str, str] = {ROWS: "count(*)"}
        for agg in self.aggregates:
            if agg.arg is None:
                continue
            a = _arg(agg.arg)
            if agg.kind in ("count", "sum", "avg"):
                cols[_count(agg.arg)] = f"count({a})"
            if agg.kind in ("sum", "avg"):
                cols[_sum(agg.arg)] = f"sum({a})"
            if agg.kind == "min":
                cols[_lo(agg.arg)] = f"min({a})"
            if agg.kind == "max":
                cols[_hi(agg.arg)] = f"max({a})"
        return list(cols.items())

    def type_problem(self, state_types: Mapping[str, str]) -> Optional[str]:
        """Why the state's Spark types (DESCRIBE of state_sql) rule delta upkeep out."""
        for agg in self.aggregates:
            if agg.arg is None:
                continue
            if agg.kind in ("sum", "avg"):
                kind = _base(state_types[_sum(agg.arg)])
                if agg.kind == "avg" and kind == "decimal":
                    if DecimalAverage.of(agg.arg, state_types[_sum(agg.arg)]) is None:
                        return ("averages a decimal too wide for Spark's decimal division to "
                                "reproduce its average (more than 15 digits)")
                    if self.outer_sql is not None:
                        return "averages a decimal in an intermediate aggregate"
                if agg.kind == "avg" and kind not in ("bigint", "decimal"):
                    return (f"averages a {state_types[_sum(agg.arg)]} column (only integer and "
                            "decimal averages are exact by delta)")
                if kind not in ("bigint", "decimal"):
                    return (f"sums a {state_types[_sum(agg.arg)]} column (only integer and decimal "
                            "sums are exact by delta)")
            if agg.kind in ("min", "max"):
                name = _lo(agg.arg) if agg.kind == "min" else _hi(agg.arg)
                if _base(state_types[name]) not in _ORDERABLE:
                    return f"takes {agg.kind} of a {state_types[name]} column"
        return None

    # ---------------------------------------------------------------- SQL
    def state_sql(self, input_sql: str) -> str:
        """Per-group state from input rows (a backfill, or a sidecar rebuilt)."""
        keys = _cols(self.keys)
        cols = ", ".join(f"{expr} AS {name}" for name, expr in self.state_columns())
        group = f" GROUP BY {keys}" if keys else ""
        lead = f"{keys}, " if keys else ""
        return f"SELECT {lead}{cols} FROM (\n{input_sql}\n) _br_in{group}"

    def delta_sql(self, plus_sql: str, minus_sql: str) -> str:
        """Per-group signed deltas of the change rows (one row per touched group)."""
        cols = [f"coalesce(sum({SIGN}), 0) AS {ROWS}"]
        # Per state column, what its update needs from the change rows (new_state_sql).
        for name, expr in self.state_columns()[1:]:
            a = expr[expr.index("(") + 1:-1]  # the argument column, _br_a<i>
            kind = _kind(name)
            if kind == "c":
                cols.append(f"coalesce(sum(CASE WHEN {a} IS NOT NULL THEN {SIGN} ELSE 0 END), 0) "
                            f"AS {name}")
            else:
                fn = {"s": "sum", "lo": "min", "hi": "max"}[kind]
                cols.append(f"{fn}(CASE WHEN {SIGN} > 0 THEN {a} END) AS {name}_plus")
                cols.append(f"{fn}(CASE WHEN {SIGN} < 0 THEN {a} END) AS {name}_minus")
        keys = _cols(self.keys)
        lead = f"{keys}, " if keys else ""
        group = f" GROUP BY {keys}" if keys else ""
        return (f"SELECT {lead}{', '.join(cols)} FROM (\n"
                f"SELECT *, 1 AS {SIGN} FROM (\n{plus_sql}\n) _br_p\nUNION ALL\n"
                f"SELECT *, -1 AS {SIGN} FROM (\n{minus_sql}\n) _br_m\n) _br_d{group}")

    def new_state_sql(self, delta: str, old: str, types: Mapping[str, str]) -> str:
        """Old state + delta for every touched group, with a flag on the groups whose min or
        max cannot be told from the change (a deleted value reached the old extreme)."""
        on = keys_match(self.keys, "_br_o", "_br_d")
        cols = [f"_br_d.{q(k)}" for k in self.keys]
        cols.append(f"coalesce(_br_o.{ROWS}, 0) + _br_d.{ROWS} AS {ROWS}")
        recompute = []
        for name, _ in self.state_columns()[1:]:
            kind = _kind(name)
            if kind == "c":
                cols.append(f"coalesce(_br_o.{name}, 0) + _br_d.{name} AS {name}")
            elif kind == "s":
                count = f"(coalesce(_br_o.{_c_of(name)}, 0) + _br_d.{_c_of(name)})"
                value = (f"coalesce(_br_o.{name}, 0) + coalesce(_br_d.{name}_plus, 0) "
                         f"- coalesce(_br_d.{name}_minus, 0)")
                cols.append(f"CAST(CASE WHEN {count} = 0 THEN NULL ELSE {value} END "
                            f"AS {types[name]}) AS {name}")
            else:
                pick, cmp = ("least", "<=") if kind == "lo" else ("greatest", ">=")
                best = f"{pick}(_br_o.{name}, _br_d.{name}_plus)"
                cols.append(f"{best} AS {name}")
                recompute.append(f"(_br_d.{name}_minus IS NOT NULL AND ({best} IS NULL OR "
                                 f"_br_d.{name}_minus {cmp} {best}))")
        cols.append(f"({' OR '.join(recompute) or 'false'}) AS {RECOMPUTE}")
        if self.outer_keys_sql is not None:
            # The old state rides along (NULL for a new group): an intermediate's outer groups
            # are found from it without reading the old sidecar version again (old_state).
            cols += [f"_br_o.{n} AS {WAS}{n}" for n, _ in self.state_columns()]
        # A group the old state lacks whose change rows net to none (rows that entered and
        # left it between two runs) is in neither state: it is left out, since a MERGE of it
        # would match no clause (see merge_sidecar_sql).
        return (f"SELECT {', '.join(cols)} FROM {delta} _br_d LEFT JOIN {old} _br_o ON {on} "
                f"WHERE _br_o.{ROWS} IS NOT NULL OR _br_d.{ROWS} <> 0")

    def old_state(self, new_state: str) -> str:
        """The touched groups' state before the change, from new_state_sql's view (groups
        that did not exist are left out), as a relation."""
        cols = [q(k) for k in self.keys] + [f"{WAS}{n} AS {n}" for n, _ in self.state_columns()]
        return (f"(SELECT {', '.join(cols)} FROM {new_state} WHERE {WAS}{ROWS} IS NOT NULL) "
                f"_br_before")

    def state_before(self, base: str, touched: str) -> str:
        """The same from the sidecar version the refresh started from (a resumed refresh has
        no new_state view)."""
        return (f"(SELECT _br_b.* FROM {base} _br_b LEFT SEMI JOIN {touched} _br_t "
                f"ON {keys_match(self.keys, '_br_b', '_br_t')}) _br_before")

    def extremes(self) -> List[str]:
        return [n for n, _ in self.state_columns() if _kind(n) in ("lo", "hi")]

    def extremes_sql(self, input_sql: str, new_state: str) -> str:
        """min/max recomputed from the upstream for the flagged groups only."""
        keys = _cols(self.keys)
        exprs = dict(self.state_columns())
        cols = ", ".join(f"{exprs[n]} AS {n}" for n in self.extremes())
        if not self.keys:
            return f"SELECT {cols} FROM (\n{input_sql}\n) _br_in"
        # A semi join on null-safe equality: a NULL group key is a group like any other.
        on = keys_match(self.keys, "_br_in", "_br_r")
        grouped = ", ".join(f"_br_in.{q(k)}" for k in self.keys)
        return (f"SELECT {grouped}, {cols} FROM (\n{input_sql}\n) _br_in LEFT SEMI JOIN "
                f"(SELECT {keys} FROM {new_state} WHERE {RECOMPUTE}) _br_r ON {on} "
                f"GROUP BY {grouped}")

    def final_state_sql(self, new_state: str, extremes: Optional[str]) -> str:
        """The new state of every touched group (without the recompute flag)."""
        names = [n for n, _ in self.state_columns()]
        if extremes is None:
            return f"SELECT {_cols(list(self.keys) + names)} FROM {new_state}"
        on = keys_match(self.keys, "_br_s", "_br_x")
        recomputed = self.extremes()
        picked = [f"_br_s.{q(k)}" for k in self.keys]
        for n in names:
            picked.append(f"CASE WHEN _br_s.{RECOMPUTE} THEN _br_x.{n} ELSE _br_s.{n} END AS {n}"
                          if n in recomputed else f"_br_s.{n}")
        return (f"SELECT {', '.join(picked)} FROM {new_state} _br_s "
                f"LEFT JOIN {extremes} _br_x ON {on}")

    def merge_sidecar_sql(self, sidecar: str, final_state: str) -> str:
        """Every source row meets a clause: a new group has rows (new_state_sql). Delta's
        MERGE on a table with deletion vectors re-tests the ON condition on the outer join's
        rows, where `<=>` holds between a NULL key and the missing target row's NULLs: a new
        NULL group that matched no clause failed the MERGE (USER_RAISED_EXCEPTION)."""
        names = [n for n, _ in self.state_columns()]
        sets = ", ".join(f"{n} = s.{n}" for n in names)
        cols = _cols(list(self.keys) + names)
        values = ", ".join(f"s.{q(c)}" for c in list(self.keys) + names)
        return (f"MERGE INTO {sidecar} t USING {final_state} s ON {keys_match(self.keys, 't', 's')}\n"
                f"WHEN MATCHED AND s.{ROWS} = 0 THEN DELETE\n"
                f"WHEN MATCHED THEN UPDATE SET {sets}\n"
                f"WHEN NOT MATCHED AND s.{ROWS} > 0 THEN INSERT ({cols}) VALUES ({values})")

    def output_over(self, state: str) -> str:
        """The model's output rows from a state relation (groups left empty drop out; a global
        aggregate always has its one row, as the from-scratch query does)."""
        return self._averaged().replace("_br_state", state)

    def _averaged(self) -> str:
        """output_sql with each average rendered (`_average`)."""
        if _AVG not in self.output_sql.lower():
            return self.output_sql
        tree = sqlglot.parse_one(self.output_sql, read=DIALECT)
        types = {_sum(a.arg): a.result for a in self.decimal_averages}
        for node in list(tree.find_all(exp.Anonymous)):
            if node.name.lower() == _AVG:
                total, count = (a.name for a in node.expressions)
                node.replace(sqlglot.parse_one(_average(total, count, types.get(total)),
                                               read=DIALECT))
        return tree.sql(dialect=DIALECT)

    def model_over(self, state: str) -> str:
        """Every output row of the model from a relation holding the whole state: the
        aggregate's own rows, or for an intermediate the rest of the model over them."""
        rows = self.output_over(state)
        if self.outer_sql is None:
            return rows
        return _over_inner(self.outer_sql, rows)

    def touched_outer_keys(self, before: str, touched: str) -> str:
        """The output keys of the outer groups (outer_keys_sql) that the touched groups' rows
        fall in, before (`before`: their old state, old_state or state_before) and after
        (`touched`: their new state), as a relation: every outer group whose value may
        have changed."""
        assert self.outer_keys_sql is not None
        rows = (f"SELECT * FROM (\n{self.output_over(before)}\n) _br_rows_before\nUNION ALL\n"
                f"SELECT * FROM (\n{self.output_over(touched)}\n) _br_rows_after")
        return f"(\n{_over_inner(self.outer_keys_sql, rows)}\n) _br_outer_keys"

    def whole_state(self, base: str, touched: str) -> str:
        """The whole new state, as a relation: the groups of `base` the refresh did not touch
        and every touched group's new state (`touched`; a group emptied by the change has 0
        rows, which the output leaves out)."""
        cols = _cols(list(self.keys) + [n for n, _ in self.state_columns()])
        return (f"(\nSELECT {cols} FROM {base} _br_b LEFT ANTI JOIN {touched} _br_t "
                f"ON {keys_match(self.keys, '_br_b', '_br_t')}\n"
                f"UNION ALL\nSELECT {cols} FROM {touched}\n) _br_whole")


    def in_touched_partitions(self, whole: str, touched: str) -> str:
        """The groups of `whole` in a partition (outer_partition) that a group of `touched`
        is in: all the outer part reads to recompute the touched partitions' rows."""
        inner = [i for i, _ in self.outer_partition]
        # `whole` is an aliased subquery, or a sidecar version (a resumed plan): named here.
        return (f"(\nSELECT _br_w.* FROM (SELECT * FROM {whole}) _br_w LEFT SEMI JOIN "
                f"{self._partitions(touched)} ON {keys_match(inner, '_br_w', '_br_p')}\n) _br_part")

    def partition_keys(self, rows: str, target: str, touched: str,
                       unique_key: Sequence[str]) -> str:
        """The output keys of the touched partitions: the recomputed rows' and the target's
        rows in those partitions (a key only the target has is deleted)."""
        cols = ", ".join(q(k) for k in unique_key)
        on = " AND ".join(f"_br_t.{q(o)} <=> _br_p.{q(i)}" for i, o in self.outer_partition)
        return (f"(\nSELECT {cols} FROM (\n{rows}\n) _br_r\nUNION\n"
                f"SELECT {', '.join(f'_br_t.{q(k)}' for k in unique_key)} FROM {target} _br_t "
                f"LEFT SEMI JOIN {self._partitions(touched)} ON {on}\n) _br_keys")

    def _partitions(self, touched: str) -> str:
        return (f"(SELECT DISTINCT {_cols([i for i, _ in self.outer_partition])} "
                f"FROM {touched}) _br_p")


def _over_inner(template: str, rows: str) -> str:
    """`template` (an intermediate's outer SQL) with its `_br_inner` reading `rows`."""
    tree = sqlglot.parse_one(template, read=DIALECT)
    for table in list(tree.find_all(exp.Table)):
        if table.name == INNER and not table.db:
            table.replace(exp.Subquery(this=sqlglot.parse_one(rows, read=DIALECT),
                                       alias=exp.TableAlias(this=exp.to_identifier(INNER))))
    return tree.sql(dialect=DIALECT)


_AVG = "_br_avg"


def _average(total: str, count: str, decimal: Optional[str]) -> str:
    """An average from its state, as Spark's `avg` computes it (Average.evaluateExpression):
    a double division, or for a decimal the sum divided by the count as decimal(20, 0), cast
    to the average's type (`decimal`)."""
    if decimal is None:
        return (f"CASE WHEN {count} = 0 THEN CAST(NULL AS DOUBLE) "
                f"ELSE CAST({total} AS DOUBLE) / {count} END")
    return (f"CASE WHEN {count} = 0 THEN CAST(NULL AS {decimal}) "
            f"ELSE CAST({total} / CAST({count} AS DECIMAL(20, 0)) AS {decimal}) END")


@dataclass(frozen=True)
class DecimalAverage:
    """How a decimal average is computed from its state, and for how many rows exactly.

    Spark's `avg` of a decimal(p, s) divides its decimal(p+10, s) sum by the count at full
    precision and rounds (half up) once, to decimal(p+4, s+4). SQL's division rounds first to
    its own result type (the count as decimal(20, 0); 38 digits in all, so its scale shrinks as
    the sum widens), then the cast rounds again. The two agree unless the true quotient lies
    within one unit of that scale of a half-way point at scale s+4, and a sum/count lies at
    least 1/(2 count 10^(s+4)) from it unless exactly on it: so for counts up to
    10^(scale - s - 4) / 2 (decimal(15, 2): 500 million rows per group). Checked against
    `avg` on Spark 4.2 for p, s from (1, 0) to (20, 10); decimal(27, 5) disagreed in 974 of
    997 groups (a division scale of 6 under the average's 9)."""

    arg: int
    result: str  # the average's type, DECIMAL(p+4, s+4)
    max_rows: int  # the largest count the division is exact for

    @staticmethod
    def of(arg: int, sum_type: str) -> Optional["DecimalAverage"]:
        """None when the sum is not a decimal, or too wide: a sum of 38 digits does not tell
        p, and a division that keeps fewer than 9 digits past the average's scale is exact
        only for groups of fewer than 500 million rows."""
        match = re.fullmatch(r"\s*decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)\s*", sum_type.lower())
        if match is None:
            return None
        precision, scale = int(match.group(1)), int(match.group(2))
        if precision >= 38:
            return None
        digits = _division_scale(precision, scale, 20, 0) - (scale + 4)
        if digits < 9:
            return None
        return DecimalAverage(arg, f"DECIMAL({precision - 6}, {scale + 4})", 10 ** digits // 2)


def _division_scale(p1: int, s1: int, p2: int, s2: int) -> int:
    """The scale of Spark's decimal(p1, s1) / decimal(p2, s2) (DecimalPrecision, precision
    loss allowed, the default)."""
    scale = max(6, s1 + p2 + 1)
    precision = p1 - s1 + s2 + scale
    if precision <= 38:
        return scale
    return max(38 - (precision - scale), min(scale, 6))


def _base(spark_type: str) -> str:
    return spark_type.lower().split("(")[0].strip()


def _cols(names: Sequence[str]) -> str:
    return ", ".join(q(n) for n in names)


def _arg(i: int) -> str:
    return f"_br_a{i}"


def _count(i: int) -> str:
    return f"_br_agg_c_{i}"


def _sum(i: int) -> str:
    return f"_br_agg_s_{i}"


def _lo(i: int) -> str:
    return f"_br_agg_lo_{i}"


def _hi(i: int) -> str:
    return f"_br_agg_hi_{i}"


def _kind(state: str) -> str:
    """c, s, lo or hi: which state a sidecar column (_br_agg_<kind>_<arg>) holds."""
    parts = state.split("_")
    return parts[3] if len(parts) > 4 else ""


def _c_of(sum_name: str) -> str:
    return _count(int(sum_name.rsplit("_", 1)[1]))


# ------------------------------------------------------------------------------ derivation
_KINDS = {exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}


def derive(sql: str, key: Sequence[str], upstreams: Sequence[str]) -> DeltaAggregate:
    """The delta upkeep of a model, or NotDelta with the reason it does not qualify."""
    tree = st.inline_ctes(st.parse(sql))
    if not isinstance(tree, exp.Select):
        raise NotDelta("is not a single SELECT")
    for arg, what in (("distinct", "DISTINCT"), ("qualify", "QUALIFY"),
                      ("limit", "LIMIT"), ("order", "ORDER BY"), ("windows", "a WINDOW clause")):
        if tree.args.get(arg):
            raise NotDelta(f"has {what} in its aggregating SELECT")
    if any(isinstance(n, exp.Window) for p in tree.expressions for n in p.walk()):
        raise NotDelta("has a window function in its aggregating SELECT")
    _unfilter(tree)
    group = tree.args.get("group")
    own = [a for a in tree.find_all(exp.AggFunc) if _owner(a) is tree]
    if not own:
        raise NotDelta("has no aggregate")
    if any(p.is_star for p in tree.expressions):
        raise NotDelta("selects *")
    keys = tuple(key)
    key_exprs: Dict[str, exp.Expression] = {}
    for name in keys:
        proj = next((p for p in tree.expressions if p.alias_or_name.lower() == name.lower()), None)
        if proj is None or proj.find(exp.AggFunc):
            raise NotDelta(f"has unique_key column {name} that is not a group key")
        key_exprs[name] = proj.unalias()
    if (group is None or not group.expressions) != (not keys):
        raise NotDelta("has a unique_key that is not its GROUP BY")
    for expr in group.expressions if group is not None else []:
        if expr.is_int and 0 < int(expr.name) <= len(tree.expressions):
            expr = tree.expressions[int(expr.name) - 1].unalias()
        named = isinstance(expr, exp.Column) and not expr.table and expr.name.lower() in {
            k.lower() for k in keys}
        if not named and not any(expr == k for k in key_exprs.values()):
            raise NotDelta(f"groups by {expr.sql(dialect=DIALECT)}, which is not a unique_key column")
    args: List[exp.Expression] = []
    aggs: List[Aggregate] = []
    by_node: Dict[int, Aggregate] = {}
    for node in own:
        if node.args.get("distinct") or isinstance(node.this, exp.Distinct):
            raise NotDelta(f"uses {node.sql(dialect=DIALECT)} (a distinct aggregate is not invertible)")
        if isinstance(node, exp.Count) and isinstance(node.this, exp.Star):
            agg = Aggregate("count_star", None)
        else:
            kind = "count" if isinstance(node, exp.Count) else _KINDS.get(type(node))
            if kind is None or node.expressions or not isinstance(node.this, exp.Expression):
                raise NotDelta(f"uses {node.sql(dialect=DIALECT)} (maintained by delta: count, "
                               "sum, avg, min, max)")
            arg = node.this
            if arg.find(exp.AggFunc) or arg.find(exp.Window) or arg.find(exp.Subquery):
                raise NotDelta(f"nests a query or window in {node.sql(dialect=DIALECT)}")
            index = next((i for i, a in enumerate(args) if a == arg), None)
            if index is None:
                index = len(args)
                args.append(arg.copy())
            agg = Aggregate(kind, index)
        aggs.append(agg)
        by_node[id(node)] = agg
    # The input rows: the group keys and the aggregate arguments, per upstream row.
    inner = tree.copy()
    inner.set("group", None)
    inner.set("having", None)
    inner.set("expressions", [e.copy().as_(n) for n, e in key_exprs.items()]
              + [a.copy().as_(_arg(i)) for i, a in enumerate(args)]
              # count(*) alone reads no column, and `SELECT FROM` is not SQL
              or [exp.true().as_("_br_row")])
    if inner.find(exp.Subquery) and any(not isinstance(s.parent, (exp.From,))
                                        for s in inner.find_all(exp.Subquery)):
        raise NotDelta("has a subquery in an expression")
    if any(inner.find(t) for t in (exp.Exists, exp.Union, exp.AggFunc, exp.Window)):
        raise NotDelta("reads its input through a set operation or nested aggregate")
    if any(isinstance(s, exp.Select) and s is not inner and (s.args.get("group") or s.args.get("distinct"))
           for s in inner.find_all(exp.Select)):
        raise NotDelta("aggregates in a subquery below its GROUP BY")
    joined = None
    if len(upstreams) > 1 or inner.find(exp.Join):
        # The input's signed rows come from its delta join, whichever input moves: an input
        # no term covers (deltajoin: fixed) would leave the sidecar behind on its runs.
        joined, why = dj.derive(inner)
        if joined is None:
            raise NotDelta(f"reads its input through a join that {why}")
        if joined.fixed:
            raise NotDelta(
                f"reads {', '.join(sorted(joined.fixed))} on a NULL-supplying side that is not "
                "one upstream joined by an equality with the other side (a subquery or join "
                "group, USING, or no equality in ON)")
    # The output: each projection (and HAVING) over the state relation.
    output = exp.select(*[_over_state(p, key_exprs, by_node) for p in tree.expressions])
    output = output.from_("_br_state")
    having = tree.args.get("having")
    conditions = [f"{ROWS} > 0"] if keys else []
    if having is not None:
        conditions.append(_over_state(having.this, key_exprs, by_node, named=False)
                          .sql(dialect=DIALECT))
    if conditions:
        output = output.where(" AND ".join(f"({c})" for c in conditions), dialect=DIALECT)
    return DeltaAggregate(tuple(upstreams), keys, inner.sql(dialect=DIALECT), tuple(aggs),
                          output.sql(dialect=DIALECT), len(args), joined)


def _unfilter(select: exp.Select) -> None:
    """`agg(x) FILTER (WHERE c)` becomes `agg(CASE WHEN c THEN x END)` (`count(*)`: of
    `CASE WHEN c THEN 1 END`), the same value for count, sum, avg, min and max: the condition
    is then part of the argument, evaluated per input row, and the state keeps no FILTER."""
    for node in list(select.find_all(exp.Filter)):
        agg = node.this
        if not isinstance(agg, exp.AggFunc) or _owner(node) is not select:
            continue
        if agg.args.get("distinct") or isinstance(agg.this, exp.Distinct) or agg.expressions:
            continue  # not maintained by delta anyway (derive says why)
        arg = exp.Literal.number(1) if isinstance(agg.this, exp.Star) else agg.this
        case = exp.Case(ifs=[exp.If(this=node.expression.this.copy(), true=arg.copy())])
        rewritten = agg.copy()
        rewritten.set("this", case)
        node.replace(rewritten)


def _owner(node: exp.Expression) -> Optional[exp.Expression]:
    return node.find_ancestor(exp.Select)


def _over_state(expr: exp.Expression, key_exprs: Mapping[str, exp.Expression],
                by_node: Mapping[int, Aggregate], named: bool = True) -> exp.Expression:
    """A projection with its aggregates and group keys replaced by state columns."""
    alias = expr.alias if isinstance(expr, exp.Alias) else None
    body = expr.unalias()
    for name, key_expr in key_exprs.items():
        if body == key_expr:
            column = exp.column(name, quoted=True)
            return column.as_(alias or name, quoted=True) if alias or name else column
    # Under a holder, so that replacing the expression's root node works too.
    holder = exp.Paren(this=body.copy())
    mapping = {id(o): n for o, n in zip(body.walk(), holder.this.walk())}
    for original in body.walk():
        if id(original) in by_node:
            mapping[id(original)].replace(_state_expr(by_node[id(original)]))
    for name, key_expr in key_exprs.items():
        for node in list(holder.this.walk()):
            if node == key_expr and not node.find_ancestor(exp.AggFunc):
                node.replace(exp.column(name, quoted=True))
    copy = holder.this
    leftover = [c for c in copy.find_all(exp.Column)
                if not c.name.startswith("_br_agg_") and c.name != ROWS
                and c.name not in key_exprs]
    if leftover:
        raise NotDelta(f"projects {leftover[0].sql(dialect=DIALECT)} outside its aggregates and "
                       "group keys")
    if not named:
        return copy
    name = alias or (body.alias_or_name if isinstance(body, exp.Column) else None)
    if name is None:
        raise NotDelta(f"has an unnamed output {body.sql(dialect=DIALECT)}")
    return copy.as_(name, quoted=True) if isinstance(expr, exp.Alias) else copy


def _state_expr(agg: Aggregate) -> exp.Expression:
    if agg.kind == "count_star":
        text = ROWS
    elif agg.kind == "count":
        text = _count(agg.arg or 0)
    elif agg.kind == "sum":
        text = _sum(agg.arg or 0)
    elif agg.kind == "avg":
        # Rendered once the argument's type is known (output_over, `_average`).
        text = f"{_AVG}({_sum(agg.arg or 0)}, {_count(agg.arg or 0)})"
    elif agg.kind == "min":
        text = _lo(agg.arg or 0)
    else:
        text = _hi(agg.arg or 0)
    return sqlglot.parse_one(text, read=DIALECT)


def sidecar_table(state_schema: str, model_id: str) -> str:
    """The sidecar of a model: in the state schema, named after the model's unique id."""
    safe = "".join(c if c.isalnum() else "_" for c in model_id.lower())
    return f"{state_schema}.`{safe}{SIDECAR_SUFFIX}`"


def maybe_derive(sql: str, key: Sequence[str], upstreams: Sequence[str]) -> Tuple[
        Optional[DeltaAggregate], Optional[str]]:
    try:
        return derive(sql, key, upstreams), None
    except NotDelta as exc:
        return None, str(exc)
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError) as exc:
        return None, f"cannot be parsed ({exc})"
