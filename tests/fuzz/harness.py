"""The random-query differential run (issue 31): generated models, random change batches.

Every generated model (tests/fuzz/generator.py) is built twice, as `batch_refresh` (`fzNN`)
and as a plain `table` (`fzNN_tbl`, the same SQL; a model over another model reads the
`batch_refresh` one in both, so each pair differs only in how its own SQL was maintained).
The upstreams are created and changed by tests/fuzz/data.py. After the backfill and after each
change batch, `dbt run` builds everything, and every `batch_refresh` model must

* build (the plugin falls back to a full recompute when it cannot replay, it never fails),
* equal its table twin (EXCEPT ALL both ways),
* equal its SQL evaluated from scratch at the upstream versions it records as consumed (the
  correctness contract, as tests/functional/helpers.py's assert_contract).

Each failure is written to `<out>/seed<S>/<model>-step<N>/` (README.txt: the symptom, the
model's features, the differing rows; models/: the model, its twin and the models it reads;
steps.json: the setup and every batch up to the step, replayable by tests/fuzz/repro.py),
and the failing model is rebuilt with `--full-refresh` so later steps test it again. A model
whose twin shows a NULL or duplicate key is the generator's fault, counted apart.

Every other change batch (by a hash of seed and step) first meets a `dbt run` in which every
refresh fails at one fail point (FAULTS, as a Spark error would: while staging, between
chunks, after a sidecar's write, before or after its commit, or at the end-of-run history and
state writes); the checked run after it resumes or reconciles what that left, so the contract
is checked across interrupted refreshes too. BATCH_REFRESH_FUZZ_FAULTS=0 leaves them out.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from dbt.tests.util import run_dbt

from dbt.adapters.spark_batch_refresh import failpoints

from tests.fuzz.data import SCHEMA, Data, commit_sql
from tests.fuzz.generator import NULL_KEYS, Model, generate, model_name, tested_sources
from tests.fuzz.generator import twin_name as twin
from tests.functional.helpers import compiled_sql, rows, sources_yml

PLACEHOLDER = "__SCHEMA__"
# Where a refresh can fail with an error (failpoints.py): while staging, between chunks, after
# a sidecar's write, around its commit, and in the end-of-run history and state writes. Not
# `after_lease` or `after_staging`: they sit between steps that release the lease on their own
# errors and nothing that can fail runs at them, so only a kill stops a refresh there, and a
# killed run's lease holds until its lease_timeout (tests/thrift parks runs there).
FAULTS = ["during_staging", "after_chunk:1", "after_sidecar", "before_commit", "after_commit",
          "before_history_write", "before_state_write"]
DIFF_ROWS = 20


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


@dataclass
class Settings:
    seed: int
    models: int
    steps: int
    out: str
    avoid_known: bool = False
    faults: bool = True  # every other change batch first meets a run that fails (fault())

    @classmethod
    def from_env(cls, seed: int, models: int, steps: int) -> "Settings":
        return cls(
            seed=env_int("BATCH_REFRESH_FUZZ_SEED", seed),
            models=env_int("BATCH_REFRESH_FUZZ_MODELS", models),
            steps=env_int("BATCH_REFRESH_FUZZ_STEPS", steps),
            # resolved now: dbt's project fixture changes the working directory
            out=os.path.abspath(os.environ.get("BATCH_REFRESH_FUZZ_OUT") or "fuzz-failures"),
            avoid_known=os.environ.get("BATCH_REFRESH_FUZZ_AVOID_KNOWN", "") not in ("", "0"),
            faults=os.environ.get("BATCH_REFRESH_FUZZ_FAULTS", "1") not in ("", "0"),
        )


def fuzz_sources_yml(seed: int) -> str:
    """The `raw` source, its ids tested in the seeds tested_sources() picks."""
    text = sources_yml(*SCHEMA)
    for table in SCHEMA if tested_sources(seed) else ():
        text = text.replace(f"- name: {table}\n", f"- name: {table}\n        columns:\n"
                            "          - name: id\n            data_tests: [unique, not_null]\n")
    return text


def model_files(models: List[Model], seed: int) -> Dict[str, str]:
    files = {"sources.yml": fuzz_sources_yml(seed)}
    for m in models:
        files[f"{m.name}.sql"] = m.file("batch_refresh")
        files[f"{twin(m.name)}.sql"] = m.file("table")
    return files


@dataclass
class Failure:
    model: str
    step: int
    symptom: str  # "failed build", "mismatch", "contract check error", "invalid model"
    detail: str
    features: List[str]
    known: bool


@dataclass
class Stats:
    model_steps: int = 0  # a batch_refresh model built and compared after a run
    actions: Counter = field(default_factory=Counter)
    staged_from: Counter = field(default_factory=Counter)
    fallbacks: Counter = field(default_factory=Counter)
    failures: List[Failure] = field(default_factory=list)
    skipped: int = 0  # not built: a model it reads failed
    faults: Counter = field(default_factory=Counter)  # refreshes a fail point stopped, by point
    seconds: float = 0.0
    dbt_seconds: float = 0.0  # in `dbt run`
    check_seconds: float = 0.0  # in the comparisons


class FuzzRun:
    def __init__(self, project: Any, settings: Settings, models: List[Model]) -> None:
        self.project = project
        self.settings = settings
        self.models = models
        self.by_name = {m.name: m for m in models}
        self.data = Data(settings.seed)
        self.steps: List[Dict[str, Any]] = []  # {"step", "kind", "sql": [...]} from setup on
        self.stats = Stats()
        self.log: List[str] = []  # step, model, kind, action, staged from, fallback reason
        self.dir = os.path.join(settings.out, f"seed{settings.seed}")

    # -- statements ---------------------------------------------------------------------
    def execute(self, statements: List[str]) -> None:
        for sql in statements:
            self.project.run_sql(sql.replace(PLACEHOLDER, self.project.test_schema))

    def query(self, sql: str) -> List[Dict[str, Any]]:
        return rows(self.project, sql)

    # -- the run ------------------------------------------------------------------------
    def run(self) -> Stats:
        start = time.time()
        shutil.rmtree(self.dir, ignore_errors=True)
        setup = self.data.initial_sql(PLACEHOLDER)
        self.steps.append({"step": 0, "kind": "setup", "sql": setup})
        self.execute(setup)
        self.dbt_and_check(0, "backfill")
        for step in range(1, self.settings.steps + 1):
            kind, commits = self.data.batch()
            statements = [commit_sql(PLACEHOLDER, t, ops) for t, ops in commits]
            self.steps.append({"step": step, "kind": kind, "sql": statements,
                               "changed": [[t, len(ops)] for t, ops in commits],
                               "fault": self.fault(step)})
            self.execute(statements)
            self.dbt_and_check(step, kind)
        self.stats.seconds = time.time() - start
        self.write_summary()
        return self.stats

    def dbt_and_check(self, step: int, kind: str) -> None:
        start = time.time()
        point = self.fault(step)
        if point is not None:
            self.faulted_run(step, point)
        results = {r.node.name: r for r in run_dbt(["run"], expect_pass=None).results}
        self.stats.dbt_seconds += time.time() - start
        start = time.time()
        reset: List[str] = []
        for m in self.models:
            result = results.get(m.name)
            mate = results.get(twin(m.name))
            if result is None or str(result.status) == "skipped":
                self.stats.skipped += 1
                continue
            if mate is None or str(mate.status) != "success":
                self.fail(m, step, kind, "invalid model",
                          f"its table twin did not build: {getattr(mate, 'message', None)}")
                continue
            if str(result.status) != "success":
                if self.key_problem(m):
                    continue
                self.fail(m, step, kind, "failed build", str(result.message))
                continue
            response = dict(result.adapter_response or {})
            self.log.append(f"{step}\t{m.name}\t{m.kind}\t{response.get('action', '?')}\t"
                            f"{response.get('staged_from', '')}\t{response.get('fallback_reason', '')}")
            self.stats.model_steps += 1
            self.stats.actions[response.get("action", "?")] += 1
            if response.get("staged_from"):
                self.stats.staged_from[response["staged_from"]] += 1
            if response.get("fallback_reason"):
                self.stats.fallbacks[response["fallback_reason"].split(":")[0][:120]] += 1
            problem = self.compare(m)
            if problem and not self.key_problem(m):
                self.fail(m, step, kind, problem[0], problem[1], response)
                if problem[0] == "mismatch":
                    reset.append(m.name)
        self.stats.check_seconds += time.time() - start
        if reset:
            # rebuilt, so later steps test the model again from a correct target
            run_dbt(["run", "--full-refresh", "--select", " ".join(reset)], expect_pass=None)

    def fault(self, step: int) -> Optional[str]:
        """The fail point a run of this step fails at before the run that is checked (which
        resumes or reconciles what it left), or None: every other change batch, chosen by a
        hash of the seed and the step so the seeded draws stay the same."""
        return fault_point(self.settings.seed, step) if self.settings.faults else None

    def faulted_run(self, step: int, point: str) -> None:
        """`dbt run` with every batch_refresh refresh failing at `point` as a Spark error
        would (failpoints.py, BATCH_REFRESH_FAIL_MODE=error); what it leaves is checked only
        through the run after it."""
        results = faulted_dbt_run(point)
        failed = sum(1 for r in results if r.node.name in self.by_name
                     and str(r.status) not in ("success", "skipped"))
        self.stats.faults[point] += failed
        self.log.append(f"{step}\t-\t-\tfault at {point}: {failed} refreshes failed\t\t")

    # -- checks -------------------------------------------------------------------------
    def compare(self, m: Model) -> Optional[tuple]:
        schema = self.project.test_schema
        target, mate = f"{schema}.{m.name}", f"{schema}.{twin(m.name)}"
        try:
            expected = self.expected_sql(m)
        except Exception as error:  # noqa: BLE001 - reported, the run goes on
            return "contract check error", f"could not pin the model at its consumed versions: {error}"
        try:
            counts = self.query(
                f"select (select count(*) from (select * from {target} except all select * from {mate})) as extra,"
                f" (select count(*) from (select * from {mate} except all select * from {target})) as missing,"
                f" (select count(*) from (({expected}) except all (select * from {target}))) as c_missing,"
                f" (select count(*) from ((select * from {target}) except all ({expected}))) as c_extra")[0]
        except Exception as error:  # noqa: BLE001
            return "contract check error", f"the comparison failed: {error}"
        if not any(int(v) for v in counts.values()):
            return None
        lines = [f"against its table twin: {counts['extra']} rows extra, {counts['missing']} missing; "
                 f"against the from-scratch evaluation at its consumed versions: "
                 f"{counts['c_extra']} rows extra, {counts['c_missing']} missing"]
        for label, sql in (
                ("extra (in the target, not in the twin)", f"select * from {target} except all select * from {mate}"),
                ("missing (in the twin, not in the target)", f"select * from {mate} except all select * from {target}")):
            found = self.query(f"select * from ({sql}) d order by 1 limit {DIFF_ROWS}")
            lines.append(f"{label}:")
            lines += [f"  {dict(r)}" for r in found]
        return "mismatch", "\n".join(lines)

    def expected_sql(self, m: Model) -> str:
        from dbt.adapters.spark_batch_refresh.sql.rewrite import pin_versions

        state = self.query(
            f"select consumed from {self.project.test_schema}_batch_refresh.batch_refresh_state "
            f"where model_id = 'model.test.{m.name}'")
        consumed = {u: p["version"] for u, p in json.loads(state[0]["consumed"]).items()}
        return pin_versions(compiled_sql(self.project, m.name), consumed)

    def key_problem(self, m: Model) -> bool:
        """A NULL or duplicate key in the twin: the generator's fault (recorded apart)."""
        if not m.key:
            return False
        key = ", ".join(m.key)
        # a NULL group's key, or an outer join's bare ids, are NULL by design (null-safe)
        nulls = "false" if m.features & NULL_KEYS else " or ".join(f"{k} is null" for k in m.key)
        try:
            found = self.query(f"select count(*) - count(distinct struct({key})) as dup, count_if({nulls}) as nul "
                               f"from {self.project.test_schema}.{twin(m.name)}")[0]
        except Exception:  # noqa: BLE001 - no twin to judge by
            return False
        if int(found["dup"]) or int(found["nul"]):
            self.fail(m, len(self.steps) - 1, "", "invalid model",
                      f"the twin's key {m.key} has {found['dup']} duplicates and {found['nul']} NULLs")
            return True
        return False

    # -- reports ------------------------------------------------------------------------
    def fail(self, m: Model, step: int, kind: str, symptom: str, detail: str,
             response: Optional[Dict[str, Any]] = None) -> None:
        known = sorted(f for f in m.features if f.startswith("KNOWN_"))
        failure = Failure(m.name, step, symptom, detail, sorted(m.features), bool(known))
        self.stats.failures.append(failure)
        where = os.path.join(self.dir, f"{m.name}-step{step}")
        os.makedirs(os.path.join(where, "models"), exist_ok=True)
        for name in self.closure(m):
            for file in (name, twin(name)):
                src = os.path.join(self.project.project_root, "models", f"{file}.sql")
                shutil.copy(src, os.path.join(where, "models", f"{file}.sql"))
        with open(os.path.join(where, "models", "sources.yml"), "w") as handle:
            handle.write(fuzz_sources_yml(self.settings.seed))
        with open(os.path.join(where, "steps.json"), "w") as handle:
            json.dump({"seed": self.settings.seed, "model": m.name, "step": step,
                       "steps": self.steps[: step + 1]}, handle, indent=1)
        batch = self.steps[step]
        text = [
            f"seed {self.settings.seed}, step {step} ({batch['kind']}), model {m.name} ({m.kind}): {symptom}",
            f"features: {', '.join(sorted(m.features)) or '-'}" + (f"  (known defect: {', '.join(known)})" if known else ""),
            f"adapter_response: {json.dumps(response, default=str)}" if response else "",
            "",
            m.file("batch_refresh"),
            detail,
            "",
            f"the change batch of step {step} (all statements from the setup on: steps.json):",
            *batch["sql"],
            "",
            "replay: BATCH_REFRESH_FUZZ_REPRO=" + where + " .venv/bin/python -m pytest tests/fuzz/repro.py -s",
        ]
        with open(os.path.join(where, "README.txt"), "w") as handle:
            handle.write("\n".join(text) + "\n")

    def closure(self, m: Model) -> List[str]:
        names, todo = [], [m.name]
        while todo:
            name = todo.pop()
            if name not in names:
                names.append(name)
                todo.extend(model_name(r) for r in self.by_name[name].refs)
        return names

    def summary(self) -> str:
        s = self.stats
        failures = s.failures
        counts = Counter(f.symptom for f in failures)
        lines = [
            f"fuzz seed {self.settings.seed}: {len(self.models)} models, {self.settings.steps} steps "
            f"({', '.join(st['kind'] for st in self.steps[1:])}), {s.model_steps} model-steps in {s.seconds:.0f} s "
            f"(dbt run {s.dbt_seconds:.0f} s, comparisons {s.check_seconds:.0f} s); sources' ids "
            f"{'tested' if tested_sources(self.settings.seed) else 'untested'}",
            f"  actions: {dict(s.actions)}; staged from: {dict(s.staged_from)}; skipped {s.skipped}",
            f"  fallbacks: {dict(s.fallbacks)}",
            f"  runs stopped at fail points, then resumed: {dict(s.faults)}",
            f"  mismatches: {counts['mismatch']}, failed builds: {counts['failed build']}, "
            f"contract check errors: {counts['contract check error']}, invalid models (generator): "
            f"{counts['invalid model']}; of the failures {sum(f.known for f in failures)} have a known defect's shape",
        ]
        for f in failures:
            first = f.detail.strip().splitlines()[0][:200] if f.detail.strip() else ""
            lines.append(f"  - {f.model} step {f.step}: {f.symptom}{' [known]' if f.known else ''}: {first}")
        if failures:
            lines.append(f"  reproductions under {self.dir}")
        return "\n".join(lines)

    def write_summary(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, "summary.txt"), "w") as handle:
            handle.write(self.summary() + "\n")
        with open(os.path.join(self.dir, "actions.tsv"), "w") as handle:
            handle.write("step\tmodel\tkind\taction\tstaged_from\tfallback_reason\n")
            handle.write("\n".join(self.log) + "\n")
        with open(os.path.join(self.dir, "models.sql"), "w") as handle:
            for m in self.models:
                handle.write(f"-- {m.name} ({m.kind}) key {m.key} features {sorted(m.features)}\n")
                handle.write(m.file("batch_refresh") + "\n")


def fault_point(seed: int, step: int) -> Optional[str]:
    """The fail point of change batch `step`'s faulted run, or None: every other batch, by a
    hash of seed and step (the seeded draws of models and data stay the same)."""
    if step == 0:
        return None
    drawn = int(hashlib.sha256(f"fault:{seed}:{step}".encode()).hexdigest(), 16)
    return FAULTS[drawn // 2 % len(FAULTS)] if drawn % 2 == 0 else None


def faulted_dbt_run(point: str) -> List[Any]:
    """`dbt run` with every batch_refresh refresh failing at fail point `point` (error mode)."""
    os.environ[failpoints.ENV], os.environ[failpoints.MODE_ENV] = point, "error"
    try:
        return list(run_dbt(["run"], expect_pass=None).results)
    finally:
        del os.environ[failpoints.ENV], os.environ[failpoints.MODE_ENV]


def catalogue(settings: Settings) -> List[Model]:
    return generate(settings.seed, settings.models, settings.avoid_known)
