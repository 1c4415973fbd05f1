"""The refresh commit's metadata round-trips through DESCRIBE HISTORY, and the log is read right."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime

from dbt.adapters.spark_batch_refresh.storage.commit_log import (
    TXN_STRIDE, RefreshCommit, TargetLog, columns_hash, txn_version)
from dbt.adapters.spark_batch_refresh.plan.planner import UpstreamPoint

T = datetime(2030, 1, 1)
COMMIT = RefreshCommit(
    model_id="model.p.m", refresh=3, plan_id="abc", run_id="abc", action="replay",
    mode="incremental", reason="upstream moved: `s`.`t` v1->v2; odd 'text'", fingerprint="fp",
    columns=columns_hash([("id", "int")]), pinned={"s.t": UpstreamPoint(2, T, "tid")},
    consumed={"s.t": UpstreamPoint(1, T, "tid")}, chunk=1, chunks=1, staged_rows=4)


def _entry(meta: str, version: int, op: str = "MERGE") -> dict:
    return {"version": version, "timestamp": T, "operation": op, "userMetadata": meta,
            "operationMetrics": {"numTargetRowsInserted": "1"}}


def test_metadata_is_safe_for_set_and_round_trips():
    meta = COMMIT.to_metadata()
    assert ";" not in meta and "`" not in meta  # SET cannot take them unquoted
    back = RefreshCommit.from_history(_entry(meta, 9), "model.p.m")
    assert back is not None and back.reason == COMMIT.reason
    assert back.pinned == COMMIT.pinned and back.consumed == COMMIT.consumed
    assert (back.version, back.refresh, back.complete) == (9, 3, True)
    assert RefreshCommit.from_history(_entry(meta, 9), "model.p.other") is None


def test_commit_metrics_read_as_text_over_thrift():
    """Thrift renders DESCRIBE HISTORY's map columns as JSON text: a rewrite's rows (its
    history row, its cost memory) are read from it (tests/unit/test_row_counts.py: the counts
    of a write straight from the model)."""
    entry = dict(_entry(COMMIT.to_metadata(), 9, "CREATE OR REPLACE TABLE AS SELECT"),
                 operationMetrics='{"numFiles":"1","numOutputRows":"6","numOutputBytes":"1024"}')
    back = RefreshCommit.from_history(entry, "model.p.m")
    assert back is not None and back.output_rows() == 6


def test_first_commit_of_the_next_refresh_outnumbers_every_chunk():
    assert txn_version(4, 1) > txn_version(3, TXN_STRIDE)
    assert COMMIT.for_chunk(1, 3).txn_version == COMMIT.txn_version  # chunk 1 == single commit
    assert not COMMIT.for_chunk(2, 3).complete and COMMIT.for_chunk(3, 3).complete


def test_target_log_skips_maintenance_and_names_outside_writes():
    ours = COMMIT.to_metadata()
    log = TargetLog.from_history([_entry(None, 12, "OPTIMIZE"), _entry(ours, 11)], "model.p.m")
    assert log.last is not None and log.outside is None and log.head_version == 12
    log = TargetLog.from_history([_entry(None, 12, "OPTIMIZE"), _entry(None, 11, "WRITE"),
                                  _entry(ours, 10)], "model.p.m")
    assert log.last is not None and log.outside == "v11: WRITE"
    old_format = json.dumps({"batch_refresh_plan": "x", "chunk": 1, "chunks": 1})
    assert TargetLog.from_history([_entry(old_format, 3)], "model.p.m").last is None


def test_the_refresh_records_its_own_commit_not_the_newest():
    """Issue 19.5: an outside commit landing between the refresh's write and its read of the
    log is not taken as the refresh's own (its version, and so the state row's, is the one the
    plan id is found at)."""
    from dbt.adapters.spark_batch_refresh.engine.apply import Applier
    from dbt.adapters.spark_batch_refresh.storage.delta import DeltaReader
    from dbt.adapters.spark_batch_refresh.engine.run_result import RefreshRequest

    log = [_entry(None, 8, "WRITE"), _entry(COMMIT.to_metadata(), 7)]  # newest first
    fetch = lambda sql: log if sql.startswith("DESCRIBE HISTORY") else []  # noqa: E731
    req = RefreshRequest(model="m", model_id="model.p.m", target="s.m", sql="select 1",
                         raw_config={}, target_options="", target_kind="delta",
                         state_schema="s_br", full_refresh=False, force=False)
    landed = Applier(fetch, lambda sql: None, DeltaReader(fetch))._landed(req, COMMIT, None)
    assert (landed.version, landed.plan_id) == (7, "abc")
    # ... and the next run sees the outside write on top of it
    assert TargetLog.from_history(log, "model.p.m").outside == "v8: WRITE"


def test_a_recreated_upstream_is_told_from_its_history_without_a_snapshot_read() -> None:
    """The consumed version's commit time decides: the same time is the same table, another
    time a table dropped and created again; a commit gone from the log (or too many since)
    cannot tell, and the caller falls back to DESCRIBE DETAIL."""
    from datetime import datetime

    from dbt.adapters.spark_batch_refresh.storage.delta import HISTORY_SPAN_MAX, DeltaReader
    from dbt.adapters.spark_batch_refresh.plan.planner import UpstreamPoint

    consumed = UpstreamPoint(3, datetime(2026, 11, 24, 4, 0, 0, 123000))
    log = {3: "2026-11-24 04:00:00.123", 4: "2026-11-24 04:05:00", 5: "2026-11-24 04:06:00"}
    asked = []

    def fetch(sql: str):
        asked.append(sql)
        limit = int(sql.rsplit(" ", 1)[1])
        newest = max(log)
        return [{"version": v, "timestamp": log[v]} for v in range(newest, newest - limit, -1)
                if v in log]

    reader = DeltaReader(fetch)
    assert reader.same_table("s.t", consumed, 5) is True
    assert asked == ["DESCRIBE HISTORY `s`.`t` LIMIT 3"]  # from the consumed version on
    log[3] = "2026-11-24 04:07:00"  # dropped and created again, with more commits than before
    assert reader.same_table("s.t", consumed, 5) is False
    del log[3]  # that commit left the log
    assert reader.same_table("s.t", consumed, 5) is None
    asked.clear()
    assert reader.same_table("s.t", consumed, 3 + HISTORY_SPAN_MAX) is None
    assert asked == []  # too long a history to read: the caller reads the table's details


def test_one_history_read_per_moved_upstream() -> None:
    """The latest point is read with the upstream's newest commits: a replay over fewer than
    HISTORY_WINDOW commits checks the consumed one from those rows, without a second read; a
    longer span reads back to the consumed version."""
    from datetime import datetime

    from dbt.adapters.spark_batch_refresh.storage.delta import HISTORY_WINDOW, DeltaReader
    from dbt.adapters.spark_batch_refresh.plan.planner import UpstreamPoint

    stamp = "2026-11-24 04:00:00"
    newest = 7
    asked = []

    def fetch(sql: str):
        asked.append(sql)
        limit = int(sql.rsplit(" ", 1)[1])
        return [{"version": v, "timestamp": stamp} for v in range(newest, max(newest - limit, -1), -1)]

    reader = DeltaReader(fetch)
    latest = reader.latest_point("s.t")
    assert latest is not None and latest.version == 7
    assert reader.same_table("s.t", UpstreamPoint(3, datetime(2026, 11, 24, 4)), 7) is True
    assert asked == [f"DESCRIBE HISTORY `s`.`t` LIMIT {HISTORY_WINDOW}"]
    newest = HISTORY_WINDOW + 10
    asked.clear()
    reader = DeltaReader(fetch)  # a new invocation: its histories are read afresh
    latest = reader.latest_point("s.t")
    assert reader.same_table("s.t", UpstreamPoint(3, datetime(2026, 11, 24, 4)), newest) is True
    assert asked[1] == f"DESCRIBE HISTORY `s`.`t` LIMIT {newest - 3 + 1}"


def test_a_time_delta_may_have_shifted_is_read_again_where_it_is_exact() -> None:
    """Delta's history moves a commit not later than the one before it to that time + 1 ms,
    within the window it reads (never the window's oldest row): such a time is read again
    where it is the oldest row, so recorded and compared times are the ones Delta stored."""
    from dbt.adapters.spark_batch_refresh.storage.delta import HISTORY_WINDOW, DeltaReader, raw_time
    from dbt.adapters.spark_batch_refresh.plan.planner import UpstreamPoint
    from datetime import datetime

    rows = [{"version": 5, "timestamp": "2026-11-24 04:00:00.002"},
            {"version": 4, "timestamp": "2026-11-24 04:00:00.001"},
            {"version": 3, "timestamp": "2026-11-24 04:00:00"}]
    assert raw_time(rows, 0) is None and raw_time(rows, 1) is None  # 1 ms after the one before
    assert raw_time(rows, 2) == datetime(2026, 11, 24, 4)  # the oldest row is never moved
    asked = []

    def fetch(sql: str):
        asked.append(sql)
        limit = int(sql.rsplit(" ", 1)[1])
        return rows[:limit]

    reader = DeltaReader(fetch)
    latest = reader.latest_point("s.t")
    assert latest == UpstreamPoint(5, datetime(2026, 11, 24, 4, 0, 0, 2000))
    assert asked == [f"DESCRIBE HISTORY `s`.`t` LIMIT {HISTORY_WINDOW}", "DESCRIBE HISTORY `s`.`t` LIMIT 1"]
    asked.clear()
    assert reader.same_table("s.t", UpstreamPoint(4, datetime(2026, 11, 24, 4, 0, 0, 1000)), 5)
    assert asked == ["DESCRIBE HISTORY `s`.`t` LIMIT 2"]  # read again from v4 on
    asked.clear()
    assert reader.same_table("s.t", UpstreamPoint(3, datetime(2026, 11, 24, 4)), 5)
    assert asked == []  # the window's oldest row


def test_histories_are_shared_until_dbt_may_have_written() -> None:
    """Readers of one invocation share an upstream's history; a statement of dbt's that may
    write (a hook, another materialization) forgets it; read-only ones do not."""
    from dbt.adapters.spark_batch_refresh.storage.delta import DeltaReader, SharedHistories

    asked = []

    def fetch(sql: str):
        asked.append(sql)
        return [{"version": 4, "timestamp": "2026-11-24 04:00:00"}]

    shared = SharedHistories()
    assert DeltaReader(fetch, shared).latest_point("s.t").version == 4
    assert DeltaReader(fetch, shared).latest_point("S.T").version == 4  # another model
    assert len(asked) == 1
    DeltaReader(fetch, shared).read_after_commit("`s`.`u`")  # a refresh's own target
    DeltaReader(fetch, shared).latest_point("s.u")  # its child plans from that read
    assert len(asked) == 2
    for read_only in ("select 1", "/* dbt */ show tables", "\n  describe s.t", "SET a=b",
                      "with x as (select * from s.t) select count(*) from x"):
        shared.saw(read_only)
        DeltaReader(fetch, shared).latest_point("s.t")
    assert len(asked) == 2
    for writing in ("insert into s.t values (1)", "/* {} */ merge into s.t using x on true "
                    "when matched then delete", "with x as (select 1) insert into s.t select * "
                    "from x", "-- c\ncreate or replace table `spark_catalog`.`s`.`t` as select 1",
                    "optimize s.t", "call s.proc()", "alter table s.t change column a comment 'x'"):
        shared.saw(writing)
        DeltaReader(fetch, shared).latest_point("s.t")
    assert len(asked) == 9
    # A write that names other tables (a `table` model, a view model) leaves s.t's read.
    for other in ("create or replace table s.tbl using delta as select * from s.t",
                  "insert overwrite s.w select * from s.t", "drop view if exists s.v",
                  "/* dbt */ create or replace view s.v as select * from s.t"):
        shared.saw(other)
        DeltaReader(fetch, shared).latest_point("s.t")
    assert len(asked) == 9


def test_table_details_are_shared_like_histories() -> None:
    """A backfill reads each upstream's DESCRIBE DETAIL: once per invocation, forgotten when
    dbt may have written the table or a refresh wrote it (its read after the commit)."""
    from dbt.adapters.spark_batch_refresh.storage.delta import DeltaReader, SharedHistories

    asked = []

    def fetch(sql: str):
        asked.append(sql)
        return [{"id": f"id{len(asked)}", "properties": {"delta.enableChangeDataFeed": "true"}}]

    shared = SharedHistories()
    first = DeltaReader(fetch, shared).details(["s.t", "s.u"])
    assert DeltaReader(fetch, shared).details(["S.T"])["S.T"] == first["s.t"]  # another model
    assert len(asked) == 2 and first["s.t"] == ("id1", {"delta.enableChangeDataFeed": "true"})
    shared.saw("select * from s.t")
    shared.saw("create or replace table s.other as select 1")
    DeltaReader(fetch, shared).details(["s.t"])
    assert len(asked) == 2
    shared.saw("create or replace table s.t as select 1")  # a `table` model rebuilt it
    assert DeltaReader(fetch, shared).details(["s.t"])["s.t"][0] == "id3"
    DeltaReader(fetch, shared).details(["s.u"])
    assert len(asked) == 3
    DeltaReader(lambda sql: [], shared).read_after_commit("`s`.`u`")  # a refresh wrote it
    assert DeltaReader(fetch, shared).details(["s.u"])["s.u"][0] == "id4"
    shared.clear()  # the invocation ended
    DeltaReader(fetch, shared).details(["s.t", "s.u"])
    assert len(asked) == 6


def test_a_proved_key_is_recorded_for_the_models_downstream():
    """recorded_key: the key of the refresh commit that made a version's rows; nothing where
    the history read does not show that commit, or a write no refresh made came after it, or
    the refresh was a chunk of several."""
    from dbt.adapters.spark_batch_refresh.storage.commit_log import recorded_key
    keyed = replace(COMMIT, key=("customer_id",))
    assert RefreshCommit.from_history(_entry(keyed.to_metadata(), 9), "model.p.m").key == (
        "customer_id",)
    assert RefreshCommit.from_history(_entry(COMMIT.to_metadata(), 9), "model.p.m").key == ()
    ours = keyed.to_metadata()
    history = [_entry(None, 12, "OPTIMIZE"), _entry(ours, 11), _entry(None, 10, "WRITE"),
               _entry(ours, 9)]
    assert recorded_key(history, 12) == ("customer_id",)  # maintenance since the refresh
    assert recorded_key(history, 11) == ("customer_id",)
    assert recorded_key(history, 10) == ()  # an outside write made it
    assert recorded_key(history, 9) == ("customer_id",)
    assert recorded_key(history, 8) == ()  # not in the history read
    assert recorded_key(history, 13) == ()
    assert recorded_key([_entry(None, 12, "OPTIMIZE"), _entry(ours, 10)], 12) == ()  # gap
    assert recorded_key([_entry(keyed.for_chunk(1, 2).to_metadata(), 5)], 5) == ()
    assert recorded_key([_entry(keyed.for_chunk(2, 2).to_metadata(), 6)], 6) == (
        "customer_id",)
    assert recorded_key([_entry(COMMIT.to_metadata(), 5)], 5) == ()  # none recorded


def test_an_upstream_key_serves_only_where_both_versions_record_it():
    """DeltaReader.proven_keys: the key at the version pinned and at the one consumed, from
    the history latest_point read (no other statement)."""
    from dbt.adapters.spark_batch_refresh.storage.delta import DeltaReader
    keyed = replace(COMMIT, key=("customer_id",)).to_metadata()
    history = [_entry(keyed, 7), _entry(COMMIT.to_metadata(), 6), _entry(keyed, 5)]
    statements = []

    def fetch(sql):
        statements.append(sql)
        return history

    reader = DeltaReader(fetch)
    latest = {"s.up": reader.latest_point("s.up"), "s.src": None}
    assert latest["s.up"].version == 7 and len(statements) == 1
    assert reader.proven_keys(["s.up", "s.src"], {}, latest) == {"s.up": ("customer_id",)}
    assert reader.proven_keys(["s.up"], {"s.up": 7}, latest) == {"s.up": ("customer_id",)}
    assert reader.proven_keys(["s.up"], {"s.up": 5}, latest) == {"s.up": ("customer_id",)}
    assert reader.proven_keys(["s.up"], {"s.up": 6}, latest) == {}  # keyless then
    assert reader.proven_keys(["s.up"], {"s.up": 2}, latest) == {}  # not read
    assert len(statements) == 1


def test_the_upstream_keys_a_key_went_through_round_trip():
    """RefreshCommit.through: what an interrupted refresh resumes with."""
    through = replace(COMMIT, key=("id",), through={"s.up": ("id",), "s.b": ("x", "y")})
    back = RefreshCommit.from_history(_entry(through.to_metadata(), 9), "model.p.m")
    assert back.through == {"s.up": ("id",), "s.b": ("x", "y")}
    assert back.for_chunk(2, 3).through == back.through
    assert RefreshCommit.from_history(_entry(COMMIT.to_metadata(), 9), "model.p.m").through == {}
