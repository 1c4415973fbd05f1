"""SELECT-list scalar subqueries written as joins (decorrelate.py), on SQL text alone."""

import pytest
import sqlglot

from dbt.adapters.spark_batch_refresh.sql import analysis as sa
from dbt.adapters.spark_batch_refresh.sql.decorrelate import scalar_joins
from dbt.adapters.spark_batch_refresh.sql.sqltree import DIALECT

COUNTED = ("select o.id, o.status, (select count(*) from s.items i where i.order_id = o.id) as n "
           "from s.orders o")


def rewritten(sql: str) -> str:
    return scalar_joins(sqlglot.parse_one(sql, read=DIALECT)).sql(dialect=DIALECT)


def test_a_count_becomes_a_left_join_of_the_grouped_count():
    assert rewritten(COUNTED) == (
        "SELECT o.id, o.status, COALESCE(_br_sq0._br_v, 0) AS n FROM s.orders AS o LEFT JOIN "
        "(SELECT i.order_id AS _br_c0, COUNT(*) AS _br_v FROM s.items AS i GROUP BY i.order_id) "
        "AS _br_sq0 ON _br_sq0._br_c0 = o.id")


def test_own_filters_stay_inside_and_every_correlation_is_a_join_key():
    out = rewritten("select o.id, (select sum(i.qty) from s.items i where o.id = i.order_id "
                    "and i.qty > 1 and i.sku = o.sku) + 1 as q from s.orders o "
                    "where o.status = 'a'")
    assert "_br_sq0._br_v + 1 AS q" in out and "WHERE i.qty > 1 GROUP BY i.order_id, i.sku" in out
    assert "ON _br_sq0._br_c0 = o.id AND _br_sq0._br_c1 = o.sku WHERE o.status = 'a'" in out


def test_an_exists_in_the_select_list_is_the_join_matching():
    out = rewritten("select o.id, not exists (select 1 from s.items i where i.order_id = o.id "
                    "and i.qty > 2) as idle from s.orders o")
    assert out == (
        "SELECT o.id, NOT (NOT (_br_sq0._br_v IS NULL)) AS idle FROM s.orders AS o LEFT JOIN "
        "(SELECT i.order_id AS _br_c0, COUNT(*) AS _br_v FROM s.items AS i WHERE i.qty > 2 "
        "GROUP BY i.order_id) AS _br_sq0 ON _br_sq0._br_c0 = o.id")


@pytest.mark.parametrize("sql", [
    # EXISTS of an aggregate is always true
    "select o.id, exists (select max(i.x) from s.items i where i.o_id = o.id) as f "
    "from s.orders o",
    # an unqualified column may be either side's
    "select o.id, (select count(*) from s.items i where i.order_id = id) as n from s.orders o",
    # not an equality
    "select o.id, (select count(*) from s.items i where i.order_id > o.id) as n from s.orders o",
    # an aggregate that is not NULL (or 0) over no rows
    "select o.id, (select collect_list(i.qty) from s.items i where i.order_id = o.id) as n "
    "from s.orders o",
    # an OR between the correlation and a filter
    "select o.id, (select count(*) from s.items i where i.order_id = o.id or i.qty > 1) as n "
    "from s.orders o",
    # the outer SELECT aggregates, or has `*` (which the join would widen)
    "select o.k, max((select count(*) from s.items i where i.order_id = o.k)) as n "
    "from s.orders o group by o.k",
    "select *, (select count(*) from s.items i where i.order_id = o.id) as n from s.orders o",
    # a set, not a scalar: IN and ANY read every row of the subquery
    "select o.id, o.id in (select max(i.x) from s.items i where i.o_id = o.id) as f "
    "from s.orders o",
    "select o.id, o.v > any (select max(i.x) from s.items i where i.o_id = o.id) as f "
    "from s.orders o",
])
def test_forms_that_are_not_plainly_equal_stay_as_written(sql):
    assert rewritten(sql) == sqlglot.parse_one(sql, read=DIALECT).sql(dialect=DIALECT)


def test_the_model_replays_by_affected_keys_through_the_join():
    a = sa.analyze(COUNTED, ("id",))
    assert a.incremental_reason is None, a.incremental_reason
    assert a.replay_sql is not None and "LEFT JOIN" in a.replay_sql
    assert {p.occurrence.upstream for p in a.key_paths} == {"s.items", "s.orders"}
    # the fingerprint is the model's own: adopting the form rebuilds nothing
    assert a.normalized_sql == sqlglot.parse_one(COUNTED, read=DIALECT).sql(
        dialect=DIALECT, normalize=True)
