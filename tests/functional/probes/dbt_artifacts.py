"""brooklyn-data's dbt_artifacts marts as the probe runs them
(tests/functional/probe_real_projects.py): `da_` keyless, `dak_` with the package's key tests
(MODEL_TESTS)."""
from __future__ import annotations

from tests.functional.probes.common import C, O, P, PR, ported, surrogate

# Session 70: brooklyn-data's dbt_artifacts marts (the package that records dbt's own runs;
# it supports Spark and Databricks). Its raw upload tables synthesized in staging models from
# the probe's four tables: invocations from customers (the target name is the region, NULL
# at times), model executions from orders (an invocation per customer, a node per product),
# test executions from payments (a test per order_id % 7, NULL with the order), seed
# executions from products, snapshot executions from customers, the models of the newest
# upload from products (an upload per five product ids, so the newest holds one to five).
# The marts as the package writes them but for its macros spelled out as they compile on
# Spark: cast_to_utc_date as `cast(x as date)`, generate_surrogate_key as dbt_utils' md5 of
# '-'-joined columns, median and p95 as `percentile_cont(...) within group (order by ...)`;
# Snowflake's `dateadd('day', ...)` and `dayofweekiso` as Spark spells them. Keyless, and
# again (`dak_`) with the package's unique + not_null tests on each mart's id.
_DA_AT = "timestamp'2024-01-01 00:00:00'"
DA_STAGING = {
 "stg_invocations": f"""
with source as (select id, region from {C})
select concat('inv', id) as command_invocation_id,
  element_at(array('run', 'build', 'test'), id % 3 + 1) as dbt_command,
  region as target_name, dateadd(HOUR, id * 7, {_DA_AT}) as run_started_at
from source""",
 "stg_model_executions": f"""
with source as (select * from {O})
select concat('exec', id) as model_execution_id, concat('inv', customer_id) as command_invocation_id,
  concat('model.p.m', product_id) as node_id,
  dateadd(HOUR, customer_id * 7, {_DA_AT}) as run_started_at,
  id % 5 = 0 as was_full_refresh,
  case status when 'cancelled' then 'error' when 'new' then 'skipped' else 'success' end as status,
  dateadd(SECOND, id % 7, dateadd(HOUR, customer_id * 7, {_DA_AT})) as compile_started_at,
  dateadd(SECOND, id, dateadd(HOUR, customer_id * 7, {_DA_AT})) as query_completed_at,
  amount / 10.0 as total_node_runtime, amount as rows_affected,
  'table' as materialization, concat('m', product_id) as name
from source""",
 "stg_test_executions": f"""
with source as (select * from {P})
select concat('texec', id) as test_execution_id,
  concat('inv', id % 48 + 1) as command_invocation_id,
  concat('test.p.t', order_id % 7) as node_id,
  dateadd(MINUTE, id * 37, {_DA_AT}) as run_started_at,
  case method when 'card' then 'pass' when 'bank' then 'fail' else 'error' end as status,
  amount / 10.0 as total_node_runtime
from source""",
 "stg_seed_executions": f"""
select concat('sexec', id) as seed_execution_id, concat('inv', id * 4) as command_invocation_id,
  concat('seed.p.s', id) as node_id, dateadd(HOUR, id * 28, {_DA_AT}) as run_started_at,
  case when price > 50 then 'error' else 'success' end as status, price / 10.0 as total_node_runtime
from {PR}""",
 "stg_snapshot_executions": f"""
select concat('snexec', id) as snapshot_execution_id, concat('inv', id) as command_invocation_id,
  concat('snapshot.p.', region) as node_id, dateadd(HOUR, id * 7, {_DA_AT}) as run_started_at,
  case when name is null then 'error' else 'success' end as status, id / 4.0 as total_node_runtime
from {C} where tier = 'std'""",
 "stg_models": f"""
select concat('model.p.m', id) as node_id, concat('m', id) as name, category as materialization,
  dateadd(DAY, id div 5, {_DA_AT}) as run_started_at
from {PR}""",
 "lineage_edges": f"""
select distinct concat('test.p.t', id % 7) as child_node_id, 'test' as child_resource_type,
  concat('model.p.m', product_id) as parent_node_id
from {O} where status <> 'new'
union all
select concat('model.p.m', id) as child_node_id, 'model' as child_resource_type,
  concat('model.p.m', id div 2) as parent_node_id
from {PR} where id > 1""",
}
DA_MARTS = {
 "current_models": """
with base as (
    select *
    from {{ ref('PFX_stg_models') }}
),

model_executions as (
    select *
    from {{ ref('PFX_stg_model_executions') }}
),

latest_models as (
    /* Retrieves the models present in the most recent run */
    select *
    from base
    where run_started_at = (select max(run_started_at) from base)
),

latest_models_runs as (
    select
        model_executions.node_id
        , model_executions.was_full_refresh
        , model_executions.query_completed_at
        , model_executions.total_node_runtime
        , model_executions.rows_affected
        , row_number() over (
            partition by latest_models.node_id, model_executions.was_full_refresh
            order by model_executions.query_completed_at desc /* most recent ranked first */
        ) as run_idx
    from model_executions
    inner join latest_models on model_executions.node_id = latest_models.node_id
    where model_executions.status = 'success'
),

latest_model_stats as (
    select
        node_id
        , max(case when was_full_refresh then query_completed_at end) as last_full_refresh_run_completed_at
        , max(case when was_full_refresh then total_node_runtime end) as last_full_refresh_run_total_runtime
        , max(case when was_full_refresh then rows_affected end) as last_full_refresh_run_rows_affected
        , max(query_completed_at) as last_run_completed_at
        , max(total_node_runtime) as last_run_total_runtime
        , max(rows_affected) as last_run_rows_affected
    from latest_models_runs
    where run_idx = 1
    group by 1
),

final as (
    select
        latest_models.*
        , latest_model_stats.last_full_refresh_run_completed_at
        , latest_model_stats.last_full_refresh_run_total_runtime
        , latest_model_stats.last_full_refresh_run_rows_affected
        , latest_model_stats.last_run_completed_at
        , latest_model_stats.last_run_total_runtime
        , latest_model_stats.last_run_rows_affected
    from latest_models
    left join latest_model_stats
        on latest_models.node_id = latest_model_stats.node_id
)

select * from final""",
 "flaky_tests_detail": """
with
    test_executions as (
        select
            node_id as test_node_id
            , run_started_at
            , status
            , cast(run_started_at as date) as date_day
        from {{ ref("PFX_stg_test_executions") }}
    ),

    sequenced as (
        select
            test_node_id
            , run_started_at
            , status
            , date_day
            , lag(status) over (
                partition by test_node_id order by run_started_at
            ) as prev_status
            , lag(run_started_at) over (
                partition by test_node_id order by run_started_at
            ) as prev_run_started_at
            , lag(date_day) over (
                partition by test_node_id order by run_started_at
            ) as prev_date_day
        from test_executions
    ),

    flip_candidates as (
        select
            test_node_id
            , date_day
            , prev_run_started_at as failed_at
            , run_started_at as passed_at
        from sequenced
        where status = 'pass'
            and prev_status in ('fail', 'error')
            and prev_date_day = date_day
    ),

    test_model_parents as (
        select
            child_node_id as test_node_id
            , parent_node_id
        from {{ ref("PFX_lineage_edges") }}
        where child_resource_type = 'test'
            and parent_node_id like 'model.%'
    ),

    candidate_parent_activity as (
        select
            fc.test_node_id
            , fc.date_day
            , fc.failed_at
            , fc.passed_at
            , count(distinct tmp.parent_node_id) as n_parents
            , count(distinct
                case
                    when me.node_id is not null then me.node_id
                end
            ) as n_parents_rebuilt_between
        from flip_candidates as fc
        left join test_model_parents as tmp
            on fc.test_node_id = tmp.test_node_id
        left join {{ ref("PFX_stg_model_executions") }} as me
            on me.node_id = tmp.parent_node_id
            and me.status = 'success'
            and me.run_started_at > fc.failed_at
            and me.run_started_at < fc.passed_at
        group by fc.test_node_id, fc.date_day, fc.failed_at, fc.passed_at
    ),

    final as (
        select
            SURROGATE_FLIP
                as flaky_test_flip_id
            , test_node_id
            , date_day
            , failed_at
            , passed_at
            , case when n_parents = 0 then null else false end as parent_rebuilt_between
        from candidate_parent_activity
        where n_parents_rebuilt_between = 0
    )

select *
from final""",
 "flaky_tests": """
with
    test_executions as (
        select
            node_id as test_node_id
            , date_trunc('month', cast(run_started_at as date))
                as month
        from {{ ref("PFX_stg_test_executions") }}
    ),

    executions_monthly as (
        select
            test_node_id
            , month
            , count(*) as executions
        from test_executions
        group by test_node_id, month
    ),

    flips_monthly as (
        select
            test_node_id
            , date_trunc('month', date_day) as month
            , count(*) as flips
            , max(passed_at) as last_flip_at
        from {{ ref("PFX_flaky_tests_detail") }}
        group by test_node_id, date_trunc('month', date_day)
    ),

    final as (
        select
            SURROGATE_FLAKY
                as flaky_test_id
            , em.test_node_id
            , em.month
            , coalesce(fm.flips, 0) as flips
            , em.executions
            , coalesce(fm.flips, 0) / nullif(em.executions, 0) as flake_rate
            , fm.last_flip_at
            , case
                when coalesce(fm.flips, 0) >= 2
                    then true
                else false
            end as is_flaky
        from executions_monthly as em
        left join flips_monthly as fm
            on em.test_node_id = fm.test_node_id
            and em.month = fm.month
    )

select *
from final""",
 "model_performance": """
with
    executions as (
        select
            node_id
            , cast(run_started_at as date) as date_day
            , status
            , total_node_runtime
            , rows_affected
            , was_full_refresh
        from {{ ref("PFX_stg_model_executions") }}
    ),

    daily as (
        select
            date_day
            , node_id
            , count(*) as executions
            , sum(case when status = 'success' then 1 else 0 end) as success_count
            , sum(case when was_full_refresh then 1 else 0 end) as full_refresh_executions
            , percentile_cont(0.5) within group (order by
                    case when status = 'success' and not was_full_refresh then total_node_runtime end
                ) as median_runtime
            , percentile_cont(0.95) within group (order by
                    case when status = 'success' and not was_full_refresh then total_node_runtime end
                ) as p95_runtime
            , sum(
                case when status = 'success' and not was_full_refresh then rows_affected else 0 end
            ) as rows_affected_sum
        from executions
        group by date_day, node_id
    ),

    baseline as (
        select
            cur.date_day
            , cur.node_id
            , percentile_cont(0.5) within group (order by hist.median_runtime) as baseline_runtime
            , count(distinct hist.date_day) as baseline_sample_days
        from daily as cur
        left join daily as hist
            on cur.node_id = hist.node_id
            and extract(DAYOFWEEK_ISO from hist.date_day) = extract(DAYOFWEEK_ISO from cur.date_day)
            and hist.date_day < cur.date_day
            and hist.date_day
                >= dateadd(DAY, -28, cur.date_day)
            and hist.median_runtime is not null
        group by cur.date_day, cur.node_id
    ),

    final as (
        select
            SURROGATE_PERF
                as model_performance_id
            , daily.date_day
            , daily.node_id
            , daily.executions
            , daily.success_count
            , daily.full_refresh_executions
            , daily.median_runtime
            , daily.p95_runtime
            , daily.rows_affected_sum
            , baseline.baseline_runtime
            , baseline.baseline_sample_days
            , case
                when baseline.baseline_runtime > 0
                    then daily.median_runtime / baseline.baseline_runtime
            end as runtime_regression_ratio
            , case
                when baseline.baseline_runtime > 0
                    and daily.median_runtime / baseline.baseline_runtime
                        > 1.5
                    and baseline.baseline_sample_days
                        >= 1
                    then true
                else false
            end as is_regressed
        from daily
        left join baseline
            on daily.date_day = baseline.date_day
            and daily.node_id = baseline.node_id
    )

select *
from final""",
 "dag_bottlenecks_detail": """
with
    edges as (
        select
            parent_node_id
            , child_node_id
        from {{ ref("PFX_lineage_edges") }}
        where child_resource_type = 'model'
            and parent_node_id like 'model.%'
    ),

    model_executions as (
        select
            command_invocation_id
            , node_id
            , run_started_at
            , compile_started_at
            , query_completed_at
        from {{ ref("PFX_stg_model_executions") }}
        where status = 'success'
    ),

    child_parent as (
        select
            child.command_invocation_id
            , child.node_id as child_node_id
            , child.run_started_at
            , child.compile_started_at as child_compile_started_at
            , parent.node_id as parent_node_id
            , parent.query_completed_at as parent_query_completed_at
        from model_executions as child
        inner join edges on child.node_id = edges.child_node_id
        inner join model_executions as parent
            on parent.node_id = edges.parent_node_id
            and parent.command_invocation_id = child.command_invocation_id
    ),

    binding_parent as (
        select
            command_invocation_id
            , child_node_id
            , run_started_at
            , child_compile_started_at
            , parent_node_id
            , parent_query_completed_at
        from child_parent
        qualify
            row_number() over (
                partition by command_invocation_id, child_node_id
                order by parent_query_completed_at desc, parent_node_id asc
            )
            = 1
    ),

    final as (
        select
            SURROGATE_BOTTLENECK
                as dag_bottleneck_detail_id
            , command_invocation_id
            , cast(run_started_at as date) as date_day
            , child_node_id
            , parent_node_id as binding_parent_node_id
            , parent_query_completed_at
            , child_compile_started_at
            , greatest(
                timestampdiff(MILLISECOND, parent_query_completed_at, child_compile_started_at)
                / 1000.0,
                0
            ) as stall_seconds
        from binding_parent
    )

select *
from final""",
 "run_health_daily_detail": """
with
    invocations as (
        select
            command_invocation_id
            , dbt_command
            , target_name
            , run_started_at
            , cast(run_started_at as date) as date_day
        from {{ ref("PFX_stg_invocations") }}
    ),

    executions as (
        select
            command_invocation_id
            , node_id
            , status
            , total_node_runtime
            , run_started_at
        from {{ ref("PFX_stg_model_executions") }}
        union all
        select
            command_invocation_id
            , node_id
            , status
            , total_node_runtime
            , run_started_at
        from {{ ref("PFX_stg_seed_executions") }}
        union all
        select
            command_invocation_id
            , node_id
            , status
            , total_node_runtime
            , run_started_at
        from {{ ref("PFX_stg_snapshot_executions") }}
        union all
        select
            command_invocation_id
            , node_id
            , status
            , total_node_runtime
            , run_started_at
        from {{ ref("PFX_stg_test_executions") }}
    ),

    exec_classified as (
        select
            e.command_invocation_id
            , i.date_day
            , i.target_name
            , e.total_node_runtime
            , e.run_started_at
            , case when e.status in ('success', 'pass') then 1 else 0 end as is_success
            , case when e.status in ('fail', 'failure') then 1 else 0 end as is_failure
            , case when e.status = 'error' then 1 else 0 end as is_error
            , case when e.status in ('skipped', 'skip') then 1 else 0 end as is_skip
        from executions as e
        inner join invocations as i
            on e.command_invocation_id = i.command_invocation_id
    ),

    node_daily as (
        select
            date_day
            , target_name
            , sum(is_success) as node_successes
            , sum(is_failure) as node_failures
            , sum(is_error) as node_errors
            , sum(is_skip) as node_skips
            , sum(total_node_runtime) as total_runtime_seconds
            , max(total_node_runtime) as max_node_runtime_seconds
            , min(run_started_at) as first_run_started_at
            , max(run_started_at) as last_run_started_at
        from exec_classified
        group by date_day, target_name
    ),

    invocation_daily as (
        select
            date_day
            , target_name
            , count(distinct command_invocation_id) as invocations
            , count(distinct dbt_command) as distinct_commands
        from invocations
        group by date_day, target_name
    ),

    failed_invocation_daily as (
        select
            date_day
            , target_name
            , count(distinct command_invocation_id) as failed_invocations
        from exec_classified
        where is_error = 1 or is_failure = 1
        group by date_day, target_name
    ),

    final as (
        select
            SURROGATE_HEALTH
                as run_health_daily_detail_id
            , inv.date_day
            , inv.target_name
            , inv.invocations
            , inv.distinct_commands
            , coalesce(nd.node_successes, 0) as node_successes
            , coalesce(nd.node_failures, 0) as node_failures
            , coalesce(nd.node_errors, 0) as node_errors
            , coalesce(nd.node_skips, 0) as node_skips
            , coalesce(fid.failed_invocations, 0) as failed_invocations
            , nd.node_successes
                / nullif(nd.node_successes + nd.node_failures + nd.node_errors, 0)
                as success_rate
            , coalesce(nd.total_runtime_seconds, 0) as total_runtime_seconds
            , nd.max_node_runtime_seconds
            , nd.first_run_started_at
            , nd.last_run_started_at
        from invocation_daily as inv
        left join node_daily as nd
            on inv.date_day = nd.date_day and inv.target_name = nd.target_name
        left join failed_invocation_daily as fid
            on inv.date_day = fid.date_day and inv.target_name = fid.target_name
    )

select *
from final""",
}
_DA_SURROGATES = {
    "SURROGATE_FLIP": surrogate("test_node_id", "failed_at", "passed_at"),
    "SURROGATE_FLAKY": surrogate("em.test_node_id", "em.month"),
    "SURROGATE_PERF": surrogate("daily.date_day", "daily.node_id"),
    "SURROGATE_HEALTH": surrogate("inv.date_day", "inv.target_name"),
    "SURROGATE_BOTTLENECK": surrogate("command_invocation_id", "child_node_id"),
}
# the package's schema.yml: unique + not_null on each mart's id
DA_IDS = {"current_models": "node_id", "flaky_tests_detail": "flaky_test_flip_id",
          "flaky_tests": "flaky_test_id", "model_performance": "model_performance_id",
          "run_health_daily_detail": "run_health_daily_detail_id",
          "dag_bottlenecks_detail": "dag_bottleneck_detail_id"}
PROBES, MODEL_TESTS = ported("da", {**DA_STAGING, **DA_MARTS}, DA_IDS, _DA_SURROGATES)
