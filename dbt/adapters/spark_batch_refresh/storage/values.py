"""Values as the driver returns them: a Spark session gives typed values, PyHive over Thrift
gives timestamps and map columns as text. One reading of each for every caller."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Dict, Mapping, Optional


def as_datetime(value: Any) -> Optional[datetime]:
    """Timestamps arrive as datetimes (session) or text (Thrift); None for text that is not one."""
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


_MAP_ENTRY = re.compile(r"""['"]?([\w.]+)['"]?\s*(?:->|=|:)\s*['"]?([^,'"}]+)""")


def as_map(value: Any) -> Dict[str, str]:
    """A map column (DESCRIBE DETAIL's properties, DESCRIBE HISTORY's operationMetrics and
    operationParameters): a map (session) or its text form (Thrift)."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    return {k: v.strip() for k, v in _MAP_ENTRY.findall(str(value or ""))}
