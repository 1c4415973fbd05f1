"""Which models replay by delta join, and the SQL of their terms (pure)."""

from __future__ import annotations

import pytest
import sqlglot

from dbt.adapters.spark_batch_refresh import analysis as sa
from dbt.adapters.spark_batch_refresh import deltajoin as dj


def _derive(sql: str):
    return dj.derive(sqlglot.parse_one(sql, read="spark"))


def _changes(upstream, types):
    return f"SELECT * FROM table_changes('{upstream}', 3, 4) WHERE _change_type IN {types}"


def test_an_inner_join_is_linear_in_every_input():
    joined, why = _derive("select o.id, c.region from raw.o o join raw.c c on o.cid = c.id")
    assert why is None and joined == dj.DeltaJoin(("raw.c", "raw.o"))
    assert joined.blocker(["raw.c", "raw.o"]) is None


def test_outer_join_sides_that_supply_nulls_are_fixed():
    left, _ = _derive("select o.id from raw.o o left join raw.c c on o.cid = c.id "
                      "left join (select p.id from raw.p p join raw.q q on p.q = q.id) pq "
                      "on pq.id = o.pid")
    assert left.fixed == {"raw.c", "raw.p", "raw.q"}
    assert left.blocker(["raw.o"]) is None
    assert "raw.c moved" in left.blocker(["raw.o", "raw.c"])
    right, _ = _derive("select c.id from raw.o o right join raw.c c on o.cid = c.id")
    assert right.fixed == {"raw.o"}
    full, _ = _derive("select c.id from raw.o o full join raw.c c on o.cid = c.id")
    assert full.fixed == {"raw.o", "raw.c"}
    semi, _ = _derive("select o.id from raw.o o left anti join raw.c c on o.cid = c.id")
    assert semi.fixed == {"raw.c"}


@pytest.mark.parametrize("sql, reason", [
    ("select o.id, count(*) as n from raw.o o join raw.c c on o.cid = c.id group by o.id",
     "aggregates"),
    ("select distinct o.id from raw.o o join raw.c c on o.cid = c.id", "DISTINCT"),
    ("select o.id, row_number() over (partition by c.id order by o.id) as r "
     "from raw.o o join raw.c c on o.cid = c.id", "window"),
    ("select id from raw.o union select id from raw.c", "UNION (distinct)"),
    ("select o.id from raw.o o join raw.o p on o.id = p.id join raw.c c on c.id = o.cid",
     "more than once"),
    ("with x as (select * from raw.o) select x.id from x join x y on x.id = y.id "
     "join raw.c c on c.id = x.cid", "more than once"),
    ("select o.id from raw.o o join raw.c c on o.cid = c.id where o.x in (select x from raw.p)",
     "subquery"),
    ("select * from raw.o union all select * from raw.c", "* under UNION ALL"),
    ("select id from raw.o", "fewer than two"),
])
def test_non_linear_models_say_why(sql, reason):
    joined, why = _derive(sql)
    assert joined is None and reason in why


def test_terms_telescope_pinning_earlier_inputs_new_and_later_ones_old():
    joined, _ = _derive("select o.id, c.region, p.cat from raw.o o join raw.c c on o.cid = c.id "
                        "join raw.p p on p.id = o.pid")
    plus, minus = joined.terms(
        "select o.id, c.region, p.cat from raw.o o join raw.c c on o.cid = c.id "
        "join raw.p p on p.id = o.pid",
        _changes, ["raw.o", "raw.c"], new={"raw.o": 9, "raw.c": 7, "raw.p": 5},
        old={"raw.o": 8, "raw.c": 6, "raw.p": 5})
    first, second = plus.split("UNION ALL")
    # raw.c changes first: raw.o (after it in name order) at its old version
    assert "TABLE_CHANGES('raw.c'" in first and "raw.o VERSION AS OF 8" in first
    # then raw.o changes, with raw.c at its new version; raw.p never moved
    assert "TABLE_CHANGES('raw.o'" in second and "raw.c VERSION AS OF 7" in second
    assert "raw.p VERSION AS OF 5" in first and "raw.p VERSION AS OF 5" in second
    assert "'insert', 'update_postimage'" in plus and "'delete', 'update_preimage'" in minus


def test_a_union_branch_without_the_changed_upstream_is_emptied():
    sql = ("select concat('o', id) as uid from raw.o union all "
           "select concat('p', id) as uid from raw.p where m <> 'void'")
    joined, _ = _derive(sql)
    plus, _ = joined.terms(sql, _changes, ["raw.o"], new={"raw.o": 2, "raw.p": 1},
                           old={"raw.o": 1, "raw.p": 1})
    assert "TABLE_CHANGES('raw.o'" in plus
    assert "raw.p VERSION AS OF 1 WHERE m <> 'void' AND FALSE" in plus.replace("\n", " ")


def test_analysis_offers_a_delta_join_only_for_keyed_linear_models():
    joined = sa.analyze("select o.id, c.region from raw.o o join raw.c c on o.cid = c.id", ["id"])
    assert joined.delta_join is not None and not joined.rowwise
    agg = sa.analyze("select c.region, count(*) as n from raw.o o join raw.c c on o.cid = c.id "
                     "group by c.region")
    assert agg.delta_join is None and agg.delta_join_reason == "aggregates"
    rowwise = sa.analyze("select id from raw.o", ["id"])
    assert rowwise.delta_join is None and rowwise.delta_join_reason is None


def test_explain_names_the_rule_per_upstream():
    from datetime import datetime

    from dbt.adapters.spark_batch_refresh import explain
    from dbt.adapters.spark_batch_refresh.config import BatchRefreshConfig
    from dbt.adapters.spark_batch_refresh.planner import UpstreamPoint

    sql = "select o.id, c.region from raw.o o left join raw.c c on o.cid = c.id"
    ups = [explain.UpstreamInfo(u, UpstreamPoint(2, datetime(2026, 1, 1)), True, 2)
           for u in ("raw.c", "raw.o")]
    text = explain.render("m", BatchRefreshConfig(unique_key=("id",)), sa.analyze(sql, ["id"]),
                          ups, "idle")
    assert "incremental (delta join" in text
    assert "[delta join] raw.o (as o)" in text
    assert "[affected-key recompute, as it is on a NULL-supplying side] raw.c (as c)" in text
    assert "A run in which raw.c moved recomputes its affected keys" in text
    windowed = ("select o.id, row_number() over (partition by c.id order by o.id) as r "
                "from raw.o o join raw.c c on o.cid = c.id")
    text = explain.render("m", BatchRefreshConfig(unique_key=("id",)),
                          sa.analyze(windowed, ["id"]), ups, "idle")
    assert "no delta join: the model uses a window function" in text or "full recompute" in text


def test_a_star_asks_for_the_change_rows_without_the_feed_columns():
    joined, _ = _derive("select o.*, c.region from raw.o o join raw.c c on o.cid = c.id")
    assert joined.star
    plain, _ = _derive("select o.id, c.region from raw.o o join raw.c c on o.cid = c.id")
    assert not plain.star
    text = sa.change_rows_sql("raw.o", 2, 3, dj.PLUS, ["id", "cid"])
    assert text.startswith("SELECT `id`, `cid` FROM table_changes('raw.o', 2, 3)")
