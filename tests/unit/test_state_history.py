"""The invocation's state and history write: one INSERT and one INSERT OVERWRITE, whatever the model count."""

from __future__ import annotations

from datetime import datetime
from typing import List

from dbt.adapters.spark_batch_refresh.storage import endpoint
from dbt.adapters.spark_batch_refresh.storage.commit_log import RefreshCommit
from dbt.adapters.spark_batch_refresh.plan.planner import UpstreamPoint
from dbt.adapters.spark_batch_refresh.engine.record import Outcome, Recorder, history_row, state_values
from dbt.adapters.spark_batch_refresh.storage.state import StateStore

T = datetime(2030, 1, 1, 12, 0, 0)


def _rows(sql: str) -> int:
    """The rows of the statement's one inline table (VALUES list)."""
    assert sql.count("FROM VALUES") == 1 and "UNION ALL" not in sql
    return sql.count("\n(")


def _commit(model: str, refresh: int = 2) -> RefreshCommit:
    return RefreshCommit(
        model_id=model, refresh=refresh, plan_id=f"p{refresh}", run_id=f"p{refresh}",
        action="replay", mode="incremental", reason="upstream moved", fingerprint="f",
        columns="c", pinned={"s.t": UpstreamPoint(5, T)}, consumed={"s.t": UpstreamPoint(3, T)},
        version=7, timestamp=T, metrics={"numTargetRowsInserted": "2", "numTargetRowsUpdated": "1"})


def test_one_state_commit_and_one_history_commit_for_many_models():
    recorder = Recorder()
    ran: List[str] = []
    StateStore._ensured.add((endpoint.current(), "s"))  # the DDL is tested on Spark; here only the writes
    for model in ("model.p.a", "model.p.b", "model.p.c"):
        commit = _commit(model)
        recorder.add(Outcome("s", model, f"x.{model}", T, commit=commit,
                             history=history_row(commit, None, T, T),
                             previous=history_row(_commit(model, 1), None, T, T), previous_refresh=1))
    recorder.add(Outcome("s", "model.p.d", "x.d", T, error="boom"))
    recorder.flush(lambda sql: [], ran.append)  # no state rows yet: every previous is offered
    # history first: a state row that records a refresh implies its history row was written
    assert [" ".join(s.split()[:2]) for s in ran] == ["INSERT INTO", "INSERT OVERWRITE"]
    insert, state = ran
    assert _rows(state) == 4  # four models, one statement
    assert "FULL OUTER JOIN" in state  # the whole (one row per model) table rewritten
    assert "WHEN NOT s.ok THEN s.last_outcome" in state  # a failure records its outcome only
    assert "s.refresh >= t.refresh" in state  # an older refresh never overwrites a newer one
    # history: the new and the previous refresh of each model, each written only if missing
    assert _rows(insert) == 6
    assert "WHERE NOT EXISTS (SELECT 1 FROM s.batch_refresh_history h" in insert
    assert not recorder.pending()


def test_an_up_to_date_state_row_makes_the_history_write_a_blind_append():
    recorder = Recorder()
    ran: List[str] = []
    StateStore._ensured.add((endpoint.current(), "s"))
    commit = _commit("model.p.a", 3)
    recorder.add(Outcome("s", "model.p.a", "x.a", T, commit=commit,
                         history=history_row(commit, None, T, T),
                         previous=history_row(_commit("model.p.a", 2), None, T, T), previous_refresh=2))
    recorder.flush(lambda sql: [{"model_id": "model.p.a", "refresh": 2}], ran.append)
    insert, state = ran
    assert "NOT EXISTS" not in insert and _rows(insert) == 1  # refresh 3 alone, no read
    assert "(CAST('p3' AS STRING), CAST('model.p.a' AS STRING)" in insert


def test_state_values_come_from_the_commit():
    values = state_values(Outcome("s", "m", "x.m", T, commit=_commit("m")))
    assert values["consumed"] == '{"s.t": {"version": 5, "timestamp": "2030-01-01T12:00:00"}}'
    assert (values["target_version"], values["refresh"], values["ok"]) == (7, 2, True)
    failed = state_values(Outcome("s", "m", "x.m", T, error="bad key"))
    assert failed["ok"] is False and failed["last_outcome"] == "error: bad key"


def test_history_row_from_a_commit_alone():
    row = history_row(_commit("m"), None, T, T, "recorded from the target's log")
    assert (row["rows_inserted"], row["rows_updated"], row["rows_deleted"]) == (2, 1, 0)
    assert row["versions_from"] == '{"s.t": 3}' and row["versions_to"] == '{"s.t": 5}'
    assert row["run_id"] == "p2"


def test_refreshes_lost_to_consecutive_kills_are_recovered_from_the_log():
    recorder = Recorder()
    """The state row says refresh 2; this run made refresh 5 and re-offers 4 (previous): the
    log's refresh 3, which no state write saw, is recorded from the target's history."""
    ran: List[str] = []
    log = [{"version": 10 - r, "userMetadata": _commit("model.p.a", r).to_metadata(),
            "timestamp": T, "operationMetrics": {}} for r in (5, 4, 3, 2)]

    def fetch(sql: str):
        if sql.startswith("SELECT model_id, refresh"):
            return [{"model_id": "model.p.a", "refresh": 2}, {"model_id": "model.p.b", "refresh": 4}]
        assert sql == "DESCRIBE HISTORY x.a LIMIT 50", sql  # only the model that lags
        return log

    for model, relation in (("model.p.a", "x.a"), ("model.p.b", "x.b")):
        recorder.add(Outcome("s", model, relation, T, commit=_commit(model, 5),
                             history=history_row(_commit(model, 5), None, T, T),
                             previous=history_row(_commit(model, 4), None, T, T), previous_refresh=4))
    recorder.flush(fetch, ran.append)
    insert = ran[0]
    # a: 3, 4, 5 (its 4 found in the log and offered as previous, kept once); b: 5 (its state
    # row records 4, so 4's history row is there)
    assert _rows(insert) == 4
    assert "(CAST('p3' AS STRING), CAST('model.p.a' AS STRING)" in insert and "'p2'" not in insert
    assert "WHERE NOT EXISTS" in insert


def _reconcile(model: str, refresh: int) -> Outcome:
    """What a refresh with nothing to write offers: the target's newest refresh (executor)."""
    commit = _commit(model, refresh)
    return Outcome("r", model, "x.a", T, commit=commit, reconcile=True,
                   previous=history_row(commit, None, T, T, "recorded from the target's log"),
                   previous_refresh=refresh)


def test_nothing_to_do_and_a_state_row_in_step_writes_nothing():
    recorder = Recorder()
    read: List[str] = []
    ran: List[str] = []
    recorder.add(_reconcile("model.p.a", 3))

    def fetch(sql: str):
        read.append(sql)
        return [{"model_id": "model.p.a", "refresh": 3}]

    recorder.flush(fetch, ran.append)
    assert ran == [] and len(read) == 1  # one read, no DDL, no write
    assert read[0].startswith("SELECT model_id, refresh FROM r.batch_refresh_state")


def test_nothing_to_do_records_a_refresh_whose_state_write_was_lost():
    """Refresh 3 committed and its run died before the state write; this run had nothing to
    do: it writes the row and re-offers 3's history row (only if missing)."""
    recorder = Recorder()
    ran: List[str] = []
    StateStore._ensured.add((endpoint.current(), "r"))
    recorder.add(_reconcile("model.p.a", 3))
    recorder.add(_reconcile("model.p.b", 4))  # in step: left out of both writes
    rows = [{"model_id": "model.p.a", "refresh": 2}, {"model_id": "model.p.b", "refresh": 4}]
    recorder.flush(lambda sql: rows, ran.append)
    insert, state = ran
    assert _rows(insert) == 1 and "WHERE NOT EXISTS" in insert and "'p3'" in insert
    assert _rows(state) == 1 and "'model.p.a'" in state and "'model.p.b'" not in state


def test_nothing_to_do_without_a_state_table_creates_it():
    from dbt_common.exceptions import DbtRuntimeError

    recorder = Recorder()
    ran: List[str] = []
    StateStore._ensured.discard((endpoint.current(), "r"))
    recorder.add(_reconcile("model.p.a", 1))
    reads: List[str] = []

    def fetch(sql: str):
        reads.append(sql)
        if sql.startswith("SELECT model_id") and len(reads) == 1:
            raise DbtRuntimeError("TABLE_OR_VIEW_NOT_FOUND")
        return []

    recorder.flush(fetch, ran.append)
    assert any(s.startswith("CREATE TABLE IF NOT EXISTS r.batch_refresh_state") for s in ran)
    assert ran[-1].startswith("INSERT OVERWRITE r.batch_refresh_state")
