"""The package as a user installs it without extras: a wheel in a fresh venv, no Spark in it.

Built once per `make test` (the `lean_install` fixture in tests/conftest.py, `build_shared`) and
shared by the packaging test (parse, the clear error of `method: session` without the extra) and
the Thrift suite (`dbt debug` against a real server with no pyspark installed).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class LeanInstall:
    wheel: Path
    python: Path

    def run(self, code: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.python), "-c", code], capture_output=True, text=True)

    def script(self, path: Path, args: List[str], cwd: Path) -> subprocess.CompletedProcess:
        env: Dict[str, str] = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
        return subprocess.run([str(self.python), str(path), *args], capture_output=True,
                              text=True, env=env, cwd=cwd, timeout=900)

    def dbt(self, project: Path, args: List[str]) -> subprocess.CompletedProcess:
        env: Dict[str, str] = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
        return subprocess.run(
            [str(self.python), "-m", "dbt.cli.main", *args, "--profiles-dir", str(project),
             "--project-dir", str(project)],
            capture_output=True, text=True, env=env, cwd=project, timeout=600)


def build(where: Path, extras: str = "") -> LeanInstall:
    """`extras` as pip writes them after the wheel, e.g. "[connect]"."""
    dist = where / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(ROOT)],
        check=True,
    )
    (wheel,) = dist.glob("dbt_spark_batch_refresh-*.whl")
    # The wheel and its declared dependencies only (from pip's cache when warm).
    env_dir = where / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"{wheel}{extras}"], check=True)
    return LeanInstall(wheel, python)


def build_shared(root: Path) -> LeanInstall:
    """`build` once under `root` for every process that asks (pytest-xdist's workers share
    the parent of their temporary directories): the first builds under a lock, the others wait
    for it and reuse its venv; a failed build is tried again by the next one."""
    where = root / "lean-install"
    where.mkdir(parents=True, exist_ok=True)
    with open(root / "lean-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = where / "ready"
        if ready.exists():
            (wheel,) = (where / "dist").glob("dbt_spark_batch_refresh-*.whl")
            return LeanInstall(wheel, where / "venv" / "bin" / "python")
        for stale in ("dist", "venv"):
            shutil.rmtree(where / stale, ignore_errors=True)
        built = build(where)
        ready.write_text("ok\n")
        return built


def write_project(root: Path, profile_output: Dict[str, object]) -> Path:
    """A one-model dbt project whose profile has the given target output."""
    lines = "".join(f"      {k}: {v}\n" for k, v in profile_output.items())
    files = {
        "dbt_project.yml": "name: wheel_check\nversion: '1.0'\nconfig-version: 2\nprofile: wheel_check\n",
        "profiles.yml": f"wheel_check:\n  target: dev\n  outputs:\n    dev:\n{lines}",
        "models/m.sql": "{{ config(materialized='batch_refresh', unique_key='id') }}\nselect 1 as id",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root
