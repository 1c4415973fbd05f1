"""Write conflicts on the shared state tables (dbt threads > 1): retried, or the lease is lost."""

from datetime import datetime

import pytest

from dbt.adapters.spark_batch_refresh.storage.state import StateStore, is_conflict, retry_conflicts

CONFLICT = RuntimeError("[DELTA_CONCURRENT_APPEND] ConcurrentAppendException: Files were added")


def test_conflicts_are_retried_other_errors_are_not():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise CONFLICT
        return "ok"

    assert retry_conflicts(flaky) == "ok" and len(calls) == 3
    with pytest.raises(RuntimeError, match="PARSE_SYNTAX_ERROR"):
        retry_conflicts(lambda: (_ for _ in ()).throw(RuntimeError("[PARSE_SYNTAX_ERROR]")))
    assert is_conflict(RuntimeError("[DELTA_PROTOCOL_CHANGED] protocol changed"))
    assert not is_conflict(RuntimeError("[TABLE_OR_VIEW_NOT_FOUND]"))


def _store(merge_outcomes, row_after_conflict):
    outcomes = list(merge_outcomes)

    def fetch(sql):
        if sql.startswith("MERGE"):
            outcome = outcomes.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            return [{"num_affected_rows": outcome}]
        if sql.startswith("SELECT"):
            return row_after_conflict
        return []

    return StateStore("s", fetch, lambda sql: None)


def _lease(store):
    now = datetime(2026, 1, 1)
    return store.take_lease(model_id="m", relation="r", seen=None, run_id="run", holder="h",
                            now=now, until=now, plan={})


def test_lease_conflict_with_another_models_row_is_retried():
    assert _lease(_store([CONFLICT, 1], row_after_conflict=[])) is True


def test_lease_conflict_on_this_models_row_loses():
    other = [{"model_id": "m", "phase": "refreshing", "fingerprint": "", "consumed": None,
              "plan": None, "run_id": "other", "lease_holder": "x", "lease_since": None,
              "lease_until": None, "last_refresh_at": None}]
    assert _lease(_store([CONFLICT, 1], row_after_conflict=other)) is False
