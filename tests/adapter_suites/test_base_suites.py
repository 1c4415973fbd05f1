"""dbt-tests-adapter base suites on this adapter (embedded session profile from tests/conftest.py).

They prove that nothing inherited from dbt-spark broke: the plain materializations, seeds, tests,
snapshots and docs still behave as dbt-spark's own suite expects.
"""

from __future__ import annotations

import pytest

from dbt.tests.adapter.basic.test_base import BaseSimpleMaterializations
from dbt.tests.adapter.basic.test_empty import BaseEmpty
from dbt.tests.adapter.basic.test_ephemeral import BaseEphemeral
from dbt.tests.adapter.basic.test_generic_tests import BaseGenericTests
from dbt.tests.adapter.basic.test_incremental import BaseIncremental
from dbt.tests.adapter.basic.test_snapshot_timestamp import BaseSnapshotTimestamp
from dbt.tests.adapter.basic.test_docs_generate import BaseDocsGenerate
from dbt.tests.adapter.basic.expected_catalog import base_expected_catalog
from dbt.tests.util import AnyString


class TestSimpleMaterializations(BaseSimpleMaterializations):
    pass


class TestEmpty(BaseEmpty):
    pass


class TestEphemeral(BaseEphemeral):
    pass


class TestIncremental(BaseIncremental):
    pass


class TestGenericTests(BaseGenericTests):
    pass


# dbt-spark snapshots need Delta (its own suite skips them on a plain session for lack of the
# jars); the embedded session has Delta, so they run here. BaseSnapshotCheckCols exercises the
# same dbt-spark snapshot MERGE with three snapshots instead of one and took 106 s here, so only
# the timestamp strategy is in the suite.
DELTA_SNAPSHOTS = {"seeds": {"+file_format": "delta"}, "snapshots": {"+file_format": "delta"}}


class TestSnapshotTimestamp(BaseSnapshotTimestamp):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"name": "snapshot_strategy_timestamp", **DELTA_SNAPSHOTS}


class AnyStats(dict):
    """Table stats are whatever Spark reports for the table (sizes vary); any dict matches."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, dict)


class TestDocsGenerate(BaseDocsGenerate):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project):
        # Spark's names for the seed's types; owner is the OS user running Spark.
        return base_expected_catalog(
            project,
            role=AnyString(),
            id_type="bigint",
            text_type="string",
            time_type="timestamp",
            view_type="view",
            table_type="table",
            model_stats=AnyStats(),
        )
