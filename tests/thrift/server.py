"""A real Spark Thrift Server (HiveThriftServer2) on a real Spark standalone cluster.

Everything comes from the installed pyspark (it is a Spark distribution): a master and two
workers (each its own JVM, 1 core, 1.5 GB), and the Thrift Server as the cluster's one
application, whose executors are separate processes the workers launch. All bound to 127.0.0.1
on free ports, with one warehouse directory and Derby metastore under a temp dir (on one
machine a local directory is the shared storage a real cluster needs). Each process runs in a
process group of its own; `stop` terminates them all, and a start that fails or times out stops
what it started and raises with the logs of every process. The Delta jars come from the
package's own resolution (the same list the embedded session uses): `spark.jars` ships them to
the executors, and the driver also has them on its class path (see server_confs).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import venv
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Optional

from dbt.adapters.spark_batch_refresh.embedded.session_defaults import (
    DELTA_CATALOG,
    DELTA_EXTENSION,
    DELTA_VERIFY_NON_UTC,
    LOG4J_CONFIG,
    SessionSettings,
    _jar_confs,
    delta_package,
    jar_cache_file,
)
from dbt.adapters.spark_batch_refresh.embedded.jar_cache import read_jars

from tests.spark_confs import JVM_OPTIONS, LOCAL_CONFS, PARTITION_CONFS

START_TIMEOUT_S = 180.0
WORKERS = 2
# The second server line the suite checks (issue: servers users already run): Spark 3.5 with
# Delta 3.3, built once into a cache (pip from PyPI, two jars from Maven Central) and reused.
SPARK35_VERSION = "3.5.3"
DELTA33_VERSION = "3.3.2"
MAVEN = "https://repo1.maven.org/maven2"
CACHE_ENV = "BATCH_REFRESH_TEST_CACHE"
WORKER_CORES = 1
WORKER_MEMORY = "1536m"
EXECUTOR_MEMORY = "1g"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Starts the embedded session once, in a process of its own: its start resolves the Delta
# package under the machine's resolution lock and remembers the jars (embedded/jar_cache.py).
_RESOLVE = """
import sys
from dbt.adapters.spark_batch_refresh.embedded.session_defaults import SessionSettings
from dbt.adapters.spark_batch_refresh.embedded.spark import EmbeddedSpark
EmbeddedSpark._start(SessionSettings(session_dir=sys.argv[1])).stop()
"""


def _cached_jars() -> Optional[List[str]]:
    """The Delta jars the embedded session remembers, resolved first if no start has yet.

    A server given the package instead resolves it with Ivy itself, outside that lock: on a
    machine whose Ivy cache was empty, the first `make test` had the Thrift Server resolving
    while the other pytest worker's embedded session did, and the server failed ("download
    failed: io.delta#delta-spark...")."""
    cache = jar_cache_file(delta_package(SessionSettings(), os.environ), os.environ)
    jars = read_jars(cache)
    if jars and all(os.path.isfile(j) for j in jars):
        return jars
    with tempfile.TemporaryDirectory(prefix="delta-jars-") as where:
        done = subprocess.run([sys.executable, "-c", _RESOLVE, where], cwd=where, text=True,
                              capture_output=True, timeout=1200,
                              env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    if done.returncode != 0:
        raise RuntimeError(f"resolving the Delta jars failed:\n{done.stderr[-3000:]}")
    return read_jars(cache)


# The server runs in a time zone of its own (UTC-11, no daylight saving; test clients here run
# in UTC): commit times it renders are hours behind the client's clock, so a refresh that
# compared them with the client's clock would open the interval gate hours early.
SERVER_TZ = "Pacific/Pago_Pago"


@dataclass(frozen=True)
class SparkDistribution:
    """A Spark to run the cluster and server from: a pyspark install (it is a distribution)
    and the Delta jars that match it (None: the package's own resolution, as embedded)."""

    label: str
    bin: Path  # spark-submit, spark-class
    home: Path  # SPARK_HOME
    delta_jars: Optional[List[str]] = None


def installed_distribution() -> SparkDistribution:
    import pyspark

    return SparkDistribution(f"Spark {pyspark.__version__} (installed)",
                             Path(sys.executable).parent, Path(os.path.dirname(pyspark.__file__)))


def spark35_distribution() -> SparkDistribution:
    """pyspark 3.5 in a venv of its own and the Delta 3.3 jars, built on first use."""
    cache = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "dbt-spark-batch-refresh")
    root = cache / f"spark-{SPARK35_VERSION}-delta-{DELTA33_VERSION}"
    if not (root / "ready").exists():
        _build_spark35(root)
    (home,) = root.glob("venv/lib/python*/site-packages/pyspark")
    jars = sorted(str(j) for j in (root / "jars").glob("*.jar"))
    return SparkDistribution(f"Spark {SPARK35_VERSION} + Delta {DELTA33_VERSION}",
                             root / "venv" / "bin", home, jars)


def _build_spark35(root: Path) -> None:
    # Built in place; `ready` is written last, so a killed build is started over, not used.
    subprocess.run(["rm", "-rf", str(root)], check=True)
    (root / "jars").mkdir(parents=True)
    venv.create(root / "venv", with_pip=True)
    subprocess.run([str(root / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet",
                    f"pyspark=={SPARK35_VERSION}"], check=True, timeout=1800)
    for artifact in (f"delta-spark_2.12/{DELTA33_VERSION}/delta-spark_2.12-{DELTA33_VERSION}.jar",
                     f"delta-storage/{DELTA33_VERSION}/delta-storage-{DELTA33_VERSION}.jar"):
        with urllib.request.urlopen(f"{MAVEN}/io/delta/{artifact}", timeout=300) as answer:
            (root / "jars" / artifact.rsplit("/", 1)[1]).write_bytes(answer.read())
    (root / "ready").write_text("ok\n")


def server_confs(base: Path, master: str,
                 delta_jars: Optional[List[str]] = None) -> Dict[str, str]:
    settings = replace(SessionSettings(), cached_jars=delta_jars or _cached_jars())
    confs = {
        "spark.master": master,
        "spark.executor.memory": EXECUTOR_MEMORY,
        "spark.executor.cores": str(WORKER_CORES),
        "spark.cores.max": str(WORKERS * WORKER_CORES),
        # A task whose input is cached on a busy executor would wait up to 3 s (the default)
        # for it before running on the idle one; with 1-core executors that wait is most of a
        # small statement's time.
        "spark.locality.wait": "0s",
        # Executors in the server's zone too, as a cluster's machines would be configured.
        "spark.executor.extraJavaOptions": (
            f"-Duser.timezone={SERVER_TZ} -Dlog4j.configurationFile=file:{LOG4J_CONFIG} "
            + JVM_OPTIONS
        ),
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
        # A server outside UTC set up as docs/guides/cluster.md says: Delta's check after every
        # commit off (else each commit reconstructs the table's state).
        DELTA_VERIFY_NON_UTC: "false",
        "spark.sql.sources.default": "delta",
        "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
        **(LOCAL_CONFS if master.startswith("local") else PARTITION_CONFS),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }
    confs.update({"spark.jars": ",".join(delta_jars)} if delta_jars else
                 _jar_confs(settings, os.environ))
    if "spark.jars" in confs:
        # dbt-spark runs statements asynchronously (PyHive async_=True): the server runs them on
        # its background pool, whose class loader does not see jars added by `spark.jars`
        # ("Failed to find the data source: delta"). On the driver class path they are seen
        # by every thread, as on a cluster where Delta is installed with Spark. Only Delta's
        # own jars: the class path comes before Spark's jars, and Ivy's transitive picks
        # (older jackson, hadoop) would shadow Spark's.
        delta = [j for j in confs["spark.jars"].split(",")
                 if os.path.basename(j).startswith(("io.delta", "delta-"))]
        confs["spark.driver.extraClassPath"] = ":".join(delta)
    return confs


def _spark_env(dist: SparkDistribution) -> Dict[str, str]:
    # A pyspark install is a Spark distribution (its jars include the thrift server).
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(dist.home),
            "PYSPARK_PYTHON": sys.executable}


@dataclass
class _Process:
    """One JVM of the cluster, in a process group of its own, its output in `log`."""

    name: str
    proc: subprocess.Popen
    log: Path

    @staticmethod
    def launch(name: str, cmd: List[str], base: Path, dist: SparkDistribution) -> "_Process":
        log = base / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=base, stdout=out, stderr=subprocess.STDOUT,
                                    env=_spark_env(dist), start_new_session=True)
        return _Process(name, proc, log)

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass

    def tail(self, chars: int = 3000) -> str:
        try:
            text = self.log.read_text(errors="replace")[-chars:]
        except OSError:
            text = ""
        return f"--- {self.name} ({self.log}) ---\n{text}"


@dataclass
class ThriftServer:
    host: str
    port: int
    base: Path
    master: str
    webui: int  # the master's web UI: its /json/ lists workers and applications
    processes: List[_Process] = field(default_factory=list)  # master, workers, server
    owns_base: bool = False  # a temporary directory made for this server: removed by stop()

    def cluster_status(self) -> Dict[str, object]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui}/json/", timeout=5) as answer:
            return json.loads(answer.read())

    @property
    def log(self) -> Path:
        return self.processes[-1].log

    def stop(self) -> None:
        for process in reversed(self.processes):  # the application first, the master last
            process.stop()
        if self.owns_base:
            shutil.rmtree(self.base, ignore_errors=True)

    def log_tail(self, chars: int = 6000) -> str:
        return "\n".join(p.tail(chars // max(1, len(self.processes))) for p in self.processes)

    def _check_alive(self, what: str) -> None:
        for process in self.processes:
            if process.proc.poll() is not None:
                raise RuntimeError(f"{process.name} exited ({process.proc.returncode}) while "
                                   f"{what}:\n{self.log_tail()}")


def _spark_class(dist: SparkDistribution, main: str, *args: str) -> List[str]:
    return ["nice", "-n", "10", str(dist.bin / "spark-class"), main, *args]


def _alive_workers(webui: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=2) as answer:
            status = json.loads(answer.read())
    except (OSError, ValueError):
        return 0
    return sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _start_cluster(server: ThriftServer, dist: SparkDistribution, master_port: int) -> None:
    base, master, webui = server.base, server.master, server.webui
    server.processes.append(_Process.launch("master", _spark_class(
        dist, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
        "--port", str(master_port), "--webui-port", str(webui)), base, dist))
    _await(server, "starting the Spark master", lambda: _listening(master_port))
    for i in range(WORKERS):
        work = base / f"worker-{i}"
        work.mkdir(exist_ok=True)
        server.processes.append(_Process.launch(f"worker-{i}", _spark_class(
            dist, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
            "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY,
            "--work-dir", str(work), "--webui-port", str(_free_port()), master), base, dist))
    _await(server, f"registering {WORKERS} workers", lambda: _alive_workers(webui) == WORKERS)


def _await(server: ThriftServer, what: str, ready) -> None:
    """Poll for a readiness event (a port, a registration) with a deadline; fail at once, with
    every process's log, if one of them died."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        server._check_alive(what)
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"{what}: not done after {START_TIMEOUT_S}s:\n{server.log_tail()}")
        time.sleep(0.25)


# The server applications this module starts: the main class spark-submit runs and the
# arguments that bind it to 127.0.0.1 on the given port (the Spark Connect server reads its
# binding from confs, the Thrift Server from hiveconfs).
THRIFT_SERVER = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _binding(main_class: str, port: int) -> List[str]:
    if main_class == CONNECT_SERVER:
        return ["--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf", f"spark.connect.grpc.binding.port={port}"]
    return ["--hiveconf", "hive.server2.thrift.bind.host=127.0.0.1",
            "--hiveconf", f"hive.server2.thrift.port={port}"]


def start(base: Optional[Path] = None, dist: Optional[SparkDistribution] = None,
          cluster: bool = True, main_class: str = THRIFT_SERVER) -> ThriftServer:
    """The Thrift Server (or, by `main_class`, the Spark Connect server), on a standalone
    cluster of its own (`cluster`) or in `local[1]`."""
    dist = dist or installed_distribution()
    owned = base is None
    base = base or Path(tempfile.mkdtemp(prefix="spark-server-", dir="/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    master_port, webui = _free_port(), _free_port()
    master = f"spark://127.0.0.1:{master_port}" if cluster else LOCAL_CONFS["spark.master"]
    server = ThriftServer("127.0.0.1", _free_port(), base, master, webui, owns_base=owned)
    name = "connect-server" if main_class == CONNECT_SERVER else "thrift-server"
    try:
        if cluster:
            _start_cluster(server, dist, master_port)
        cmd = ["nice", "-n", "10", str(dist.bin / "spark-submit"), "--class", main_class,
               *_binding(main_class, server.port)]
        for key, value in server_confs(base, master, dist.delta_jars).items():
            cmd += ["--conf", f"{key}={value}"]
        cmd.append("spark-internal")
        server.processes.append(_Process.launch(name, cmd, base, dist))
        _await(server, f"starting the {name}", lambda: _listening(server.port))
    except BaseException:
        server.stop()
        raise
    return server
