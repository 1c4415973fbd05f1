"""Shared fixtures: dbt's test project fixtures on the embedded Spark + Delta session.

One JVM per test process: the first dbt invocation starts the embedded Spark, every later one
(and every helper here) reuses it.
"""

from __future__ import annotations

import os
import tempfile

import pytest

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
        # Small tables, short JVM: C1-only JIT and few partitions (~15% faster statements here).
        "server_side_parameters": {
            "spark.sql.shuffle.partitions": "2",
            "spark.databricks.delta.snapshotPartitions": "1",
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC",
        },
    }
