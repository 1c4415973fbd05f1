"""The on-demand contract check: its query and its report (the comparison itself runs on Spark
in tests/functional/test_batch_refresh.py)."""

from __future__ import annotations

from dbt.adapters.spark_batch_refresh.engine.verify import Verdict, differences_sql


def test_differences_compare_both_ways_and_tag_the_side():
    sql = differences_sql("`s`.`t`", "SELECT id FROM s.u VERSION AS OF 3")
    assert "((SELECT * FROM `s`.`t`) EXCEPT ALL (SELECT id FROM s.u VERSION AS OF 3))" in sql
    assert "((SELECT id FROM s.u VERSION AS OF 3) EXCEPT ALL (SELECT * FROM `s`.`t`))" in sql
    assert "'only in target' AS batch_refresh_side" in sql
    assert "'only in model' AS batch_refresh_side" in sql


def test_verdict_names_the_rows_and_the_fix():
    ok = Verdict("m", "`s`.`m`", {"s.u": 3})
    assert ok.consistent and ok.render().endswith("equals the model evaluated from scratch at s.u v3.")
    bad = Verdict("m", "`s`.`m`", {"s.u": 3}, only_in_target=1, only_in_model=0,
                  examples=[{"batch_refresh_side": "only in target", "id": 4, "v": None}])
    text = bad.render()
    assert "1 rows only in the target, 0 rows only in the model" in text
    assert "  only in target: id=4, v=None" in text
    assert "dbt run --select m --full-refresh" in text
