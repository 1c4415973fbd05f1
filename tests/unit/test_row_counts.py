"""Row counts of a refresh: summed over chunks, including chunks an interrupted run committed."""

from __future__ import annotations

from dbt.adapters.spark_batch_refresh.engine.apply import count_committed, merge_counts
from dbt.adapters.spark_batch_refresh.engine.run_result import RefreshResult


def _add(result: RefreshResult, counts: dict) -> None:
    for name, value in counts.items():
        setattr(result, name, getattr(result, name) + value)


def test_chunks_add_up_and_committed_chunks_count():
    result = RefreshResult(action="replay", reason="", mode="incremental")
    # chunk 1 was committed by the interrupted run: its counts come from the target history
    count_committed({"numTargetRowsInserted": "3", "numTargetRowsUpdated": "1",
                     "numTargetRowsDeleted": "0"}, result)
    # chunks 2 and 3 are merged by the resumed run
    _add(result, merge_counts([{"num_inserted_rows": 2, "num_updated_rows": 0, "num_deleted_rows": 4}]))
    _add(result, merge_counts([{"num_inserted_rows": 1, "num_updated_rows": 5, "num_deleted_rows": 0}]))
    assert (result.rows_inserted, result.rows_updated, result.rows_deleted) == (6, 6, 4)


def test_backfill_commit_metrics_as_a_map_or_as_text():
    result = RefreshResult(action="backfill", reason="", mode="full")
    count_committed({"numOutputRows": "29"}, result)
    count_committed('{"numOutputRows":"29","numFiles":"1"}', result)  # Thrift's text form
    count_committed(None, result)
    count_committed("{numOutputRows -> x}", result)  # unreadable: nothing counted
    assert result.rows_inserted == 58
