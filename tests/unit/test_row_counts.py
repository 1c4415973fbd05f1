"""Row counts of a refresh: summed over chunks, including chunks an interrupted run committed."""

from __future__ import annotations

from dbt.adapters.spark_batch_refresh.executor import RefreshResult, _count_committed, _count_merge


def test_chunks_add_up_and_committed_chunks_count():
    result = RefreshResult(action="replay", reason="", mode="incremental")
    # chunk 1 was committed by the interrupted run: its counts come from the target history
    _count_committed({"numTargetRowsInserted": "3", "numTargetRowsUpdated": "1",
                      "numTargetRowsDeleted": "0"}, result)
    # chunks 2 and 3 are merged by the resumed run
    _count_merge([{"num_inserted_rows": 2, "num_updated_rows": 0, "num_deleted_rows": 4}], result)
    _count_merge([{"num_inserted_rows": 1, "num_updated_rows": 5, "num_deleted_rows": 0}], result)
    assert (result.rows_inserted, result.rows_updated, result.rows_deleted) == (6, 6, 4)


def test_backfill_commit_and_unreadable_metrics():
    result = RefreshResult(action="backfill", reason="", mode="full")
    _count_committed({"numOutputRows": "29"}, result)
    _count_committed("{numOutputRows -> 29}", result)  # rendered as text: left alone
    _count_committed(None, result)
    assert result.rows_inserted == 29
