"""The wheel ships the macros (dbt/include/spark_batch_refresh/macros/); without the `session` extra it has no
Spark, `dbt parse` of a thrift profile works and `method: session` fails with one error naming
the extra."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests.lean_install import ROOT, LeanInstall, write_project

SESSION_PROFILE = {"type": "spark_batch_refresh", "method": "session", "schema": "wheel_check"}
THRIFT_PROFILE = {"type": "spark_batch_refresh", "method": "thrift", "host": "127.0.0.1",
                  "port": 1, "schema": "wheel_check"}


def test_wheel_ships_the_macros(lean_install: LeanInstall) -> None:
    names = zipfile.ZipFile(lean_install.wheel).namelist()
    packaged = sorted(n for n in names if n.startswith("dbt/include/spark_batch_refresh/macros/"))
    sources = sorted(
        "dbt/include/spark_batch_refresh/macros/" + str(p.relative_to(ROOT / "dbt" / "include" / "spark_batch_refresh" / "macros"))
        for p in (ROOT / "dbt" / "include" / "spark_batch_refresh" / "macros").rglob("*.sql")
    )
    assert packaged == sources and sources, "every macro under dbt/include/spark_batch_refresh/macros/ ships, nothing else"
    assert "dbt/include/spark_batch_refresh/dbt_project.yml" in names


def test_without_the_extra_no_spark_and_parse_works(lean_install: LeanInstall,
                                                     tmp_path: Path) -> None:
    where = lean_install.run("import dbt.include.spark_batch_refresh as p; print(p.PACKAGE_PATH)")
    assert where.returncode == 0 and str(lean_install.python.parents[1]) in where.stdout, where
    for module in ("pyspark", "delta"):
        found = lean_install.run(f"import importlib.util as u; print(u.find_spec('{module}'))")
        assert found.stdout.strip() == "None", f"{module} installed without the session extra"

    # a thrift profile parses without Spark installed (no connection is opened)
    project = write_project(tmp_path / "project", THRIFT_PROFILE)
    parsed = lean_install.dbt(project, ["parse"])
    assert parsed.returncode == 0, parsed.stdout + parsed.stderr
    manifest = (project / "target" / "manifest.json").read_text()
    assert "materialization_batch_refresh_spark_batch_refresh" in manifest
    assert '"materialized": "batch_refresh"' in manifest

    # method: session without pyspark: one error that names this package's extra, no traceback
    session = lean_install.dbt(write_project(tmp_path / "session", SESSION_PROFILE), ["parse"])
    output = session.stdout + session.stderr
    assert session.returncode != 0, output
    assert 'pip install "dbt-spark-batch-refresh[session]"' in output, output
    assert "Traceback" not in output and "dbt-spark[session]" not in output, output
