"""The refresh-state and history tables (Delta), read and written through the dbt connection."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, TypeVar

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_batch_refresh.storage import endpoint
from dbt.adapters.spark_batch_refresh.plan.planner import ModelState, UpstreamPoint
from dbt.adapters.spark_batch_refresh.storage.calls import Fetch, Run
from dbt.adapters.spark_batch_refresh.storage.values import as_datetime
from dbt.adapters.spark_batch_refresh.sql.sqlgen import lit

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

_STATE_COLUMNS = """
  model_id STRING, relation STRING, phase STRING, fingerprint STRING, consumed STRING,
  plan STRING, run_id STRING, lease_holder STRING, lease_since TIMESTAMP,
  lease_until TIMESTAMP, chunks_total INT, chunks_done INT,
  staged_rows BIGINT, target_version BIGINT, last_refresh_at TIMESTAMP, last_action STRING, last_outcome STRING,
  updated_at TIMESTAMP, target_committed_at TIMESTAMP, refresh BIGINT, model_sql STRING"""
_STATE_COLUMN_NAMES = tuple(c.split()[0] for c in _STATE_COLUMNS.split(","))

# How upsert() sets each state column, by what the new row `s` meets in the table `t`:
# a failed refresh records only its outcome ...
_FAILED = {"last_outcome": "s.last_outcome", "updated_at": "s.now"}
# ... a refresh not older than the row's takes the row, but a live lease another run holds ...
_LIVE = "(t.phase <> 'idle' AND t.lease_until IS NOT NULL AND t.lease_until > s.now)"
_FRESH = {"phase": "'idle'", "plan": "NULL", "lease_holder": "NULL", "lease_since": "NULL",
          "lease_until": "NULL", "run_id": "s.run_id", "chunks_done": "s.chunks_total"}
_COPIED = ("relation", "fingerprint", "consumed", "target_version", "target_committed_at",
           "refresh", "last_refresh_at", "last_action", "last_outcome", "chunks_total",
           "staged_rows", "model_sql")
# ... and a model without a row gets what that update writes with no lease to keep.
_INSERTED = {"model_id": "s.model_id", **_FRESH, **{c: f"s.{c}" for c in _COPIED},
             "updated_at": "s.now"}


def _upserted(column: str) -> str:
    """One state column of upsert()'s overwrite: the cases of a MERGE's clauses, in order (a
    row of the table no new row meets fails every case and keeps its value)."""
    if column in _FRESH:
        updated = f"CASE WHEN {_LIVE} THEN t.{column} ELSE {_FRESH[column]} END"
    elif column in _COPIED:
        updated = f"s.{column}"
    elif column == "updated_at":
        updated = "s.now"
    else:
        updated = f"t.{column}"
    return (f"CASE WHEN t.model_id IS NULL THEN {_INSERTED.get(column, 'NULL')} "
            f"WHEN NOT s.ok THEN {_FAILED.get(column, f't.{column}')} "
            f"WHEN s.ok AND (t.refresh IS NULL OR s.refresh >= t.refresh) THEN {updated} "
            f"ELSE t.{column} END AS {column}")


_HISTORY_COLUMNS = """
  run_id STRING, model_id STRING, relation STRING, action STRING, mode STRING,
  reason STRING, versions_from STRING, versions_to STRING, rows_inserted BIGINT,
  rows_updated BIGINT, rows_deleted BIGINT, staged_rows BIGINT, started_at TIMESTAMP,
  finished_at TIMESTAMP, duration_s DOUBLE, outcome STRING, message STRING, strategy STRING"""
# Bookkeeping tables do not need a change feed; keep them small and cheap to update.
# Delta checkpoints a table inside every 10th commit by default; both tables take one commit
# per `dbt run`, so every 10th run's end-of-run write paid two checkpoints (+1.0-1.1 s on a
# 1.1 s write). Replaying up to 100 small JSON commits costs nothing measurable here (per-run
# write and a new process's first read flat over 120 commits without a checkpoint:
# bench/state_checkpoints.py, docs/decisions.md, session 52).
CHECKPOINT_INTERVAL = 100
_PROPS = ("TBLPROPERTIES ('delta.enableChangeDataFeed' = 'false', "
          f"'delta.checkpointInterval' = '{CHECKPOINT_INTERVAL}')")


def ts(value: Optional[datetime]) -> str:
    return "NULL" if value is None else f"TIMESTAMP {lit(value.isoformat(sep=' '))}"


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
    model_sql: Optional[str] = None  # the compiled SQL the last refresh ran (verify.py)

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
        model_sql=r.get("model_sql"),
    )


class StateStore:
    def __init__(self, schema: str, fetch: Fetch, run: Run) -> None:
        self.schema = schema
        self.state = f"{schema}.{STATE_TABLE}"
        self.history = f"{schema}.{HISTORY_TABLE}"
        self._fetch = fetch
        self._run = run

    # per process and endpoint: the DDL below is idempotent but not free
    _ensured: set[tuple[str, str]] = set()
    _ensure_lock = threading.Lock()  # dbt threads: create the tables once, not concurrently

    def ensure(self) -> None:
        key = (endpoint.current(), self.schema)
        if key in StateStore._ensured:
            return
        with StateStore._ensure_lock:
            if key not in StateStore._ensured:
                retry_conflicts(self._create)
                StateStore._ensured.add(key)

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

    # Reads for the reports: a project that never ran a model gets none, not new tables.
    def all_states(self) -> List[Dict[str, Any]]:
        return self._if_exists(f"SELECT * FROM {self.state} ORDER BY model_id")

    def recent_history(self, keep: int) -> List[Dict[str, Any]]:
        """Each model's newest `keep` history rows."""
        return self._if_exists(
            f"SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY model_id ORDER BY "
            f"started_at DESC, finished_at DESC) AS _rn FROM {self.history}) "
            f"WHERE _rn <= {int(keep)} ORDER BY model_id, started_at DESC, finished_at DESC")

    def all_history(self) -> List[Dict[str, Any]]:
        return self._fetch(f"SELECT * FROM {self.history} ORDER BY started_at, run_id")

    def _if_exists(self, sql: str) -> List[Dict[str, Any]]:
        try:
            return self._fetch(sql)
        except DbtRuntimeError as exc:
            text = str(exc)
            if any(m in text for m in ("TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND",
                                       "cannot be found", "Table or view not found")):
                return []
            raise

    def read(self, model_id: str) -> Optional[StateRow]:
        rows = self._fetch(f"SELECT * FROM {self.state} WHERE model_id = {lit(model_id)}")
        return _state_row(rows[0]) if rows else None

    def refreshes(self, model_ids: Iterable[str]) -> Dict[str, int]:
        """The refresh number each model's row records (models without a row are left out)."""
        ids = ", ".join(lit(m) for m in model_ids)
        rows = self._fetch(f"SELECT model_id, refresh FROM {self.state} WHERE model_id IN ({ids})")
        return {str(r["model_id"]): int(r["refresh"] or 0) for r in rows}

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
        chunks: int = 0,
        staged_rows: int = 0,
        keep_progress: bool = False,
    ) -> bool:
        """Compare-and-set on the state row: True if this run now holds the lease.

        Only a multi-chunk refresh takes it, once its staging is known, so the row goes
        straight to `merging`. The row must still be what this run read (same run id and
        phase), so of two runs that read the same row only one wins; Delta's conflict
        detection makes the loser's MERGE either fail or match nothing.
        """
        if seen is None:
            guard = "false"
        else:
            guard = f"t.run_id <=> {lit(seen.run_id)} AND t.phase = {lit(seen.phase)}"
        source = (
            f"SELECT {lit(model_id)} AS model_id, {lit(relation)} AS relation, "
            f"{lit(run_id)} AS run_id, {lit(holder)} AS lease_holder, "
            f"{ts(now)} AS lease_since, {ts(until)} AS lease_until, "
            f"{lit(json.dumps(plan))} AS plan, {int(chunks)} AS chunks_total, "
            f"{int(staged_rows)} AS staged_rows"
        )
        # A resumed refresh keeps the progress its chunks recorded.
        progress = ("" if keep_progress else
                    ", chunks_total = s.chunks_total, chunks_done = 0, staged_rows = s.staged_rows")
        sql = (
            f"MERGE INTO {self.state} t USING ({source}) s ON t.model_id = s.model_id\n"
            f"WHEN MATCHED AND {guard} THEN UPDATE SET phase = 'merging'{progress}, "
            f"run_id = s.run_id, lease_holder = s.lease_holder, lease_since = s.lease_since, "
            f"lease_until = s.lease_until, plan = s.plan, relation = s.relation, "
            f"updated_at = s.lease_since\n"
            f"WHEN NOT MATCHED THEN INSERT (model_id, relation, phase, fingerprint, consumed, plan, "
            f"run_id, lease_holder, lease_since, lease_until, chunks_total, chunks_done, "
            f"staged_rows, updated_at) VALUES (s.model_id, s.relation, 'merging', NULL, NULL, "
            f"s.plan, s.run_id, s.lease_holder, s.lease_since, s.lease_until, s.chunks_total, 0, "
            f"s.staged_rows, s.lease_since)"
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

    def _update(self, model_id: str, run_id: str, assignments: str) -> int:
        """Update the row while `run_id` holds it; the rows changed (0: the lease was lost)."""
        sql = (f"UPDATE {self.state} SET {assignments} "
               f"WHERE model_id = {lit(model_id)} AND run_id = {lit(run_id)}")
        rows = retry_conflicts(lambda: self._fetch(sql))
        return int(rows[0].get("num_affected_rows", 0)) if rows else 0

    def chunk_done(self, model_id: str, run_id: str, chunk: int, now: datetime,
                   lease_until: datetime) -> bool:
        """Record progress and extend the lease; False if another run holds it now."""
        # Progress for status output; resume trusts the target's history, not this number.
        return self._update(model_id, run_id, f"chunks_done = {int(chunk)}, "
                            f"lease_until = {ts(lease_until)}, updated_at = {ts(now)}") == 1

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

    def upsert(self, values: List[Mapping[str, Any]]) -> None:
        """The rows of one invocation's refreshes in one commit.

        A successful refresh sets the row to what its target commit says; a live lease another
        run holds (a multi-chunk refresh of the same model) is left as it is; an older refresh
        never overwrites a newer one. A failed refresh only records its outcome.

        Written as one INSERT OVERWRITE of the whole table (one row per model) joined with the
        new rows, not a MERGE: Delta's MERGE runs twice the jobs (it finds the matched files,
        then rewrites them), and this write ends every `dbt run` (8 models' rows, interleaved
        rounds: 0.67 -> 0.53 s; docs/decisions.md, session 63). Concurrent writers conflict as
        they did: the overwrite reads the whole table, so a commit that lands between its read
        and its commit fails it, and it is run again.
        """
        if not values:
            return
        source = _inline_rows(values, _UPSERT_COLUMNS)
        sql = (f"INSERT OVERWRITE {self.state} ({', '.join(_STATE_COLUMN_NAMES)})\n"
               f"SELECT {', '.join(_upserted(c) for c in _STATE_COLUMN_NAMES)}\n"
               f"FROM {self.state} t FULL OUTER JOIN (\n{source}\n) s ON t.model_id = s.model_id")
        retry_conflicts(lambda: self._run(sql))

    def append_history(self, rows: List[Mapping[str, Any]], relations: Mapping[str, str],
                       only_if_missing: bool) -> None:
        """History rows in one commit. A blind append (no read of the table) unless some rows
        are offered again after a crash (`only_if_missing`): then rows already there (by model
        and plan id) are not written twice."""
        cols = [c.split()[0] for c in _HISTORY_COLUMNS.replace("\n", " ").split(",")]
        types = dict(c.split()[:2] for c in _HISTORY_COLUMNS.replace("\n", " ").split(","))
        kept: List[Mapping[str, Any]] = []
        seen = set()
        for row in rows:
            key = (row.get("model_id"), row.get("run_id"))
            if key in seen:
                continue
            seen.add(key)
            kept.append({**row,
                         "relation": relations.get(str(row.get("model_id")), row.get("relation"))})
        source = _inline_rows(kept, [(c, types[c]) for c in cols])
        guard = (f" WHERE NOT EXISTS (SELECT 1 FROM {self.history} h "
                 f"WHERE h.model_id = v.model_id AND h.run_id = v.run_id)" if only_if_missing else "")
        sql = (f"INSERT INTO {self.history} ({', '.join(cols)}) SELECT {', '.join(cols)} FROM (\n"
               f"{source}\n) v{guard}")
        retry_conflicts(lambda: self._run(sql))


_UPSERT_COLUMNS = (
    ("model_id", "STRING"), ("relation", "STRING"), ("ok", "BOOLEAN"), ("fingerprint", "STRING"),
    ("consumed", "STRING"), ("run_id", "STRING"), ("target_version", "BIGINT"),
    ("target_committed_at", "TIMESTAMP"), ("refresh", "BIGINT"), ("last_refresh_at", "TIMESTAMP"),
    ("last_action", "STRING"), ("last_outcome", "STRING"), ("chunks_total", "INT"),
    ("staged_rows", "BIGINT"), ("model_sql", "STRING"), ("now", "TIMESTAMP"),
)


def _inline_rows(rows: Sequence[Mapping[str, Any]], columns: Sequence[Tuple[str, str]]) -> str:
    """The rows as one inline table: Spark plans a VALUES list as one relation, where a UNION
    ALL of one-row SELECTs costs it 20-40 ms a row to analyse (a 60-model invocation's state
    and history writes planned for seconds)."""
    tuples = ",\n".join("(" + ", ".join(_cell(row.get(name), sql_type) for name, sql_type in columns)
                        + ")" for row in rows)
    return f"SELECT * FROM VALUES\n{tuples}\nAS _br_rows({', '.join(n for n, _ in columns)})"


def _cell(value: Any, sql_type: str) -> str:
    if isinstance(value, datetime):
        return ts(value)
    return f"CAST({lit(value)} AS {sql_type})"
