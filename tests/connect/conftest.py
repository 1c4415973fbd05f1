"""The Spark Connect suite: dbt with `method: connect` against a real Spark Connect server.

The server is Spark's own (org.apache.spark.sql.connect.service.SparkConnectServer from the
installed pyspark, the `session` extra's), with Delta's extension, catalog and jars, in
`local[1]`, bound to 127.0.0.1, in the Thrift suite's server time zone (UTC-11), started by
tests/thrift/server.py as the Thrift Server is (process group, deadline, its log in a failed
test's report). The client is this process's pyspark through its Connect module: no SparkSession
of the JVM kind is used by a connect target.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator

import pytest

from tests.thrift import server as spark_server
from tests.thrift.conftest import pytest_runtest_makereport, serve  # noqa: F401


@pytest.fixture(scope="package")
def thrift_server_process() -> Iterator[spark_server.ThriftServer]:
    # The Thrift suite's name: its test class runs here unchanged (tests/connect/test_connect.py).
    yield from serve(cluster=False, main_class=spark_server.CONNECT_SERVER)


@pytest.fixture(scope="package")
def connect_url(thrift_server_process: spark_server.ThriftServer) -> str:
    return f"sc://{thrift_server_process.host}:{thrift_server_process.port}"


@pytest.fixture(scope="class")
def dbt_profile_target(connect_url: str) -> Dict[str, Any]:
    return {
        "type": "spark_batch_refresh",
        "method": "connect",
        "host": connect_url,
        "threads": 1,
        "connect_retries": 2,
        "connect_timeout": 5,
    }
