"""Session confs around a group of statements: the idempotent-write and commit-metadata confs
Delta reads from the session (each dbt connection is its own Spark session)."""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Optional, Tuple

from dbt.adapters.spark_batch_refresh.storage.calls import Run

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
# An INSERT OVERWRITE under `dynamic` replaces only the partitions its rows fall in; a refresh
# that rewrites its target must replace all of them, whatever the session says.
PARTITION_OVERWRITE = "spark.sql.sources.partitionOverwriteMode"
# Delta checks that every row a REPLACE WHERE inserts satisfies its predicate; a refresh's
# rows do by construction (sqlgen.replace_where), and the check costs a pass over them.
REPLACE_WHERE_CHECK = "spark.databricks.delta.replaceWhere.constraintCheck.enabled"


def idempotent_write(app_id: str, version: int) -> Dict[str, str]:
    """Delta skips a write whose (app id, version) the table has already committed."""
    return {TXN_APP_ID: app_id, TXN_VERSION: str(version)}


class SessionConfs:
    """SET session confs for the statements inside, RESET them after (also on error)."""

    def __init__(self, run: Run, confs: Mapping[str, str]) -> None:
        self._run = run
        self._confs = confs

    def __enter__(self) -> None:
        for key, value in self._confs.items():
            self._run(f"SET {key}={value}")

    def __exit__(self, *exc: Any) -> None:
        for key in self._confs:
            self._run(f"RESET {key}")


_SET = re.compile(r"SET (?P<key>[A-Za-z0-9_.:]+)=(?P<value>\S(?:.*\S)?)", re.DOTALL)
_RESET = re.compile(r"RESET (?P<key>[A-Za-z0-9_.:]+)")


def conf_statement(sql: str) -> Optional[Tuple[str, Optional[str]]]:
    """(key, value) of a `SET key=value` as SessionConfs writes it, (key, None) of its
    `RESET key`; None for any other statement."""
    found = _SET.fullmatch(sql)
    if found is not None:
        return found.group("key"), found.group("value")
    found = _RESET.fullmatch(sql)
    return (found.group("key"), None) if found is not None else None


def apply_conf(session: Any, key: str, value: Optional[str]) -> None:
    """What the SET or RESET does, through the embedded session's conf (no SQL statement to
    parse and plan: 3-7 ms each, eight per write). RESET as Spark's: the key unset, then the
    value the session was built with, if any."""
    if value is not None:
        session.conf.set(key, value)
        return
    session.conf.unset(key)
    built = session.sparkContext._conf.get(key)
    if built is not None:
        session.conf.set(key, built)
