"""The history row is an idempotent append: Delta skips a repeated (app id, version)."""

from __future__ import annotations

from typing import List

from dbt.adapters.spark_batch_refresh.state import StateStore


def test_history_row_is_an_idempotent_insert_with_confs_reset():
    log: List[str] = []
    StateStore("s", lambda sql: [], log.append).record({"run_id": "plan1", "model_id": "model.p.m"})
    assert log[0] == "SET spark.databricks.delta.write.txnAppId=batch_refresh_history:model.p.m:plan1"
    assert log[1] == "SET spark.databricks.delta.write.txnVersion=1"
    assert log[2].startswith("INSERT INTO s.batch_refresh_history (run_id, model_id, ")
    assert log[3:] == ["RESET spark.databricks.delta.write.txnAppId",
                       "RESET spark.databricks.delta.write.txnVersion"]


def test_confs_are_reset_when_the_insert_fails():
    log: List[str] = []

    def run(sql: str) -> None:
        log.append(sql)
        if sql.startswith("INSERT"):
            raise RuntimeError("boom")

    try:
        StateStore("s", lambda sql: [], run).record({"run_id": "p", "model_id": "m"})
    except RuntimeError:
        pass
    assert [s for s in log if s.startswith("RESET")] == [
        "RESET spark.databricks.delta.write.txnAppId", "RESET spark.databricks.delta.write.txnVersion"]


def _row(model_id: str) -> dict:
    return {"model_id": model_id, "phase": "idle", "fingerprint": "f", "consumed": None,
            "plan": None, "run_id": "r", "lease_holder": None, "lease_since": None,
            "lease_until": None, "last_refresh_at": None}


def test_one_state_read_per_invocation():
    reads: List[str] = []

    def fetch(sql: str) -> list:
        reads.append(sql)
        return [_row("model.p.a"), _row("model.p.b")]

    store = StateStore("s", fetch, lambda sql: None)
    a, fresh_a = store.read_planned("model.p.a", "inv1")
    b, fresh_b = store.read_planned("model.p.b", "inv1")
    missing, _ = store.read_planned("model.p.new", "inv1")
    assert (a.model_id, fresh_a, b.model_id, fresh_b, missing) == ("model.p.a", True, "model.p.b", False, None)
    assert reads == ["SELECT * FROM s.batch_refresh_state"]
    _, fresh_next = store.read_planned("model.p.a", "inv2")  # a new dbt invocation reads again
    assert fresh_next and len(reads) == 2
