"""The Thrift suite on a Spark 3.5 + Delta 3.3 server: the tests of the default suite's class
(tests/thrift/test_thrift.py) that exercise what differs by server version, in the same order,
against the other server. What differs is what a refresh sends and what it gets back:
`table_changes`, `VERSION AS OF`, the txnAppId/txnVersion and userMetadata session confs,
deletion vectors, the MERGE forms, `DESCRIBE HISTORY`, the gap errors, and the error a losing
concurrent commit or lease write raises. So these run here: backfill + replay of the row-wise
(several chunks), join + aggregate and chained models with `--threads 4`, a change-feed gap, a
killed client resumed, a model edit, the lease race of two processes (a losing lease write), two
single-chunk runs released together (a losing target commit).

Left to the default suite: the check that its server is an application of a standalone cluster
(this one runs `local[1]`); the parked runs losing to a concurrent commit and the wait for a
held lease, whose server-side statements and errors are those of the two races above (the rest
is the plugin's own logic, the same SQL on every server: ~170 s a server); and the two
module-level tests, which are about the client (two targets in one process, `dbt debug` without
pyspark), not the server."""

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


default.adopt_server_tests(TestSpark35Server)
