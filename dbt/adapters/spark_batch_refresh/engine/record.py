"""The refresh-state and history rows of one dbt invocation, written once at its end.

A refresh's own record is its target commit (commit_log.py); the state and history tables are
what users, `batch_refresh_status` and `dbt docs` read. Writing them per model would cost two
commits per refresh, so each refresh leaves its rows here and the adapter writes them all in
one history INSERT and one state write (an INSERT OVERWRITE of the state table, one row per
model) when the invocation ends. A process that dies before
then loses nothing: the model's next run writes its state row from the target's log and offers
the history row of the refresh it started from again (a run with nothing to write offers the
target's newest refresh, written only where the row lags it).

History is written before state, so a state row that records refresh n means refresh n's
history row was written. That makes the common write a blind append (no read of the history
table): only when a state row lags behind the refresh a run started from (a run died before or
during its write) are the re-offered rows inserted with a check that they are missing.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, List, Optional

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_batch_refresh.storage.commit_log import RefreshCommit
from dbt.adapters.spark_batch_refresh.storage.delta import LOG_LOOKBACK, DeltaReader
from dbt.adapters.spark_batch_refresh.failpoints import fail_point
from dbt.adapters.spark_batch_refresh.engine.run_result import Fetch, RefreshResult, Run
from dbt.adapters.spark_batch_refresh.storage.state import StateStore, points_json

logger = AdapterLogger("SparkBatchRefresh")


@dataclass(frozen=True)
class Outcome:
    """What one refresh leaves for the invocation's state and history write."""

    state_schema: str
    model_id: str
    relation: str
    now: datetime
    commit: Optional[RefreshCommit] = None  # the refresh's last commit, as the log has it
    history: Optional[Dict[str, Any]] = None
    previous: Optional[Dict[str, Any]] = None  # the refresh it started from (reconciliation)
    previous_refresh: int = 0  # that refresh's number
    error: Optional[str] = None
    sql: Optional[str] = None  # the compiled model SQL the refresh ran (for verify.py)
    # Nothing was written: `commit` is the target's newest refresh, written only where the
    # state row lags it (Refresher._reconcile).
    reconcile: bool = False


def history_row(commit: RefreshCommit, result: Optional[RefreshResult], started: datetime,
                finished: datetime, message: str = "") -> Dict[str, Any]:
    """A history row: from a run's result, or (result None) from a commit's metadata alone."""
    metrics = commit.metrics or {}

    def metric(*names: str) -> int:
        for name in names:
            try:
                if metrics.get(name):
                    return int(metrics[name])
            except (TypeError, ValueError):
                pass
        return 0
    reason = commit.reason + (f"; fallback: {commit.fallback_reason}" if commit.fallback_reason else "")
    return {
        "run_id": commit.plan_id, "model_id": commit.model_id, "action": commit.action,
        "mode": commit.mode, "strategy": commit.strategy.value, "reason": reason,
        "versions_from": json.dumps({u: p.version for u, p in commit.consumed.items()}, sort_keys=True),
        "versions_to": json.dumps({u: p.version for u, p in commit.pinned.items()}, sort_keys=True),
        "rows_inserted": result.rows_inserted if result else metric("numTargetRowsInserted", "numOutputRows"),
        "rows_updated": result.rows_updated if result else metric("numTargetRowsUpdated"),
        "rows_deleted": result.rows_deleted if result else metric("numTargetRowsDeleted"),
        "staged_rows": result.staged_rows if result else commit.staged_rows,
        "started_at": started, "finished_at": finished,
        "duration_s": round(result.duration_s, 3) if result else 0.0,
        "outcome": "success", "message": message,
    }


def logged_history_row(commit: RefreshCommit, fallback: datetime) -> Dict[str, Any]:
    """The history row of a refresh no state write recorded, from its commit in the target's
    log (timed by the commit, `fallback` where the log gives no time)."""
    when = commit.timestamp or fallback
    return history_row(commit, None, when, when, "recorded from the target's log")


def state_values(outcome: Outcome) -> Dict[str, Any]:
    commit = outcome.commit
    if commit is None:
        return {"model_id": outcome.model_id, "relation": outcome.relation, "ok": False,
                "last_outcome": f"error: {outcome.error}"[:2000], "now": outcome.now}
    return {
        "model_id": outcome.model_id, "relation": outcome.relation, "ok": True,
        "fingerprint": commit.fingerprint, "consumed": points_json(commit.pinned),
        "run_id": commit.plan_id, "target_version": commit.version,
        "target_committed_at": commit.timestamp, "refresh": commit.refresh,
        "last_refresh_at": outcome.now, "last_action": commit.action, "last_outcome": "success",
        "chunks_total": commit.chunks, "staged_rows": commit.staged_rows, "now": outcome.now,
        "model_sql": outcome.sql,
    }


class Recorder:
    """One dbt invocation's outcomes, owned by its adapter: dbt runs models on threads, and the
    adapter writes them once when the invocation ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: Dict[str, Dict[str, Outcome]] = {}

    def add(self, outcome: Outcome) -> None:
        with self._lock:
            self._pending.setdefault(outcome.state_schema, {})[outcome.model_id] = outcome

    def recorded(self, model_id: str) -> Optional[Outcome]:
        """This invocation's not yet written outcome of a model (`dbt build` tests a model in
        the same invocation that refreshed it, before the state write)."""
        with self._lock:
            for outcomes in self._pending.values():
                if model_id in outcomes:
                    return outcomes[model_id]
        return None

    def pending(self) -> bool:
        with self._lock:
            return any(self._pending.values())

    def flush(self, fetch: Fetch, run: Run) -> None:
        """One state commit and one history commit per state schema (one in practice)."""
        with self._lock:
            pending, self._pending = self._pending, {}
        for schema, pending_here in pending.items():
            store = StateStore(schema, fetch, run)
            outcomes = list(pending_here.values())
            recorded: Optional[Dict[str, int]] = None
            if any(o.reconcile for o in outcomes):
                # One read tells which rows lag; a run that only found nothing to do writes
                # nothing when none does (and creates no tables).
                try:
                    recorded = store.refreshes(o.model_id for o in outcomes if o.commit is not None)
                except DbtRuntimeError:
                    recorded = None  # no state table yet: every row lags
                outcomes = [o for o in outcomes if not o.reconcile or o.commit is None
                            or recorded is None or recorded.get(o.model_id, 0) < o.commit.refresh]
                if not outcomes:
                    continue
            store.ensure()
            done = [o for o in outcomes if o.commit is not None]
            if recorded is None:
                recorded = store.refreshes(o.model_id for o in done) if done else {}
            reoffered = _lost_history(fetch, done, recorded)
            for o in done:
                if o.previous is not None and recorded.get(o.model_id, 0) < o.previous_refresh:
                    reoffered.append(o.previous)
            rows = [o.history for o in done if o.history is not None]
            fail_point("before_history_write")
            if rows or reoffered:
                store.append_history(rows + reoffered, only_if_missing=bool(reoffered),
                                     relations={o.model_id: o.relation for o in outcomes})
            # killed here, the history rows are written and the state rows lag: the next run
            # offers its previous refresh again, and only that write checks for what is there
            fail_point("before_state_write")
            store.upsert([state_values(o) for o in outcomes])
            fail_point("after_state_write")


def _lost_history(fetch: Fetch, outcomes: List[Outcome],
                  recorded: Dict[str, int]) -> List[Dict[str, Any]]:
    """History rows of refreshes older than the one a refresh started from that no state
    write recorded (consecutive invocations killed after their commits), from the targets' logs.

    Each refresh re-offers the one before it (Outcome.previous; a refresh that wrote nothing,
    the target's newest), and its own row is written with it; only a model whose state row
    lags further behind costs a read of its log.
    """
    rows: List[Dict[str, Any]] = []
    for o in outcomes:
        assert o.commit is not None
        have = recorded.get(o.model_id, 0)
        offered = o.previous_refresh if o.previous is not None else o.commit.refresh
        if offered - have <= 1:
            continue
        for entry in DeltaReader(fetch).history(o.relation, LOG_LOOKBACK):
            found = RefreshCommit.from_history(entry, o.model_id)
            if found is not None and found.complete and have < found.refresh < offered:
                rows.append(logged_history_row(found, o.now))
    return rows
