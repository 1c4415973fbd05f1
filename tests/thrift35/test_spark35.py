"""The refresh path on a Spark 3.5 + Delta 3.3 server: what differs by server version (the SQL a
refresh sends: `table_changes`, `VERSION AS OF`, the txnAppId/txnVersion and userMetadata
session confs, deletion vectors, the MERGE forms, `DESCRIBE HISTORY`, the gap errors) is
exercised by the same tests as on the default server (tests/thrift/test_thrift.py), in order:
backfill + replay of the row-wise, join + aggregate and chained models with `--threads 4` (the
row-wise one in several chunks), a model edit rebuilt, a change-feed gap rebuilt, and a parked
run losing to a concurrent commit of the same refresh (single-chunk, and multi-chunk holding the
lease and its persisted staging). A killed client resumed runs on the default server only: its
resume reads the persisted staging with a plain SELECT, nothing that differs by version, and
it cost 49 s of CI here."""

from __future__ import annotations

from tests.functional.helpers import rows
from tests.thrift import server as thrift_server
from tests.thrift import test_thrift as default  # a module: its class is not collected here

_Base = default.TestThriftServer  # not bound to a Test* name here, so not collected twice


class TestSpark35Server:
    models = _Base.models
    work = _Base.work

    def test_server_is_spark_35_with_delta_33(self, project, thrift_server_process):
        (row,) = rows(project, "select version() as v")
        assert row["v"].startswith(thrift_server.SPARK35_VERSION), row

    test_backfill_then_replay_threads_4 = _Base.test_backfill_then_replay_threads_4
    test_change_feed_gap_rebuilds = _Base.test_change_feed_gap_rebuilds
    test_model_sql_edit_rebuilds = _Base.test_model_sql_edit_rebuilds
    test_parked_run_loses_to_a_concurrent_commit = (
        _Base.test_parked_run_loses_to_a_concurrent_commit)
