"""batch_refresh models in the rest of dbt: build, test, ls, show, retry, --select,
--full-refresh, docs/catalog/lineage, run_results, logging and the status operation.

The project is the example project (examples/: its seeds, models, tests and the demo
change macro) plus one gated model read through a source, so lineage covers refs and sources.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime as _dt
from pathlib import Path
from typing import Any, Dict, List

import pytest

from dbt.adapters.spark_batch_refresh.report import status as _status
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.helpers import (
    STATE_SUFFIX,
    actions,
    assert_contract,
    rows,
    run_fails,
    run_ok,
    state,
    table_version,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples"
BATCH_MODELS = ["customer_orders", "customer_totals", "gated_orders", "orders_enriched"]
RESPONSE_KEYS = {
    "action", "reason", "mode", "resumed", "fallback_reason", "versions_from", "versions_to",
    "rows_inserted", "rows_updated", "rows_deleted", "staged_rows", "chunks", "next_due",
    "run_id", "rows_affected", "code", "_message", "strategy", "rewritten",
}

SHOP_SOURCE = """
version: 2
sources:
  - name: shop
    schema: "{{ target.schema }}"
    tables:
      - name: orders
        description: The orders seed, read as a source.
"""

GATED = """
{{ config(unique_key='order_id', refresh_interval='1d') }}
-- Read through a source and gated: refreshes once its consumed data is a day old.
-- The source is the orders seed: depends_on makes `dbt build` load it first.
-- depends_on: {{ ref('orders') }}
select order_id, status from {{ source('shop', 'orders') }}
"""


# examples/macros/apply_demo_changes.sql as one commit (its four statements cost
# ~15 s here): 2 inserts, 3 updates, 1 order cancelled, 2 deleted.
DEMO_CHANGES = """
merge into {orders} t using (
  select * from values
    (41, 2, 'placed', 320.0D, timestamp'2026-11-01 09:00:00', 'insert'),
    (42, 5, 'placed', 12.5D, timestamp'2026-11-01 10:00:00', 'insert'),
    (1, null, null, null, null, 'ship'), (2, null, null, null, null, 'ship'),
    (3, null, null, null, null, 'ship'), (4, null, null, null, null, 'cancel'),
    (5, null, null, null, null, 'delete'), (6, null, null, null, null, 'delete')
    as s(order_id, customer_id, status, amount, ordered_at, op)
) s on t.order_id = s.order_id
when matched and s.op = 'delete' then delete
when matched and s.op = 'ship' then update set status = 'shipped', amount = t.amount + 300
when matched and s.op = 'cancel' then update set status = 'cancelled'
when not matched then insert (order_id, customer_id, status, amount, ordered_at)
  values (s.order_id, s.customer_id, s.status, s.amount, s.ordered_at)
"""


def example_files(folder: str) -> Dict[str, str]:
    return {p.name: p.read_text() for p in sorted((EXAMPLE / folder).iterdir()) if p.is_file()}


def artifact(project: Any, name: str) -> Dict[str, Any]:
    with open(os.path.join(project.project_root, "target", name)) as handle:
        return json.load(handle)


def responses(project: Any) -> Dict[str, Dict[str, Any]]:
    """adapter_response of each model in target/run_results.json, by model name."""
    return {
        r["unique_id"].rsplit(".", 1)[-1]: r["adapter_response"]
        for r in artifact(project, "run_results.json")["results"]
        if r["unique_id"].startswith("model.")
    }


def log_lines(output: str, model: str) -> List[str]:
    print(output)  # shown by pytest when an assertion below fails
    return [line for line in output.splitlines() if f"batch_refresh {model}: " in line]


class TestExampleProjectEcosystem:
    @pytest.fixture(scope="class")
    def seeds(self):
        return example_files("seeds")

    @pytest.fixture(scope="class")
    def macros(self):
        return example_files("macros")

    @pytest.fixture(scope="class")
    def models(self):
        return {**example_files("models"), "shop.yml": SHOP_SOURCE, "gated_orders.sql": GATED}

    @pytest.fixture(scope="class")
    def project_config_update(self):
        # examples/dbt_project.yml, under this test project's name
        return {
            "seeds": {"+file_format": "delta",
                      "+tblproperties": {"delta.enableChangeDataFeed": "true"}},
            "models": {"+materialized": "batch_refresh"},
        }

    def test_ecosystem(self, project, logs_dir, monkeypatch):
        schema = project.test_schema
        self.build_and_run_results(project)
        self.ls_and_show(project)
        self.docs_and_lineage(project, schema)
        self.replay_logging_and_status(project, schema, logs_dir)
        self.select_and_full_refresh(project, schema)
        self.retry_resumes(project, schema, monkeypatch)
        self.empty_flag(project, schema)
        self.operation_errors(project)

    # ------------------------------------------------------------------ dbt build
    def build_and_run_results(self, project):
        results, output = run_dbt_and_capture(["build"])
        by_type: Dict[str, int] = {}
        for r in results:
            by_type[r.node.resource_type] = by_type.get(r.node.resource_type, 0) + 1
            assert r.status in ("success", "pass"), (r.node.unique_id, r.status, r.message)
        assert by_type == {"seed": 2, "model": 4, "test": 9}  # 3 of them batch_refresh_consistent

        found = responses(project)
        assert set(found) == set(BATCH_MODELS)
        for model, response in found.items():
            assert RESPONSE_KEYS <= set(response), (model, set(response) ^ RESPONSE_KEYS)
            assert response["action"] == "backfill" and response["mode"] == "full"
            assert response["chunks"] == 1
            assert response["rows_affected"] == response["rows_inserted"] > 0
            assert response["versions_to"] and response["versions_from"] == {}
            assert response["run_id"] and response["next_due"] == ""
        # the join + aggregate replays by affected keys too: no fallback anywhere
        assert len(found["customer_totals"]["versions_to"]) == 2  # customers, orders_enriched
        assert all(r["fallback_reason"] == "" for r in found.values())
        # one info line per model: what it did and why
        (line,) = log_lines(output, "orders_enriched")
        assert re.search(r"backfill v\d+ of orders: \d+ rows in 1 chunk \(first run\)", line), line
        (line,) = log_lines(output, "customer_totals")
        assert "backfill of 2 upstreams (customers v" in line and "fallback: " not in line, line

    # ------------------------------------------------------------------ dbt ls / show
    def ls_and_show(self, project):
        listed = run_dbt(["ls", "--select", "config.materialized:batch_refresh",
                          "--resource-type", "model", "--output", "name"])
        assert sorted(listed) == BATCH_MODELS
        downstream = run_dbt(["ls", "--select", "orders_enriched+", "--output", "name",
                              "--resource-type", "model"])
        assert sorted(downstream) == ["customer_orders", "customer_totals", "orders_enriched"]

        shown = run_dbt(["show", "--select", "customer_orders", "--limit", "3"])
        table = shown.results[0].agate_table
        assert list(table.column_names) == ["order_id", "customer_id", "amount_cents", "size_band"]
        assert len(table.rows) == 3
        assert all(row["size_band"] == "large" for row in table.rows)

    # ------------------------------------------------------------------ docs generate
    def docs_and_lineage(self, project, schema):
        run_dbt(["docs", "generate"])
        catalog = artifact(project, "catalog.json")
        assert not catalog["errors"]
        # state, progress and history tables stay out of the project's docs
        listed = list(catalog["nodes"].values()) + list(catalog["sources"].values())
        assert not [n for n in listed if n["metadata"]["schema"].endswith(STATE_SUFFIX)]
        assert not [n for n in listed if "__br_staging" in n["metadata"]["name"]]
        assert "source.test.shop.orders" in catalog["sources"]

        for model in BATCH_MODELS:
            node = catalog["nodes"][f"model.test.{model}"]
            described = rows(project, f"describe {schema}.{model}")
            expected = {r["col_name"]: r["data_type"] for r in described if r["col_name"]
                        and not r["col_name"].startswith("#")}
            assert {c: v["type"] for c, v in node["columns"].items()} == expected, model
            stats = node["stats"]
            assert stats["br_consumed"]["value"].count("@v") >= 1
            assert stats["br_last_refresh"]["value"].startswith(
                state(project, model)["last_refresh_at"].isoformat(sep=" ", timespec="seconds"))
            assert "backfill" in stats["br_last_refresh"]["value"]
            assert stats["br_mode"]["value"].startswith("auto; last refresh backfill in full mode")
            assert stats["br_phase"]["value"] == "idle"
            assert all(stats[k]["include"] for k in ("br_mode", "br_consumed", "br_interval"))
        totals = catalog["nodes"]["model.test.customer_totals"]["stats"]
        assert "(fallback: " not in totals["br_mode"]["value"]  # a fallback would be named here
        gated = catalog["nodes"]["model.test.gated_orders"]["stats"]
        assert gated["br_interval"]["value"] == "every 1d of upstream lag"
        plain = catalog["nodes"]["model.test.orders_enriched"]["stats"]
        assert plain["br_interval"]["value"] == "every 0s of upstream lag"
        # seeds are plain tables: no refresh metadata
        assert "br_mode" not in catalog["nodes"]["seed.test.orders"]["stats"]

        manifest = artifact(project, "manifest.json")
        parents = manifest["parent_map"]
        assert sorted(parents["model.test.customer_totals"]) == [
            "model.test.orders_enriched", "seed.test.customers"]
        assert parents["model.test.customer_orders"] == ["model.test.orders_enriched"]
        assert sorted(parents["model.test.gated_orders"]) == [
            "seed.test.orders", "source.test.shop.orders"]
        assert "model.test.gated_orders" in manifest["child_map"]["source.test.shop.orders"]

    # ------------------------------------------------------------------ logging and status
    def replay_logging_and_status(self, project, schema, logs_dir):
        project.run_sql(DEMO_CHANGES.format(orders=f"{schema}.orders"))
        results, output = run_dbt_and_capture(["run", "--select", "orders_enriched", "gated_orders"])
        assert sorted(r.node.name for r in results) == ["gated_orders", "orders_enriched"]
        found = responses(project)

        replay = found["orders_enriched"]
        assert replay["action"] == "replay" and replay["mode"] == "incremental"
        (orders,) = replay["versions_to"]
        assert replay["versions_to"][orders] > replay["versions_from"][orders]
        assert (replay["rows_inserted"], replay["rows_updated"], replay["rows_deleted"]) == (2, 3, 2)
        assert replay["rows_affected"] == 7 and replay["chunks"] == 1
        assert (replay["strategy"], replay["staged_from"]) == ("rowwise", "changes")
        (line,) = log_lines(output, "orders_enriched")
        assert re.search(r"replay \(rowwise\) v\d+->v\d+ of orders: \+2 ~3 -2 rows in 1 chunk", line), line

        gated = found["gated_orders"]
        assert gated["action"] == "skip" and gated["next_due"] and gated["rows_affected"] == 0
        (line,) = log_lines(output, "gated_orders")
        assert line.rstrip().endswith(f"next due {gated['next_due']}") or "next due" in line
        assert "skip (upstream moved, not due yet)" in line

        # SQL goes to the debug log (dbt.log), never to the console
        assert "MERGE INTO" not in output and "table_changes(" not in output.lower()
        with open(os.path.join(logs_dir, "dbt.log")) as handle:
            assert "table_changes(" in handle.read().lower()
        assert_contract(project, "orders_enriched")

        _, report = run_dbt_and_capture(["run-operation", "batch_refresh_status"])
        assert "lag behind upstream" in report and "next due" in report
        models_table = report.split("recent refreshes")[0]
        status = {line.split()[0]: line for line in models_table.splitlines()
                  if line.split() and line.split()[0] in BATCH_MODELS}
        assert set(status) == set(BATCH_MODELS)
        assert "up to date" in status["orders_enriched"] and "idle" in status["orders_enriched"]
        # not selected in the last run: one orders_enriched commit behind, due at the next run
        assert re.search(r"orders_enriched \+1 \(stale \d+[smhd]", status["customer_orders"])
        assert "next run" in status["customer_totals"]
        assert re.search(r"orders \+\d+ \(stale \d+[smhd]", status["gated_orders"])
        assert gated["next_due"][:16] in status["gated_orders"]
        assert "recent refreshes" in report
        history_lines = [line for line in report.split("recent refreshes")[1].splitlines()
                         if line.startswith("orders_enriched ")]
        assert [("replay" in h and "rowwise" in h, "backfill" in h) for h in history_lines] == [
            (True, False), (False, True)]

    # ------------------------------------------------------------------ dbt retry
    def retry_resumes(self, project, schema, monkeypatch):
        project.run_sql(f"update {schema}.orders set amount = amount + 1 where order_id = 7")
        target = f"{schema}.orders_enriched"
        before = table_version(project, target)
        # a Spark-like error just before the one target commit of a single-chunk refresh
        monkeypatch.setenv("BATCH_REFRESH_FAIL_AT", "before_commit")
        monkeypatch.setenv("BATCH_REFRESH_FAIL_MODE", "error")
        output = run_fails(["run", "--select", "orders_enriched"])
        assert "next `dbt run` starts the refresh again" in output and "Traceback" not in output
        assert table_version(project, target) == before  # nothing was written
        row = state(project, "orders_enriched")
        assert row["phase"] == "idle" and "injected fault" in row["last_outcome"]
        monkeypatch.delenv("BATCH_REFRESH_FAIL_AT")

        results = run_ok(["retry"])
        assert [r.node.name for r in results] == ["orders_enriched"]
        response = results[0].adapter_response
        assert response["action"] == "replay" and response["resumed"] is False
        assert table_version(project, target) == before + 1  # one commit for the refresh
        assert state(project, "orders_enriched")["phase"] == "idle"
        assert actions(project, "orders_enriched") == ["backfill", "replay", "replay"]
        assert_contract(project, "orders_enriched")
        tests = run_ok(["test", "--select", "orders_enriched"])
        # unique, not_null and batch_refresh_consistent (the contract, as users check it)
        assert len(tests) == 3 and all(t.status == "pass" for t in tests)

    # ------------------------------------------------------------------ --select, --full-refresh
    def select_and_full_refresh(self, project, schema):
        others = ["customer_orders", "orders_enriched"]
        before = {m: table_version(project, f"{schema}.{m}") for m in others}
        # the gate is closed for gated_orders; --full-refresh rebuilds it anyway, and only it
        results = run_ok(["run", "--select", "gated_orders", "--full-refresh"])
        assert [r.node.name for r in results] == ["gated_orders"]
        assert results[0].adapter_response["action"] == "backfill"
        assert results[0].adapter_response["reason"] == "--full-refresh"
        assert actions(project, "gated_orders") == ["backfill", "backfill"]
        assert before == {m: table_version(project, f"{schema}.{m}") for m in others}

    # ------------------------------------------------------------------ dbt run --empty
    def empty_flag(self, project, schema):
        target = f"{schema}.customer_orders"
        before = (table_version(project, target), actions(project, "customer_orders"))
        _, output = run_dbt_and_capture(["run", "--empty", "--select", "customer_orders"])
        assert "--empty: target exists, left as it is" in output
        assert (table_version(project, target), actions(project, "customer_orders")) == before
        # a missing target is created without rows, and no state is recorded for it ...
        project.run_sql(f"drop table {target}")
        _, output = run_dbt_and_capture(["run", "--empty", "--select", "customer_orders"])
        assert "--empty: created the target without rows" in output
        assert rows(project, f"select count(*) as n from {target}")[0]["n"] == 0
        assert actions(project, "customer_orders") == before[1]
        # ... so the next run sees a target that is not the one it built (same version number,
        # another commit) and backfills it
        results = run_ok(["run", "--select", "customer_orders"])
        response = results[0].adapter_response
        assert response["action"] == "backfill", response
        assert "was recreated" in response["reason"], response["reason"]
        assert_contract(project, "customer_orders")

    # ------------------------------------------------------------------ mistakes
    def operation_errors(self, project):
        output = run_fails(["run-operation", "batch_refresh_status", "--args", "{history: lots}"])
        assert "history must be a whole number" in output and "Traceback" not in output
        output = run_fails(["run-operation", "batch_refresh_status", "--args", "{model: nope}"])
        assert "no model named 'nope'" in output and "Traceback" not in output
        _, report = run_dbt_and_capture(
            ["run-operation", "batch_refresh_status", "--args", "{model: gated_orders, history: 0}"])
        assert "batch_refresh models (1)" in report and "gated_orders" in report
        assert "recent refreshes" not in report and "orders_enriched" not in report


# ---------------------------------------------------------------------------- pure (no Spark)


def test_summary_lines_say_what_and_why():
    replay = {"action": "replay", "reason": "upstream moved: s.orders v12->v15", "mode": "incremental",
              "versions_from": {"s.orders": 12, "s.customers": 3},
              "versions_to": {"s.orders": 15, "s.customers": 3},
              "rows_inserted": 120, "rows_updated": 30, "rows_deleted": 4, "chunks": 1}
    assert _status.summary_line(replay) == (
        "replay of 2 upstreams (customers v3, orders v12->v15): +120 ~30 -4 rows in 1 chunk "
        "(upstream moved; mode incremental)")
    resumed = dict(replay, resumed=True, versions_from={"s.orders": 1}, versions_to={"s.orders": 2},
                   chunks=3)
    assert _status.summary_line(resumed).startswith("resumed replay v1->v2 of orders: ")
    assert _status.summary_line(resumed).endswith("in 3 chunks (upstream moved; mode incremental)")
    skip = {"action": "skip", "reason": "gate closed (refresh_interval 1h)",
            "next_due": "2030-01-01 10:00:00"}
    assert _status.summary_line(skip) == (
        "skip (upstream moved, not due yet): gate closed (refresh_interval 1h); "
        "next due 2030-01-01 10:00:00")
    assert _status.short_message(skip) == (
        "SKIP: gate closed (refresh_interval 1h); next due 2030-01-01 10:00:00")
    assert _status.short_message({"action": "backfill", "rows_inserted": 7}) == "BACKFILL 7 rows"
    # a keyless full recompute rewrites the whole table: its rows are the new size, not +N ~0 -0
    keyless = {"action": "full", "reason": "upstream moved: s.orders v1->v2", "mode": "full",
               "versions_from": {"s.orders": 1}, "versions_to": {"s.orders": 2},
               "rows_inserted": 6, "chunks": 1, "rewritten": True}
    assert _status.summary_line(keyless) == (
        "full recompute v1->v2 of orders: 6 rows rewritten in 1 chunk (upstream moved; mode full)")
    assert _status.short_message(keyless) == "FULL 6 rows rewritten"


def test_status_report_lag_and_next_due():
    now = _dt(2030, 1, 1, 12, 0, 0)
    models = [
        _status.ModelInfo("model.p.a", "a", "s.a", "1h", None, 3600.0),
        _status.ModelInfo("model.p.b", "b", "s.b"),
        _status.ModelInfo("model.p.c", "c", "s.c"),
    ]
    consumed = json.dumps({"s.src": {"version": 4, "timestamp": "2030-01-01 11:30:00"}})
    states = {
        "model.p.a": {"phase": "idle", "consumed": consumed, "last_action": "replay",
                      "last_refresh_at": _dt(2030, 1, 1, 11, 31), "last_outcome": "success"},
        "model.p.b": {"phase": "merging", "chunks_total": 4, "chunks_done": 1,
                      "lease_until": _dt(2030, 1, 1, 11, 0), "consumed": consumed},
        "model.p.gone": {"phase": "idle", "relation": "s.gone"},
    }
    latest = {"s.src": _status.Latest(6, {6: _dt(2030, 1, 1, 11, 50), 5: _dt(2030, 1, 1, 11, 40)})}
    report = _status.render(models, states, None, latest, now)
    lines = {line.split()[0]: line for line in report.splitlines()[3:] if line.strip()}
    assert "src +2 (stale 20m)" in lines["a"] and "2030-01-01 12:30:00" in lines["a"]
    assert "merging 1/4 (interrupted; next run resumes)" in lines["b"] and "next run" in lines["b"]
    assert "never run" in lines["c"]
    assert "(not in project)" in lines["gone"]
    assert "recent refreshes" not in report


def test_catalog_stats_are_text():
    info = _status.ModelInfo("model.p.a", "a", "s.a", "15m", "full", 900.0)
    row = {"phase": "idle", "consumed": json.dumps({"s.src": {"version": 4}}),
           "last_refresh_at": _dt(2030, 1, 1), "last_action": "full", "last_outcome": "success"}
    last = {"action": "full", "mode": "full", "reason": "upstream moved; fallback: a join"}
    stats = _status.catalog_stats(info, row, last)
    assert stats["stats:br_mode:value"] == "full; last refresh full in full mode (fallback: a join)"
    assert stats["stats:br_consumed:value"] == "src@v4"
    assert stats["stats:br_last_refresh:value"] == "2030-01-01 00:00:00 by full, success"
    assert stats["stats:br_interval:value"] == "every 15m of upstream lag"
    assert all(isinstance(v, (str, bool)) for v in stats.values())
