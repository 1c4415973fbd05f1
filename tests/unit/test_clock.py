"""One clock per Spark endpoint: a remote server's, measured once per process (issue 19.3)."""

from __future__ import annotations

from datetime import datetime, timedelta

from dbt.adapters.spark_batch_refresh.storage import endpoint


def test_times_are_read_on_the_servers_clock(monkeypatch):
    monkeypatch.setattr(endpoint, "_offsets", {})
    monkeypatch.delenv(endpoint.NOW_ENV, raising=False)
    asked = []
    server_now = datetime.now() - timedelta(hours=11)  # a server in UTC-11, rendered as text

    def fetch(sql):
        asked.append(sql)
        return [{"now": server_now.isoformat(sep=" ")}]

    server = endpoint.key_for("thrift", {"host": "spark", "port": 10000})
    endpoint.use(server, fetch)
    endpoint.use(server, fetch)
    assert asked == ["SELECT current_timestamp() AS now"]  # once per process and endpoint
    assert abs(endpoint.current_time() - server_now) < timedelta(seconds=5)
    # the testing aid is an absolute time on that clock
    monkeypatch.setenv(endpoint.NOW_ENV, "2030-01-01T00:00:00")
    assert endpoint.current_time() == datetime(2030, 1, 1)


def test_each_endpoint_keeps_its_own_clock(monkeypatch):
    """dbt run for a remote target, then for the embedded session, in one process: the second
    compares times on this host's clock, not on the first server's."""
    monkeypatch.setattr(endpoint, "_offsets", {})
    monkeypatch.delenv(endpoint.NOW_ENV, raising=False)
    server_now = datetime.now() - timedelta(hours=11)
    server = endpoint.key_for("thrift", {"host": "spark", "port": 10000})
    endpoint.use(server, lambda sql: [{"now": server_now}])
    endpoint.use(endpoint.EMBEDDED, None)
    assert abs(endpoint.current_time() - datetime.now()) < timedelta(seconds=5)
    other = endpoint.key_for("thrift", {"host": "spark", "port": 10000,
                                        "server_side_parameters": {"spark.sql.session.timeZone": "UTC"}})
    assert other != server  # the session time zone renders the clock
    endpoint.use(server, lambda sql: [{"now": datetime.now()}])  # not measured again
    assert abs(endpoint.current_time() - server_now) < timedelta(seconds=5)
