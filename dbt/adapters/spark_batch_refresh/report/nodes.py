"""What the status report and the docs catalog read of dbt's manifest nodes."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from dbt.adapters.contracts.relation import RelationConfig

from dbt.adapters.spark_batch_refresh.report import status as status_report
from dbt.adapters.spark_batch_refresh.plan.config import parse_duration


def model_info(node: Mapping[str, Any]) -> status_report.ModelInfo:
    interval = node.get("refresh_interval")
    try:
        seconds = parse_duration(interval)
    except ValueError:
        seconds = None  # `dbt run` reports the bad value; the report just shows it
    return status_report.ModelInfo(
        unique_id=str(node["unique_id"]),
        name=str(node["name"]),
        relation=str(node.get("relation") or ""),
        refresh_interval=None if interval is None else str(interval),
        refresh_mode=None if node.get("refresh_mode") is None else str(node["refresh_mode"]),
        interval_s=seconds,
    )



def materialized(node: RelationConfig) -> Optional[str]:
    config = getattr(node, "config", None)
    return getattr(config, "materialized", None) if config is not None else None



def node_dict(node: RelationConfig) -> Dict[str, Any]:
    """The fields of a manifest node the status report and the catalog stats read."""
    config = node.config
    get = config.get if config is not None else (lambda _k, _d=None: None)
    return {
        "unique_id": getattr(node, "unique_id", node.name),
        "name": node.name,
        "relation": f"{node.schema}.{node.identifier}",
        "refresh_interval": get("refresh_interval", None),
        "refresh_mode": get("refresh_mode", None),
    }
