"""A PySpark session (embedded, or a Spark Connect client) as the DB-API-ish cursor dbt-spark's
session wrapper drives, with every Spark error a dbt error and TIMESTAMP values on the session's
clock."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any, List, Optional, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dbt_common.exceptions import DbtRuntimeError


class SessionCursor:
    """A DB-API-ish cursor over one SparkSession (dbt-spark's wrapper drives it)."""

    def __init__(self, session: Any) -> None:
        from dbt.adapters.spark.session import Cursor

        self._inner = Cursor()
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def execute(self, sql: str, *parameters: Any) -> None:
        if parameters:
            sql = sql % parameters
        try:
            self._inner._df = self._session.sql(sql)
            self._inner._rows = None
        except Exception as exc:  # noqa: BLE001 - every Spark/Delta error becomes a dbt error
            raise DbtRuntimeError(str(exc)) from exc

    def fetchall(self) -> Optional[List[Any]]:
        rows = self._inner.fetchall()
        if not rows:
            return rows
        from pyspark.sql.types import TimestampType

        fields = self._inner._df.schema.fields
        instants = [i for i, f in enumerate(fields) if isinstance(f.dataType, TimestampType)]
        if not instants:
            return rows
        zone = session_zone(self._session.conf.get("spark.sql.session.timeZone"))
        return [wall_clock(row, instants, zone) for row in rows]


def session_zone(name: Optional[str]) -> Optional[tzinfo]:
    """A Spark session time zone (a region id, `UTC`, or an offset such as `+02:00`)."""
    if not name:
        return None
    offset = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?", name.strip())
    if offset:
        sign = -1 if offset.group(1) == "-" else 1
        return timezone(sign * timedelta(hours=int(offset.group(2)),
                                         minutes=int(offset.group(3) or 0)))
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        return None


def wall_clock(row: Sequence[Any], instants: List[int], zone: Optional[tzinfo]) -> tuple:
    """A row with its TIMESTAMP values as the session's wall clock, as a Thrift Server renders
    them. PySpark (in-process and Spark Connect alike) hands an instant back in this process's
    local time zone, while the SQL a refresh writes (lease and state times, literals compared
    with commit times) is read by Spark in the session's zone: with a session zone other than
    the client's, a lease written at 10:00 would read back hours off."""
    values = list(row)
    if zone is None:
        return tuple(values)
    for i in instants:
        value = values[i]
        if isinstance(value, datetime) and value.tzinfo is None:
            values[i] = value.astimezone().astimezone(zone).replace(tzinfo=None)
    return tuple(values)


class SessionHandle:
    def __init__(self, session: Any) -> None:
        self.session = session

    def cursor(self) -> SessionCursor:
        return SessionCursor(self.session)
