"""A thrift user's install: the wheel without the `session` extra (no pyspark, no delta-spark in
the venv) connects to the real Spark Thrift Server, and `dbt debug` passes every check."""

from __future__ import annotations

from pathlib import Path

from tests.lean_install import LeanInstall, write_project
from tests.thrift.server import ThriftServer


def test_dbt_debug_over_thrift_without_spark_installed(lean_install: LeanInstall,
                                                      thrift_server_process: ThriftServer,
                                                      tmp_path: Path) -> None:
    found = lean_install.run("import importlib.util as u; print(u.find_spec('pyspark'))")
    assert found.stdout.strip() == "None"
    project = write_project(tmp_path / "project", {
        "type": "spark_batch_refresh", "method": "thrift", "host": thrift_server_process.host,
        "port": thrift_server_process.port, "user": "dbt", "schema": "lean_check",
        "connect_retries": 2, "connect_timeout": 10})
    debug = lean_install.dbt(project, ["debug"])
    output = debug.stdout + debug.stderr
    assert debug.returncode == 0, output
    assert "All checks passed" in output, output
