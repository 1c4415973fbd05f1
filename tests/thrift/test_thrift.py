"""The product through a real Spark Thrift Server (`method: thrift`), and concurrent runs.

One dbt project for the whole suite (class-scoped, tests run in order and build on each other's
state): two raw Delta tables and four `batch_refresh` models forming a DAG

    raw.orders ──► rows_m (row-wise, chunked) ──► chain_m (aggregate over a batch_refresh model)
    raw.orders ─┬► agg_m (join + GROUP BY)
    raw.customers┘
    raw.orders ──► race_m (row-wise; the model the concurrent runs fight over)

Every refresh goes through dbt-spark's PyHive connection; nothing in the refresh path has a
local SparkSession (dbt runs in-process here and in subprocesses, neither starts a JVM). After
every run the correctness contract is checked: the target equals the model SQL evaluated from
scratch at the upstream versions recorded as consumed.

Concurrency, without sleeps: a refresh is parked at a fail point on a named pipe
(BATCH_REFRESH_PAUSE_AT / BATCH_REFRESH_PAUSE_FIFO) while a second `dbt run` of the same model
commits the same refresh; released, the parked run writes nothing and reports that the model
was refreshed concurrently (a single-chunk run parked before its one commit, and a multi-chunk
run parked with its lease and persisted staging before its first chunk). Two multi-chunk runs
parked before the lease and released together: one takes it, the other waits (lease_wait) and
finds nothing left; a run that waits for a held lease and one whose wait runs out. Last, two
runs both parked before their one commit and released together: exactly one commits. Each
race follows an upstream change, so the
model's history must show exactly one replay per race, the version ranges chaining without gap
or overlap.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from dbt.adapters.spark_batch_refresh.engine.run_result import TRACE_ENV
from dbt.adapters.spark_batch_refresh.sql.rewrite import pin_versions
from tests.lean_install import LeanInstall, write_project
from tests.thrift.server import ThriftServer
from tests.functional.helpers import (
    compiled_sql,
    consumed_versions,
    history,
    rows,
    sources_yml,
    state,
)

DBT = str(Path(sys.executable).with_name("dbt"))
# race_m's chunk size and lease_wait come from environment variables, not --vars: a subprocess
# then parses partially (only race_m again) from the suite's own partial-parse file, where
# --vars would force a full parse (about 4 s of every `dbt run` subprocess here).
MULTI = {"RACE_CHUNK_ROWS": "2"}  # several chunks: the lease and persisted staging
# Held trials: (pause point, env of the parked run). A single-chunk refresh parked before its
# one commit; a multi-chunk one (2 rows per chunk) parked with the lease and its staging.
HELD_POINTS: List[Tuple[str, Dict[str, str]]] = [("before_commit", {}), ("after_staging", MULTI)]
# How many successful refreshes of race_m each test makes (the last test checks the chain of
# all of them); tests/thrift35 and tests/connect leave some of these tests out.
RACE_M_REFRESHES = {
    "test_backfill_then_replay_threads_4": 1,
    "test_parked_run_loses_to_a_concurrent_commit": len(HELD_POINTS),
    "test_lease_race_of_two_processes": 1,
    "test_a_run_waits_for_a_held_lease_another_gives_up": 1,
    "test_simultaneous_runs_one_refreshes": 1,
}
# Run by this suite alone, not by tests/thrift35 and tests/connect, which take the class's other
# tests: the standalone cluster is this server's; the parked runs and the lease wait are the
# plugin's logic, whose statements and errors on the server are those of the lease race (a
# losing lease write) and the simultaneous runs (a losing target commit), which run everywhere.
DEFAULT_SERVER_ONLY = frozenset({
    "test_connection_is_thrift_on_a_cluster",
    "test_parked_run_loses_to_a_concurrent_commit",
    "test_a_run_waits_for_a_held_lease_another_gives_up",
    "test_a_lease_of_another_host_holds_until_it_expires",
})
SUBPROCESS_TIMEOUT_S = 300
PARTIAL_PARSE = "partial_parse.msgpack"

ROWS_M = """
{{ config(materialized='batch_refresh', unique_key='id', merge_chunk_rows=2) }}
select id, cust, amount * 2 as amt2, status
from {{ source('raw', 'orders') }}
where status <> 'void'
"""
AGG_M = """
{{ config(materialized='batch_refresh') }}
select c.region, count(*) as n_orders, sum(o.amount) as total
from {{ source('raw', 'orders') }} o
join {{ source('raw', 'customers') }} c on o.cust = c.cust
where o.status <> 'void'
group by c.region
"""
AGG_M_EDITED = AGG_M.replace("sum(o.amount) as total", "sum(o.amount) as total, max(o.amount) as biggest")
CHAIN_M = """
{{ config(materialized='batch_refresh') }}
select cust, count(*) as n, sum(amt2) as amt2
from {{ ref('rows_m') }}
group by cust
"""
RACE_M = """
{{ config(materialized='batch_refresh', unique_key='id',
          merge_chunk_rows=env_var('RACE_CHUNK_ROWS', '100000') | int,
          lease_wait=env_var('RACE_LEASE_WAIT', '0s')) }}
select id, cust, amount
from {{ source('raw', 'orders') }}
where amount > 0
"""
# Keyless: its backfill and its full recomputes are written straight from the model, their rows
# counted from the commit's metrics, which Thrift returns as text.
FLAT_M = """
{{ config(materialized='batch_refresh', refresh_mode='full') }}
select cust, amount from {{ source('raw', 'orders') }} where status <> 'void'
"""
MODELS = ["rows_m", "agg_m", "chain_m", "race_m"]
# Gated: its upstream changes minutes apart, so every refresh after the backfill is a skip, on
# the server's clock (the server runs in another time zone, tests/thrift/server.py).
GATE_M = """
{{ config(materialized='batch_refresh', unique_key='id', refresh_interval='2h') }}
select id, amount from {{ source('raw', 'orders') }}
"""
# Its upstream is vacuumed under it: the change-feed gap surfaces from executor tasks (a file
# gone) and must still be recognised as a gap and rebuilt.
GAP_M = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, v * 10 as v10 from {{ source('raw', 'events') }}
"""


def _contract(project: Any, model: str, compiled: Optional[str] = None) -> None:
    """Target == model SQL from scratch at the consumed versions (also for subprocess runs)."""
    expected = pin_versions(compiled or compiled_sql(project, model), consumed_versions(project, model))
    target = f"{project.test_schema}.{model}"
    (diff,) = rows(project, f"select (select count(*) from ((({expected})) except all (select * from {target}))) "
                            f"as missing, (select count(*) from ((select * from {target}) except all ({expected}))) as extra")
    assert (diff["missing"], diff["extra"]) == (0, 0), (
        f"{model}: {diff['missing']} rows missing, {diff['extra']} rows extra vs the from-scratch result")


def _chunk_commits(project: Any, model: str) -> Dict[tuple, int]:
    """(plan, chunk) -> how many target commits carry it (each must be exactly 1)."""
    seen: Dict[tuple, int] = {}
    for entry in rows(project, f"describe history {project.test_schema}.{model}"):
        meta = entry.get("userMetadata")
        if meta and "batch_refresh_plan" in meta:
            data = json.loads(meta)
            key = (data["batch_refresh_plan"], data["chunk"])
            seen[key] = seen.get(key, 0) + 1
    return seen


def _change_orders(project: Any, step: int) -> None:
    """One Delta commit: updates, a delete, rows entering/leaving the filters, inserts."""
    s = project.test_schema
    base = 100 + 10 * step
    project.run_sql(
        f"merge into {s}.orders t using (select * from values "
        f"(1, 1, {step + 50}, 'open', false), (2, 2, -5, 'open', false), (3, 3, 7, 'void', false), "
        f"({4 + step}, 0, 0, 'open', true), ({base}, 1, 11, 'open', false), "
        f"({base + 1}, 4, 12, 'open', false), ({base + 2}, 2, 13, 'void', false) "
        f"as v(id, cust, amount, status, del)) s on t.id = s.id "
        f"when matched and s.del then delete "
        f"when matched then update set id = s.id, cust = s.cust, amount = s.amount, status = s.status "
        f"when not matched and not s.del then insert (id, cust, amount, status) "
        f"values (s.id, s.cust, s.amount, s.status)")


def _results_by_model(results: Any) -> Dict[str, Any]:
    return {r.node.name: r for r in results}


class _Subprocess:
    """One `dbt run` in a process of its own, with its own target/log dirs (run in parallel)."""

    def __init__(self, project: Any, work: Path, name: str, args: List[str],
                 env: Optional[Dict[str, str]] = None) -> None:
        self.target = work / f"target-{name}"
        self.logs = work / f"logs-{name}"
        parsed = Path(project.project_root) / "target" / PARTIAL_PARSE
        if parsed.exists():  # the in-process runs' parse: this run re-parses what changed only
            self.target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(parsed, self.target / PARTIAL_PARSE)
        full_env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", **(env or {})}
        for var in ("BATCH_REFRESH_FAIL_AT", "BATCH_REFRESH_PAUSE_AT"):
            if var not in (env or {}):
                full_env.pop(var, None)
        self.proc = subprocess.Popen(
            [DBT, *args, "--project-dir", project.project_root, "--profiles-dir",
             project.profiles_dir, "--target-path", str(self.target), "--log-path",
             str(work / f"logs-{name}")],
            cwd=project.project_root, env=full_env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        self.output = ""

    def wait(self) -> int:
        self.output, _ = self.proc.communicate(timeout=SUBPROCESS_TIMEOUT_S)
        return self.proc.returncode

    def outcome(self) -> Dict[str, Any]:
        """The model's status, action and message from the run's own run_results.json."""
        path = self.target / "run_results.json"
        assert path.exists(), f"no run_results.json (rc {self.proc.returncode}):\n{self.output[-4000:]}"
        (res,) = json.loads(path.read_text())["results"]
        return {"status": res["status"], "action": (res.get("adapter_response") or {}).get("action"),
                "message": res.get("message") or ""}

    def log_text(self) -> str:
        """Console output and dbt's log file (debug lines included)."""
        path = self.logs / "dbt.log"
        return self.output + (path.read_text(errors="replace") if path.exists() else "")

    def compiled(self, model: str) -> str:
        return (self.target / "compiled" / "test" / "models" / f"{model}.sql").read_text()


def _wait_parked(fifo: Path, proc: subprocess.Popen, deadline_s: float = 240.0) -> int:
    """Open the pause pipe for writing; that succeeds once the paused run has it open to read.

    A non-blocking open fails (ENXIO) while no reader is there; the loop polls that event with a
    deadline and fails at once if the process died instead of pausing.
    """
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            pass
        assert proc.poll() is None, f"the paused run exited ({proc.returncode}) before the pause point"
        assert time.monotonic() < deadline, "the run never reached its pause point"
        time.sleep(0.1)


class _Parked(_Subprocess):
    """A `dbt run` of race_m parked at a fail point until released (see failpoints.py)."""

    def __init__(self, project: Any, work: Path, name: str, point: str,
                 run_env: Dict[str, str], start: bool = True) -> None:
        self._args = (project, work, name, point, run_env)
        self.fifo = work / f"pause-{name}"
        os.mkfifo(self.fifo)
        self._pipe: Optional[int] = None
        self.proc = None  # type: ignore[assignment]
        if start:
            self.start()

    def start(self) -> None:
        project, work, name, point, run_env = self._args
        super().__init__(project, work, name, ["run", "--select", "race_m"],
                         env={**run_env, "BATCH_REFRESH_PAUSE_AT": point,
                              "BATCH_REFRESH_PAUSE_FIFO": str(self.fifo)})

    def parked(self) -> None:
        self._pipe = _wait_parked(self.fifo, self.proc)

    def release(self) -> None:
        if self._pipe is not None:
            os.write(self._pipe, b"go\n")
            os.close(self._pipe)
            self._pipe = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None


def _release_together(runs: List[_Parked]) -> None:
    """Once every run is parked, release them all at once; each must then succeed."""
    try:
        for r in runs:
            r.parked()
        for r in runs:
            r.release()
    except BaseException:
        for r in runs:
            r.kill()
        raise
    for r in runs:
        assert r.wait() == 0, r.output[-4000:]


def _kill_after_chunk_1(project: Any, work: Path, step: int) -> _Subprocess:
    """A `dbt run` of rows_m (four chunks) killed after its first chunk committed."""
    _change_orders(project, step)
    dead = _Subprocess(project, work, f"crash-{step}", ["run", "--select", "rows_m"],
                       env={"BATCH_REFRESH_FAIL_AT": "after_chunk:1"})
    assert dead.wait() == 137, dead.output[-4000:]
    assert "fail point 'after_chunk:1'" in dead.output
    left = state(project, "rows_m")
    assert (left["phase"], left["chunks_done"]) == ("merging", 1), left
    assert left["chunks_total"] > 1, left
    return dead


def _resume_rows_m(project: Any) -> None:
    """The next run resumes the killed plan: each chunk committed once, the contract holds."""
    from dbt.tests.util import run_dbt

    (res,) = run_dbt(["run", "--select", "rows_m"])
    assert (res.adapter_response["action"], res.adapter_response["resumed"]) == (
        "replay", True), res.adapter_response
    assert state(project, "rows_m")["phase"] == "idle"
    _contract(project, "rows_m")
    commits = _chunk_commits(project, "rows_m")
    assert commits and all(n == 1 for n in commits.values()), commits


class TestThriftServer:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "sources.yml": sources_yml("orders", "customers", "events"),
            "rows_m.sql": ROWS_M,
            "agg_m.sql": AGG_M,
            "chain_m.sql": CHAIN_M,
            "race_m.sql": RACE_M,
            "gate_m.sql": GATE_M,
            "gap_m.sql": GAP_M,
            "flat_m.sql": FLAT_M,
        }

    @pytest.fixture(scope="class")
    def work(self, tmp_path_factory):
        return tmp_path_factory.mktemp("thrift-runs")

    def test_connection_is_thrift_on_a_cluster(self, project, thrift_server_process):
        creds = project.adapter.config.credentials
        assert (creds.type, str(creds.method.value)) == ("spark_batch_refresh", "thrift")
        with project.adapter.connection_named("probe"):
            handle = project.adapter.connections.get_thread_connection().handle
        assert type(handle).__name__ == "_BackoffPyhiveWrapper", type(handle)
        # The server is one application of a standalone cluster: its executors run in the
        # workers' JVMs, not in the driver's.
        status = thrift_server_process.cluster_status()
        alive = [w for w in status["workers"] if w["state"] == "ALIVE"]
        (app,) = status["activeapps"]
        assert (len(alive), app["cores"]) == (2, 2), status
        assert all(w["coresused"] == 1 for w in alive), status

    def test_backfill_then_replay_threads_4(self, project, tmp_path, monkeypatch):
        s = project.test_schema
        trace = tmp_path / "trace.tsv"
        monkeypatch.setenv(TRACE_ENV, str(trace))
        project.run_sql(f"create table {s}.orders (id int, cust int, amount int, status string) using delta")
        project.run_sql(f"create table {s}.customers (cust int, region string) using delta")
        project.run_sql(f"insert into {s}.orders select cast(id as int), cast(id % 5 as int), "
                        f"cast(id * 3 % 17 as int), case when id % 6 = 0 then 'void' else 'open' end "
                        f"from range(1, 30)")
        project.run_sql(f"insert into {s}.customers values (0, 'north'), (1, 'north'), (2, 'south'), "
                        f"(3, 'east'), (4, 'west')")
        project.run_sql(f"create table {s}.events (id int, v int) using delta")
        project.run_sql(f"insert into {s}.events select cast(id as int), cast(id as int) from range(1, 20)")
        from dbt.tests.util import run_dbt

        first = _results_by_model(run_dbt(["run", "--threads", "4"]))
        assert {m: first[m].adapter_response["action"] for m in MODELS} == dict.fromkeys(MODELS, "backfill")
        for m in MODELS + ["flat_m"]:
            _contract(project, m)
        flat = first["flat_m"].adapter_response
        assert (flat["action"], flat["rows_inserted"]) == ("backfill", 25), flat
        assert [h["rows_inserted"] for h in history(project, "flat_m")] == [25]

        _change_orders(project, 0)
        project.run_sql(f"update {s}.customers set region = 'east' where cust = 4")
        second = _results_by_model(run_dbt(["run", "--threads", "4"]))
        assert {m: second[m].adapter_response["action"] for m in MODELS} == dict.fromkeys(MODELS, "replay")
        for m in MODELS:
            assert second[m].adapter_response["fallback_reason"] == "", (m, second[m].adapter_response)
            _contract(project, m)
        _contract(project, "flat_m")
        (total,) = rows(project, f"select count(*) as n from {s}.flat_m")
        flat = second["flat_m"].adapter_response
        assert flat["action"] in ("full", "overwrite") and flat["rows_inserted"] == total["n"], flat
        assert first["gate_m"].adapter_response["action"] == "backfill"
        gated = second["gate_m"].adapter_response
        assert gated["action"] == "skip" and "gate closed" in gated["_message"], gated
        assert first["gap_m"].adapter_response["action"] == "backfill"

        # Inserts alone above gap_m's key ceiling: one INSERT checked inline, nothing staged.
        # Its backfill was written straight from the model, and the ceiling is read back from
        # that commit's change feed (on main, over Thrift: no ceiling reader, so the backfill
        # staged and cached, and so did this replay).
        project.run_sql(f"insert into {s}.events values (20, 20), (21, 21)")
        trace.write_text("")
        (res,) = run_dbt(["run", "--select", "gap_m"])
        ran = [line.split("\t", 1)[1] for line in trace.read_text().splitlines()]
        assert (res.adapter_response["action"], res.adapter_response["rows_inserted"]) == (
            "replay", 2), res.adapter_response
        assert not any(statement.startswith("CACHE") for statement in ran), ran
        assert sum("INSERT INTO" in statement for statement in ran) == 1, ran
        assert any("table_changes(" in st and ".gap_m'" in st for st in ran), ran
        _contract(project, "gap_m")

    def test_change_feed_gap_rebuilds(self, project):
        s = project.test_schema
        project.run_sql(f"update {s}.events set v = v + 1 where id <= 5")
        project.run_sql(f"delete from {s}.events where id = 19")
        with project.adapter.connection_named("__vacuum"):  # the conf holds for this session
            project.adapter._run_sql("SET spark.databricks.delta.retentionDurationCheck.enabled=false")
            project.adapter._run_sql(f"VACUUM {s}.events RETAIN 0 HOURS")
        from dbt.tests.util import run_dbt

        (res,) = run_dbt(["run", "--select", "gap_m"])
        assert res.adapter_response["action"] == "backfill", res.adapter_response
        assert "removed by VACUUM" in res.adapter_response["reason"], res.adapter_response
        _contract(project, "gap_m")

    def test_killed_run_resumes(self, project, work):
        """A dbt client killed after chunk 1 of 4: the server outlives it, and the next run on
        this host resumes the same pinned plan at once (the lease's process has ended here; on
        main it waited out lease_timeout), applying each chunk once."""
        _kill_after_chunk_1(project, work, 1)
        _resume_rows_m(project)

    def test_a_lease_of_another_host_holds_until_it_expires(self, project, work, monkeypatch):
        """A lease whose holder this host cannot judge (another machine's) is refused until it
        expires, then resumed the same way."""
        from dbt.tests.util import run_dbt

        dead = _kill_after_chunk_1(project, work, 2)
        project.run_sql(
            f"update {project.test_schema}_batch_refresh.batch_refresh_state set "
            f"lease_holder = 'another-host:{dead.proc.pid}' where phase = 'merging'")
        (refused,) = run_dbt(["run", "--select", "rows_m"], expect_pass=False)
        assert "holds the lease" in refused.message, refused.message
        assert state(project, "rows_m")["chunks_done"] == 1
        monkeypatch.setenv("BATCH_REFRESH_NOW", (datetime.now() + timedelta(hours=2)).isoformat())
        _resume_rows_m(project)

    def test_model_sql_edit_rebuilds(self, project):
        from dbt.tests.util import run_dbt, write_file

        write_file(AGG_M_EDITED, project.project_root, "models", "agg_m.sql")
        (res,) = run_dbt(["run", "--select", "agg_m"])
        assert res.adapter_response["action"] == "backfill", res.adapter_response
        assert "model" in res.adapter_response["reason"], res.adapter_response
        cols = [r["col_name"] for r in rows(project, f"describe {project.test_schema}.agg_m")]
        assert "biggest" in cols
        _contract(project, "agg_m")

    def test_parked_run_loses_to_a_concurrent_commit(self, project, work):
        outcomes = []
        for trial, (point, run_env) in enumerate(HELD_POINTS):
            _change_orders(project, 10 + trial)
            fifo = work / f"pause-{trial}"
            os.mkfifo(fifo)
            holder = _Subprocess(project, work, f"held-a{trial}", ["run", "--select", "race_m"],
                                 env={**run_env, "BATCH_REFRESH_PAUSE_AT": point,
                                      "BATCH_REFRESH_PAUSE_FIFO": str(fifo)})
            pipe: Optional[int] = None
            try:
                pipe = _wait_parked(fifo, holder.proc)
                version = rows(project, f"describe history {project.test_schema}.race_m limit 1")[0]["version"]
                other = _Subprocess(project, work, f"held-b{trial}", ["run", "--select", "race_m"])
                other.wait()
                b = other.outcome()
                if point == "after_staging":
                    # the parked run holds the lease, but a single-chunk run never reads it
                    assert state(project, "race_m")["phase"] == "merging"
                assert (b["status"], b["action"]) == ("success", "replay"), b
                _contract(project, "race_m", other.compiled("race_m"))
            except BaseException:
                holder.proc.kill()
                raise
            finally:
                if pipe is not None:
                    os.write(pipe, b"go\n")  # release the parked run
                    os.close(pipe)
            assert holder.wait() == 0, holder.output[-4000:]
            a = holder.outcome()
            assert (a["status"], a["action"]) == ("success", "skip"), a
            assert "refreshed concurrently" in a["message"], a
            after = rows(project, f"describe history {project.test_schema}.race_m limit 1")[0]["version"]
            assert after == version + 1, "the parked run wrote to the target"
            assert state(project, "race_m")["phase"] == "idle"
            _contract(project, "race_m", holder.compiled("race_m"))
            outcomes.append((point, "skip: refreshed concurrently"))
        print(f"\nheld trials ({len(outcomes)}): {outcomes}")
        assert len(outcomes) == len(HELD_POINTS)

    def test_lease_race_of_two_processes(self, project, work):
        """Two multi-chunk runs staged the same refresh and are parked just before the lease,
        then released at once: one takes the lease and refreshes, the other waits for it
        (lease_wait) and then finds nothing left to do. Neither writes a chunk twice."""
        _change_orders(project, 30)
        multi = {**MULTI, "RACE_LEASE_WAIT": "10m"}
        runs = [_Parked(project, work, f"lease-race-{i}", "before_lease", multi) for i in range(2)]
        _release_together(runs)
        got = sorted((r.outcome()["status"], r.outcome()["action"]) for r in runs)
        assert got == [("success", "noop"), ("success", "replay")], [r.outcome() for r in runs]
        _contract(project, "race_m", runs[0].compiled("race_m"))

    def test_a_run_waits_for_a_held_lease_another_gives_up(self, project, work):
        """lease_wait, while a multi-chunk refresh holds the lease (parked with its staging): a
        run allowed 1s gives up with the lease error and writes nothing; a run allowed 10m
        waits (parked inside its wait), then ends without refreshing twice."""
        _change_orders(project, 31)
        holder = _Parked(project, work, "wait-holder", "after_staging", MULTI)
        waiter = _Parked(project, work, "wait-waiter", "lease_wait",
                         {**MULTI, "RACE_LEASE_WAIT": "10m"}, start=False)
        try:
            holder.parked()
            version = rows(project, f"describe history {project.test_schema}.race_m limit 1")[0]["version"]
            late = _Subprocess(project, work, "short-waiter", ["run", "--select", "race_m"],
                               env={**MULTI, "RACE_LEASE_WAIT": "1s"})
            waiter.start()
            assert late.wait() == 1, late.output[-4000:]
            out = late.outcome()
            assert out["status"] == "error", out
            assert "holds the lease" in out["message"] and "waited 1s" in out["message"], out
            waiter.parked()  # parked inside its wait: it saw the live lease
            assert state(project, "race_m")["phase"] == "merging"
            after = rows(project, f"describe history {project.test_schema}.race_m limit 1")[0]["version"]
            assert after == version, "the run that gave up wrote to the target"
            holder.release()
            assert holder.wait() == 0, holder.output[-4000:]
            waiter.release()
        except BaseException:
            holder.kill()
            waiter.kill()
            raise
        assert waiter.wait() == 0, waiter.output[-4000:]
        assert (holder.outcome()["action"], waiter.outcome()["action"]) == ("replay", "noop")
        assert "waiting up to 10m (lease_wait)" in waiter.log_text(), waiter.output[-4000:]
        _contract(project, "race_m", holder.compiled("race_m"))

    def test_simultaneous_runs_one_refreshes(self, project, work):
        """Two single-chunk runs that both planned the same refresh (each parked just before its
        one commit, so they provably overlap), released together: Delta lets exactly one commit;
        the other reports the concurrent refresh and wrote nothing."""
        _change_orders(project, 20)
        pair = [_Parked(project, work, f"free-{i}", "before_commit", {}) for i in range(2)]
        _release_together(pair)
        got = [p.outcome() for p in pair]
        refreshed = [g for g in got if g["status"] == "success" and g["action"] == "replay"]
        assert len(refreshed) == 1, got
        (other,) = [g for g in got if g not in refreshed]
        assert (other["status"], other["action"]) == ("success", "skip"), other
        assert "refreshed concurrently" in other["message"], other
        _contract(project, "race_m", pair[0].compiled("race_m"))

        # Nothing lost or applied twice over the whole sequence: successful refreshes of race_m
        # chain their version ranges (each upstream range consumed exactly once), one refresh
        # per upstream change after the backfill, and each target commit's chunk once.
        done = [h for h in history(project, "race_m")
                if h["outcome"] == "success" and h["action"] in ("backfill", "replay", "full")]
        races = sum(n for test, n in RACE_M_REFRESHES.items() if test in vars(type(self)))
        assert [h["action"] for h in done] == ["backfill"] + ["replay"] * races
        for prev, cur in zip(done, done[1:]):
            assert json.loads(cur["versions_from"]) == json.loads(prev["versions_to"]), (prev, cur)
        commits = _chunk_commits(project, "race_m")
        assert all(n == 1 for n in commits.values()), commits


def adopt_server_tests(suite: type) -> None:
    """Give another server's suite (tests/thrift35, tests/connect) this class's tests but
    DEFAULT_SERVER_ONLY, in their order: they build on each other's state."""
    for name, test in vars(TestThriftServer).items():
        if name.startswith("test_") and name not in DEFAULT_SERVER_ONLY:
            setattr(suite, name, test)


CLOCK_MODEL = """
{{ config(materialized='batch_refresh', unique_key='id', refresh_interval='0s') }}
select id, v from {{ source('raw', 'ticks') }}
"""
CLOCK_MACROS = """
{% macro clock_setup() %}
  {% do run_query("create schema if not exists " ~ target.schema) %}
  {% do run_query("create or replace table " ~ target.schema ~ ".ticks (id int, v int) using delta") %}
  {% do run_query("insert into " ~ target.schema ~ ".ticks values (1, 1), (2, 2)") %}
{% endmacro %}
{% macro clock_change() %}
  {% do run_query("insert into " ~ target.schema ~ ".ticks values (3, 3)") %}
{% endmacro %}
"""


def test_two_targets_in_one_process_keep_their_own_clocks(thrift_server_process, tmp_path):
    """An orchestrator that runs dbt for two targets in one process (here: the Thrift Server,
    whose clock reads UTC-11, then the embedded session) must compare each target's commit
    times with that target's own clock. A clock measured on the server and kept for the
    process made the embedded run's interval gate read 11 h in the past, so a model with
    refresh_interval='0s' skipped its replay as 'not due' (found under two pytest workers),
    and the state tables made on the server were taken to exist in the embedded warehouse,
    so the embedded run's state write failed."""
    from dbt.cli.main import dbtRunner
    from tests.conftest import SESSION_DIR
    from tests.spark_confs import TEST_SPARK_CONFS

    schema = f"clock_{os.getpid()}"
    (tmp_path / "models").mkdir()
    (tmp_path / "macros").mkdir()
    (tmp_path / "models" / "ticked.sql").write_text(CLOCK_MODEL)
    (tmp_path / "models" / "sources.yml").write_text(sources_yml("ticks"))
    (tmp_path / "macros" / "clock.sql").write_text(CLOCK_MACROS)
    (tmp_path / "dbt_project.yml").write_text(
        "name: clock\nversion: '1.0'\nconfig-version: 2\nprofile: clock\n")
    common = {"type": "spark_batch_refresh", "host": "localhost", "schema": schema, "threads": 1}
    outputs = {
        "thrift": {**common, "method": "thrift", "host": thrift_server_process.host,
                   "port": thrift_server_process.port, "user": "dbt", "connect_retries": 2,
                   "connect_timeout": 10},
        "embedded": {**common, "method": "session", "session_dir": SESSION_DIR,
                     "server_side_parameters": dict(TEST_SPARK_CONFS)},
    }
    (tmp_path / "profiles.yml").write_text(json.dumps({"clock": {"target": "thrift", "outputs": outputs}}))
    dirs = ["--project-dir", str(tmp_path), "--profiles-dir", str(tmp_path)]

    warnings: List[str] = []

    def dbt(*args: str) -> Any:
        res = dbtRunner(callbacks=[lambda ev: warnings.append(ev.info.msg)
                                   if ev.info.level == "warn" else None]).invoke([*args, *dirs])
        assert res.success, (args, res.exception, res.result)
        return res.result

    def action(target: str) -> Dict[str, Any]:
        (one,) = dbt("run", "--target", target).results
        return one.adapter_response

    # The schemas are left behind: both warehouses are temporary (the server's, and the test
    # session's SESSION_DIR) and removed at the end; the schema name is this process's own.
    # the server's clock is measured by the first refresh through it
    dbt("run-operation", "clock_setup", "--target", "thrift")
    assert action("thrift")["action"] == "backfill"
    dbt("run-operation", "clock_setup", "--target", "embedded")
    assert action("embedded")["action"] == "backfill"
    dbt("run-operation", "clock_change", "--target", "embedded")
    replayed = action("embedded")
    assert replayed["action"] == "replay", replayed
    # nor are the state tables made on one endpoint taken to exist on the other
    assert not warnings, warnings


def test_dbt_debug_over_thrift_without_spark_installed(lean_install: LeanInstall,
                                                      thrift_server_process: ThriftServer,
                                                      tmp_path: Path) -> None:
    """A thrift user's install: the wheel without the `session` extra (no pyspark, no
    delta-spark in the venv) connects to the real Spark Thrift Server, and `dbt debug` passes
    every check. In this file so that `--dist loadfile` runs it on the worker whose cluster is
    already up."""
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
