"""Credentials and connections: dbt-spark's, plus an embedded Spark with Delta for `session`."""

from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone, tzinfo
from importlib import metadata
from typing import Any, Dict, List, Optional, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dbt.adapters.contracts.connection import Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.dataclass_schema import StrEnum
from dbt_common.exceptions import DbtRuntimeError
from dbt.adapters.spark.connections import (
    PyhiveConnectionWrapper,
    SparkConnectionManager,
    SparkCredentials,
)

from dbt.adapters.spark_batch_refresh.embedded.session_defaults import (
    SessionSettings,
    delta_package,
    embedded_confs,
    jar_cache_file,
)
from dbt.adapters.spark_batch_refresh.embedded.jar_cache import (
    remember_jars,
    start_resolving_once,
)

logger = AdapterLogger("SparkBatchRefresh")


class ConnectionMethod(StrEnum):
    """dbt-spark's methods (equal to its enum's members as strings) plus `connect`."""

    THRIFT = "thrift"
    HTTP = "http"
    ODBC = "odbc"
    SESSION = "session"
    CONNECT = "connect"


@dataclass
class SparkBatchRefreshCredentials(SparkCredentials):
    method: ConnectionMethod = None  # type: ignore[assignment]
    # Embedded session only: where warehouse, metastore and derby.log live (relative to the
    # directory dbt runs in), and how to find the Delta jars.
    session_dir: str = ".batch_refresh"
    delta_jars: Optional[List[str]] = None
    delta_package: Optional[str] = None

    @classmethod
    def __pre_deserialize__(cls, data: Any) -> Any:
        data = super().__pre_deserialize__(data)
        # The embedded session is the default; it needs no host.
        data.setdefault("method", ConnectionMethod.SESSION.value)
        if data.get("method") == ConnectionMethod.SESSION.value:
            data.setdefault("host", "localhost")
        return data

    def __post_init__(self) -> None:
        if self.method == ConnectionMethod.SESSION:
            require_session_extra()  # before dbt-spark's check, which names its own extra
        if self.method == ConnectionMethod.CONNECT:
            connect_url(self.host, self.token)  # a host that is no sc:// URL fails here
            require_connect_client()
        super().__post_init__()

    @property
    def type(self) -> str:
        return "spark_batch_refresh"

    def _connection_keys(self) -> tuple[str, ...]:
        keys = super()._connection_keys()
        if self.method == ConnectionMethod.SESSION:
            return ("method", "schema", "session_dir")
        if self.method == ConnectionMethod.CONNECT:
            return ("method", "host", "schema")
        return ("method",) + tuple(keys)


class _EmbeddedSpark:
    """One JVM per process; each dbt connection gets its own SparkSession on it.

    Separate sessions keep session confs (the idempotent-write txn confs, commit metadata)
    from leaking between dbt threads that refresh different models at once.
    """

    _lock = threading.Lock()
    _base: Any = None

    @classmethod
    def session_for_connection(cls, creds: SparkBatchRefreshCredentials) -> Any:
        with cls._lock:
            if cls._base is None:
                cls._base = cls._start(creds)
            return cls._base.newSession()

    @staticmethod
    def _start(creds: SparkBatchRefreshCredentials) -> Any:
        from pyspark.sql import SparkSession

        _quiet_pyspark_error_log()
        active = SparkSession.getActiveSession()
        if active is not None:
            # Someone (a test harness, a notebook) already started Spark: reuse it.
            return active
        settings = SessionSettings(
            session_dir=creds.session_dir,
            delta_jars=creds.delta_jars,
            delta_package=creds.delta_package,
            user_confs=creds.server_side_parameters,
        )
        cache = jar_cache_file(delta_package(settings, os.environ), os.environ)
        return start_resolving_once(
            cache,
            lambda jars: embedded_confs(replace(settings, cached_jars=jars), cwd=os.getcwd()),
            lambda confs: _EmbeddedSpark._build(confs, cache))

    @staticmethod
    def _build(confs: Dict[str, str], cache: str) -> Any:
        from pyspark.sql import SparkSession

        # The embedded Spark serves only this process: bind it to loopback.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.makedirs(os.path.dirname(confs["spark.sql.warehouse.dir"]), exist_ok=True)
        builder = SparkSession.builder.enableHiveSupport()
        for key, value in confs.items():
            builder = builder.config(key, value)
        logger.debug(f"Starting embedded Spark with {confs}")
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        if "spark.jars.packages" in confs and not remember_jars(
                cache, spark.sparkContext.getConf().get("spark.jars", "")):
            logger.debug(f"Could not remember the Delta jars in {cache}")
        return spark


def _quiet_pyspark_error_log() -> None:
    """PySpark 4 writes every SQL error it converts to stderr a second time, as a JSON record
    with the JVM's stack trace, from loggers of its own that do not propagate. dbt already
    reports the error (once, as a dbt error), and some statements of a refresh fail by design
    (the state table a first run looks for before it exists): on a console that was a
    screenful of JSON per model. Those loggers are turned off for this process."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # pyspark before 4.0 has no such logger
        return
    for name in PYSPARK_ERROR_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


PYSPARK_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
SESSION_EXTRA = 'pip install "dbt-spark-batch-refresh[session]"'
CONNECT_EXTRA = 'pip install "dbt-spark-batch-refresh[connect]"'
CONNECT_SCHEME = "sc://"


def connect_url(host: Optional[str], token: Optional[str]) -> str:
    """The Spark Connect URL of a `method: connect` profile: `host` is the URL
    (sc://host:port/;param=value...); a `token` (the profile's, e.g. from env_var) is added
    as the URL's token parameter, which makes the client use TLS."""
    if not host or not host.startswith(CONNECT_SCHEME):
        raise DbtRuntimeError(
            f"The profile uses `method: connect`, whose `host` must be a Spark Connect URL "
            f"such as sc://spark.example.com:15002, but it is `{host}`. Set `host` to the "
            f"server's sc:// URL (Spark Connect listens on port 15002 by default).")
    if token and ";token=" not in host:
        return f"{host.rstrip('/')}/;token={token}" if "/;" not in host else f"{host};token={token}"
    return host


def require_connect_client() -> None:
    """`method: connect` needs the Spark Connect client and its libraries (grpc, pyarrow,
    pandas), which the `connect` extra installs (pyspark-client: no JVM, no Spark jars)."""
    try:
        import pyspark.sql.connect.session  # noqa: F401 - checks grpc, pyarrow and pandas too
    except Exception as exc:  # noqa: BLE001 - ImportError, or pyspark's own dependency error
        raise DbtRuntimeError(
            f"The profile uses `method: connect` (Spark Connect), but its client cannot be "
            f"loaded ({exc}). Install the extra that brings it: {CONNECT_EXTRA}.") from exc


def require_session_extra() -> None:
    """`method: session` (the default) runs Spark in this process: it needs pyspark and
    delta-spark, which only the `session` extra installs."""
    missing = [name for name in ("pyspark", "delta-spark") if not _installed(name)]
    if missing:
        raise DbtRuntimeError(
            f"The profile uses `method: session` (the embedded Spark + Delta, the default when "
            f"no method is set), but {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed. Install the extra that "
            f"brings them: {SESSION_EXTRA}; or connect to a Spark server with `method: thrift`, "
            f"`http` or `odbc`, which need neither.")


def _installed(distribution: str) -> bool:
    try:
        metadata.version(distribution)
        return True
    except metadata.PackageNotFoundError:
        return False


class _SessionCursor:
    """A DB-API-ish cursor over one SparkSession (dbt-spark's wrapper drives it)."""

    def __init__(self, session: Any) -> None:
        from dbt.adapters.spark.session import Cursor

        self._inner = Cursor()
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def execute(self, sql: str, *parameters: Any) -> None:
        from dbt_common.exceptions import DbtRuntimeError

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


class _SessionHandle:
    def __init__(self, session: Any) -> None:
        self.session = session

    def cursor(self) -> _SessionCursor:
        return _SessionCursor(self.session)


def _connect_session(creds: SparkBatchRefreshCredentials) -> Any:
    """A Spark Connect session of its own for one dbt connection: its session confs (the
    idempotent-write txn confs, commit metadata) are the server session's, so dbt threads
    refreshing different models at once do not see each other's. Connect's own builder, not
    pyspark's: pyspark's marks the whole process as Spark Connect, which would turn an
    embedded session in the same process (an orchestrator running two targets) into a
    client too."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    _quiet_pyspark_error_log()
    builder = ConnectSession.builder.remote(connect_url(creds.host, creds.token))
    for key, value in (creds.server_side_parameters or {}).items():
        builder = builder.config(key, value)
    session = builder.create()
    session.version  # one round trip: an unreachable server fails here, in the retry loop
    return session


def _open_connect(connection: Connection) -> Connection:
    from dbt.adapters.spark.session import SessionConnectionWrapper

    class ConnectWrapper(SessionConnectionWrapper):
        def close(self) -> None:
            super().close()
            # dbt closes a connection when its node is done: the server session goes too.
            self.handle.session.stop()

    creds = connection.credentials
    return SparkBatchRefreshConnectionManager.retry_connection(
        connection,
        connect=lambda: ConnectWrapper(_SessionHandle(_connect_session(creds))),  # type: ignore[arg-type]
        logger=logger,
        retryable_exceptions=(Exception,),
        retry_limit=creds.connect_retries,
        retry_timeout=creds.connect_timeout,
    )


class _BackoffPyhiveWrapper(PyhiveConnectionWrapper):
    """dbt-spark's Thrift/HTTP wrapper, polling a running statement with a growing interval.

    dbt-spark sleeps `poll_interval` (default 5 s) before every status poll, so each statement
    takes at least that long. A refresh issues ~30 statements, most of them sub-second (SET,
    RESET, state-row reads), which made a refresh through a Thrift Server ~5x slower than the
    same SQL in an embedded session. Here the first poll waits 50 ms and the wait doubles up to
    the profile's `poll_interval`, so long statements are still polled at the user's interval.
    """

    _FIRST_WAIT_S = 0.05

    def _execute_with_polling(self, sql: str, bindings: Optional[List[Any]]) -> None:
        self._next_wait_s = self._FIRST_WAIT_S
        super()._execute_with_polling(sql, bindings)

    # dbt-spark reads `self.poll_interval` once per sleep: each read is the next wait.
    @property  # type: ignore[override]
    def poll_interval(self) -> float:
        wait = min(getattr(self, "_next_wait_s", self._max_wait_s), self._max_wait_s)
        self._next_wait_s = wait * 2
        return wait

    @poll_interval.setter
    def poll_interval(self, value: float) -> None:
        self._max_wait_s = float(value)


class SparkBatchRefreshConnectionManager(SparkConnectionManager):
    TYPE = "spark_batch_refresh"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        creds = connection.credentials
        if connection.state == ConnectionState.OPEN:
            return super().open(connection)
        if creds.method == ConnectionMethod.CONNECT:
            return _open_connect(connection)
        if creds.method != ConnectionMethod.SESSION:
            opened = super().open(connection)
            plain = opened.handle
            if type(plain) is PyhiveConnectionWrapper:
                opened.handle = _BackoffPyhiveWrapper(
                    plain.handle, poll_interval=creds.poll_interval,
                    query_timeout=creds.query_timeout, query_retries=creds.query_retries)
            return opened
        from dbt.adapters.spark.session import SessionConnectionWrapper

        session = _EmbeddedSpark.session_for_connection(creds)
        connection.handle = SessionConnectionWrapper(_SessionHandle(session))  # type: ignore[arg-type]
        connection.state = ConnectionState.OPEN
        return connection
