"""A real Spark Thrift Server (HiveThriftServer2) from the installed pyspark, with Delta.

Bound to 127.0.0.1 on a free port, with its own warehouse and Derby metastore under a temp
dir; started once per test session and stopped (its process group terminated) at the end.
The Delta jars come from the package's own resolution (the same list the embedded session
uses), so the server needs no network once the embedded session has resolved them once.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional

from dbt.adapters.spark_batch_refresh.session_defaults import (
    DELTA_CATALOG,
    DELTA_EXTENSION,
    LOG4J_CONFIG,
    SessionSettings,
    _jar_confs,
    delta_package,
    jar_cache_file,
)

from tests.spark_confs import JVM_OPTIONS, PARTITION_CONFS

START_TIMEOUT_S = 180.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cached_jars() -> Optional[List[str]]:
    cache = jar_cache_file(delta_package(SessionSettings(), os.environ), os.environ)
    try:
        with open(cache) as handle:
            return [line.strip() for line in handle if line.strip()]
    except OSError:
        return None


# The server runs in a time zone of its own (UTC-11, no daylight saving; test clients here run
# in UTC): commit times it renders are hours behind the client's clock, so a refresh that
# compared them with the client's clock would open the interval gate hours early.
SERVER_TZ = "Pacific/Pago_Pago"


def server_confs(base: Path) -> Dict[str, str]:
    settings = replace(SessionSettings(), cached_jars=_cached_jars())
    confs = {
        "spark.master": "local[2]",
        "spark.app.name": "batch-refresh-thrift-tests",
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.sql.warehouse.dir": str(base / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={base / 'metastore_db'};create=true"
        ),
        "spark.driver.extraJavaOptions": (
            f"-Dderby.system.home={base} -Dlog4j.configurationFile=file:{LOG4J_CONFIG} "
            f"-Duser.timezone={SERVER_TZ} " + JVM_OPTIONS
        ),
        "spark.driver.memory": "2g",
        "spark.sql.session.timeZone": SERVER_TZ,
        "spark.sql.sources.default": "delta",
        "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
        **PARTITION_CONFS,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }
    confs.update(_jar_confs(settings, os.environ))
    if "spark.jars" in confs:
        # dbt-spark runs statements asynchronously (PyHive async_=True): the server runs them on
        # its background pool, whose class loader does not see jars added by `spark.jars`
        # ("Failed to find the data source: delta"). On the driver class path they are seen
        # by every thread, as on a cluster where Delta is installed with Spark. Only Delta's
        # own jars: the class path comes before Spark's jars, and Ivy's transitive picks
        # (older jackson, hadoop) would shadow Spark's.
        delta = [j for j in confs["spark.jars"].split(",") if os.path.basename(j).startswith("io.delta")]
        confs["spark.driver.extraClassPath"] = ":".join(delta)
    return confs


@dataclass
class ThriftServer:
    host: str
    port: int
    base: Path
    log: Path
    proc: subprocess.Popen

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
            except ProcessLookupError:
                pass

    def log_tail(self, chars: int = 6000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def start(base: Optional[Path] = None) -> ThriftServer:
    base = base or Path(tempfile.mkdtemp(prefix="thrift-server-", dir="/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    submit = Path(sys.executable).with_name("spark-submit")
    cmd = [
        "nice", "-n", "10", str(submit),
        "--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
        "--hiveconf", "hive.server2.thrift.bind.host=127.0.0.1",
        "--hiveconf", f"hive.server2.thrift.port={port}",
    ]
    for key, value in server_confs(base).items():
        cmd += ["--conf", f"{key}={value}"]
    cmd.append("spark-internal")
    log = base / "server.log"
    import pyspark

    # The installed pyspark is the Spark distribution (its jars include the thrift server).
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_HOME": os.path.dirname(pyspark.__file__), "PYSPARK_PYTHON": sys.executable}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=base, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    server = ThriftServer("127.0.0.1", port, base, log, proc)
    deadline = time.monotonic() + START_TIMEOUT_S
    # Readiness is an event (the port accepts connections); the loop only polls for it.
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"Spark Thrift Server exited with {proc.returncode}:\n{server.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"Spark Thrift Server not listening after {START_TIMEOUT_S}s:\n"
                               f"{server.log_tail()}")
        time.sleep(0.25)
