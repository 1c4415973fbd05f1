#!/usr/bin/env bash
# `make demo`: the example project end to end on the embedded Spark + Delta.
# seed -> run (backfill) -> scripted upstream change -> run (replay) -> history -> tests
set -euo pipefail
cd "$(dirname "$0")/../integration_tests"
DBT="../.venv/bin/dbt"
ARGS=(--profiles-dir ../profiles)
export DBT_SEND_ANONYMOUS_USAGE_STATS=false
rm -rf .batch_refresh target logs   # the demo's own warehouse: start clean every time

step() { printf '\n==> %s\n' "$*"; }
step "dbt seed (orders, customers as Delta tables with Change Data Feed)"
"$DBT" seed "${ARGS[@]}"
step "dbt run #1: snapshot backfill"
"$DBT" run "${ARGS[@]}"
step "upstream change: inserts, updates and deletes on orders"
"$DBT" run-operation apply_demo_changes "${ARGS[@]}"
step "dbt run #2: replay of the change feed"
"$DBT" run "${ARGS[@]}"
step "dbt run #3: nothing changed upstream, a no-op"
"$DBT" run "${ARGS[@]}"
step "history (dbt run-operation batch_refresh_status)"
"$DBT" run-operation batch_refresh_status "${ARGS[@]}"
step "dbt test"
"$DBT" test "${ARGS[@]}"
