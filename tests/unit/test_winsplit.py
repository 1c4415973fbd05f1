"""A grouped SELECT with windows over its groups, split into the aggregate and the rest (pure)."""

from __future__ import annotations

import pytest
import sqlglot

from dbt.adapters.spark_batch_refresh.sql import analysis as sa
from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.winsplit import split_joined_windows, split_windowed


def _split(sql: str) -> str:
    return split_windowed(sqlglot.parse_one(sql, read="spark")).sql(dialect="spark")


def test_the_windows_move_outside_and_the_group_aggregates_inside():
    sql = _split("select c.k, count(*) filter (where x > 1) as n, sum(v) as s, "
                 "rank() over (partition by c.k order by sum(v) desc) as r, "
                 "sum(sum(v)) over () as tot, sum(v) * 100.0 / sum(sum(v)) over () as share "
                 "from raw.t c group by 1 having sum(v) > 0")
    outer, inner = sql.split(" FROM (", 1)
    # each group aggregate once, FILTER with it; the window's own sum stays outside
    assert ("SELECT c.k AS `k`, COUNT(*) FILTER(WHERE x > 1) AS _br_m0, SUM(v) AS _br_m1 "
            "FROM raw.t AS c GROUP BY c.k) AS _br_split") in inner
    assert outer == ("SELECT `k` AS k, _br_m0 AS n, _br_m1 AS s, RANK() OVER (PARTITION BY "
                     "`k` ORDER BY _br_m1 DESC) AS r, SUM(_br_m1) OVER () AS tot, "
                     "_br_m1 * 100.0 / SUM(_br_m1) OVER () AS share")
    assert inner.endswith("WHERE _br_m1 > 0")  # HAVING over the groups


def test_group_expressions_and_cte_stay_what_they_were():
    # a grouped column keeps its name, an expression (or a name taken twice) gets one
    sql = _split("with x as (select * from raw.t) select x.k, upper(name) as un, y.k as yk, "
                 "ntile(4) over (order by count(*), x.k) as q from x join raw.u y on x.a = y.a "
                 "group by x.k, upper(name), y.k")
    assert sql == ("WITH x AS (SELECT * FROM raw.t) SELECT `k` AS k, `_br_g1` AS un, `_br_g2` "
                   "AS yk, NTILE(4) OVER (ORDER BY _br_m0, `k`) AS q FROM (SELECT x.k AS `k`, "
                   "UPPER(name) AS `_br_g1`, y.k AS `_br_g2`, COUNT(*) AS _br_m0 FROM x JOIN "
                   "raw.u AS y ON x.a = y.a GROUP BY x.k, UPPER(name), y.k) AS _br_split")


@pytest.mark.parametrize("sql", [
    # Spark's generated name of a computed output cannot be reproduced
    "select k, sum(v) as s, rank() over (order by sum(v)) from raw.t group by k",
    # `name` may be the input column or the output alias: Spark decides by the schema
    "select k as name, sum(v) as s, rank() over (order by sum(v)) as r from raw.t group by name",
    "select k, sum(v) as s, rank() over (order by sum(v)) as r from raw.t group by rollup(k)",
    "select k, sum(v) as s, rank() over (order by sum(v)) as r from raw.t group by k limit 3",
    "select k, sum(v) as s, rank() over (order by (select max(v) from raw.u)) as r "
    "from raw.t group by k",
    # no window: nothing to split
    "select k, sum(v) as s from raw.t group by k",
])
def test_what_is_left_as_written(sql):
    assert _split(sql) == sqlglot.parse_one(sql, read="spark").sql(dialect="spark")


def test_a_rank_over_its_own_groups_is_kept_as_an_intermediate():
    analysis = sa.analyze(
        "select o.customer_id, cu.region, sum(o.amount) as total, rank() over (partition by "
        "cu.region order by sum(o.amount) desc, o.customer_id) as rnk from raw.o o join "
        "raw.c cu on cu.id = o.customer_id group by o.customer_id, cu.region")
    assert analysis.key == ("customer_id", "region")
    middle = analysis.intermediate
    assert middle is not None and middle.keys == ("customer_id", "region")
    assert middle.join is not None
    sql = middle.model_over(middle.whole_state("side VERSION AS OF 3", "touched"))
    assert "RANK() OVER (PARTITION BY `region` ORDER BY _br_m0 DESC, `customer_id`) AS rnk" in sql
    assert sql.startswith("SELECT `customer_id` AS customer_id, `region` AS region, _br_m0 AS total")
    sqlglot.parse_one(sql, read="spark")
    # every window is partitioned by region: a refresh recomputes the touched regions only
    assert middle.outer_partition == (("region", "region"),)
    rows = middle.model_over(middle.in_touched_partitions(
        middle.whole_state("side VERSION AS OF 3", "touched"), "touched"))
    assert "LEFT SEMI JOIN (SELECT DISTINCT `region` FROM touched) AS _br_p" in rows
    # a resumed plan reads its own sidecar version, a relation without an alias
    resumed = middle.model_over(middle.in_touched_partitions("side VERSION AS OF 4", "touched"))
    assert "FROM (SELECT * FROM side VERSION AS OF 4) AS _br_w LEFT SEMI JOIN" in resumed
    keys = middle.partition_keys(rows, "db.target", "touched", analysis.key)
    assert ("SELECT _br_t.`customer_id`, _br_t.`region` FROM db.target _br_t LEFT SEMI JOIN "
            "(SELECT DISTINCT `region` FROM touched) _br_p ON _br_t.`region` <=> _br_p.`region`"
            ) in keys
    sqlglot.parse_one(keys[1:keys.rindex(")")], read="spark")


@pytest.mark.parametrize("sql, partition", [
    ("select g, h, sum(v) as s, rank() over (partition by g order by sum(v)) as r, "
     "lag(sum(v)) over (partition by g, h order by h) as l from raw.t group by g, h", ("g",)),
    # a window over every group, an aggregate over the groups, a partition not in the output
    ("select g, h, sum(v) as s, rank() over (partition by g order by sum(v)) as r, "
     "sum(sum(v)) over () as t from raw.t group by g, h", ()),
    ("select g, h as x, rank() over (partition by g order by sum(v)) as r from raw.t "
     "group by g, h", ("g",)),
])
def test_which_window_partitions_bound_a_refresh(sql, partition):
    middle = sa.analyze(sql).intermediate
    assert middle is not None
    assert tuple(i for i, _ in middle.outer_partition) == partition


def test_a_partitioned_rank_in_the_grouped_select_replays_by_its_split_form():
    # the model as written fails the key walk; its split form is read by partition
    sql = ("select k, pmod(v, 10) as band, sum(v) as s, rank() over (partition by k order by "
           "sum(v) desc, pmod(v, 10)) as r from raw.fact group by k, pmod(v, 10)")
    analysis = sa.analyze(sql)
    assert analysis.incremental_reason is None and analysis.key == ("k", "band")
    assert analysis.replay_sql is not None and "AS _br_split" in analysis.replay_sql
    assert [p.rule for p in analysis.key_paths] == ["partition recompute"]
    # the fingerprint is the model's own: nothing rebuilds for the new form
    assert analysis.normalized_sql == sa.analyze(sql.replace("rank()", "rank ()")).normalized_sql
    assert "_br_split" not in analysis.normalized_sql
    # with aggregate_upkeep='delta' its intermediate is still there to keep
    assert analysis.intermediate is not None and analysis.intermediate.outer_partition


def _split_join(sql: str) -> str:
    return split_joined_windows(st.parse(sql)).sql(dialect=st.DIALECT)  # QUALIFY kept


def test_windows_over_a_join_move_outside_and_the_join_inside():
    sql = _split_join(
        "with x as (select * from raw.c) select o.id, x.region, amount, "
        "row_number() over (partition by x.region order by o.amount desc, o.id) as rn "
        "from raw.o o join x on x.id = o.cid where x.tier <> 'blocked' "
        "qualify rn <= 3 and o.ts > 0 order by region, o.id")
    # a column keeps its name where QUALIFY and ORDER BY would not read an output by it
    assert sql == (
        "WITH x AS (SELECT * FROM raw.c) SELECT `id` AS id, `region` AS region, `amount` AS "
        "amount, ROW_NUMBER() OVER (PARTITION BY `region` ORDER BY `_br_c3` DESC, `id`) AS rn "
        "FROM (SELECT o.id AS `id`, x.region AS `region`, amount AS `amount`, o.amount AS "
        "`_br_c3`, o.ts AS `ts` FROM raw.o AS o JOIN x ON x.id = o.cid WHERE x.tier <> "
        "'blocked') AS _br_split QUALIFY rn <= 3 AND `ts` > 0 ORDER BY region, `id`")
    # an output named like another column: that column's name is generated
    sql = _split_join("select o.x as id, o.id as oid, rank() over (partition by o.g order by "
                      "o.id) as r from raw.o o join raw.c c on c.id = o.cid order by id, o.id")
    assert sql == ("SELECT `x` AS id, `_br_c1` AS oid, RANK() OVER (PARTITION BY `g` ORDER BY "
                   "`_br_c1`) AS r FROM (SELECT o.x AS `x`, o.id AS `_br_c1`, o.g AS `g` FROM "
                   "raw.o AS o JOIN raw.c AS c ON c.id = o.cid) AS _br_split ORDER BY id, "
                   "`_br_c1`")
    # a subquery filter's rows, one relation: split the same way
    sql = _split_join("select id, rank() over (partition by g order by v) as r from raw.t "
                      "where g in (select g from raw.u)")
    assert sql == ("SELECT `id` AS id, RANK() OVER (PARTITION BY `g` ORDER BY `v`) AS r FROM "
                   "(SELECT id AS `id`, g AS `g`, v AS `v` FROM raw.t WHERE g IN (SELECT g FROM "
                   "raw.u)) AS _br_split")


@pytest.mark.parametrize("sql", [
    # a lateral alias, or an input column of that name: Spark decides by the schema
    "select o.v * 2 as w, rank() over (partition by o.g order by w) as r from raw.o o "
    "join raw.c c on c.id = o.cid",
    "select o.id, count(*) over (partition by o.g) as n, sum(o.v) as s from raw.o o "
    "join raw.c c on c.id = o.cid",  # a global aggregate beside the window
    "select c.*, rank() over (partition by o.g order by o.v) as r from raw.o o "
    "join raw.c c on c.id = o.cid",
    "select o.id, rank() over (partition by o.g order by o.v) from raw.o o "
    "join raw.c c on c.id = o.cid",  # Spark's generated name
    "select distinct o.g, rank() over (partition by o.g order by o.v) as r from raw.o o "
    "join raw.c c on c.id = o.cid",
    "select o.id, rank() over (partition by o.g order by o.v) as r from raw.o o "
    "join raw.c c on c.id = o.cid limit 5",
    # no join, no subquery filter, or no window: nothing to split
    "select id, rank() over (partition by g order by v) as r from raw.t where v > 0",
    "select o.id, c.region from raw.o o join raw.c c on c.id = o.cid",
])
def test_windows_over_a_join_left_as_written(sql):
    assert _split_join(sql) == st.parse(sql).sql(dialect=st.DIALECT)


def test_a_star_over_a_join_stays_inside_when_the_model_outputs_it():
    """dbt-labs' attribution-playbook: `select *, <windows>` over sessions LEFT JOIN
    conversions USING (customer_id) in a CTE the model selects `*` from. A model that builds
    outputs no name twice, so the star's columns are read by name over the split. (The WHERE
    rejects the join's NULLs: parsed, the LEFT JOIN is an inner one.)"""
    sql = _split_join(
        "with s as (select * from raw.s), c as (select * from raw.c), "
        "b as (select *, count(*) over (partition by customer_id) as total, "
        "row_number() over (partition by customer_id order by s.started_at) as idx "
        "from s left join c using (customer_id) where s.started_at <= c.converted_at), "
        "p as (select *, 1.0 / total as linear from b) select * from p")
    assert ("b AS (SELECT *, COUNT(*) OVER (PARTITION BY customer_id) AS total, ROW_NUMBER() "
            "OVER (PARTITION BY customer_id ORDER BY started_at) AS idx FROM (SELECT * FROM s "
            "JOIN c USING (customer_id) WHERE s.started_at <= c.converted_at) AS "
            "_br_split)") in sql, sql
    # a derived table the model selects `*` from, QUALIFY and ORDER BY by name too
    sql = _split_join("select * from (select *, rank() over (partition by c.region order by "
                      "o.amount) as r from raw.o o join raw.c c on c.id = o.cid "
                      "qualify r = 1 order by o.amount) z")
    assert sql == ("SELECT * FROM (SELECT *, RANK() OVER (PARTITION BY region ORDER BY amount) "
                   "AS r FROM (SELECT * FROM raw.o AS o JOIN raw.c AS c ON c.id = o.cid) AS "
                   "_br_split QUALIFY r = 1 ORDER BY amount) AS z")


@pytest.mark.parametrize("sql", [
    # read by named columns: the star may hold two `id`s the reader never reads
    "with x as (select *, rank() over (partition by c.region order by o.amount) as r "
    "from raw.o o join raw.c c on c.id = o.cid) select cid, amount, r from x",
    # a qualified USING key: the star holds the joined one
    "select *, rank() over (partition by c.customer_id order by o.v) as r from raw.o o "
    "left join raw.c c using (customer_id)",
    "select *, rank() over (partition by g order by v) as r from raw.o natural join raw.c",
    "select *, rank() over (partition by o.g order by o.v) as r from raw.o o "
    "join raw.c c on c.id = o.cid union all select * from raw.u",
    # `x.f` of no joined relation: a struct's field, not a column of the star
    "select *, rank() over (partition by x.f order by o.v) as r from raw.o o "
    "join raw.c c on c.id = o.cid",
    # a lateral alias in the SELECT list
    "select *, o.v * 2 as w, rank() over (partition by o.g order by w) as r from raw.o o "
    "join raw.c c on c.id = o.cid",
])
def test_a_star_over_a_join_left_as_written(sql):
    assert _split_join(sql) == st.parse(sql).sql(dialect=st.DIALECT)


def test_a_window_over_a_join_replays_the_partitions_the_change_touches():
    """The model as written fails the key walk (a window over a join); its split form
    recomputes the touched partitions: a customer's change reaches every partition its
    orders fall in, through the join at the pinned versions."""
    sql = ("select o.id, c.region, row_number() over (partition by c.region order by "
           "o.amount desc, o.id) as rn from raw.o o join raw.c c on c.id = o.cid")
    analysis = sa.analyze(sql, ("id",))
    assert analysis.incremental_reason is None
    assert analysis.replay_sql is not None and "AS _br_split" in analysis.replay_sql
    assert {p.rule for p in analysis.key_paths} == {"partition recompute"}
    assert "_br_split" not in analysis.normalized_sql
    queries = sa.affected_keys_sql(analysis.replay_sql, ["id"], {"raw.c": (3, 4)}, {"raw.c": 4, "raw.o": 7},
                                   {"raw.c": 2, "raw.o": 7}, lambda u: ["id", "cid", "region",
                                                                        "amount"])
    assert queries and all("TABLE_CHANGES('raw.c', 3, 4)" in q for q in queries)
    for q in queries:
        sqlglot.parse_one(q, read="spark")


def test_the_attribution_playbook_replays_the_customers_the_change_touches():
    """attribution-playbook's touches, keyed by session: its windows partition by the USING
    key of a join under `select *`; split, the key walk recomputes the touched customers."""
    sql = ("with sessions as (select * from raw.sessions), conv as (select * from raw.conv), "
           "b as (select *, count(*) over (partition by customer_id) as total_sessions, "
           "row_number() over (partition by customer_id order by sessions.started_at) as idx "
           "from sessions left join conv using (customer_id) "
           "where sessions.started_at <= conv.converted_at "
           "and sessions.started_at >= dateadd(DAY, -30, conv.converted_at)), "
           "p as (select *, 1.0 / total_sessions as linear_points, "
           "revenue * linear_points as linear_revenue from b) select * from p")
    analysis = sa.analyze(sql, ("session_id",))
    assert analysis.incremental_reason is None, analysis.incremental_reason
    assert analysis.replay_sql is not None and "AS _br_split" in analysis.replay_sql
    assert {p.rule for p in analysis.key_paths} == {"partition recompute"}
