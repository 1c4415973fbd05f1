"""The product through Spark Connect (`method: connect`), and the `connect` extra alone.

The Thrift suite's class (tests/thrift/test_thrift.py), in its order, against a Spark Connect
server instead of a Thrift Server: backfill + replay of the row-wise (several chunks), join +
aggregate and chained models with `--threads 4`, a change-feed gap rebuilt, a killed dbt client
resumed (its Connect session dropped mid-refresh), a model edit rebuilt, the lease race of two
processes, two single-chunk runs released together. What the refresh sends is the same
SQL; what differs is the transport: one Connect session per dbt connection (session confs such
as the txnAppId/txnVersion of an idempotent write are per session), errors arriving as
Connect's exceptions (gap, conflict and lease errors are recognised from them), results as Arrow.

Left to the Thrift suite: the standalone-cluster check (this server runs `local[1]`), the parked
runs losing to a concurrent commit and the wait for a held lease (their statements and errors
are those of the two races that run here).

Then, in this file so that `--dist loadfile` runs it on the worker whose server is up: the wheel
with only the `connect` extra in a fresh venv (no JVM-backed pyspark, no Spark jars) passes
`dbt debug`, which names the server's Spark and Delta versions, and runs `make demo`'s script
end to end (seed, backfill, change, replay, no-op, status, the contract test) against the server.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any, Dict, List

from tests.functional.helpers import rows
from tests.lean_install import ROOT, build
from tests.thrift import test_thrift as thrift_suite  # a module: its class is not collected here

_Base = thrift_suite.TestThriftServer  # not bound to a Test* name here, so not collected twice


class TestConnectServer:
    models = _Base.models
    work = _Base.work

    def test_connection_is_spark_connect(self, project):
        creds = project.adapter.config.credentials
        assert (creds.type, str(creds.method.value)) == ("spark_batch_refresh", "connect")
        with project.adapter.connection_named("probe"):
            handle = project.adapter.connections.get_thread_connection().handle
            session = handle.handle.session
        assert type(session).__module__ == "pyspark.sql.connect.session", type(session)
        (row,) = rows(project, "select version() as v")
        assert row["v"].startswith("4.2."), row

    def test_each_thread_has_its_own_session_confs(self, project):
        """Two dbt threads' connections: a session conf one sets is not seen by the other (the
        idempotent-write confs of two models refreshed at once must not mix)."""
        adapter = project.adapter
        seen: Dict[str, List[Any]] = {}
        first_set = threading.Event()

        def thread(name: str, set_it: bool) -> None:
            with adapter.connection_named(name):
                if set_it:
                    adapter.execute("set spark.batch_refresh.probe = mine")
                    first_set.set()
                else:
                    first_set.wait(timeout=120)
                _, table = adapter.execute("set spark.batch_refresh.probe", fetch=True)
                seen[name] = [tuple(r) for r in table]

        threads = [threading.Thread(target=thread, args=("one", True)),
                   threading.Thread(target=thread, args=("two", False))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert seen["one"] == [("spark.batch_refresh.probe", "mine")], seen
        assert seen["two"] == [("spark.batch_refresh.probe", "<undefined>")], seen


thrift_suite.adopt_server_tests(TestConnectServer)


def test_connect_extra_alone_debugs_and_runs_the_demo(connect_url: str, tmp_path: Path,
                                                      monkeypatch: Any) -> None:
    """A Spark Connect user's install: the wheel with the `connect` extra only."""
    lean = build(tmp_path / "install", extras="[connect]")
    found = lean.run(
        "import importlib.metadata as m, importlib.util as u, os\n"
        "def has(d):\n"
        "    try: return m.version(d)\n"
        "    except m.PackageNotFoundError: return None\n"
        "import pyspark\n"
        "print(has('pyspark'), has('pyspark-client'), has('delta-spark'),\n"
        "      os.path.isdir(os.path.join(os.path.dirname(pyspark.__file__), 'jars')))")
    assert found.returncode == 0, found.stderr
    pyspark, client, delta, jars = found.stdout.split()
    assert (pyspark, delta, jars) == ("None", "None", "False"), found.stdout
    assert client.startswith("4.2."), found.stdout

    project = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", project,
                    ignore=shutil.ignore_patterns("target", "logs", ".batch_refresh"))
    shutil.copy(ROOT / "profiles" / "profiles.yml", project / "profiles.yml")
    monkeypatch.setenv("SPARK_CONNECT_URL", connect_url)  # the profile's `connect` output reads it

    debug = lean.dbt(project, ["debug", "--target", "connect"])
    output = debug.stdout + debug.stderr
    assert debug.returncode == 0, output
    assert "All checks passed" in output, output
    assert "Connected (connect) to Spark 4.2.0, Delta Lake 4.4.0" in output, output

    demo = lean.script(ROOT / "scripts" / "demo.py",
                       ["--project-dir", str(project), "--profiles-dir", str(project),
                        "--target", "connect"], cwd=project)
    output = demo.stdout + demo.stderr
    assert demo.returncode == 0, output[-6000:]
    assert "replay" in output, output[-6000:]
