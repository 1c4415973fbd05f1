"""One clock: a remote Spark server's, measured once per process (issue 19.3)."""

from __future__ import annotations

from datetime import datetime, timedelta

from dbt.adapters.spark_batch_refresh import run_result


def test_times_are_read_on_the_servers_clock(monkeypatch):
    monkeypatch.setattr(run_result, "_server_offset", None)
    monkeypatch.delenv(run_result.NOW_ENV, raising=False)
    asked = []
    server_now = datetime.now() - timedelta(hours=11)  # a server in UTC-11, rendered as text

    def fetch(sql):
        asked.append(sql)
        return [{"now": server_now.isoformat(sep=" ")}]

    run_result.sync_clock(fetch)
    run_result.sync_clock(fetch)
    assert asked == ["SELECT current_timestamp() AS now"]  # once per process
    assert abs(run_result.current_time() - server_now) < timedelta(seconds=5)
    # the testing aid is an absolute time on that clock
    monkeypatch.setenv(run_result.NOW_ENV, "2030-01-01T00:00:00")
    assert run_result.current_time() == datetime(2030, 1, 1)
