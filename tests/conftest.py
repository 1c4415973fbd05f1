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
def lean_install(tmp_path_factory):
    """The wheel in a fresh venv without extras (tests/lean_install.py), built once."""
    from tests.lean_install import build

    return build(tmp_path_factory.mktemp("lean-install"))


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


# Heaviest files first (seconds per file under `make test`, 2026-11-24 CI run of 0a1d7f0, before
# tests/thrift35 ran the whole class; the two workers contend for two cores): under
# `make test`'s two workers (`--dist loadfile --no-loadscope-reorder` hands out whole files in
# collection order; xdist's default order is most tests first, which started the 1-test crash
# file with the Thrift file on one worker) a long file started last would run alone at the end
# while the other worker sits idle.
HEAVIEST_FIRST = [
    "tests/thrift/",  # 1382: a standalone cluster, its server, subprocess races
    "tests/crash/",  # 963: five cold-JVM driver processes
    "tests/thrift35/",  # 710 (about 1100 with the whole class): the Spark 3.5 server
    "tests/connect/",  # new: 470 alone (a Spark Connect server, the Thrift class, a lean venv)
    "tests/functional/test_tpch.py",  # new: 468 alone (22 TPC-H models, a backfill, a refresh)
    "tests/functional/test_changes.py",  # 772
    "tests/functional/test_batch_refresh.py",  # 259
    "tests/functional/test_shapes.py",  # 605
    "tests/functional/test_real_sql.py",  # new: about 300 (14 models, 5 runs, round trip)
    "tests/functional/test_delta_aggregates.py",  # 250 alone, 360 beside another suite (new)
    "tests/fuzz/",  # new: about 90-150 (8 random models, 2 change batches)
]


def pytest_collection_modifyitems(config, items):
    def rank(item):
        path = item.nodeid
        return next((i for i, p in enumerate(HEAVIEST_FIRST) if path.startswith(p)),
                    len(HEAVIEST_FIRST))

    items.sort(key=rank)  # stable: the order within a file (stateful classes) is kept
