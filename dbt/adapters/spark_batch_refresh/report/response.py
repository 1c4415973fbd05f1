"""`adapter_response` of a batch_refresh node: what run_results.json records of a refresh."""

from __future__ import annotations

from dataclasses import MISSING, Field, dataclass, fields
from typing import Any, Mapping

from dbt.adapters.contracts.connection import AdapterResponse

from dbt.adapters.spark_batch_refresh.engine.run_result import RefreshCounts
from dbt.adapters.spark_batch_refresh.report import status as status_report


@dataclass
class BatchRefreshResponse(AdapterResponse, RefreshCounts):
    """`adapter_response` of a batch_refresh node in run_results.json: the result's counts
    (RefreshCounts) and its words."""

    # dbt writes adapter_response with omit_none: "" keeps "none" fields present in the file.
    action: str = ""
    reason: str = ""
    mode: str = ""
    resumed: bool = False
    fallback_reason: str = ""
    staged_from: str = ""  # keyed replay: "changes", "join", "aggregate" or "snapshot"
    strategy: str = ""  # plan/strategy.py: a replay's rule, or the action
    next_due: str = ""
    run_id: str = ""

    @classmethod
    def from_result(cls, data: Mapping[str, Any]) -> "BatchRefreshResponse":
        """From RefreshResult.to_dict(): each field of this class taken from the key of its
        name, as the type of its default (None and missing become the default)."""
        own = {f.name: _coerce(f, data.get(f.name)) for f in fields(cls) if f.name not in _BASE}
        return cls(
            _message=status_report.short_message(data),
            code=str(data.get("action") or "").upper(),
            rows_affected=int(data.get("rows_affected") or 0),
            **own,
        )


_BASE = {f.name for f in fields(AdapterResponse)}


def _coerce(spec: Field[Any], value: Any) -> Any:
    default = spec.default_factory() if spec.default is MISSING else spec.default  # type: ignore[misc]
    if value is None:
        return default
    if isinstance(default, dict):  # upstream -> version
        return {str(k): int(v) for k, v in value.items()}
    return type(default)(value)
