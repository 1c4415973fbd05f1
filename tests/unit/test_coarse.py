"""Coarse affected keys (sql/coarse.py): which key column a change row carries itself."""

from typing import Optional

import pytest

from dbt.adapters.spark_batch_refresh.sql import analysis as sa
from dbt.adapters.spark_batch_refresh.sql import sqlgen
from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.coarse import Coarse, Route, coarse_key

COLUMNS = {
    "s.customer": ["c_custkey", "c_name", "c_segment"],
    "s.orders": ["o_orderkey", "o_custkey", "o_orderdate", "o_priority"],
    "s.lineitem": ["l_orderkey", "l_linenumber", "l_price", "l_shipdate"],
}

Q3 = """select l_orderkey, sum(l_price) as revenue, o_orderdate, o_priority
from s.customer, s.orders, s.lineitem
where c_segment = 'BUILDING' and c_custkey = o_custkey and l_orderkey = o_orderkey
  and l_shipdate > date '1995-03-15'
group by l_orderkey, o_orderdate, o_priority"""


def coarse(sql: str, key: list, moved: Optional[set] = None) -> Optional[Coarse]:
    return coarse_key(st.inline_ctes(st.parse(sql)), key, lambda t: COLUMNS[t], moved)


def routes(found):
    return {i: (r.aliases, r.value) for i, r in found.traced.items()}


def test_a_key_column_traces_to_every_scan_equal_to_it_or_joined_to_one():
    found = coarse(Q3, ["l_orderkey", "o_orderdate", "o_priority"])
    assert found.column == "l_orderkey"
    assert routes(found) == {0: (("customer", "orders"), "`orders`.`o_orderkey`"),
                             1: (("orders",), "`orders`.`o_orderkey`"),
                             2: (("lineitem",), "`lineitem`.`l_orderkey`")}


def test_only_moved_scans_count():
    # o_orderdate: customer reaches it through orders as l_orderkey does; the earlier wins
    assert coarse(Q3, ["l_orderkey", "o_orderdate"], {"s.customer"}).column == "l_orderkey"
    assert routes(coarse(Q3, ["o_orderdate", "l_orderkey"], {"s.lineitem"})) == {
        2: (("lineitem",), "`lineitem`.`l_orderkey`")}


def test_the_column_more_scans_hold_themselves_wins():
    sql = ("select o.o_custkey, o.o_orderkey, count(*) as n from s.orders o "
           "join s.customer c on c.c_custkey = o.o_custkey group by o.o_custkey, o.o_orderkey")
    assert routes(coarse(sql, ["o_orderkey", "o_custkey"])) == {
        0: (("o",), "`o`.`o_custkey`"), 1: (("c",), "`c`.`c_custkey`")}


@pytest.mark.parametrize("sql, key, traced", [
    # a NULL-supplied scan traces nowhere: a row appearing there removes a NULL-extended row
    ("select o.o_orderkey, c.c_name from s.orders o left join s.customer c "
     "on o.o_custkey = c.c_custkey", ["o_orderkey"], {0: "o_orderkey"}),
    ("select c.c_custkey, o.o_orderkey from s.orders o right join s.customer c "
     "on o.o_custkey = c.c_custkey", ["c_custkey", "o_orderkey"], {1: "c_custkey"}),
    # an outer join's ON equality does not hold on its NULL-extended rows
    ("select o.o_custkey, o.o_orderkey from s.orders o left join s.customer c "
     "on o.o_custkey = c.c_custkey and c.c_segment = 'x'", ["o_custkey", "o_orderkey"],
     {0: "o_custkey"}),
])
def test_outer_joins(sql, key, traced):
    assert {i: r.value.split(".")[1].strip("`") for i, r in coarse(sql, key).traced.items()} == traced


@pytest.mark.parametrize("sql", [
    # one input row reaches output rows of other key values
    "select o_custkey, o_orderkey, rank() over (order by o_orderdate) as r from s.orders",
    "select o_custkey, count(*) as n from s.orders group by rollup (o_custkey)",
    "select o_custkey, o_orderkey from s.orders limit 10",
    "select o_custkey, o_orderkey from s.orders union all select c_custkey, 0 from s.customer",
    # the key column read through a subquery that is not a plain SELECT
    "select x.o_custkey, x.o_orderkey from (select * from s.orders) x",
    "select x.o_custkey, x.n as o_orderkey from (select o_custkey, count(*) as n "
    "from s.orders group by o_custkey) x",
    # computed from two sources
    "select o.o_custkey + c.c_custkey as o_custkey, o.o_orderkey from s.orders o, s.customer c",
    # a key column that is the NULL-supplied side's
    "select c.c_custkey as o_custkey, o.o_orderkey from s.orders o left join s.customer c "
    "on o.o_custkey = c.c_custkey",
    # ambiguous: both sources have a column of that name
    "select c_custkey as o_custkey, o_orderkey from s.orders, s.customer c, s.customer d",
])
def test_no_coarse_column(sql):
    found = coarse(sql, ["o_custkey", "o_orderkey"])
    assert found is None or found.column == "o_orderkey" and found.traced != {}


def test_value_queries_read_traced_change_rows_alone():
    found, parts = sa.coarse_keys_sql(Q3, ["l_orderkey", "o_orderdate", "o_priority"],
                                      {"s.lineitem": (3, 4), "s.customer": (2, 2)},
                                      {"s.lineitem": 4, "s.customer": 2, "s.orders": 1},
                                      {"s.lineitem": 2, "s.customer": 1, "s.orders": 1},
                                      lambda t: COLUMNS[t])
    assert found.column == "l_orderkey"
    assert parts[-1] == ("SELECT `lineitem`.`l_orderkey` AS `l_orderkey` FROM "
                         "(SELECT * FROM TABLE_CHANGES('s.lineitem', 3, 4)) AS lineitem")
    # the customer's change rows reach l_orderkey through orders alone (pinned at the old
    # version: it comes after customer), not through lineitem
    assert parts[0] == (
        "SELECT `orders`.`o_orderkey` AS `l_orderkey` FROM (SELECT * FROM "
        "TABLE_CHANGES('s.customer', 2, 2)) AS customer INNER JOIN s.orders VERSION AS OF 1 "
        "ON `orders`.`o_custkey` = `customer`.`c_custkey`")


def test_a_scan_reaching_no_key_column_keeps_the_walk():
    sql = ("select o.o_orderkey, count(*) as n from s.orders o join s.lineitem l "
           "on l.l_orderkey = o.o_orderkey join s.customer c on c.c_custkey > o.o_custkey "
           "group by o.o_orderkey")
    ranges = {"s.customer": (2, 2), "s.lineitem": (5, 5)}
    assert sa.coarse_keys_sql(sql, ["o_orderkey"], {"s.customer": (2, 2)}, {}, {},
                              lambda t: COLUMNS[t]) is None
    found, parts = sa.coarse_keys_sql(sql, ["o_orderkey"], ranges, {}, {}, lambda t: COLUMNS[t])
    assert routes(found) == {1: (("l",), "`l`.`l_orderkey`")}
    assert parts[0].startswith("SELECT `l`.`l_orderkey` AS `o_orderkey` FROM")
    assert parts[1].startswith("SELECT `o_orderkey` FROM (SELECT o.o_orderkey")  # the walk


def test_values_are_cast_to_the_output_column_type():
    _, parts = sa.coarse_keys_sql(Q3, ["l_orderkey"], {"s.lineitem": (3, 4)}, {}, {},
                                  lambda t: COLUMNS[t], {"l_orderkey": "bigint"})
    assert parts == ["SELECT TRY_CAST(`lineitem`.`l_orderkey` AS BIGINT) AS `l_orderkey` FROM "
                     "(SELECT * FROM TABLE_CHANGES('s.lineitem', 3, 4)) AS lineitem"]


def test_staging_recomputes_the_values_and_tombstones_the_target_rest():
    sql = sqlgen.staging_coarse("SELECT a, b, v FROM m", "_keys", "a", "db.t", ["a", "b"])
    assert "WHERE _br_m.`a` IN (SELECT `a` FROM _br_coarse)" in sql
    assert "SELECT _br_t.`a`, _br_t.`b` FROM db.t _br_t WHERE _br_t.`a` IN" in sql
    assert "FULL JOIN _br_old _br_o ON _br_r.`a` <=> _br_o.`a` AND _br_r.`b` <=> _br_o.`b`" in sql
    assert "CASE WHEN _br_r._br_present THEN _br_r.`b` ELSE _br_o.`b` END AS _br_k_1" in sql
    # a NULL value stages an all-NULL tombstone: the key check then asks the model for a row
    # with a NULL key, as it does for an affected NULL key
    assert "UNION ALL SELECT NULL AS `a`, NULL AS `b` FROM _br_coarse WHERE `a` IS NULL" in sql
    safe = sqlgen.staging_coarse("SELECT a, b, v FROM m", "_keys", "a", "db.t", ["a", "b"], True)
    assert "EXISTS (SELECT 1 FROM _br_coarse _br_x WHERE _br_x.`a` <=> _br_t.`a`)" in safe
    assert "IS NULL" not in safe


def test_plain_subqueries_are_read_through_and_expressions_of_one_source_count():
    # TPC-H Q9's form: the keys are projected by a FROM subquery, one of them computed
    sql = ("select nation, o_year, sum(amount) as profit from (select c_name as nation, "
           "year(o_orderdate) as o_year, l_price as amount from s.customer, s.orders, "
           "s.lineitem where c_custkey = o_custkey and o_orderkey = l_orderkey) as profit "
           "group by nation, o_year")
    found = coarse(sql, ["nation", "o_year"])
    assert found.column == "o_year"  # as many scans and held as often, shorter routes
    assert routes(coarse(sql, ["o_year"])) == {
        0: (("customer", "orders"), "YEAR(`orders`.`o_orderdate`)"),
        1: (("orders",), "YEAR(`orders`.`o_orderdate`)"),
        2: (("lineitem", "orders"), "YEAR(`orders`.`o_orderdate`)")}


def test_a_subquery_NULL_supplied_by_the_output_select_supplies_NULLs_inside_too():
    sql = ("select o.o_orderkey, x.c_name from s.orders o left join (select c.c_custkey, "
           "c.c_name from s.customer c) x on x.c_custkey = o.o_custkey")
    assert routes(coarse(sql, ["o_orderkey", "c_name"])) == {0: (("o",), "`o`.`o_orderkey`")}


def test_explain_names_the_column_and_each_scan_s_route():
    text = sa.coarse_description(Q3, ["l_orderkey", "o_orderdate", "o_priority"],
                                 lambda t: COLUMNS[t])
    assert text == ("affected rows by l_orderkey, its values from the change rows of "
                    "s.customer (through orders), s.orders (its own), s.lineitem (its own)")


def test_a_model_of_one_scan_keeps_the_walk():
    # its walk reads the change rows alone; the coarse staging would read the target besides
    sql = "select o_custkey, o_orderdate, count(*) as n from s.orders group by 1, 2"
    assert coarse(sql, ["o_custkey", "o_orderdate"]).column == "o_custkey"
    assert sa.coarse_keys_sql(sql, ["o_custkey", "o_orderdate"], {"s.orders": (2, 3)}, {}, {},
                              lambda t: COLUMNS[t]) is None


def test_a_defect_of_the_coarse_analysis_costs_the_walk_not_the_refresh():
    from datetime import datetime

    from dbt.adapters.spark_batch_refresh.engine.stage import Stager
    from dbt.adapters.spark_batch_refresh.plan.config import parse_config
    from dbt.adapters.spark_batch_refresh.plan.planner import Plan, UpstreamPoint

    def broken(table):
        raise ValueError("a defect")

    stager = Stager(lambda sql: [], lambda sql: None, lambda sql: [], broken, None)
    config = parse_config("m", {"unique_key": ["l_orderkey", "o_orderdate"]})
    at = datetime(2026, 1, 1)
    plan = Plan("replay", "", "incremental",
                pinned={t: UpstreamPoint(2, at) for t in ("s.lineitem", "s.orders", "s.customer")},
                consumed={t: UpstreamPoint(1, at) for t in ("s.lineitem", "s.orders", "s.customer")})
    assert stager._coarse(Q3, config, plan.ranges(), plan, []) is None
    stager = Stager(lambda sql: [], lambda sql: None, lambda sql: [], lambda t: COLUMNS[t], None)
    assert stager._coarse(Q3, config, plan.ranges(), plan, [])[0].column == "l_orderkey"
