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
# One kill per distinct state a dead run can leave: lease taken with nothing durable
# (`during_staging` leaves the same, staging is in the session cache), staging persisted,
# all merged but not recorded. Some chunks merged (`after_chunk:1`) is killed and resumed by
# tests/thrift (a real kill through the Thrift Server) and errored and resumed by
# tests/functional/test_resume.py; `after_chunk:2` behaves as `after_chunk:1`, and
# `after_cleanup` comes after the commit that ends a refresh. All stay valid
# BATCH_REFRESH_FAIL_AT values, left out here for CI time (each kill costs a JVM start and a
# resumed multi-chunk refresh, about three minutes on 2 cores).
FAIL_POINTS = ["after_lease", "after_staging", "before_cleanup"]

PROJECT = {
    "dbt_project.yml": "name: crash\nversion: '1.0'\nconfig-version: 2\nprofile: crash\n",
    "models/chunked.sql": (
        "{{ config(materialized='batch_refresh', unique_key='id', merge_chunk_rows=8) }}\n"
        "select id, grp, v * 2 as v2 from {{ target.schema }}.src where v >= 0\n"
    ),
    "macros/steps.sql": """
{% macro setup() %}
  {% do run_query("create schema if not exists " ~ target.schema) %}
  {% do run_query("create table " ~ target.schema ~ ".src (id int, grp int, v int) using delta tblproperties (delta.enableChangeDataFeed = true)") %}
  {% do run_query("insert into " ~ target.schema ~ ".src select cast(id as int), cast(id % 7 as int), cast(id as int) from range(60)") %}
{% endmacro %}

{% macro change() %}
  {#- Touches ~30 keys: updates, a delete, rows leaving/entering the filter, inserts. -#}
  {% set src = target.schema ~ ".src" %}
  {% set n = run_query("select coalesce(max(id), 0) + 1 as n from " ~ src).columns[0].values()[0] %}
  {% do run_query("update " ~ src ~ " set v = v + 1 where id % 3 = 0 and v >= 0") %}
  {% do run_query("update " ~ src ~ " set v = -1 where id % 11 = 1") %}
  {% do run_query("delete from " ~ src ~ " where id % 13 = 2") %}
  {% do run_query("insert into " ~ src ~ " select cast(id + " ~ n ~ " as int), cast(id % 5 as int), cast(id as int) from range(6)") %}
{% endmacro %}

{% macro check() %}
  {% set st = run_query("select consumed, phase from " ~ target.schema ~ "_batch_refresh.batch_refresh_state where model_id = 'model.crash.chunked'") %}
  {% set consumed = fromjson(st.columns[0].values()[0]) %}
  {% set v = consumed[target.schema ~ '.src']['version'] %}
  {% set expected = "select id, grp, v * 2 as v2 from " ~ target.schema ~ ".src version as of " ~ v ~ " where v >= 0" %}
  {% set tgt = target.schema ~ ".chunked" %}
  {% set missing = run_query("select count(*) from ((" ~ expected ~ ") except all (select * from " ~ tgt ~ "))").columns[0].values()[0] %}
  {% set extra = run_query("select count(*) from ((select * from " ~ tgt ~ ") except all (" ~ expected ~ "))").columns[0].values()[0] %}
  {% set hist = run_query("describe history " ~ tgt) %}
  {% set commits = [] %}
  {% for meta in hist.columns['userMetadata'].values() %}
    {% if meta %}{% do commits.append(fromjson(meta)) %}{% endif %}
  {% endfor %}
  {% set actions = run_query("select action from " ~ target.schema ~ "_batch_refresh.batch_refresh_history where model_id = 'model.crash.chunked' order by finished_at").columns[0].values() %}
  {{ print("DRIVER " ~ tojson({"step": "check", "version": v, "phase": st.columns[1].values()[0], "missing": missing | int, "extra": extra | int, "commits": commits, "actions": actions | list})) }}
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


def assert_clean(check: Dict[str, Any]) -> None:
    assert check["phase"] == "idle"
    assert (check["missing"], check["extra"]) == (0, 0), check
    seen: Dict[tuple, int] = {}
    for meta in check["commits"]:
        key = (meta["batch_refresh_plan"], meta["chunk"])
        seen[key] = seen.get(key, 0) + 1
    assert all(n == 1 for n in seen.values()), f"a chunk committed twice: {seen}"
    plans: Dict[str, set] = {}
    for meta in check["commits"]:
        plans.setdefault(meta["batch_refresh_plan"], set()).add(meta["chunk"])
    for meta in check["commits"]:
        assert plans[meta["batch_refresh_plan"]] == set(range(1, meta["chunks"] + 1)), plans


@pytest.mark.slow
def test_every_fail_point_resumes(tmp_path: Path) -> None:
    write_project(tmp_path, "crash_schema")
    clock = datetime(2999, 1, 1)
    # backfill, then a change whose replay spans several chunks, killed at the first point
    drive(tmp_path, "setup", "run", "change", f"crash:{FAIL_POINTS[0]}", now=clock, expect_crash=True)
    for i, point in enumerate(FAIL_POINTS):
        clock += timedelta(days=1)  # every lease taken so far has expired (lease_timeout 1h)
        nxt = FAIL_POINTS[i + 1] if i + 1 < len(FAIL_POINTS) else None
        # change upstream again, then the run that resumes the killed refresh; the newer
        # change is replayed by the next cycle's run (and by a final normal run)
        steps = ["change", "run", "check"] if nxt else ["change", "run", "run", "check"]
        if point == "after_staging":
            # while the dead run's lease is live, a run fails fast and changes nothing
            live = drive(tmp_path, "check", "run_expect_fail", "check",
                         now=clock - timedelta(days=1, minutes=-1))
            before, failed, after = live
            assert failed["success"] is False
            assert "holds the lease" in " ".join(failed["messages"])
            assert before == after, "a run that lost the lease changed something"
        out = drive(tmp_path, *steps, *(["change", f"crash:{nxt}"] if nxt else []), now=clock,
                    expect_crash=nxt is not None)
        runs = [o for o in out if o.get("step") == "run"]
        check = next(o for o in out if o.get("step") == "check")
        assert all(r["success"] and r["actions"] == ["replay"] for r in runs), (point, out)
        assert_clean(check)
