"""Pure parts of the connection layer: the Spark Connect URL and session-zone timestamps."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_batch_refresh.client.connect import connect_url
from dbt.adapters.spark_batch_refresh.client.session_cursor import session_zone, wall_clock


def test_connect_url_takes_the_host_and_adds_the_token():
    assert connect_url("sc://h:15002", None) == "sc://h:15002"
    assert connect_url("sc://h:15002", "t0k") == "sc://h:15002/;token=t0k"
    assert connect_url("sc://h:15002/;use_ssl=true", "t0k") == "sc://h:15002/;use_ssl=true;token=t0k"
    assert connect_url("sc://h:15002/;token=mine", "t0k") == "sc://h:15002/;token=mine"


@pytest.mark.parametrize("host", [None, "", "spark.example.com", "localhost:15002"])
def test_connect_url_names_the_fix_for_a_plain_host(host):
    with pytest.raises(DbtRuntimeError, match=r"`host` must be a Spark Connect URL.*sc://"):
        connect_url(host, None)


def test_session_zone_reads_region_ids_and_offsets():
    assert session_zone("UTC").utcoffset(datetime(2026, 1, 1)) == timedelta(0)
    assert session_zone("+02:00") == timezone(timedelta(hours=2))
    assert session_zone("-11:00") == timezone(timedelta(hours=-11))
    assert session_zone("Pacific/Pago_Pago").utcoffset(datetime(2026, 1, 1)) == timedelta(hours=-11)
    assert session_zone("Not/AZone") is None and session_zone(None) is None


def test_wall_clock_renders_instants_in_the_session_zone(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        # PySpark hands back 21:00 local (UTC) for the instant 10:00 at UTC-11
        row = (datetime(2026, 1, 1, 21, 0), "x", datetime(2026, 1, 1, 21, 0))
        converted = wall_clock(row, [0], session_zone("-11:00"))
        assert converted == (datetime(2026, 1, 1, 10, 0), "x", datetime(2026, 1, 1, 21, 0))
        assert wall_clock((None,), [0], session_zone("UTC")) == (None,)
        assert wall_clock(row, [0], None) == row
    finally:
        monkeypatch.undo()
        time.tzset()
