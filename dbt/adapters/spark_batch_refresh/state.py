"""The refresh-state and history tables (Delta), read and written through the dbt connection."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Dict, List, Mapping, Optional, TypeVar

from dbt.adapters.spark_batch_refresh.planner import ModelState, UpstreamPoint
from dbt.adapters.spark_batch_refresh.session_confs import SessionConfs, idempotent_write
from dbt.adapters.spark_batch_refresh.sqlgen import lit

STATE_TABLE = "batch_refresh_state"
HISTORY_TABLE = "batch_refresh_history"

# Delta's optimistic-concurrency failures. With dbt threads > 1 several models write the
# shared state and history tables at once; their rows never overlap, so a write that lost
# such a race is simply tried again.
_CONFLICTS = ("DELTA_CONCURRENT", "Concurrent", "DELTA_METADATA_CHANGED", "MetadataChanged",
              "DELTA_PROTOCOL_CHANGED", "ProtocolChanged")
_ATTEMPTS = 8
T = TypeVar("T")


def is_conflict(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in _CONFLICTS)


def retry_conflicts(action: Callable[[], T], attempts: int = _ATTEMPTS) -> T:
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:  # noqa: BLE001 - only conflicts are retried, the rest re-raised
            if attempt == attempts or not is_conflict(exc):
                raise
            time.sleep(0.05 * attempt)  # back off so the winner's commit lands first
    raise AssertionError("unreachable")

Fetch = Callable[[str], List[Dict[str, Any]]]
Run = Callable[[str], None]

_STATE_COLUMNS = """
  model_id STRING, relation STRING, phase STRING, fingerprint STRING, consumed STRING,
  plan STRING, run_id STRING, lease_holder STRING, lease_since TIMESTAMP,
  lease_until TIMESTAMP, generation STRING, chunks_total INT, chunks_done INT,
  staged_rows BIGINT, target_version BIGINT, last_refresh_at TIMESTAMP, last_action STRING, last_outcome STRING,
  updated_at TIMESTAMP, target_committed_at TIMESTAMP"""
_HISTORY_COLUMNS = """
  run_id STRING, model_id STRING, relation STRING, action STRING, mode STRING,
  reason STRING, versions_from STRING, versions_to STRING, rows_inserted BIGINT,
  rows_updated BIGINT, rows_deleted BIGINT, staged_rows BIGINT, started_at TIMESTAMP,
  finished_at TIMESTAMP, duration_s DOUBLE, outcome STRING, message STRING"""
# Bookkeeping tables do not need a change feed; keep them small and cheap to update.
_PROPS = "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'false')"


def ts(value: Optional[datetime]) -> str:
    return "NULL" if value is None else f"TIMESTAMP {lit(value.isoformat(sep=' '))}"


def as_datetime(value: Any) -> Optional[datetime]:
    """Timestamps arrive as datetimes (session) or text (Thrift)."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def points_json(points: Mapping[str, UpstreamPoint]) -> str:
    return json.dumps({u: p.to_json() for u, p in sorted(points.items())})


def points_from_json(text: Optional[str]) -> Dict[str, UpstreamPoint]:
    if not text:
        return {}
    return {u: UpstreamPoint.from_json(p) for u, p in json.loads(text).items()}


@dataclass(frozen=True)
class StateRow:
    model_id: str
    phase: str
    fingerprint: str
    consumed: Dict[str, UpstreamPoint]
    plan: Optional[Dict[str, Any]]
    run_id: Optional[str]
    lease_holder: Optional[str]
    lease_since: Optional[datetime]
    lease_until: Optional[datetime]
    last_refresh_at: Optional[datetime]
    chunks_total: Optional[int] = None
    chunks_done: Optional[int] = None
    staged_rows: Optional[int] = None
    target_version: Optional[int] = None
    target_committed_at: Optional[datetime] = None  # with the version: tells a recreated target

    def model_state(self) -> ModelState:
        return ModelState(self.fingerprint, self.consumed, self.phase, self.last_refresh_at)


def _state_row(r: Mapping[str, Any]) -> StateRow:
    return StateRow(
        model_id=r["model_id"],
        phase=r["phase"] or "idle",
        fingerprint=r["fingerprint"] or "",
        consumed=points_from_json(r["consumed"]),
        plan=json.loads(r["plan"]) if r["plan"] else None,
        run_id=r["run_id"],
        lease_holder=r["lease_holder"],
        lease_since=as_datetime(r["lease_since"]),
        lease_until=as_datetime(r["lease_until"]),
        last_refresh_at=as_datetime(r["last_refresh_at"]),
        chunks_total=r.get("chunks_total"),
        chunks_done=r.get("chunks_done"),
        staged_rows=r.get("staged_rows"),
        target_version=r.get("target_version"),
        target_committed_at=as_datetime(r.get("target_committed_at")),
    )


class StateStore:
    def __init__(self, schema: str, fetch: Fetch, run: Run) -> None:
        self.schema = schema
        self.state = f"{schema}.{STATE_TABLE}"
        self.history = f"{schema}.{HISTORY_TABLE}"
        self._fetch = fetch
        self._run = run

    _ensured: set[str] = set()  # per process: the DDL below is idempotent but not free
    _ensure_lock = threading.Lock()  # dbt threads: create the tables once, not concurrently

    def ensure(self) -> None:
        if self.schema in StateStore._ensured:
            return
        with StateStore._ensure_lock:
            if self.schema not in StateStore._ensured:
                retry_conflicts(self._create)
                StateStore._ensured.add(self.schema)

    def _create(self) -> None:
        self._run(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
        self._run(f"CREATE TABLE IF NOT EXISTS {self.state} ({_STATE_COLUMNS}) USING delta {_PROPS}")
        self._run(
            f"CREATE TABLE IF NOT EXISTS {self.history} ({_HISTORY_COLUMNS}) USING delta {_PROPS}"
        )
        # Tables made by an older release gain the columns added since (additive only).
        for table, columns in ((self.state, _STATE_COLUMNS), (self.history, _HISTORY_COLUMNS)):
            have = {r["col_name"].lower() for r in self._fetch(f"DESCRIBE QUERY SELECT * FROM {table}")}
            missing = [c.strip() for c in columns.split(",") if c.split()[0].lower() not in have]
            if missing:
                self._run(f"ALTER TABLE {table} ADD COLUMNS ({', '.join(missing)})")

    # Per process: the state table as first read in the current dbt invocation (schema,
    # invocation id) -> rows by model id. Reading a Delta table that other models committed to
    # since the last read costs a snapshot update (~1 s); one read per invocation instead of
    # one per model is what keeps a skip or a no-op near dbt's own overhead.
    _snapshots: Dict[tuple[str, str], Dict[str, Dict[str, Any]]] = {}
    _snapshot_lock = threading.Lock()

    def read_planned(self, model_id: str, invocation: str) -> tuple[Optional[StateRow], bool]:
        """(row, fresh): the model's row in this invocation's snapshot of the state table;
        `fresh` when the snapshot was taken by this call. A row from an older snapshot can only
        be stale through another, concurrent dbt invocation: good enough to decide a skip or a
        no-op, not to write (the caller reads the row again with `read`)."""
        key = (self.schema, invocation)
        with StateStore._snapshot_lock:
            snapshot = StateStore._snapshots.get(key)
            fresh = snapshot is None
            if snapshot is None:
                snapshot = {r["model_id"]: r for r in self._fetch(f"SELECT * FROM {self.state}")}
                StateStore._snapshots.clear()  # only the current invocation's is ever used
                StateStore._snapshots[key] = snapshot
        found = snapshot.get(model_id)
        return (_state_row(found) if found else None), fresh

    def read(self, model_id: str) -> Optional[StateRow]:
        rows = self._fetch(f"SELECT * FROM {self.state} WHERE model_id = {lit(model_id)}")
        return _state_row(rows[0]) if rows else None

    def take_lease(
        self,
        *,
        model_id: str,
        relation: str,
        seen: Optional[StateRow],
        run_id: str,
        holder: str,
        now: datetime,
        until: datetime,
        plan: Mapping[str, Any],
        keep_phase: bool = False,
    ) -> bool:
        """Compare-and-set on the state row: True if this run now holds the lease.

        The row must still be what this run read (same run id and phase), so of two runs
        that read the same row only one wins; Delta's conflict detection makes the loser's
        MERGE either fail or match nothing.
        """
        if seen is None:
            guard = "false"
        else:
            guard = f"t.run_id <=> {lit(seen.run_id)} AND t.phase = {lit(seen.phase)}"
        source = (
            f"SELECT {lit(model_id)} AS model_id, {lit(relation)} AS relation, "
            f"{lit(run_id)} AS run_id, {lit(holder)} AS lease_holder, "
            f"{ts(now)} AS lease_since, {ts(until)} AS lease_until, "
            f"{lit(json.dumps(plan))} AS plan"
        )
        # A resumed refresh keeps its phase and plan; a new one starts at 'refreshing'.
        phase = "t.phase" if keep_phase else "'refreshing'"
        progress = "" if keep_phase else ", chunks_total = NULL, chunks_done = NULL, staged_rows = NULL"
        sql = (
            f"MERGE INTO {self.state} t USING ({source}) s ON t.model_id = s.model_id\n"
            f"WHEN MATCHED AND {guard} THEN UPDATE SET phase = {phase}{progress}, run_id = s.run_id, "
            f"lease_holder = s.lease_holder, lease_since = s.lease_since, "
            f"lease_until = s.lease_until, plan = s.plan, relation = s.relation, "
            f"updated_at = s.lease_since\n"
            f"WHEN NOT MATCHED THEN INSERT (model_id, relation, phase, fingerprint, consumed, plan, "
            f"run_id, lease_holder, lease_since, lease_until, updated_at) VALUES (s.model_id, "
            f"s.relation, 'refreshing', NULL, NULL, s.plan, s.run_id, s.lease_holder, "
            f"s.lease_since, s.lease_until, s.lease_since)"
        )
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                result = self._fetch(sql)
                break
            except Exception as exc:  # noqa: BLE001 - Delta reports a lost race as a conflict
                if not is_conflict(exc):
                    raise
                # A conflict with another model's row (dbt threads) is retried; one with this
                # model's row means another run got there first.
                now_row = self.read(model_id)
                unchanged = (now_row is None and seen is None) or (
                    now_row is not None and seen is not None
                    and (now_row.run_id, now_row.phase) == (seen.run_id, seen.phase))
                if not unchanged or attempt == _ATTEMPTS:
                    return False
                time.sleep(0.05 * attempt)
        affected = int(result[0].get("num_affected_rows", 0)) if result else 0
        return affected == 1

    def _update(self, model_id: str, run_id: str, assignments: str) -> None:
        sql = (f"UPDATE {self.state} SET {assignments} "
               f"WHERE model_id = {lit(model_id)} AND run_id = {lit(run_id)}")
        retry_conflicts(lambda: self._run(sql))

    def begin_merging(self, model_id: str, run_id: str, chunks: int, staged_rows: int,
                      now: datetime) -> None:
        self._update(model_id, run_id, f"phase = 'merging', chunks_total = {int(chunks)}, "
                     f"chunks_done = 0, staged_rows = {int(staged_rows)}, updated_at = {ts(now)}")

    def chunk_done(self, model_id: str, run_id: str, chunk: int, now: datetime,
                   lease_until: datetime) -> None:
        # Progress for status output; resume trusts the target's history, not this number.
        self._update(model_id, run_id, f"chunks_done = {int(chunk)}, "
                     f"lease_until = {ts(lease_until)}, updated_at = {ts(now)}")

    def complete(
        self,
        *,
        model_id: str,
        run_id: str,
        fingerprint: str,
        consumed: Mapping[str, UpstreamPoint],
        action: str,
        target_version: Optional[int],
        target_committed_at: Optional[datetime],
        now: datetime,
    ) -> None:
        """The target is complete: advance the consumed versions and release the lease in one
        commit (the history row is written before, keyed by plan id, so a crash between the
        two replays it harmlessly)."""
        self._update(
            model_id, run_id,
            f"phase = 'idle', fingerprint = {lit(fingerprint)}, "
            f"target_version = {lit(target_version)}, "
            f"target_committed_at = {ts(target_committed_at)}, consumed = {lit(points_json(consumed))}, "
            f"last_refresh_at = {ts(now)}, last_action = {lit(action)}, "
            f"last_outcome = 'success', lease_holder = NULL, lease_until = NULL, plan = NULL, "
            f"updated_at = {ts(now)}",
        )

    def replan(self, model_id: str, run_id: str, plan: Mapping[str, Any], now: datetime) -> None:
        self._update(model_id, run_id, f"plan = {lit(json.dumps(plan))}, updated_at = {ts(now)}")

    def release(self, model_id: str, run_id: str, touched: bool, outcome: str,
                now: datetime) -> None:
        """Give the lease up after a failure; back to `idle` only if the target is untouched."""
        reset = "" if touched else ", phase = 'idle', plan = NULL, lease_holder = NULL"
        self._update(model_id, run_id, f"lease_until = {ts(now)}, "
                     f"last_outcome = {lit(outcome[:2000])}, updated_at = {ts(now)}{reset}")

    def unlock(self, model_id: str, now: datetime) -> int:
        sql = (f"UPDATE {self.state} SET lease_until = {ts(now)}, updated_at = {ts(now)} "
               f"WHERE model_id = {lit(model_id)}")
        rows = retry_conflicts(lambda: self._fetch(sql))
        return int(rows[0].get("num_affected_rows", 0)) if rows else 0

    def record(self, values: Mapping[str, Any]) -> None:
        cols = [c.split()[0] for c in _HISTORY_COLUMNS.replace("\n", " ").split(",")]
        rendered = []
        for col in cols:
            value = values.get(col)
            rendered.append(ts(value) if isinstance(value, datetime) else lit(value))
        # An idempotent append keyed on the refresh's plan id: a cleanup replayed after a crash
        # is skipped by Delta (same txnAppId/txnVersion) instead of writing a second row. An
        # append is one Spark job where a MERGE on run_id was ten (~1.5 s less per refresh).
        source = ", ".join(f"{v} AS {c}" for c, v in zip(cols, rendered))
        app_id = f"batch_refresh_history:{values.get('model_id')}:{values.get('run_id')}"
        sql = f"INSERT INTO {self.history} ({', '.join(cols)}) SELECT {source}"

        def append() -> None:
            with SessionConfs(self._run, idempotent_write(app_id, 1)):
                self._run(sql)

        retry_conflicts(append)
