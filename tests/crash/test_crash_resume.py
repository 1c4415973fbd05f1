"""Killed refreshes resume: a dbt process dies at each named fail point, later runs finish.

Each step runs in a separate process (tests/crash/driver.py) with its own warehouse; the kill
is a real `os._exit` at the fail point, so nothing is cleaned up by the dying process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tests.spark_confs import TEST_SPARK_CONFS

DRIVER = Path(__file__).with_name("driver.py")
# One kill per distinct state a dead run can leave, for a single-chunk refresh: before its one
# commit (nothing written), after it (the target's log has the refresh, the state table does
# not), and before the invocation's state write (the history row appended, no state row: the
# next run offers it again and must not write it twice); then after the commit again, so that
# three invocations in a row die past their commits and the last run records the lost refreshes
# from the target's log. A multi-chunk refresh killed after chunk 1 and resumed is
# tests/thrift (a killed dbt client, the chunks applied once); a chunk failing with an error
# tests/functional/test_resume.py. Killed while staging or after the lease leaves what
# `before_commit` leaves; `after_state_write` what a finished run leaves.
FAIL_POINTS = ["before_commit", "after_commit", "before_state_write", "after_commit"]

PROJECT = {
    "dbt_project.yml": "name: crash\nversion: '1.0'\nconfig-version: 2\nprofile: crash\n",
    "models/single.sql": (
        "{{ config(materialized='batch_refresh', unique_key='id') }}\n"
        "select id, grp, v * 2 as v2 from {{ target.schema }}.src where v >= 0\n"
    ),
    "macros/steps.sql": """
{% macro setup() %}
  {% do run_query("create schema if not exists " ~ target.schema) %}
  {% do run_query("create table " ~ target.schema ~ ".src (id int, grp int, v int) using delta tblproperties (delta.enableChangeDataFeed = true)") %}
  {% do run_query("insert into " ~ target.schema ~ ".src select cast(id as int), cast(id % 7 as int), cast(id as int) from range(60)") %}
{% endmacro %}

{% macro change() %}
  {#- Touches ~30 keys in one commit: updates, a delete, rows leaving/entering the filter, inserts. -#}
  {% set src = target.schema ~ ".src" %}
  {% set n = run_query("select coalesce(max(id), 0) + 1 as n from " ~ src).columns[0].values()[0] %}
  {% do run_query("merge into " ~ src ~ " t using (select id, grp, case when id % 11 = 1 then -1 else v + 1 end as v, id % 13 = 2 as del from " ~ src ~ " where (id % 3 = 0 and v >= 0) or id % 11 = 1 or id % 13 = 2 union all select cast(id + " ~ n ~ " as int), cast(id % 5 as int), cast(id as int), false from range(6)) s on t.id = s.id when matched and s.del then delete when matched then update set v = s.v when not matched then insert (id, grp, v) values (s.id, s.grp, s.v)") %}
{% endmacro %}

{% macro check() %}
  {#- The target's own log is the record: its newest complete refresh says what was consumed. -#}
  {% set out = {} %}
  {% for model in ["single"] %}
    {% set tgt = target.schema ~ "." ~ model %}
    {% set commits = [] %}
    {% for meta in run_query("describe history " ~ tgt).columns['userMetadata'].values() %}
      {% if meta %}{% do commits.append(fromjson(meta)) %}{% endif %}
    {% endfor %}
    {% set done = [] %}
    {% for c in commits if c['chunk'] == c['chunks'] %}{% do done.append(c) %}{% endfor %}
    {% set v = done[0]['to'][target.schema ~ '.src']['version'] %}
    {% set expected = "select id, grp, v * 2 as v2 from " ~ target.schema ~ ".src version as of " ~ v ~ " where v >= 0" %}
    {% set missing = run_query("select count(*) from ((" ~ expected ~ ") except all (select * from " ~ tgt ~ "))").columns[0].values()[0] %}
    {% set extra = run_query("select count(*) from ((select * from " ~ tgt ~ ") except all (" ~ expected ~ "))").columns[0].values()[0] %}
    {% set st = run_query("select consumed, phase from " ~ target.schema ~ "_batch_refresh.batch_refresh_state where model_id = 'model.crash." ~ model ~ "'") %}
    {% set hist = run_query("select versions_to from " ~ target.schema ~ "_batch_refresh.batch_refresh_history where model_id = 'model.crash." ~ model ~ "' order by finished_at").columns[0].values() %}
    {% do out.update({model: {"version": v, "phase": st.columns[1].values()[0], "state_version": fromjson(st.columns[0].values()[0])[target.schema ~ '.src']['version'], "missing": missing | int, "extra": extra | int, "commits": commits, "history_to": hist | list}}) %}
  {% endfor %}
  {{ print("DRIVER " ~ tojson({"step": "check", "models": out})) }}
{% endmacro %}
""",
}


def write_project(root: Path, schema: str) -> None:
    for rel, text in PROJECT.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "profiles.yml").write_text(
        "crash:\n  target: dev\n  outputs:\n    dev:\n      type: spark_batch_refresh\n"
        f"      method: session\n      schema: {schema}\n      session_dir: {root / 'spark'}\n"
        "      server_side_parameters:\n"
        + "".join(f"        {k}: '{v}'\n" for k, v in TEST_SPARK_CONFS.items())
    )


def drive(root: Path, *steps: str, now: datetime | None = None, expect_crash: bool = False) -> List[Dict[str, Any]]:
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    env.pop("BATCH_REFRESH_FAIL_AT", None)
    if now is not None:
        env["BATCH_REFRESH_NOW"] = now.isoformat()
    proc = subprocess.run([sys.executable, str(DRIVER), str(root), *steps], env=env,
                          capture_output=True, text=True, timeout=900)
    out = [json.loads(line[len("DRIVER "):]) for line in proc.stdout.splitlines()
           if line.startswith("DRIVER ")]
    if expect_crash:
        assert proc.returncode == 137, (proc.returncode, proc.stdout[-3000:], proc.stderr[-2000:])
        assert "fail point" in proc.stderr
    else:
        assert proc.returncode == 0, (proc.returncode, proc.stdout[-4000:], proc.stderr[-2000:])
    return out


def assert_clean(check: Dict[str, Any], tables: bool) -> None:
    """After a normal run: each target equals the model at the versions its log records, each
    (plan, chunk) committed once, and the refreshes chain their version ranges (nothing consumed
    twice, nothing skipped). With `tables` (after a run in which every model refreshed), the
    state row and the history rows say the same as the log."""
    for model, found in check["models"].items():
        assert (found["missing"], found["extra"]) == (0, 0), (model, found)
        commits = list(reversed(found["commits"]))  # oldest first
        seen: Dict[tuple, int] = {}
        for meta in commits:
            key = (meta["batch_refresh_plan"], meta["chunk"])
            seen[key] = seen.get(key, 0) + 1
        assert all(n == 1 for n in seen.values()), f"{model}: a chunk committed twice: {seen}"
        done = [m for m in commits if m["chunk"] == m["chunks"]]
        for prev, cur in zip(done, done[1:]):
            assert cur["from"] == prev["to"], (model, prev, cur)
        if not tables:
            continue
        assert found["phase"] == "idle", (model, found["phase"])
        assert found["state_version"] == found["version"], (model, "state row not reconciled")
        # one history row per refresh: the ones lost to kills (three in a row) recorded by the
        # next refresh from the target's log
        # (rows recorded from the log carry the commit's time, the others the test's clock)
        to_versions = sorted(json.dumps(json.loads(h), sort_keys=True) for h in found["history_to"])
        expected = sorted(json.dumps({k: v["version"] for k, v in m["to"].items()}, sort_keys=True)
                          for m in done)
        assert to_versions == expected, model


@pytest.mark.slow
def test_every_fail_point_resumes(tmp_path: Path) -> None:
    write_project(tmp_path, "crash_schema")
    clock = datetime(2999, 1, 1)
    # backfill, then a change whose replay is killed at the first point
    drive(tmp_path, "setup", "run", "change", f"crash:{FAIL_POINTS[0]}", now=clock,
          expect_crash=True)
    for i, point in enumerate(FAIL_POINTS):
        clock += timedelta(days=1)  # every lease taken so far has expired (lease_timeout 1h)
        nxt = FAIL_POINTS[i + 1] if i + 1 < len(FAIL_POINTS) else None
        # a normal run after the kill finishes or resumes what it left (so the state and history
        # tables miss the refreshes of three killed invocations in a row); at the end one more
        # change and run (every model refreshes and writes its rows) and the full check
        steps = ["run", "check"] + (["change", f"crash:{nxt}"] if nxt else ["change", "run", "check"])
        out = drive(tmp_path, *steps, now=clock, expect_crash=nxt is not None)
        runs = [o for o in out if o.get("step") == "run"]
        checks = [o for o in out if o.get("step") == "check"]
        assert all(r["success"] for r in runs), (point, out)
        assert runs[0]["resumed"] == [], (point, runs[0])  # one commit: nothing to resume
        for n, check in enumerate(checks):
            assert_clean(check, tables=nxt is None and n == len(checks) - 1)
