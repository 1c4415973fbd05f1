"""Credentials and connections: dbt-spark's, plus the embedded Spark (`method: session`) and Spark
Connect (`method: connect`)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any, List, Optional

from dbt.adapters.contracts.connection import Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.dataclass_schema import StrEnum
from dbt_common.exceptions import DbtRuntimeError
from dbt.adapters.spark.connections import (
    PyhiveConnectionWrapper,
    SparkConnectionManager,
    SparkCredentials,
)

from dbt.adapters.spark_batch_refresh.client.connect import (
    connect_session,
    connect_url,
    require_connect_client,
)
from dbt.adapters.spark_batch_refresh.client.session_cursor import SessionHandle
from dbt.adapters.spark_batch_refresh.embedded.session_defaults import SessionSettings
from dbt.adapters.spark_batch_refresh.embedded.spark import EmbeddedSpark

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


SESSION_EXTRA = 'pip install "dbt-spark-batch-refresh[session]"'


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
        connect=lambda: ConnectWrapper(SessionHandle(connect_session(  # type: ignore[arg-type]
            creds.host, creds.token, creds.server_side_parameters))),
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

        session = EmbeddedSpark.session_for_connection(SessionSettings(
            session_dir=creds.session_dir,
            delta_jars=creds.delta_jars,
            delta_package=creds.delta_package,
            user_confs=creds.server_side_parameters,
        ))
        connection.handle = SessionConnectionWrapper(SessionHandle(session))  # type: ignore[arg-type]
        connection.state = ConnectionState.OPEN
        return connection
