"""Shared fixtures: dbt's test project fixtures on the embedded Spark + Delta session.

One JVM per test process: the first dbt invocation starts the embedded Spark, every later one
(and every helper here) reuses it.
"""

from __future__ import annotations

import os
import tempfile

import pytest

from tests.spark_confs import TEST_SPARK_CONFS

pytest_plugins = ["dbt.tests.fixtures.project"]

# One warehouse + metastore for the whole test process, outside the repository.
SESSION_DIR = os.environ.get("BATCH_REFRESH_TEST_SESSION_DIR") or tempfile.mkdtemp(
    prefix="batch-refresh-tests-"
)


@pytest.fixture(scope="class")
def dbt_profile_target():
    return {
        "type": "spark_batch_refresh",
        "method": "session",
        "host": "localhost",
        "threads": 1,
        "session_dir": SESSION_DIR,
        "server_side_parameters": dict(TEST_SPARK_CONFS),
    }


@pytest.fixture(scope="session")
def lean_install(tmp_path_factory):
    """The wheel in a fresh venv without extras (tests/lean_install.py), built once."""
    from tests.lean_install import build

    return build(tmp_path_factory.mktemp("lean-install"))
