"""A grouped SELECT with windows over its groups, split into the aggregate and the rest (pure)."""

from __future__ import annotations

import pytest
import sqlglot

from dbt.adapters.spark_batch_refresh.sql import analysis as sa
from dbt.adapters.spark_batch_refresh.sql.winsplit import split_windowed


def _split(sql: str) -> str:
    return split_windowed(sqlglot.parse_one(sql, read="spark")).sql(dialect="spark")


def test_the_windows_move_outside_and_the_group_aggregates_inside():
    sql = _split("select c.k, count(*) filter (where x > 1) as n, sum(v) as s, "
                 "rank() over (partition by c.k order by sum(v) desc) as r, "
                 "sum(sum(v)) over () as tot, sum(v) * 100.0 / sum(sum(v)) over () as share "
                 "from raw.t c group by 1 having sum(v) > 0")
    outer, inner = sql.split(" FROM (", 1)
    # each group aggregate once, FILTER with it; the window's own sum stays outside
    assert ("SELECT c.k AS _br_g0, COUNT(*) FILTER(WHERE x > 1) AS _br_m0, SUM(v) AS _br_m1 "
            "FROM raw.t AS c GROUP BY c.k) AS _br_split") in inner
    assert outer == ("SELECT _br_g0 AS k, _br_m0 AS n, _br_m1 AS s, RANK() OVER (PARTITION BY "
                     "_br_g0 ORDER BY _br_m1 DESC) AS r, SUM(_br_m1) OVER () AS tot, "
                     "_br_m1 * 100.0 / SUM(_br_m1) OVER () AS share")
    assert inner.endswith("WHERE _br_m1 > 0")  # HAVING over the groups


def test_group_expressions_and_cte_stay_what_they_were():
    sql = _split("with x as (select * from raw.t) select k, upper(name) as un, "
                 "ntile(4) over (order by count(*), k) as q from x group by k, upper(name)")
    assert sql.startswith("WITH x AS (SELECT * FROM raw.t) SELECT _br_g0 AS k, _br_g1 AS un, "
                          "NTILE(4) OVER (ORDER BY _br_m0, _br_g0) AS q FROM (SELECT k AS "
                          "_br_g0, UPPER(name) AS _br_g1, COUNT(*) AS _br_m0 FROM x GROUP BY k, "
                          "UPPER(name)) AS _br_split")


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
    assert middle is not None and middle.keys == ("_br_g0", "_br_g1") and middle.join is not None
    sql = middle.model_over(middle.whole_state("side VERSION AS OF 3", "touched"))
    assert "RANK() OVER (PARTITION BY _br_g1 ORDER BY _br_m0 DESC, _br_g0) AS rnk" in sql
    assert sql.startswith("SELECT _br_g0 AS customer_id, _br_g1 AS region, _br_m0 AS total")
    sqlglot.parse_one(sql, read="spark")
