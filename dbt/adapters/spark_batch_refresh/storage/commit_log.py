"""The target's own Delta log as the refresh record (pure: no I/O).

Every commit a refresh makes to its target carries, in `commitInfo.userMetadata`, what the next
run needs to plan: the upstream versions it brings the target to (and came from), the model
fingerprint, a hash of the output columns, the plan id, chunk i/n and the refresh number. The
write is exactly-once through Delta's idempotent-write confs: `txnAppId` is the model and
`txnVersion` a number derived from the refresh number and the chunk, so the first commit of
refresh n+1 (its only commit, or chunk 1 of several) carries the same version whichever run
makes it, and Delta lets exactly one of two racing runs commit it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple

from dbt.adapters.spark_batch_refresh.plan.cost import INSERTS, CostMemory, remember
from dbt.adapters.spark_batch_refresh.plan.key_top import KeyTop, KeyType
from dbt.adapters.spark_batch_refresh.plan.strategy import BACKFILL, FULL, REPLAY, Strategy
from dbt.adapters.spark_batch_refresh.plan.planner import Plan, UpstreamPoint
from dbt.adapters.spark_batch_refresh.storage.values import as_datetime, as_map

PLAN_KEY = "batch_refresh_plan"  # in every commit a refresh makes (also read by older tests)
FORMAT = 2
# txnVersion = refresh * STRIDE + (chunk - 1): refresh n+1's first commit outnumbers every
# chunk of refresh n, so Delta skips any write of an older refresh.
TXN_STRIDE = 1_000_000

# Commits that change a table's files or properties but not its rows.
MAINTENANCE_OPERATIONS = frozenset({
    "OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES", "UNSET TBLPROPERTIES",
    "ANALYZE", "REORG", "CHANGE COLUMN", "SET COLUMN COMMENT", "UPGRADE PROTOCOL",
})


def txn_app_id(model_id: str) -> str:
    return f"batch_refresh:{model_id}"


def txn_version(refresh: int, chunk: int) -> int:
    return refresh * TXN_STRIDE + chunk - 1


def columns_hash(columns: Sequence[tuple[str, str]]) -> str:
    text = ",".join(f"{c.lower()} {t}" for c, t in columns)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _points(data: Any) -> Dict[str, UpstreamPoint]:
    return {str(u): UpstreamPoint.from_json(p) for u, p in (data or {}).items()}


@dataclass(frozen=True)
class RefreshCommit:
    """One target commit of a refresh, as written to and read back from the target's log."""

    model_id: str
    refresh: int
    plan_id: str
    run_id: str
    action: str
    mode: str
    reason: str
    fingerprint: str
    columns: str  # columns_hash of the model output
    pinned: Mapping[str, UpstreamPoint]
    consumed: Mapping[str, UpstreamPoint]  # where the refresh started (versions_from)
    chunk: int = 1
    chunks: int = 1
    staged_rows: int = 0
    fallback_reason: Optional[str] = None
    # For the next plan's cost estimate (cost.py): when this refresh started, on the clock its
    # commit time is read from (None: not measurable), the change rows it handled, its
    # estimate, and the model's measured refreshes before it.
    started: Optional[datetime] = None
    # Seconds from `started` to the staging (planning, metadata reads, checks): a backfill's
    # sample leaves them out (see memory_after).
    prep_s: Optional[float] = None
    change_rows: Optional[int] = None
    # The key inferred from the query was NULL in the output: later refreshes go keyless
    # until a --full-refresh (executor.py).
    null_key: bool = False
    estimate_s: Optional[float] = None
    cost: CostMemory = field(default_factory=CostMemory)
    rule: Optional[Strategy] = None  # a replay's rule (Plan.rule)
    # An upper bound of the target's key after this commit (plan/key_top.py; None: unknown).
    key_top: Optional[KeyTop] = None
    # The rows this commit inserts raise key_top (an overwrite: replace it), by a key not
    # known when it was written: read from the commit when needed (storage/jvm_commit_stats.py).
    key_top_added: Optional[KeyType] = None
    # A replay that rebuilt the sidecar an overwrite left behind (engine/stage.py): measured
    # as a full recompute.
    sidecar_rebuilt: bool = False
    # The columns every row of the target is unique by after this commit, where the query
    # proves it (not a configured key, not one that rests on dbt tests, not one found NULL):
    # read by the models downstream of it (recorded_key), which have no other way to know
    # an inferred key.
    key: Tuple[str, ...] = ()
    # The upstream models' recorded keys the refresh's key went through (DeltaReader.
    # proven_keys): a resumed refresh plans with the same key, its upstreams unread.
    through: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    # Filled in when read back from DESCRIBE HISTORY, never written:
    version: int = -1
    timestamp: Optional[datetime] = None
    metrics: Mapping[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.chunk >= self.chunks

    @property
    def txn_version(self) -> int:
        return txn_version(self.refresh, self.chunk)

    @property
    def strategy(self) -> Strategy:
        return self.plan().strategy

    def plan(self) -> Plan:
        return Plan(action=self.action, reason=self.reason, mode=self.mode, pinned=self.pinned,
                    consumed=self.consumed, fallback_reason=self.fallback_reason, rule=self.rule)

    def for_chunk(self, chunk: int, chunks: int) -> "RefreshCommit":
        return RefreshCommit(**{**self._fields(), "chunk": chunk, "chunks": chunks})

    def _fields(self) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def to_metadata(self) -> str:
        """JSON for `SET ...userMetadata=`: `;` and backticks (which SET cannot take unquoted)
        appear only inside JSON strings, so they are written as \\u escapes."""
        data = {
            PLAN_KEY: self.plan_id, "format": FORMAT, "model": self.model_id,
            "refresh": self.refresh, "run": self.run_id, "action": self.action,
            "mode": self.mode, "reason": self.reason, "fingerprint": self.fingerprint,
            "columns": self.columns, "chunk": self.chunk, "chunks": self.chunks,
            "staged_rows": self.staged_rows, "fallback_reason": self.fallback_reason,
            "started": self.started.isoformat() if self.started else None,
            "change_rows": self.change_rows, "estimate_s": self.estimate_s,
            "prep_s": self.prep_s, "null_key": self.null_key,
            "cost": self.cost.to_json(), "strategy": self.strategy.value,
            "key_top": self.key_top.to_json() if self.key_top else None,
            "key_top_added": self.key_top_added.to_json() if self.key_top_added else None,
            "sidecar_rebuilt": self.sidecar_rebuilt or None,
            "key": list(self.key) or None,
            "through": {u: list(k) for u, k in sorted(self.through.items())} or None,
            "to": {u: p.to_json() for u, p in sorted(self.pinned.items())},
            "from": {u: p.to_json() for u, p in sorted(self.consumed.items())},
        }
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return text.replace(";", "\\u003b").replace("`", "\\u0060")

    @staticmethod
    def from_history(entry: Mapping[str, Any],
                     model_id: Optional[str]) -> Optional["RefreshCommit"]:
        """The commit of `model_id`'s refresh this history entry is (of any model's: None),
        or None."""
        text = entry.get("userMetadata")
        if not text or PLAN_KEY not in str(text):
            return None
        try:
            data = json.loads(str(text))
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("format") != FORMAT or (
                model_id is not None and data.get("model") != model_id):
            return None
        return RefreshCommit(
            model_id=str(data.get("model") or ""), refresh=int(data["refresh"]), plan_id=str(data[PLAN_KEY]),
            run_id=str(data.get("run") or ""), action=str(data["action"]),
            mode=str(data.get("mode") or ""), reason=str(data.get("reason") or ""),
            fingerprint=str(data.get("fingerprint") or ""), columns=str(data.get("columns") or ""),
            pinned=_points(data.get("to")), consumed=_points(data.get("from")),
            chunk=int(data.get("chunk") or 1), chunks=int(data.get("chunks") or 1),
            staged_rows=int(data.get("staged_rows") or 0),
            fallback_reason=data.get("fallback_reason"),
            started=_time(data.get("started")), prep_s=_float(data.get("prep_s")),
            null_key=bool(data.get("null_key")),
            change_rows=_int(data.get("change_rows")),
            estimate_s=_float(data.get("estimate_s")), cost=CostMemory.from_json(data.get("cost")),
            rule=_rule(data.get("strategy")), key_top=KeyTop.from_json(data.get("key_top")),
            key_top_added=KeyType.from_json(data.get("key_top_added")),
            sidecar_rebuilt=bool(data.get("sidecar_rebuilt")),
            key=_key(data.get("key")), through=_through(data.get("through")),
            version=int(entry.get("version", -1)), timestamp=as_datetime(entry.get("timestamp")),
            metrics=as_map(entry.get("operationMetrics")),
        )


    def seconds(self) -> Optional[float]:
        """How long this refresh took to its commit, if one run made it in one commit."""
        if self.started is None or self.timestamp is None or self.chunks != 1:
            return None
        return (self.timestamp - self.started).total_seconds()

    def memory_after(self) -> CostMemory:
        """The model's measured refreshes: those this commit carried, plus this refresh.

        A backfill counts from its staging on: it stands only for the overwrite no refresh has
        measured yet (cost.rebuild_estimate), and the first model of a cold JVM spends seconds
        in its first metadata reads (bench, 1M rows: a 5.9 s backfill of which 3.4 s went to
        the state, history and DETAIL reads; 0.7-1.0 s for the same model later in the run),
        a guess that kept such a model replaying at 6x its table."""
        # an inline-checked append is the one replay that records key_top_added; a replay
        # that rebuilt its sidecar recomputed the model as a full recompute does
        action = (INSERTS if self.action == REPLAY and self.key_top_added
                  else FULL if self.action == REPLAY and self.sidecar_rebuilt else self.action)
        rows = self.change_rows if action in (REPLAY, INSERTS) else self.output_rows()
        seconds = self.seconds()
        if self.action == BACKFILL and seconds is not None and self.prep_s is not None:
            seconds = max(0.0, seconds - self.prep_s)
        return remember(self.cost, action, seconds, rows)

    def output_rows(self) -> Optional[int]:
        """Rows a rewrite (backfill, overwrite) wrote, from its commit metrics."""
        return _int(self.metrics.get("numOutputRows")) if self.metrics else None


def _rule(value: Any) -> Optional[Strategy]:
    """A replay rule from metadata (None: absent, or written by a version that knew other
    rules)."""
    try:
        return Strategy(str(value)) if value else None
    except ValueError:
        return None


def _key(value: Any) -> Tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(c, str) and c for c in value):
        return ()
    return tuple(value)


def _through(value: Any) -> Dict[str, Tuple[str, ...]]:
    if not isinstance(value, dict):
        return {}
    keys = {str(u): _key(k) for u, k in value.items()}
    return {u: k for u, k in keys.items() if k}


def recorded_key(entries: Sequence[Mapping[str, Any]], version: int) -> Tuple[str, ...]:
    """The key a `batch_refresh` model's target holds at `version`, as the refresh commit
    that made that version's rows recorded it (RefreshCommit.key), from `entries` (its
    newest history, newest first); () when those entries do not say: the version is not
    among them, a commit no refresh made changed rows at or before it, or the refresh
    that made it was not complete (a chunk of several)."""
    rows = sorted((e for e in entries if int(e.get("version", -1)) <= version),
                  key=lambda e: -int(e.get("version", -1)))
    if [int(e.get("version", -1)) for e in rows] != list(range(version, version - len(rows), -1)):
        return ()  # not read, or a commit between those read was not
    log = TargetLog.from_history(rows, None)
    if log.last is None or log.outside is not None or not log.last.complete:
        return ()
    return log.last.key


def _time(value: Any) -> Optional[datetime]:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def _int(value: Any) -> Optional[int]:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> Optional[float]:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class TargetLog:
    """What the newest entries of the target's history say about the model."""

    last: Optional[RefreshCommit]  # the newest commit of a refresh of this model
    outside: Optional[str] = None  # a row-changing commit after it that no refresh made
    head_version: int = -1

    @staticmethod
    def from_history(entries: Iterable[Mapping[str, Any]], model_id: Optional[str]) -> "TargetLog":
        """`entries` newest first, as DESCRIBE HISTORY returns them."""
        outside: Optional[str] = None
        head = -1
        for entry in entries:
            version = int(entry.get("version", -1))
            head = max(head, version)
            commit = RefreshCommit.from_history(entry, model_id)
            if commit is not None:
                return TargetLog(commit, outside, head)
            operation = str(entry.get("operation") or "")
            if outside is None and operation.upper() not in MAINTENANCE_OPERATIONS:
                outside = f"v{version}: {operation}"
        return TargetLog(None, outside, head)
