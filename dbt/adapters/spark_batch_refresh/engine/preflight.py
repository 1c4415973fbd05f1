"""Read-only checks of a planned refresh before anything is written.

Each may turn the plan into a backfill (or raise) per `on_change_feed_gap` and
`on_model_change`: an upstream recreated since it was consumed, the target written outside
batch_refresh, the model's output columns changed, an upstream without its change feed.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Mapping, Optional, Tuple

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_batch_refresh.errors import BatchRefreshUserError
from dbt.adapters.spark_batch_refresh.engine.run_result import RefreshRequest
from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig
from dbt.adapters.spark_batch_refresh.plan.gaps import RETENTION_CHECK_AGE, Gap, retention_risk
from dbt.adapters.spark_batch_refresh.plan.planner import Plan, UpstreamPoint, rebuild_or_fail
from dbt.adapters.spark_batch_refresh.storage.commit_log import TargetLog, columns_hash
from dbt.adapters.spark_batch_refresh.storage.delta import Columns, DeltaReader
from dbt.adapters.spark_batch_refresh.sql.rewrite import pin_versions

logger = AdapterLogger("SparkBatchRefresh")


class Preflight:
    def __init__(self, reader: DeltaReader) -> None:
        self.reader = reader

    def replay(self, req: RefreshRequest, config: BatchRefreshConfig, plan: Plan,
               log: TargetLog, started: datetime) -> Tuple[Plan, Columns]:
        """A refresh from the consumed versions: every moved upstream still the table consumed,
        the target untouched by others, the output columns as recorded. Returns the plan
        (perhaps a backfill now) and the model's columns when they were described."""
        last = log.last
        moved = [u for u, p in plan.pinned.items() if p.version > plan.consumed[u].version]
        ids = {u: plan.consumed[u].table_id for u in plan.pinned}
        for upstream in moved:
            seen = plan.consumed[upstream]
            same = self.reader.same_table(upstream, seen, plan.pinned[upstream].version)
            props: Optional[Mapping[str, str]] = None
            if same is None:  # the history cannot tell: compare the Delta table ids
                ids[upstream], props = self.reader.details([upstream])[upstream]
                same = not (seen.table_id and ids[upstream] and seen.table_id != ids[upstream])
            if not same:
                gap = Gap("recreated", upstream, seen.version, plan.pinned[upstream].version)
                return self.on_gap(req.model, config, plan, gap), []
            age = started - seen.timestamp if seen.timestamp is not None else None
            if props is None and age is not None and age >= RETENTION_CHECK_AGE:
                props = self.reader.properties(upstream)
            if props is not None and age is not None:
                _warn_retention(req.model, upstream, seen, props, age)
        plan = replace(plan, pinned={u: replace(p, table_id=ids[u]) for u, p in plan.pinned.items()})
        if last is None:
            return plan, []  # planned from the state row: a recreated target, already a rebuild
        changed = None
        model_cols: Columns = []
        if log.outside is not None:
            changed = f"the target {req.target} was changed outside batch_refresh ({log.outside})"
        else:
            # The same pinned versions whether it replays or rebuilds.
            model_cols = self.reader.describe(pin_versions(req.sql, plan.versions_to()))
            if columns_hash(model_cols) != last.columns:
                target_cols = self.reader.describe(f"SELECT * FROM {req.target}")
                changed = (f"the model's output columns changed ({_cols(target_cols)} -> "
                           f"{_cols(model_cols)})")
        if changed is not None:
            plan = rebuild_or_fail(req.model, config, plan, changed=changed)
        return plan, model_cols

    def on_gap(self, model: str, config: BatchRefreshConfig, plan: Plan, gap: Gap) -> Plan:
        rebuilt = rebuild_or_fail(model, config, plan, gap=gap)
        logger.warning(f"batch_refresh model '{model}': {gap.describe()}; rebuilding "
                       f"from a new snapshot (on_change_feed_gap='rebuild').")
        return rebuilt

    def backfill(self, req: RefreshRequest, config: BatchRefreshConfig, plan: Plan) -> Plan:
        """Every Delta upstream has its change feed on (unless the model never reads one);
        pin the table ids seen."""
        details = self.reader.details(list(plan.pinned))
        missing = [] if config.refresh_mode in ("full", "overwrite") else [
            u for u, (_, props) in details.items()
            if props.get("delta.enableChangeDataFeed", "false").lower() != "true"
        ]
        if missing:
            raise BatchRefreshUserError(
                req.model,
                "upstream Delta tables have no Change Data Feed, so changes cannot be replayed",
                [f"{u}: run  ALTER TABLE {u} SET TBLPROPERTIES (delta.enableChangeDataFeed = true)"
                 for u in missing]
                + ["or set refresh_mode='full' (or 'overwrite') to recompute the model on every "
                   "refresh."],
            )
        return replace(plan, pinned={u: replace(p, table_id=details[u][0])
                                     for u, p in plan.pinned.items()})


def _warn_retention(model: str, upstream: str, seen: UpstreamPoint, props: Mapping[str, str],
                    age: timedelta) -> None:
    risk = retention_risk(props, age)
    if not risk:
        return
    prop, retention, left = risk
    logger.warning(
        f"batch_refresh model '{model}': upstream {upstream} was consumed at v{seen.version} "
        f"({seen.timestamp}); {prop} is {retention}, so "
        + (f"only {left} is left before" if left.total_seconds() > 0 else "already past")
        + " VACUUM or log cleanup may open a change-feed gap. Run this model more often than "
        "that (its refresh_interval and your schedule).")


def _cols(cols: Columns) -> str:
    return ", ".join(f"{c} {t}" for c, t in cols)
