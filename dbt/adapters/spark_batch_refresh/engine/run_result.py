"""What one refresh was asked to do and what it did (plain data), and the statement meter."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from dbt.adapters.spark_batch_refresh.storage.calls import Fetch, Run


TRACE_ENV = "BATCH_REFRESH_TRACE"  # profiling aid: append each statement's seconds and SQL here


@dataclass(frozen=True)
class RefreshRequest:
    model: str
    model_id: str
    target: str  # rendered relation, e.g. `schema`.`name`
    sql: str  # compiled model SQL
    raw_config: Mapping[str, Any]
    target_options: str  # rendered partition/location/comment clauses
    target_kind: str  # "none" | "delta" | "other"
    state_schema: str
    full_refresh: bool
    force: bool
    # This invocation's run_started_at and invocation_id as the model may render them: not
    # part of the model's fingerprint (a model writing them into audit columns is not edited
    # by every run).
    run_values: Tuple[str, ...] = ()


@dataclass(kw_only=True)
class RefreshCounts:
    """What a refresh moved and what it cost: the fields a result and its `adapter_response`
    (report/response.py) share."""

    versions_from: Dict[str, int] = field(default_factory=dict)
    versions_to: Dict[str, int] = field(default_factory=dict)
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    staged_rows: int = 0
    chunks: int = 0  # target commits
    # The whole target rewritten in one commit (an overwrite, a keyless full recompute, a
    # global aggregate's replay): `rows_inserted` is then its new size, and every old row left
    # its change feed as deleted, which the counts do not repeat.
    rewritten: bool = False
    statements: int = 0  # SQL statements this refresh issued
    writes: int = 0  # of which Delta writes (each one commit)
    duration_s: float = 0.0


@dataclass
class RefreshResult(RefreshCounts):
    action: str
    reason: str
    mode: str
    run_id: Optional[str] = None
    resumed: bool = False
    fallback_reason: Optional[str] = None
    next_due: Optional[str] = None
    # What a keyed replay recomputed its rows from: "changes" (the change feed alone, row-wise
    # models), "join" (delta join: each moved upstream's change rows, the others pinned),
    # "aggregate" (delta aggregate) or "snapshot" (the model at the pinned versions, restricted
    # to affected keys).
    staged_from: Optional[str] = None
    # The one name of what the refresh did (plan/strategy.py): a replay's rule, or the action.
    strategy: Optional[str] = None
    # Set when another run committed this refresh first: its plan id.
    refreshed_by: Optional[str] = None

    @property
    def rows_affected(self) -> int:
        return self.rows_inserted + self.rows_updated + self.rows_deleted

    def to_dict(self) -> Dict[str, Any]:
        data = asdict(self)
        data["rows_affected"] = self.rows_affected
        return data


_WRITE_PREFIXES = ("MERGE", "INSERT", "UPDATE", "DELETE", "CREATE OR REPLACE TABLE",
                   "CREATE TABLE", "ALTER TABLE")


class Meter:
    """Counts and times the statements of one refresh (for run results and benchmarks)."""

    def __init__(self, fetch: Fetch, run: Run) -> None:
        self._inner_fetch, self._inner_run = fetch, run
        self.statements = 0
        self.writes = 0
        self.slowest: List[tuple[float, str]] = []
        self.started = time.monotonic()

    def _timed(self, call: Callable[[str], Any], sql: str) -> Any:
        started = time.monotonic()
        try:
            return call(sql)
        finally:
            elapsed = time.monotonic() - started
            self.statements += 1
            self.writes += sql.lstrip().upper().startswith(_WRITE_PREFIXES)
            self.slowest = sorted(self.slowest + [(elapsed, sql.split("\n", 1)[0][:90])],
                                  reverse=True)[:5]
            trace = os.environ.get(TRACE_ENV)
            if trace:
                with open(trace, "a") as handle:
                    handle.write(f"{elapsed:8.3f}\t{' '.join(sql.split())[:400]}\n")

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        return self._timed(self._inner_fetch, sql)

    def run(self, sql: str) -> None:
        self._timed(self._inner_run, sql)

    def finish(self, result: RefreshResult) -> None:
        result.duration_s = time.monotonic() - self.started
        result.statements, result.writes = self.statements, self.writes
