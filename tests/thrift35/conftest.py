"""The Thrift suite's core against a Spark 3.5 + Delta 3.3 Thrift Server, the line many teams
still run. The server runs `local[1]`: the cluster behaviour is the default suite's
(tests/thrift); here what differs is the server's Spark and Delta, and CI time is paid once.
A package of its own, so its server is not the default cluster's (under `make test`'s two
workers the two may run side by side)."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.thrift import server as thrift_server
from tests.thrift.conftest import dbt_profile_target, pytest_runtest_makereport, serve  # noqa: F401


@pytest.fixture(scope="package")
def thrift_server_process() -> Iterator[thrift_server.ThriftServer]:
    yield from serve(dist=thrift_server.spark35_distribution(), cluster=False)
