"""The Spark Connect client (`method: connect`): the server's URL, the client check, and one
Connect session per dbt connection."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_batch_refresh.embedded.spark import quiet_pyspark_error_log

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


def connect_session(host: Optional[str], token: Optional[str],
                    confs: Optional[Mapping[str, Any]]) -> Any:
    """A Spark Connect session of its own for one dbt connection: its session confs (the
    idempotent-write txn confs, commit metadata) are the server session's, so dbt threads
    refreshing different models at once do not see each other's. Connect's own builder, not
    pyspark's: pyspark's marks the whole process as Spark Connect, which would turn an
    embedded session in the same process (an orchestrator running two targets) into a
    client too."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    quiet_pyspark_error_log()
    builder = ConnectSession.builder.remote(connect_url(host, token))
    for key, value in (confs or {}).items():
        builder = builder.config(key, value)
    session = builder.create()
    session.version  # one round trip: an unreachable server fails here, in the retry loop
    return session
