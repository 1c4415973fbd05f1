"""Which models are maintained by delta aggregation, and the SQL of their upkeep (pure)."""

from __future__ import annotations

import json

import pytest
import sqlglot

from dbt.adapters.spark_batch_refresh.sql import aggdelta as ad
from dbt.adapters.spark_batch_refresh.sql import analysis as sa


def _derive(sql: str, key=("k",)) -> ad.DeltaAggregate:
    return ad.derive(sql, key, ["raw.t"])


def test_a_group_by_of_invertible_aggregates_is_maintained_by_delta():
    agg = _derive("select k, count(*) as n, sum(v) as s, avg(v) as a, min(w) as lo, "
                  "max(w) as hi, count(v) as c from raw.t where x > 0 group by k")
    assert agg.keys == ("k",) and agg.args == 2
    assert [a.kind for a in agg.aggregates] == ["count_star", "sum", "avg", "min", "max", "count"]
    # sum and avg of one argument share their state; min/max of another get theirs
    assert [n for n, _ in agg.state_columns()] == [
        "_br_n", "_br_agg_c_0", "_br_agg_s_0", "_br_agg_lo_1", "_br_agg_hi_1"]
    assert agg.extremes() == ["_br_agg_lo_1", "_br_agg_hi_1"]
    assert "WHERE x > 0" in agg.input_sql and "GROUP BY" not in agg.input_sql
    # groups that lost every row leave the output
    assert "WHERE (_br_n > 0)" in agg.output_sql


def test_expressions_over_aggregates_and_having_are_projected_from_the_state():
    agg = _derive("select k, sum(v) * 2 + count(*) as x, k || 'a' as ka from raw.t "
                  "group by k having count(*) > 3")
    out = agg.output_over("st")
    assert "_br_agg_s_0 * 2 + _br_n AS `x`" in out and "`k` || 'a' AS `ka`" in out
    assert "FROM st" in out and "(_br_n > 3)" in out


def test_a_global_aggregate_keeps_its_one_row():
    agg = ad.derive("select count(*) as n, sum(v) as s from raw.t", (), ["raw.t"])
    assert not agg.keys and "WHERE" not in agg.output_sql
    assert "GROUP BY" not in agg.delta_sql("p", "m")
    assert "ON true" in agg.new_state_sql("d", "o", {"_br_agg_s_0": "bigint"})


@pytest.mark.parametrize("sql,reason", [
    ("select k, count(distinct v) as d from raw.t group by k", "not invertible"),
    ("select k, collect_list(v) as l from raw.t group by k", "maintained by delta"),
    ("select a.k, count(*) as n from raw.t a join raw.t b on a.k = b.k group by a.k",
     "join that reads raw.t more than once"),
    ("select a.k, count(*) as n from raw.t a full join raw.u b using (k) group by a.k",
     "NULL-supplying side"),
    ("select k, count(*) as n from raw.t group by k, v", "not a unique_key column"),
    ("select k, count(*) over () as n from raw.t group by k", "window"),
])
def test_what_is_not_maintained_by_delta(sql, reason):
    with pytest.raises(ad.NotDelta, match=reason):
        _derive(sql)


def test_analysis_offers_delta_upkeep_only_over_a_row_wise_input():
    assert sa.analyze("select k, count(*) as n from raw.t group by k").delta is not None
    nested = sa.analyze("select k, count(*) as n from (select distinct k, v from raw.t) d group by k")
    assert nested.delta is None and nested.delta_reason
    # a global aggregate has no key, yet replays incrementally by delta
    overall = sa.analyze("select count(*) as n from raw.t")
    assert overall.delta is not None and overall.incremental_reason is None


def test_inexact_sums_are_ruled_out_by_the_state_types():
    agg = _derive("select k, sum(v) as s, avg(w) as a from raw.t group by k")
    exact = {"_br_agg_s_0": "bigint", "_br_agg_s_1": "bigint"}
    assert agg.type_problem(exact) is None
    assert "exact" in agg.type_problem({**exact, "_br_agg_s_0": "double"})
    assert "decimal averages" in agg.type_problem({**exact, "_br_agg_s_1": "double"})
    assert agg.type_problem({**exact, "_br_agg_s_0": "decimal(20,2)"}) is None
    # A decimal average is Spark's decimal division, cast to decimal(p+4, s+4), exact for a
    # bounded count (ad.DecimalAverage); past 15 digits it is recomputed.
    decimal = {**exact, "_br_agg_s_1": "decimal(25,2)"}
    assert agg.type_problem(decimal) is None
    for wide in ("decimal(26,2)", "decimal(37,5)", "decimal(38,2)"):
        assert "more than 15 digits" in agg.type_problem({**exact, "_br_agg_s_1": wide})
    assert agg.typed(decimal).decimal_averages == (
        ad.DecimalAverage(1, "DECIMAL(19, 6)", 500_000_000),)
    assert agg.typed(decimal).inexact_sql() == "_br_agg_c_1 > 500000000"
    assert agg.typed(exact).inexact_sql() is None
    # Inside an intermediate aggregate the outer part reads the whole state, which no
    # refresh checks against the bound: recomputed.
    middle = sa.analyze("with t as (select grp, avg(price) as a from raw.t group by grp) "
                        "select grp, a, rank() over (order by a) as r from t", ("grp",))
    assert middle.intermediate is not None
    assert "intermediate" in middle.intermediate.type_problem(
        {"_br_n": "bigint", "_br_agg_c_0": "bigint", "_br_agg_s_0": "decimal(20,2)"})
    # decimal(7, 2): the division keeps all 21 digits past the sum's scale
    assert ad.DecimalAverage.of(1, "decimal(17,2)") == ad.DecimalAverage(
        1, "DECIMAL(11, 6)", 10 ** 17 // 2)
    out = agg.typed(decimal).output_over("st")
    assert ("CAST(_br_agg_s_1 / CAST(_br_agg_c_1 AS DECIMAL(20, 0)) AS DECIMAL(19, 6))"
            in out), out
    assert "FROM st" in out and "_br_avg" not in out.lower()
    # untyped, or an integer average: a double, as Spark's avg of an integer
    assert "CAST(_br_agg_s_1 AS DOUBLE) / _br_agg_c_1" in agg.typed(exact).output_over("st")
    assert "CAST(_br_agg_s_1 AS DOUBLE) / _br_agg_c_1" in agg.output_over("st")


def test_the_upkeep_sql_parses_as_spark_sql():
    agg = _derive("select k, count(*) as n, sum(v) as s, max(w) as hi from raw.t group by k")
    types = {n: "bigint" for n, _ in agg.state_columns()}
    for text in (agg.state_sql(agg.input_sql), agg.delta_sql(agg.input_sql, agg.input_sql),
                 agg.new_state_sql("d", "o", types), agg.extremes_sql(agg.input_sql, "ns"),
                 agg.final_state_sql("ns", "x"), agg.merge_sidecar_sql("sc", "f")):
        sqlglot.parse_one(text, read="spark")
    # the new extreme is decided by the change unless a deleted value reaches the old one
    assert ">= greatest(_br_o._br_agg_hi_1, _br_d._br_agg_hi_1_plus)" in agg.new_state_sql(
        "d", "o", types)


def test_an_aggregate_over_inner_joins_takes_its_change_rows_from_the_delta_join():
    sql = ("select c.region, count(*) as n, sum(o.amount) as total from raw.o o "
           "join raw.c c on o.cid = c.id group by c.region")
    agg = ad.derive(sql, ("region",), ["raw.c", "raw.o"])
    assert agg.join is not None and agg.join.upstreams == ("raw.c", "raw.o")
    assert "JOIN raw.c" in agg.input_sql and "GROUP BY" not in agg.input_sql
    plus, minus = agg.join.terms(
        agg.input_sql, lambda u, t: f"SELECT * FROM table_changes('{u}', 2, 3)",
        ["raw.o", "raw.c"], {"raw.o": 3, "raw.c": 3}, {"raw.o": 1, "raw.c": 1})
    # one term per moved upstream, the other one pinned
    assert plus.count("UNION ALL") == 1 and "raw.o VERSION AS OF 1" in plus
    assert "raw.c VERSION AS OF 3" in plus
    analysis = sa.analyze(sql)
    assert analysis.delta is not None and analysis.delta.join is not None


def test_a_model_over_a_grouped_subquery_keeps_that_subquery_as_its_intermediate():
    # a rank over every group (no PARTITION BY): the key walk fails, the CTE is the split
    ranked = sa.analyze("with t as (select g, count(*) as n, sum(v) as s from raw.a group by g) "
                        "select g, n, rank() over (order by s desc) as r from t", ["g"])
    assert "window function without PARTITION BY" in ranked.incremental_reason
    middle = ranked.intermediate
    assert middle is not None and middle.keys == ("g",)
    sql = middle.model_over(middle.whole_state("side VERSION AS OF 3", "touched"))
    # the rest of the model reads the whole new state: untouched groups plus touched ones
    assert "RANK() OVER (ORDER BY s DESC)" in sql
    assert "FROM side VERSION AS OF 3 AS _br_b LEFT ANTI JOIN touched" in sql
    assert "UNION ALL" in sql and "WHERE (_br_n > 0)" in sql
    sqlglot.parse_one(sql, read="spark")
    # an aggregate of an aggregate over a left join (TPC-H Q13's shape, columns qualified)
    nested = sa.analyze(
        "select n_orders, count(*) as customers from (select c.id, count(o.id) as n_orders "
        "from raw.c c left join raw.o o on o.cid = c.id and o.x <> 'y' group by c.id) per "
        "group by n_orders")
    assert "aggregated value" in nested.incremental_reason
    assert nested.key == ("n_orders",) and nested.intermediate.keys == ("id",)
    assert nested.intermediate.join is not None


def test_an_aggregate_of_the_aggregate_recomputes_the_outer_groups_it_touches():
    nested = sa.analyze(
        "select n_orders, count(*) as customers from (select c.id, count(o.id) as n_orders, "
        "sum(o.v) as spent from raw.c c left join raw.o o on o.cid = c.id group by c.id) per "
        "where spent > 0 group by n_orders having count(*) > 1").intermediate
    # the outer groups a row of the intermediate falls in: its key, the outer's WHERE kept,
    # no HAVING (a group it filters out may still have had a row in the target)
    assert nested.outer_keys_sql == (
        "SELECT DISTINCT n_orders FROM (SELECT * FROM _br_inner) AS per WHERE spent > 0")
    keys = nested.touched_outer_keys(nested.old_state("new"), "touched")
    # the touched groups' rows before (their old state, carried in the new state's view) and
    # after (their new state)
    assert "FROM new WHERE NOT _br_was_br_n IS NULL" in keys
    assert keys.count("WHERE (_br_n > 0)") == 2 and "UNION ALL" in keys
    sqlglot.parse_one(f"SELECT * FROM {keys}", read="spark")
    assert "_br_o._br_n AS _br_was_br_n" in nested.new_state_sql(
        "delta", "old", {"_br_agg_s_1": "bigint"})
    # a plain delta aggregate's step carries no old state
    plain = sa.analyze("select g, count(*) as n from raw.a group by g").delta
    assert "_br_was" not in plain.new_state_sql("delta", "old", {})
    # a resumed refresh has no such view: the version it started from, for the touched groups
    resumed = nested.touched_outer_keys(nested.state_before("side VERSION AS OF 3", "touched"),
                                        "touched")
    assert "FROM side VERSION AS OF 3 AS _br_b LEFT SEMI JOIN touched AS _br_t" in resumed


@pytest.mark.parametrize("outer", [
    # an output row that reads more than its own group's rows, or a key that is aggregated
    "select n_orders, count(*) as c, rank() over (order by count(*)) as r from ({inner}) per "
    "group by n_orders",
    "select n_orders, count(*) as c from ({inner}) per join raw.d d on d.id = per.id "
    "group by n_orders",
    "select max(n_orders) as top, count(*) as c from ({inner}) per group by spent",
    "select n_orders, count(*) as c from ({inner}) per group by rollup (n_orders)",
])
def test_an_outer_part_that_reads_beyond_its_group_recomputes_every_group(outer):
    inner = "select c.id, count(o.id) as n_orders, sum(o.v) as spent from raw.c c " \
            "left join raw.o o on o.cid = c.id group by c.id"
    key = ["top"] if "top" in outer else ["n_orders"]
    middle = sa.analyze(outer.format(inner=inner), key).intermediate
    assert middle is None or middle.outer_keys_sql is None


@pytest.mark.parametrize("sql, why", [
    # a scan outside the subquery: its changes would not pass through the sidecar
    ("select t.g, t.s, d.name, rank() over (order by t.s) as r from (select g, sum(v) as s "
     "from raw.a group by g) t join raw.d d on d.g = t.g", "no subquery or CTE"),
    ("with t as (select g, percentile(v, 0.5) as p from raw.a group by g) "
     "select g, rank() over (order by p) as r from t", "its intermediate aggregate uses"),
    # the outermost GROUP BY that delta keeps: here the innermost of three levels
    ("select g, rank() over (order by m) as r from (select g, max(s) as m from (select g, h, "
     "sum(v) as s from raw.a group by g, h) u where s > 0 group by g) t", None),
])
def test_which_models_split_at_an_intermediate(sql, why):
    analysis = sa.analyze(sql, ["g"])
    if why is None:
        assert analysis.intermediate is not None and analysis.intermediate.keys == ("g", "h")
        assert "WHERE s > 0 GROUP BY g" in analysis.intermediate.outer_sql
    else:
        assert analysis.intermediate is None and why in analysis.intermediate_reason


def test_an_aggregate_filter_becomes_part_of_its_argument():
    # a FILTER left on the state column was invalid SQL (a failed replay when it named a group
    # key) or kept the model off delta upkeep (when it named another column)
    agg = _derive("select k, count(x) filter (where k > 3) as c, count(*) filter (where y = 1) "
                  "as d, sum(v) filter (where y > 0) as s from raw.t group by k")
    assert "FILTER" not in agg.output_sql.upper()
    assert "CASE WHEN k > 3 THEN x END AS _br_a0" in agg.input_sql
    assert "CASE WHEN y = 1 THEN 1 END AS _br_a1" in agg.input_sql
    assert [a.kind for a in agg.aggregates] == ["count", "count", "sum"]


def test_a_sidecar_written_under_another_state_definition_is_not_advanced():
    from dbt.adapters.spark_batch_refresh.engine import aggstage
    old = _derive("select k, count(x) as c from raw.t group by k")
    new = _derive("select k, count(x) filter (where k > 3) as c from raw.t group by k")
    assert aggstage.state_definition(old) != aggstage.state_definition(new)
    ctx = aggstage.AggRun("st", "st.side", "p2", 2, "p1")

    def entry(version, plan, definition):
        meta = {aggstage.META_KEY: {"plan": plan, "refresh": 1}}
        if definition is not None:
            meta[aggstage.META_KEY]["state"] = definition
        return {"version": version, "userMetadata": json.dumps(meta)}

    mine = aggstage.state_definition(new)
    assert aggstage._version_of([entry(4, "p1", mine)], "p1", mine) == 4
    # the plan's version under the old definition, or from before definitions were recorded
    assert aggstage._version_of([entry(4, "p1", aggstage.state_definition(old))], "p1", mine) is None
    assert aggstage._version_of([entry(4, "p1", None)], "p1", mine) is None
    assert json.loads(aggstage._metadata(ctx, new))[aggstage.META_KEY]["state"] == mine
