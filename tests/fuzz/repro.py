"""Replays one reproduction written by the fuzz harness (a fuzz-failures/seed<S>/<model>-step<N>
directory), or a hand-shrunk copy of one: its models/ (the model, its table twin, the models it
reads, the seed's sources.yml), and steps.json (the upstreams' setup, then one list of
statements per change batch).
After the setup and after each batch, `dbt run` (after a run failing at the batch's fail
point first, where the fuzz drew one), then every `batch_refresh` model is compared with its
twin and with its from-scratch evaluation at its consumed versions.

    BATCH_REFRESH_FUZZ_REPRO=fuzz-failures/seed7/fz03-step2 .venv/bin/python -m pytest tests/fuzz/repro.py -s

Not collected by `make test` (its name is not test_*): run it by naming the file.
"""

from __future__ import annotations

import json
import os

import pytest

from dbt.tests.util import run_dbt
from tests.fuzz.data import SCHEMA
from tests.fuzz.harness import PLACEHOLDER, faulted_dbt_run, twin
from tests.functional.helpers import assert_contract, rows, sources_yml

REPRO = os.environ.get("BATCH_REFRESH_FUZZ_REPRO", "")
REPRO = os.path.abspath(REPRO) if REPRO else ""


def repro_models():
    assert REPRO, "set BATCH_REFRESH_FUZZ_REPRO to a reproduction directory"
    files = {"sources.yml": sources_yml(*SCHEMA)}
    folder = os.path.join(REPRO, "models")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as handle:
            files[name] = handle.read()
    return files


class TestReproduction:
    @pytest.fixture(scope="class")
    def models(self):
        return repro_models()

    def test_replay(self, project):
        with open(os.path.join(REPRO, "steps.json")) as handle:
            steps = json.load(handle)["steps"]
        names = sorted(n[:-4] for n in repro_models() if n.endswith(".sql") and not n.endswith("_tbl.sql"))
        problems = []
        for step in steps:
            for sql in step["sql"]:
                project.run_sql(sql.replace(PLACEHOLDER, project.test_schema))
            if step.get("fault"):
                print(f"step {step['step']}: a run failing at {step['fault']} first")
                faulted_dbt_run(step["fault"])
            results = {r.node.name: r for r in run_dbt(["run"], expect_pass=None).results}
            for name in names:
                r = results[name]
                print(f"step {step['step']} ({step['kind']}) {name}: {r.status} "
                      f"{json.dumps(dict(r.adapter_response or {}), default=str)}")
                if str(r.status) != "success":
                    problems.append(f"step {step['step']}: {name} failed: {r.message}")
                    continue
                target, mate = f"{project.test_schema}.{name}", f"{project.test_schema}.{twin(name)}"
                for label, sql in (("extra", f"select * from {target} except all select * from {mate}"),
                                   ("missing", f"select * from {mate} except all select * from {target}")):
                    found = rows(project, sql)
                    if found:
                        problems.append(f"step {step['step']}: {name} {label}: {found[:10]}")
                try:
                    assert_contract(project, name)
                except AssertionError as error:
                    problems.append(f"step {step['step']}: {error}")
        print("\n".join(problems) or "reproduction passed")
        assert not problems, "\n".join(problems)
