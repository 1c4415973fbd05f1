"""`adapter_response` of a batch_refresh node: what run_results.json records of a refresh."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping

from dbt.adapters.contracts.connection import AdapterResponse

from dbt.adapters.spark_batch_refresh.report import status as status_report


@dataclass
class BatchRefreshResponse(AdapterResponse):
    """`adapter_response` of a batch_refresh node in run_results.json."""

    # dbt writes adapter_response with omit_none: "" keeps "none" fields present in the file.
    action: str = ""
    reason: str = ""
    mode: str = ""
    resumed: bool = False
    fallback_reason: str = ""
    versions_from: Dict[str, int] = field(default_factory=dict)
    versions_to: Dict[str, int] = field(default_factory=dict)
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    staged_rows: int = 0
    chunks: int = 0
    staged_from: str = ""  # keyed replay: "changes", "join", "aggregate" or "snapshot"
    next_due: str = ""
    run_id: str = ""
    statements: int = 0  # SQL statements the refresh issued
    writes: int = 0  # of which Delta writes (commits)
    duration_s: float = 0.0

    @classmethod
    def from_result(cls, data: Mapping[str, Any]) -> "BatchRefreshResponse":
        return cls(
            _message=status_report.short_message(data),
            code=str(data.get("action") or "").upper(),
            rows_affected=int(data.get("rows_affected") or 0),
            action=str(data.get("action") or ""),
            reason=str(data.get("reason") or ""),
            mode=str(data.get("mode") or ""),
            resumed=bool(data.get("resumed")),
            fallback_reason=str(data.get("fallback_reason") or ""),
            versions_from={str(k): int(v) for k, v in (data.get("versions_from") or {}).items()},
            versions_to={str(k): int(v) for k, v in (data.get("versions_to") or {}).items()},
            rows_inserted=int(data.get("rows_inserted") or 0),
            rows_updated=int(data.get("rows_updated") or 0),
            rows_deleted=int(data.get("rows_deleted") or 0),
            staged_rows=int(data.get("staged_rows") or 0),
            chunks=int(data.get("chunks") or 0),
            staged_from=str(data.get("staged_from") or ""),
            next_due=str(data.get("next_due") or ""),
            run_id=str(data.get("run_id") or ""),
            statements=int(data.get("statements") or 0),
            writes=int(data.get("writes") or 0),
            duration_s=float(data.get("duration_s") or 0.0),
        )
