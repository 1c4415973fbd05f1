"""The adapter: dbt-spark's, plus the Python entry points the batch_refresh macros call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from importlib import import_module

from dbt.adapters.base.impl import AdapterTrackingRelationInfo
from dbt.adapters.base.meta import available
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.spark.impl import SparkAdapter

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_batch_refresh import __version__
from dbt.adapters.spark_batch_refresh import explain
from dbt.adapters.spark_batch_refresh.analysis import analyze
from dbt.adapters.spark_batch_refresh.config import parse_config
from dbt.adapters.spark_batch_refresh import status as status_report
from dbt.adapters.spark_batch_refresh.connections import SparkBatchRefreshConnectionManager
from dbt.adapters.spark_batch_refresh.executor import (
    RefreshRequest,
    Refresher,
    current_time,
)
from dbt.adapters.spark_batch_refresh.state import StateStore


@dataclass
class BatchRefreshResponse(AdapterResponse):
    """`adapter_response` of a batch_refresh node in run_results.json."""

    action: str = ""
    reason: str = ""
    mode: str = ""
    resumed: bool = False
    fallback_reason: Optional[str] = None
    versions_from: Dict[str, int] = field(default_factory=dict)
    versions_to: Dict[str, int] = field(default_factory=dict)
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    staged_rows: int = 0
    next_due: Optional[str] = None
    run_id: Optional[str] = None
    chunks: int = 0
    statements: int = 0
    writes: int = 0
    duration_s: float = 0.0


class SparkBatchRefreshAdapter(SparkAdapter):
    ConnectionManager = SparkBatchRefreshConnectionManager  # type: ignore[assignment]

    @classmethod
    def get_adapter_run_info(cls, config: Any) -> AdapterTrackingRelationInfo:
        # The base class derives the module from the class name ("sparkbatchrefresh").
        return AdapterTrackingRelationInfo(
            adapter_name="spark_batch_refresh",
            base_adapter_version=import_module("dbt.adapters.__about__").version,
            adapter_version=__version__.version,
            model_adapter_details=cls._get_adapter_specific_run_info(config),
        )

    # ------------------------------------------------------------------ SQL plumbing
    def _fetch_dicts(self, sql: str) -> List[Dict[str, Any]]:
        """Run one statement on this thread's connection; rows as dicts (no agate)."""
        _, cursor = self.connections.add_query(sql, auto_begin=False)
        description = cursor.description or []
        names = [d[0] for d in description]
        rows = cursor.fetchall() if names else []
        return [dict(zip(names, tuple(row))) for row in rows or []]

    def _run_sql(self, sql: str) -> None:
        self.connections.add_query(sql, auto_begin=False)

    def _refresher(self) -> Refresher:
        return Refresher(self._fetch_dicts, self._run_sql)

    # ------------------------------------------------------------------ materialization
    @available.parse(lambda *a, **k: (BatchRefreshResponse(_message="PARSE"), {}))
    def batch_refresh_run(
        self,
        model: str,
        model_id: str,
        target: str,
        sql: str,
        raw_config: Mapping[str, Any],
        target_options: str,
        target_kind: str,
        state_schema: str,
        full_refresh: bool,
        force: bool,
    ) -> tuple[BatchRefreshResponse, Dict[str, Any]]:
        request = RefreshRequest(
            model=model, model_id=model_id, target=target, sql=sql, raw_config=dict(raw_config),
            target_options=target_options, target_kind=target_kind, state_schema=state_schema,
            full_refresh=bool(full_refresh), force=bool(force),
        )
        result = self._refresher().refresh(request)
        data = result.to_dict()
        response = BatchRefreshResponse(
            _message=result.message(),
            code=result.action.upper(),
            rows_affected=result.rows_affected,
            **{k: data[k] for k in (
                "action", "reason", "mode", "resumed", "fallback_reason", "versions_from",
                "versions_to", "rows_inserted", "rows_updated", "rows_deleted", "staged_rows",
                "next_due", "run_id", "chunks", "statements", "writes", "duration_s")},
        )
        return response, data

    # ------------------------------------------------------------------ operations
    @available
    def batch_refresh_status(self, state_schema: str, history_rows: int = 5) -> str:
        store = StateStore(state_schema, self._fetch_dicts, self._run_sql)
        store.ensure()
        states = self._fetch_dicts(f"SELECT * FROM {store.state} ORDER BY model_id")
        history = self._fetch_dicts(
            f"SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY model_id ORDER BY "
            f"started_at DESC) AS _rn FROM {store.history}) WHERE _rn <= {int(history_rows)} "
            f"ORDER BY model_id, started_at DESC"
        )
        return status_report.render(states, history, current_time())

    @available
    def batch_refresh_history(self, state_schema: str) -> List[Dict[str, Any]]:
        store = StateStore(state_schema, self._fetch_dicts, self._run_sql)
        store.ensure()
        return self._fetch_dicts(f"SELECT * FROM {store.history} ORDER BY started_at, run_id")

    @available
    def batch_refresh_unlock(self, state_schema: str, model_id: str, force: bool = False) -> str:
        store = StateStore(state_schema, self._fetch_dicts, self._run_sql)
        store.ensure()
        row = store.read(model_id)
        now = current_time()
        if row is None:
            return f"{model_id}: no refresh state; nothing to unlock."
        live = row.lease_until is not None and row.lease_until > now
        if live and not force:
            return (
                f"{model_id}: lease is live (run {row.run_id} by {row.lease_holder} until "
                f"{row.lease_until}); refusing. Pass force: true if that run is dead."
            )
        store.unlock(model_id, now)
        return (
            f"{model_id}: lease cleared (phase {row.phase}); the next run "
            + ("resumes the interrupted refresh." if row.phase != "idle" else "refreshes normally.")
        )

    @available
    def batch_refresh_explain(self, model: str, model_id: str, sql: str,
                              raw_config: Mapping[str, Any], state_schema: str) -> str:
        """How `model` will refresh and why; reads metadata only, writes nothing."""
        config = parse_config(model, dict(raw_config))
        analysis = analyze(sql, config.unique_key)
        refresher = self._refresher()
        consumed: Dict[str, int] = {}
        phase: Optional[str] = None
        try:
            row = StateStore(state_schema, self._fetch_dicts, self._run_sql).read(model_id)
        except DbtRuntimeError:
            row = None  # no state table yet: never refreshed
        if row is not None and row.fingerprint:
            consumed = {u: p.version for u, p in row.consumed.items()}
            phase = row.phase
        upstreams = []
        for name in analysis.upstreams:
            latest = refresher.latest_point(name)
            feed = None
            if latest is not None:
                feed = explain.props_change_feed(refresher.details([name])[name][1])
            upstreams.append(explain.UpstreamInfo(name, latest, feed, consumed.get(name)))
        return explain.render(model, config, analysis, upstreams, phase)
