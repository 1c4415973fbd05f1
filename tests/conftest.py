"""Shared fixtures: dbt's test project fixtures on the embedded Spark + Delta session.

One JVM per test process: the first dbt invocation starts the embedded Spark, every later one
(and every helper here) reuses it.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests.spark_confs import TEST_SPARK_CONFS

# The suite tests what each strategy writes, on tables a few rows big, where refresh_mode='auto'
# would choose by measured seconds (plan/cost.py): timing must not decide what a test exercises.
# Structural: replay whenever the model can, recompute in full otherwise. The tests of the
# choice itself (tests/functional/test_strategies.py) unset it.
os.environ.setdefault("BATCH_REFRESH_AUTO", "structural")

pytest_plugins = ["dbt.tests.fixtures.project"]

# One warehouse + metastore for the whole test process, outside the repository.
SESSION_DIR = os.environ.get("BATCH_REFRESH_TEST_SESSION_DIR") or tempfile.mkdtemp(
    prefix="batch-refresh-tests-"
)


def pytest_sessionfinish(session, exitstatus):
    """A warehouse this process made is removed with it (one given by the variable is kept)."""
    if not os.environ.get("BATCH_REFRESH_TEST_SESSION_DIR"):
        shutil.rmtree(SESSION_DIR, ignore_errors=True)


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
def lean_install(tmp_path_factory, worker_id):
    """The wheel in a fresh venv without extras (tests/lean_install.py), built once for the
    whole `make test`: the Thrift file and the packaging file run on different workers, and
    each built its own venv (~40 s)."""
    from tests.lean_install import build_shared

    base = tmp_path_factory.getbasetemp()
    return build_shared(base.parent if worker_id != "master" else base)


@pytest.fixture(scope="module", autouse=True)
def _fresh_adapter_registry():
    """Each test file starts with no adapter registered. A test that runs dbt through
    dbtRunner (tests/thrift's two targets in one process) leaves its last adapter registered,
    and dbt's factory keeps the first adapter of a type: the next file's `project` fixture then
    got that adapter, with its profile (the embedded session where a Spark Connect profile was
    written), when the two files ran on one xdist worker."""
    from dbt.adapters.factory import reset_adapters

    reset_adapters()
    yield


# Heaviest files first (seconds per file under `make test`, the junit report of the 2026-11-29
# run of 9f67b14, two workers contending for two cores; the VACUUM listing fix after it,
# tests/spark_confs.py, takes ~100 s off each file marked *): under `make test`'s two workers
# (`--dist loadfile --no-loadscope-reorder` hands out whole files in collection order; xdist's
# default order is most tests first, which started the 1-test crash file with the Thrift file
# on one worker) a long file started last would run alone at the end while the other worker
# sits idle.
HEAVIEST_FIRST = [
    "tests/thrift/",  # 1104*: a standalone cluster, its server, subprocess races
    "tests/crash/",  # 749: five cold-JVM driver processes
    "tests/thrift35/",  # 637*: the Spark 3.5 server
    "tests/connect/",  # 777*: a Spark Connect server, the Thrift class, a lean venv's demo
    "tests/functional/test_tpch.py",  # 652: 22 TPC-H models, a backfill, a refresh
    "tests/functional/test_changes.py",  # 585 (three VACUUMs; 390 after the fix, 458b0a0)
    "tests/functional/test_batch_refresh.py",  # 191
    "tests/functional/test_shapes.py",  # 585
    "tests/functional/test_real_sql.py",  # 390
    "tests/functional/test_delta_aggregates.py",  # 474
    "tests/fuzz/",  # 266 (8 random models, 2 change batches)
]


def pytest_collection_modifyitems(config, items):
    def rank(item):
        path = item.nodeid
        return next((i for i, p in enumerate(HEAVIEST_FIRST) if path.startswith(p)),
                    len(HEAVIEST_FIRST))

    items.sort(key=rank)  # stable: the order within a file (stateful classes) is kept
