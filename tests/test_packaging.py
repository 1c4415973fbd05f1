"""The wheel ships the macros (mapped from macros/) and `dbt parse` works from a fresh venv."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROJECT = {
    "dbt_project.yml": "name: wheel_check\nversion: '1.0'\nconfig-version: 2\nprofile: wheel_check\n",
    "profiles.yml": (
        "wheel_check:\n  target: dev\n  outputs:\n    dev:\n      type: spark_batch_refresh\n"
        "      method: session\n      schema: wheel_check\n"
    ),
    "models/m.sql": "{{ config(materialized='batch_refresh', unique_key='id') }}\nselect 1 as id",
}


def test_wheel_installs_and_parses(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(ROOT)],
        check=True,
    )
    (wheel,) = dist.glob("dbt_spark_batch_refresh-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packaged = sorted(n for n in names if n.startswith("dbt/include/spark_batch_refresh/macros/"))
    sources = sorted(
        "dbt/include/spark_batch_refresh/macros/" + str(p.relative_to(ROOT / "macros"))
        for p in (ROOT / "macros").rglob("*.sql")
    )
    assert packaged == sources and sources, "every macro under macros/ ships, nothing else"
    assert "dbt/include/spark_batch_refresh/dbt_project.yml" in names

    # A fresh venv with the wheel and its declared dependencies (from pip's cache when warm).
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(wheel)], check=True)
    fresh_site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    where = subprocess.run(
        [str(py), "-c", "import dbt.include.spark_batch_refresh as p; print(p.PACKAGE_PATH)"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    assert where.startswith(fresh_site), where

    project = tmp_path / "project"
    for rel, text in PROJECT.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    parsed = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "dbt.cli.main", "parse", "--profiles-dir",
         str(project), "--project-dir", str(project)],
        capture_output=True, text=True, env=env, cwd=project,
    )
    assert parsed.returncode == 0, parsed.stdout + parsed.stderr
    manifest = (project / "target" / "manifest.json").read_text()
    assert "materialization_batch_refresh_spark_batch_refresh" in manifest
    assert '"materialized": "batch_refresh"' in manifest
