"""The thrift suite: dbt (in-process and in subprocesses) against a real Spark Thrift Server.

Overrides `dbt_profile_target` for tests/thrift only, so the embedded-session tests collected in
the same pytest process keep their own profile. The server starts once, only when a thrift test
runs, and is stopped when the last one is done.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List

import pytest

from tests.thrift import server as thrift_server


# Package scope: the server is stopped as soon as the thrift tests are done, not held
# through the rest of `make test`.
_running: List[thrift_server.ThriftServer] = []


def serve(**start_args: Any) -> Iterator[thrift_server.ThriftServer]:
    """A server for a package's tests; its logs go into the report of a test that fails."""
    srv = thrift_server.start(**start_args)
    _running.append(srv)
    try:
        yield srv
    finally:
        _running.remove(srv)
        srv.stop()


@pytest.fixture(scope="package")
def thrift_server_process() -> Iterator[thrift_server.ThriftServer]:
    yield from serve()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    """A failed Thrift test carries the logs of the master, workers and server."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and _running:
        report.sections.append(("Spark cluster logs", _running[-1].log_tail(12000)))


@pytest.fixture(scope="class")
def dbt_profile_target(thrift_server_process: thrift_server.ThriftServer) -> Dict[str, Any]:
    return {
        "type": "spark_batch_refresh",
        "method": "thrift",
        "host": thrift_server_process.host,
        "port": thrift_server_process.port,
        "user": "dbt",
        "threads": 1,
        "connect_retries": 2,
        "connect_timeout": 10,
    }
