"""The Thrift suite on a Spark 3.5 + Delta 3.3 server: every test of the default suite's class
(tests/thrift/test_thrift.py), in the same order, against the other server. What differs by
server version is what a refresh sends and what it gets back: `table_changes`, `VERSION AS OF`,
the txnAppId/txnVersion and userMetadata session confs, deletion vectors, the MERGE forms,
`DESCRIBE HISTORY`, the gap errors, and the error a losing concurrent commit or lease write
raises. So all of it runs here: backfill + replay of the row-wise (several chunks), join +
aggregate and chained models with `--threads 4`, a change-feed gap, a killed client resumed, a
model edit, parked runs losing to a concurrent commit, the lease race of two processes, a wait
for a held lease and one that runs out, two single-chunk runs released together.

Left to the default suite: the check that its server is an application of a standalone cluster
(this one runs `local[1]`), and the two module-level tests, which are about the client (two
targets in one process, `dbt debug` without pyspark), not the server."""

from __future__ import annotations

from tests.functional.helpers import rows
from tests.thrift import server as thrift_server
from tests.thrift import test_thrift as default  # a module: its class is not collected here

_Base = default.TestThriftServer  # not bound to a Test* name here, so not collected twice
_CLUSTER_ONLY = {"test_connection_is_thrift_on_a_cluster"}


class TestSpark35Server:
    models = _Base.models
    work = _Base.work

    def test_server_is_spark_35_with_delta_33(self, project, thrift_server_process):
        (row,) = rows(project, "select version() as v")
        assert row["v"].startswith(thrift_server.SPARK35_VERSION), row


# The default class's tests in its own order (a dict keeps definition order); they build on
# each other's state, so the order matters.
for _name, _test in vars(_Base).items():
    if _name.startswith("test_") and _name not in _CLUSTER_ONLY:
        setattr(TestSpark35Server, _name, _test)
