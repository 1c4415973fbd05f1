"""The adapter: dbt-spark's, plus the Python entry points the batch_refresh macros call."""

from __future__ import annotations

from dataclasses import replace
from importlib import import_module
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

import agate
from dbt.adapters.base.impl import AdapterTrackingRelationInfo
from dbt.adapters.base.meta import available
from dbt.adapters.base.relation import BaseRelation, InformationSchema
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.contracts.relation import RelationConfig
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.impl import SparkAdapter
from dbt_common.clients.agate_helper import build_type_tester
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_batch_refresh import __version__
from dbt.adapters.spark_batch_refresh.report import explain
from dbt.adapters.spark_batch_refresh.report import nodes
from dbt.adapters.spark_batch_refresh.sql.analysis import (
    analyze, coarse_description, keyless_if_null, through_proven_keys)
from dbt.adapters.spark_batch_refresh.plan.config import CONFIG_NAMES, parse_config
from dbt.adapters.spark_batch_refresh.plan.strategy import sidecar_behind
from dbt.adapters.spark_batch_refresh.plan.tested_key import declared_keys
from dbt.adapters.spark_batch_refresh.report import status as status_report
from dbt.adapters.spark_batch_refresh.connections import (
    ConnectionMethod,
    SparkBatchRefreshConnectionManager,
)
from dbt.adapters.spark_batch_refresh.errors import MissingUpstream
from dbt.adapters.spark_batch_refresh.engine.executor import Refresher
from dbt.adapters.spark_batch_refresh.engine.record import Recorder
from dbt.adapters.spark_batch_refresh.engine.lease_holder import LOCAL as LOCAL_PROCESSES
from dbt.adapters.spark_batch_refresh.report.response import BatchRefreshResponse
from dbt.adapters.spark_batch_refresh.storage import endpoint
from dbt.adapters.spark_batch_refresh.storage.endpoint import current_time
from dbt.adapters.spark_batch_refresh.engine.run_result import RefreshRequest
from dbt.adapters.spark_batch_refresh.engine.verify import Verifier
from dbt.adapters.spark_batch_refresh.storage.delta import SharedHistories
from dbt.adapters.spark_batch_refresh.storage.jvm_commit_stats import inserted_key_max
from dbt.adapters.spark_batch_refresh.storage.frame_write import (
    replace_using_statement, write_replace_using)
from dbt.adapters.spark_batch_refresh.storage.jvm_describe import describe_read, read_describe
from dbt.adapters.spark_batch_refresh.storage.jvm_history import history_read, read_history
from dbt.adapters.spark_batch_refresh.storage.jvm_views import read_views, views_read
from dbt.adapters.spark_batch_refresh.storage.session_confs import apply_conf, conf_statement
from dbt.adapters.spark_batch_refresh.storage.state import StateStore, points_json

logger = AdapterLogger("SparkBatchRefresh")

# Bounds the DESCRIBE HISTORY read that dates the first unconsumed commit of an upstream.
_STATUS_HISTORY_LIMIT = 1000


class SparkBatchRefreshAdapter(SparkAdapter):
    ConnectionManager = SparkBatchRefreshConnectionManager  # type: ignore[assignment]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The state and history rows of this invocation's refreshes, written at its end.
        self._recorder = Recorder()
        # Upstream histories read once per invocation (storage/delta.py SharedHistories).
        self._histories = SharedHistories()

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
        answered = self._from_jvm(sql)
        if answered is not None:
            return answered
        _, cursor = self.connections.add_query(sql, auto_begin=False)
        description = cursor.description or []
        names = [d[0] for d in description]
        try:
            rows = cursor.fetchall() if names else []
        except DbtRuntimeError:
            raise
        except Exception as exc:  # noqa: BLE001 - a lazy read fails here, not in execute
            # The session cursor runs a SELECT when its rows are fetched: a change-feed gap
            # (vacuumed files) surfaces here and must reach the gap handler as a dbt error.
            raise DbtRuntimeError(str(exc)) from exc
        return [dict(zip(names, tuple(row))) for row in rows or []]

    def _from_jvm(self, sql: str) -> Optional[List[Dict[str, Any]]]:
        """A DESCRIBE HISTORY, SHOW VIEWS or DESCRIBE QUERY in the embedded session, answered
        by the JVM (storage/jvm_history.py, jvm_views.py, jvm_describe.py); None for every
        other statement and connection, and wherever only the SQL can answer."""
        read, database, query = history_read(sql), views_read(sql), describe_read(sql)
        if read is None and database is None and query is None:
            return None
        session = self._embedded_session()
        if session is None:
            return None
        if read is not None:
            rows, source = read_history(session, read), "Delta log"
        elif database is not None:
            rows, source = read_views(session, database), "catalog"
        else:
            rows, source = read_describe(session, query or ""), "analyser"
        if rows is not None:
            logger.debug(f"{sql} (read from the embedded session's {source}: {len(rows)} rows)")
        return rows

    def _embedded_session(self) -> Any:
        """The SparkSession of this thread's connection (opened now if it was not) when the
        connection is the embedded session; None for every other connection."""
        if self.config.credentials.method != ConnectionMethod.SESSION:
            return None
        wrapper = self.connections.get_thread_connection().handle
        return getattr(getattr(wrapper, "handle", None), "session", None)

    def _run_sql(self, sql: str) -> None:
        frame = replace_using_statement(sql)
        if frame is not None:
            session = self._embedded_session()
            if session is not None:
                logger.debug(f"{sql} (as the embedded session's DataFrame write `replaceUsing`)")
                try:
                    write_replace_using(session, frame)
                except Exception as exc:  # noqa: BLE001 - every Spark/Delta error a dbt error
                    raise DbtRuntimeError(str(exc)) from exc
                return
        conf = conf_statement(sql)
        session = self._embedded_session() if conf is not None else None
        if session is not None:
            try:
                apply_conf(session, *conf)
                logger.debug(f"{sql} (through the embedded session's conf)")
                return
            except Exception:  # noqa: BLE001 - anything unexpected: the SQL, and its error
                pass
        self.connections.add_query(sql, auto_begin=False)

    def _refresher(self) -> Refresher:
        self._use_endpoint()
        embedded = self.config.credentials.method == ConnectionMethod.SESSION
        return Refresher(self._fetch_dicts, self._run_sql, self._recorder, self._histories,
                         inserted_key_max=self._inserted_key_max if embedded else None,
                         replace_using=embedded)

    def _inserted_key_max(self, target: str, version: int, column: str) -> Optional[str]:
        """The largest key a target commit inserted, from its files' statistics (the
        embedded session's Delta log; storage/jvm_commit_stats.py)."""
        session = self._embedded_session()
        return inserted_key_max(session, target, version, column) if session is not None else None

    def _use_endpoint(self) -> None:
        """This target's Spark is the one whose clock (and time zone) times are compared on
        and whose state tables are known to exist, whatever this process ran before."""
        creds = self.config.credentials
        if creds.method == ConnectionMethod.SESSION:
            endpoint.use(endpoint.EMBEDDED, None)
        else:
            method = ConnectionMethod(creds.method).value
            endpoint.use(endpoint.key_for(method, vars(creds)), self._fetch_dicts)

    def debug_query(self) -> None:
        """`dbt debug`: besides the round trip, say which Spark and Delta answered."""
        (row,) = self._fetch_dicts("select version() as spark")
        try:
            (delta,) = self._fetch_dicts("select reflect('io.delta.package', 'VERSION') as v")
            delta_version = str(delta["v"])
        except DbtRuntimeError:
            delta_version = "not found on the server's class path (batch_refresh needs it)"
        method = ConnectionMethod(self.config.credentials.method).value
        logger.info(f"Connected ({method}) to Spark {str(row['spark']).split()[0]}, "
                    f"Delta Lake {delta_version}")

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
        run_values: Optional[List[str]] = None,
    ) -> tuple[BatchRefreshResponse, Dict[str, Any]]:
        request = RefreshRequest(
            model=model, model_id=model_id, target=target, sql=sql, raw_config=dict(raw_config),
            target_options=target_options, target_kind=target_kind, state_schema=state_schema,
            full_refresh=bool(full_refresh), force=bool(force),
            run_values=tuple(str(v) for v in run_values or ()),
        )
        result = self._refresher().refresh(request)
        data = dict(result.to_dict())
        data["summary"] = status_report.summary_line(data)
        return BatchRefreshResponse.from_result(data), data

    def execute(self, sql: str, auto_begin: bool = False, fetch: bool = False,
                limit: Optional[int] = None) -> Tuple[AdapterResponse, Any]:
        """dbt's own statements (hooks, other materializations, seeds): one that may write
        makes the refreshes read upstream histories afresh."""
        self._histories.saw(sql)
        return super().execute(sql, auto_begin=auto_begin, fetch=fetch, limit=limit)

    def cleanup_connections(self) -> None:
        """The end of a dbt invocation: write the refresh-state and history rows of every
        model it refreshed (one commit each), forget the histories it read, then close the
        connections."""
        self._histories.clear()
        if self._recorder.pending():
            try:
                with self.connection_named("batch_refresh_record"):
                    self._use_endpoint()
                    self._recorder.flush(self._fetch_dicts, self._run_sql)
            except Exception as exc:  # noqa: BLE001 - the refreshes themselves are committed
                logger.warning(
                    f"batch_refresh: could not write the refresh-state and history tables "
                    f"({exc}). Nothing is lost: each model's next run writes its row from "
                    f"the target's own log.")
        super().cleanup_connections()

    # ------------------------------------------------------------------ docs catalog
    _catalog_stats: Dict[Tuple[str, str], Dict[str, Any]] = {}

    def get_catalog(
        self,
        relation_configs: Iterable[RelationConfig],
        used_schemas: FrozenSet[Tuple[str, str]],
    ) -> Tuple[agate.Table, List[Exception]]:
        """dbt-spark's catalog, plus each batch_refresh model's refresh metadata as stats.

        The state tables live in their own schema, which no node uses, so they never enter
        the catalog; only what they say about each model does.
        """
        configs = list(relation_configs)  # dbt passes an iterator; it is read twice here
        self._catalog_stats = self._refresh_stats_for(configs)
        return super().get_catalog(configs, used_schemas)

    def _refresh_stats_for(self, configs: List[RelationConfig]) -> Dict[Tuple[str, str], Dict[str, Any]]:
        models = [c for c in configs if nodes.materialized(c) == "batch_refresh"]
        if not models:
            return {}
        state_schema = str(self.execute_macro("spark_batch_refresh__state_schema")).strip()
        store = StateStore(state_schema, self._fetch_dicts, self._run_sql)
        states = {str(r["model_id"]): r for r in store.all_states()}
        last = {str(h["model_id"]): h for h in store.recent_history(1)}
        stats = {}
        for node in models:
            info = nodes.model_info(nodes.node_dict(node))
            key = (str(node.schema).lower(), str(node.identifier).lower())
            stats[key] = status_report.catalog_stats(info, states.get(info.unique_id),
                                                     last.get(info.unique_id))
        return stats

    def _get_one_catalog(
        self,
        information_schema: InformationSchema,
        schemas: Set[str],
        used_schemas: FrozenSet[Tuple[str, str]],
    ) -> agate.Table:
        if len(schemas) != 1:
            return super()._get_one_catalog(information_schema, schemas, used_schemas)
        columns: List[Dict[str, Any]] = []
        for relation in self.list_relations(information_schema.database, next(iter(schemas))):
            columns.extend(self._get_columns_for_catalog(relation))
        # The refresh stats are sentences; agate must not turn them into dates or numbers.
        text = {k for c in columns for k in c if k.startswith("stats:br_")}
        return agate.Table.from_object(columns, column_types=build_type_tester(text))

    def _get_columns_for_catalog(self, relation: BaseRelation) -> Iterable[Dict[str, Any]]:
        """Columns from DESCRIBE for every relation, not from SHOW TABLE EXTENDED's text.

        On Spark 4.2 that text has no schema at all for Delta tables (dbt-spark then falls
        back to DESCRIBE) and Spark's internal type names for views (`long`, `integer`, and
        `array` without its element type), so one project's docs mixed `bigint` and `long`.
        DESCRIBE gives every relation its SQL types, read from the Delta log for Delta tables.
        """
        stats = self._catalog_stats.get(
            (str(relation.schema).lower(), str(relation.identifier).lower()), {})
        try:
            columns = self.get_columns_in_relation(relation)
        except DbtRuntimeError as exc:  # dropped while the catalog was read: leave it out
            logger.debug(f"Error retrieving columns for catalog entry {relation}: {exc}")
            columns = []
        for column in columns:
            as_dict = column.to_column_dict()
            as_dict["column_name"] = as_dict.pop("column", None)
            as_dict["column_type"] = as_dict.pop("dtype")
            as_dict["table_database"] = None
            as_dict.update(stats)
            yield as_dict

    # ------------------------------------------------------------------ operations
    @available
    def batch_refresh_status(self, state_schema: str, models: List[Mapping[str, Any]],
                             history_rows: Any = 5, only_listed: bool = False) -> str:
        """The `batch_refresh_status` report: every project model, its lag and recent runs.

        Read-only: a project that never ran a batch_refresh model gets a report, not new
        state tables.
        """
        keep = _history_limit(history_rows)
        infos = [nodes.model_info(m) for m in models]
        store = StateStore(state_schema, self._fetch_dicts, self._run_sql)
        states = {str(r["model_id"]): r for r in store.all_states()}
        history = store.recent_history(keep) if keep else None
        if only_listed:
            wanted = {i.unique_id for i in infos}
            states = {k: v for k, v in states.items() if k in wanted}
            if history is not None:
                history = [h for h in history if str(h.get("model_id")) in wanted]
        self._reconcile_from_logs(infos, states)
        latest = self._latest_upstreams(states.values())
        self._use_endpoint()
        return status_report.render(infos, states, history, latest, current_time())

    def _reconcile_from_logs(self, infos: List[status_report.ModelInfo],
                             states: Dict[str, Any]) -> None:
        """The state table is a cache of the targets' logs: a row a killed run did not write
        (or one deleted by hand) is shown as the target's newest refresh commit says."""
        reader = self._refresher().reader
        for info in infos:
            if not info.relation:
                continue
            try:
                last = reader.target_log(_render(info.relation), info.unique_id).last
            except DbtRuntimeError:
                continue  # no target yet
            row = states.get(info.unique_id)
            if last is None or not last.complete or (
                    row is not None and row.get("refresh") is not None
                    and int(row["refresh"]) >= last.refresh):
                continue
            states[info.unique_id] = {
                **(row or {}), "model_id": info.unique_id, "relation": info.relation,
                "phase": (row or {}).get("phase") or "idle",
                "consumed": points_json(last.pinned), "fingerprint": last.fingerprint,
                "target_version": last.version, "last_refresh_at": last.timestamp,
                "last_action": last.action, "last_outcome": "success", "refresh": last.refresh}

    def _latest_upstreams(
        self, states: Iterable[Mapping[str, Any]]
    ) -> Dict[str, Optional[status_report.Latest]]:
        """Newest version of every consumed upstream, with the commit times lag needs."""
        oldest: Dict[str, int] = {}
        for row in states:
            for upstream, point in status_report.consumed_points(row.get("consumed")).items():
                version = int(point.get("version", 0))
                oldest[upstream] = min(version, oldest.get(upstream, version))
        reader = self._refresher().reader
        latest: Dict[str, Optional[status_report.Latest]] = {}
        for upstream, consumed in sorted(oldest.items()):
            # A dropped upstream reads as None: the report says "?".
            found = reader.commit_times(upstream, consumed, _STATUS_HISTORY_LIMIT)
            latest[upstream] = status_report.Latest(*found) if found else None
        return latest

    @available
    def batch_refresh_config_names(self) -> List[str]:
        """The model configs a refresh reads (the macros collect exactly these)."""
        return list(CONFIG_NAMES)

    @available
    def batch_refresh_declared_keys(self, graph: Mapping[str, Any],
                                    node: Mapping[str, Any]) -> Dict[str, Any]:
        """The keys the tests and constraints of `node` and of its upstreams declare."""
        return declared_keys(graph, node)

    @available
    def batch_refresh_history(self, state_schema: str) -> List[Dict[str, Any]]:
        self._use_endpoint()
        store = StateStore(state_schema, self._fetch_dicts, self._run_sql)
        store.ensure()
        return store.all_history()

    @available
    def batch_refresh_unlock(self, state_schema: str, model_id: str, force: bool = False) -> str:
        self._use_endpoint()
        store = StateStore(state_schema, self._fetch_dicts, self._run_sql)
        store.ensure()
        row = store.read(model_id)
        now = current_time()
        if row is None:
            return f"{model_id}: no refresh state; nothing to unlock."
        unexpired = row.lease_until is not None and row.lease_until > now
        ended = unexpired and LOCAL_PROCESSES.gone(row.lease_holder, row.plan)
        if unexpired and not ended and not force:
            return (
                f"{model_id}: lease is live (run {row.run_id} by {row.lease_holder} until "
                f"{row.lease_until}); refusing. Pass force: true if that run is dead."
            )
        store.unlock(model_id, now)
        return (
            f"{model_id}: lease cleared (phase {row.phase}"
            + (f"; its holder {row.lease_holder} has ended" if ended else "") + "); the next run "
            + ("resumes the interrupted refresh." if row.phase != "idle" else "refreshes normally.")
        )

    @available
    def batch_refresh_explain(self, model: str, model_id: str, sql: str,
                              raw_config: Mapping[str, Any], state_schema: str,
                              relation: str = "") -> str:
        """How `model` will refresh and why; reads metadata only, writes nothing."""
        config = parse_config(model, dict(raw_config))
        refresher = self._refresher()
        sql, views = refresher.views.see_through(sql)
        analysis = analyze(sql, config.unique_key, config.tested_key, config.upstream_keys,
                           config.upstream_model_keys)
        consumed: Dict[str, int] = {}
        phase: Optional[str] = None
        target = _render(relation) if relation else None
        last = None
        if target is not None:
            try:
                last = refresher.reader.target_log(target, model_id).last
            except DbtRuntimeError:
                last = None  # no target yet: never refreshed
        if last is not None:
            consumed = {u: p.version for u, p in last.pinned.items()}
            phase = "idle" if last.complete else f"merging {last.chunk}/{last.chunks} (resumable)"
            # as the next refresh plans it
            analysis, _, null_safe = keyless_if_null(analysis, config.unique_key, last.null_key)
            config = replace(config, nullable_key=null_safe)
        upstreams = []
        for name in analysis.upstreams:
            try:
                latest = refresher.reader.latest_point(name)
            except MissingUpstream:
                latest = None  # explain says "not a Delta table / missing" rather than failing
            feed = None
            if latest is not None:
                feed = explain.props_change_feed(refresher.reader.details([name])[name][1])
            upstreams.append(explain.UpstreamInfo(name, latest, feed, consumed.get(name)))
        if not analysis.key:  # as the refresh does: through its upstream models' proven keys
            proven = refresher.reader.proven_keys(analysis.upstreams, consumed,
                                                  {u.name: u.latest for u in upstreams})
            keyed = through_proven_keys(sql, config.tested_key, config.upstream_keys, proven,
                                        config.upstream_model_keys,
                                        last is not None and last.null_key)
            if keyed is not None:
                analysis, _, null_safe = keyed
                config = replace(config, nullable_key=null_safe)
        recorded = None if last is None else explain.LastRefresh(
            last.action, last.estimate_s, last.seconds(), last.memory_after(),
            sidecar_behind(config, analysis, last.action, last.fallback_reason))
        waiting = None if last is None else refresher.reader.moved_rows(
            consumed, {u.name: u.latest for u in upstreams})
        coarse = None
        if analysis.key and not analysis.rowwise and not analysis.incremental_reason:
            try:
                coarse = coarse_description(analysis.replay_sql or sql, analysis.key,
                                            refresher.table_columns)
            except Exception:  # noqa: BLE001 - a line of explain, never its failure
                coarse = None
        return explain.render(model, config, analysis, upstreams, phase, recorded, waiting,
                              views=views, coarse=coarse)

    @available.parse(lambda *a, **k: "select 1 as batch_refresh_side where false")
    def batch_refresh_consistency_sql(self, model: str, model_id: str, relation: str,
                                      state_schema: str) -> str:
        """The `batch_refresh_consistent` test's query: every row that differs."""
        query, _ = Verifier(self._fetch_dicts, self._run_sql, self._recorder).differences(
            model, model_id, _render(relation), state_schema)
        return query

    @available
    def batch_refresh_verify(self, model: str, model_id: str, relation: str,
                             state_schema: str) -> str:
        """`dbt run-operation batch_refresh_verify`: counts and examples; an error if they differ."""
        verdict = Verifier(self._fetch_dicts, self._run_sql, self._recorder).verify(
            model, model_id, _render(relation), state_schema)
        if not verdict.consistent:
            raise DbtRuntimeError(verdict.render())
        return verdict.render()


def _render(relation: str) -> str:
    """`schema.name` as a quoted relation."""
    return ".".join(f"`{part}`" for part in relation.replace("`", "").split("."))


def _history_limit(value: Any) -> int:
    """`--args '{history: n}'`: a clear error instead of a traceback for a bad value."""
    try:
        keep = int(value)
    except (TypeError, ValueError):
        keep = -1
    if keep < 0 or isinstance(value, bool):
        raise DbtRuntimeError(
            f"batch_refresh_status: history must be a whole number of runs per model (0 hides "
            f"them), got {value!r}. Fix: --args '{{history: 5}}'."
        )
    return keep
