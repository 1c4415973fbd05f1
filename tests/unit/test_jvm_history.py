"""Which statements the embedded session answers from Delta's log (storage/jvm_history.py), and
how a commit's time becomes the session's wall clock (pure; the rows themselves are compared
with DESCRIBE HISTORY's on Spark in tests/functional/test_shared_histories.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from dbt.adapters.spark_batch_refresh.storage.jvm_history import HistoryRead, _row, history_read


def test_history_reads_recognised():
    assert history_read("DESCRIBE HISTORY raw.fact LIMIT 20") == HistoryRead("raw", "fact", 20)
    assert history_read("describe history `raw`.`my``t` limit 1") == HistoryRead("raw", "my`t", 1)
    assert history_read("DESCRIBE HISTORY t LIMIT 5") == HistoryRead(None, "t", 5)
    assert history_read("DESCRIBE HISTORY spark_catalog.s.t LIMIT 1") == HistoryRead("s", "t", 1)


def test_everything_else_left_to_sql():
    for sql in ("DESCRIBE HISTORY raw.fact",  # no limit: not a statement the adapter issues
                "DESCRIBE HISTORY other_catalog.s.t LIMIT 1",
                "DESCRIBE HISTORY '/tmp/path' LIMIT 1",
                "DESCRIBE HISTORY delta.`/tmp/t` LIMIT 1x",
                "DESCRIBE HISTORY a.b.c.d LIMIT 1",
                "DESCRIBE DETAIL raw.fact",
                "SELECT * FROM raw.fact LIMIT 20"):
        assert history_read(sql) is None, sql


def test_commit_time_on_the_session_clock():
    millis = 1_795_757_869_535  # 2026-11-27 05:37:49.535 UTC
    row = _row({"version": 3, "timestamp": millis}, timezone(timedelta(hours=2)))
    assert row["timestamp"] == datetime(2026, 11, 27, 7, 37, 49, 535000)
    assert row["version"] == 3 and row["userMetadata"] is None and "engineInfo" in row


def test_show_views_recognised():
    from dbt.adapters.spark_batch_refresh.storage.jvm_views import views_read

    assert views_read("SHOW VIEWS IN `raw`") == "raw"
    assert views_read("show views in analytics") == "analytics"
    assert views_read("SHOW VIEWS IN `my``db`") == "my`db"
    for sql in ("SHOW VIEWS", "SHOW VIEWS IN cat.db", "SHOW VIEWS IN raw LIKE 'v*'",
                "SHOW TABLES IN raw"):
        assert views_read(sql) is None, sql


def test_describe_query_recognised():
    from dbt.adapters.spark_batch_refresh.storage.jvm_describe import describe_read

    assert describe_read("DESCRIBE QUERY select 1") == "select 1"
    assert describe_read("describe query\n  with x as (select 1)\nselect * from x") == \
        "with x as (select 1)\nselect * from x"
    for sql in ("DESCRIBE QUERY", "DESCRIBE TABLE t", "DESCRIBE t", "SELECT 1"):
        assert describe_read(sql) is None, sql
