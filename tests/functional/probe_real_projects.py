"""A probe of SQL written as dbt projects write it, under random upstream changes (not part of
`make test`: run it by path, `PROBE_SEED=5 PROBE_STEPS=3 .venv/bin/python -m pytest
tests/functional/probe_real_projects.py -s`, over an hour). Every model must build and equal its SQL
from scratch after every run; what each refresh did and why it fell back is printed.
PROBE_ONLY=q_,p_jaffle runs only the models whose names start so (m_ mrr-playbook, a_
attribution-playbook, sg_ segment, js_ jaffle-shop, dd_ dbt_utils.deduplicate, da_
dbt_artifacts, rc_ recursive CTEs, ft_ Fivetran-style string keys, sh_/shk_
fivetran/dbt_shopify, st_/stk_ fivetran/dbt_stripe's MRR report, xr_/xrk_
fivetran/dbt_xero, qb_/qbk_ fivetran/dbt_quickbooks, sf_/sfk_ fivetran/dbt_salesforce; the
ported packages each in a module of tests/functional/probes/). As in
the fuzz, every other change batch first meets a run in which every refresh fails at a fail
point (tests/fuzz/harness.py fault_point; PROBE_FAULTS=0 leaves them out)."""
from __future__ import annotations

import os
from collections import Counter, defaultdict

import pytest
from dbt.tests.util import run_dbt

from tests.functional.helpers import assert_contract, sources_yml
from tests.functional.test_shapes import TABLES, Changes, create_tables
from tests.functional.probes import dbt_artifacts, quickbooks, salesforce, shopify, stripe, xero
from tests.functional.probes.common import C, O, P, PR, cfg
from tests.fuzz.harness import fault_point, faulted_dbt_run

SEED = int(os.environ.get("PROBE_SEED", "5"))
STEPS = int(os.environ.get("PROBE_STEPS", "4"))
# PROBE_TESTED=1: every source declares `id` with unique and not_null tests, as a dbt project
# would; the models then infer keys through them (keyinfer.py)
TESTED = os.environ.get("PROBE_TESTED", "") == "1"
FAULTS = os.environ.get("PROBE_FAULTS", "1") != "0"

PROBES = {
 "p_jaffle_customers": cfg() + f"""
with customer_orders as (
  select customer_id, min(id) as first_order, max(id) as most_recent_order, count(id) as number_of_orders
  from {O} group by customer_id),
customer_payments as (
  select o.customer_id, sum(p.amount) as total_amount
  from {P} p left join {O} o on p.order_id = o.id group by o.customer_id)
select c.id as customer_id, c.name, co.first_order, co.most_recent_order,
       coalesce(co.number_of_orders, 0) as number_of_orders, cp.total_amount as customer_lifetime_value
from {C} c left join customer_orders co on c.id = co.customer_id
left join customer_payments cp on c.id = cp.customer_id
""",
 "p_jaffle_orders": cfg() + f"""
with order_payments as (
  select order_id,
    sum(case when method = 'card' then amount else 0 end) as card_amount,
    sum(case when method = 'bank' then amount else 0 end) as bank_amount,
    sum(amount) as total_amount
  from {P} group by order_id)
select o.id as order_id, o.customer_id, o.status, op.card_amount, op.bank_amount, op.total_amount as amount
from {O} o left join order_payments op on o.id = op.order_id
""",
 "p_lateral_alias": cfg('id') + f"select id, amount * 2 as a2, a2 + 1 as a3 from {O}",
 "p_lateral_alias_agg": cfg() + f"""
select customer_id, sum(amount) as total, count(*) as n, total / n as avg_amount
from {O} group by customer_id""",
 "p_group_by_all": cfg() + f"select customer_id, status, count(*) as n, sum(amount) as s from {O} group by all",
 "p_surrogate_key": cfg('sk') + f"""
select md5(concat_ws('-', cast(customer_id as string), status)) as sk, customer_id, status, sum(amount) as s
from {O} group by customer_id, status""",
 "p_cumulative": cfg('id') + f"""
select id, customer_id, sum(amount) over (partition by customer_id order by id
  rows between unbounded preceding and current row) as running from {O}""",
 "p_lag_lead": cfg('id') + f"""
select id, customer_id, lag(amount) over (partition by customer_id order by id) as prev_amount,
  lead(id, 2) over (partition by customer_id order by id) as next2 from {O}""",
 "p_rank_region": cfg() + f"""
with per_customer as (select customer_id, sum(amount) as total from {O} group by customer_id),
joined as (select c.region, pc.customer_id, pc.total from per_customer pc join {C} c on c.id = pc.customer_id)
select region, customer_id, total, dense_rank() over (partition by region order by total desc) as rnk from joined""",
 "p_pct_of_total": cfg('id') + f"select id, amount, amount / sum(amount) over () as share from {O}",
 "p_count_distinct": cfg() + f"""
select product_id, count(distinct customer_id) as buyers, approx_count_distinct(status) as statuses
from {O} group by product_id""",
 "p_union_distinct": cfg() + f"select customer_id as cid from {O} union select id from {C} where tier = 'blocked'",
 "p_having_sub": cfg() + f"""
select * from (select customer_id, sum(amount) as t from {O} group by customer_id) x where t > 100""",
 "p_in_select": cfg('id') + f"""
select id, customer_id in (select id from {C} where tier = 'blocked') as blocked from {O}""",
 "p_scalar_where": cfg('id') + f"select id, amount from {O} where amount > (select avg(amount) from {O})",
 "p_window_over_union": cfg() + f"""
select src, id, row_number() over (partition by src order by id) as rn from
(select id, 'o' as src from {O} union all select id, 'p' as src from {P}) u""",
 "p_left_then_where": cfg() + f"""
select o.id as oid, p.id as pid, p.amount from {O} o left join {P} p on p.order_id = o.id where p.method = 'card'""",
 "p_non_equi": cfg() + f"""
select o.id as oid, p.id as pid from {O} o join {PR} p on o.amount between p.price and p.price + 5""",
 "p_explode": cfg() + f"""
select o.id, pos, x from {O} o lateral view posexplode(array(o.amount, o.amount * 2)) t as pos, x""",
 "p_distinct_sub": cfg() + f"""
select customer_id, count(*) as products from (select distinct customer_id, product_id from {O}) d group by customer_id""",
 "p_range_frame": cfg('id') + f"""
select id, sum(amount) over (partition by customer_id order by amount range between 10 preceding and current row) as s
from {O} where amount is not null""",
 "p_having_scalar": cfg() + f"""
select customer_id, sum(amount) as s from {O} group by customer_id having sum(amount) > (select avg(amount) * 3 from {O})""",
 "p_collect": cfg() + f"""
select customer_id, array_sort(collect_set(status)) as statuses, first(status, true) as any_status_dummy_max, max_by(id, amount) as top
from {O} group by customer_id""",
 "p_nullsafe": cfg() + f"""
select o.id as oid, c.id as cid from {O} o join {C} c on o.amount <=> c.id""",
 "p_self_prev": cfg() + f"""
select a.id, max(b.id) as prev_id from {O} a left join {O} b on b.customer_id = a.customer_id and b.id < a.id group by a.id""",
 "p_params": cfg('id') + f"""
with params as (select 50 as threshold) select o.id, o.amount from {O} o cross join params where o.amount > params.threshold""",
 "p_values_join": cfg('id') + f"""
select o.id, s.rnk from {O} o join (values ('new', 1), ('paid', 2), ('shipped', 3)) as s(status, rnk) on s.status = o.status""",
 "p_chain_down": cfg() + """
select number_of_orders, count(*) as customers from {{ ref('p_jaffle_customers') }} group by number_of_orders""",
 "p_listagg": cfg() + f"""
select customer_id, concat_ws(',', transform(array_sort(collect_list(struct(id, status))), x -> x.status)) as seq
from {O} group by customer_id""",
 "p_case_bucket_agg": cfg() + f"""
select case when amount < 30 then 'low' when amount < 80 then 'mid' else 'high' end as band, count(*) as n, sum(amount) s
from {O} group by 1""",
 "p_semi_in": cfg('id') + f"""
select id, status from {O} where customer_id in (select id from {C} where region = 'eu') and product_id not in (select id from {PR} where id is not null and price > 20)""",
 "p_first_order_flag": cfg('id') + f"""
select id, customer_id, case when id = min(id) over (partition by customer_id) then 'first' else 'repeat' end as kind from {O}""",
 "p_agg_of_join_filter": cfg() + f"""
select c.region, p.category, count(*) as n, sum(o.amount) as s
from {O} o join {C} c on c.id = o.customer_id join {PR} p on p.id = o.product_id
where c.tier <> 'blocked' and o.status in ('paid', 'shipped') group by c.region, p.category""",
}

PROBES["k_jaffle_customers"] = PROBES["p_jaffle_customers"].replace(cfg(), cfg("customer_id"))
PROBES["k_jaffle_orders"] = PROBES["p_jaffle_orders"].replace(cfg(), cfg("order_id"))
PROBES["k_rank_region"] = PROBES["p_rank_region"].replace(cfg(), cfg("customer_id"))
PROBES["k_window_over_union"] = PROBES["p_window_over_union"].replace(cfg(), cfg("src,id")).replace("unique_key='src,id'", "unique_key=['src', 'id']")
PROBES["k_left_then_where"] = PROBES["p_left_then_where"].replace(cfg(), cfg("pid"))
PROBES["k_agg_of_join_filter"] = cfg() + """
select coalesce(c.region, '?') as region, coalesce(p.category, '?') as category, count(*) as n, sum(o.amount) as s
from {{ source('raw', 'orders') }} o join {{ source('raw', 'customers') }} c on c.id = o.customer_id
join {{ source('raw', 'products') }} p on p.id = o.product_id
where c.tier <> 'blocked' and o.status in ('paid', 'shipped') group by 1, 2"""

# Session 56: more of what dbt projects write (SCD-style lead/lag, sessions from nested
# windows, cohorts, a date spine, pivots by CASE, percentiles, weekly buckets, struct and map
# columns, a correlated EXISTS in the SELECT list, a filter against a scalar subquery, shares
# per partition, several count(distinct), a union of sources aggregated, HAVING count).
PROBES.update({
 "q_lead_lag": cfg() + f"""
select id, customer_id, status, lead(id) over (partition by customer_id order by id) as next_order_id,
       lag(amount) over (partition by customer_id order by id) as prev_amount
from {O}""",
 "q_sessions": cfg() + f"""
with ordered as (
  select id, customer_id, amount,
    case when amount - lag(amount) over (partition by customer_id order by id) > 30 then 1 else 0 end as new_session
  from {O}),
sessions as (
  select id, customer_id, sum(new_session) over (partition by customer_id order by id
                                                 rows between unbounded preceding and current row) as session_no
  from ordered)
select customer_id, session_no, count(*) as n, min(id) as first_id from sessions group by customer_id, session_no""",
 "q_cohort": cfg() + f"""
with firsts as (select customer_id, min(id) as first_id from {O} group by customer_id)
select f.first_id % 5 as cohort, o.status, count(distinct o.customer_id) as customers, sum(o.amount) as revenue
from {O} o join firsts f on f.customer_id = o.customer_id
group by 1, 2""",
 "q_date_spine": cfg('day') + f"""
with spine as (select cast(id as int) as day from range(0, 130)),
daily as (select amount as day, count(*) as n from {O} where amount is not null group by amount)
select s.day, coalesce(d.n, 0) as n from spine s left join daily d on d.day = s.day""",
 "q_pivot_delta": "{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}\n" + f"""
select customer_id,
  sum(case when status = 'new' then 1 else 0 end) as new_orders,
  sum(case when status = 'paid' then amount else 0 end) as paid_amount,
  count(case when status = 'cancelled' then 1 end) as cancelled, count(*) as n
from {O} group by customer_id""",
 "q_percentiles": cfg() + f"""
select product_id, percentile(amount, 0.5) as median_amount, percentile_approx(amount, 0.9) as p90,
       stddev_pop(amount) as sd
from {O} group by product_id""",
 "q_weekly": cfg() + f"""
with o as (select *, date_add(date'2024-01-01', cast(id % 60 as int)) as order_date from {O})
select date_trunc('WEEK', order_date) as week, count(*) as n, sum(amount) as revenue from o group by 1""",
 "q_struct_map": cfg() + f"""
select id, named_struct('status', status, 'amount', amount) as info, map('amount', amount) as m,
       array(customer_id, product_id) as refs
from {O} where status <> 'cancelled'""",
 "q_exists_case": cfg() + f"""
select c.id, c.name,
  case when exists (select 1 from {O} o where o.customer_id = c.id and o.status = 'paid')
       then 'active' else 'inactive' end as state
from {C} c""",
 "q_above_avg": cfg() + f"""
select id, amount from {O} where amount > (select avg(amount) from {O})""",
 "q_share_in_customer": cfg() + f"""
select id, customer_id, amount, amount / sum(amount) over (partition by customer_id) as share
from {O} where amount is not null""",
 "q_count_distincts": cfg() + f"""
select customer_id, count(distinct product_id) as products, count(distinct status) as statuses,
       count(distinct case when amount > 50 then product_id end) as big_products
from {O} group by customer_id""",
 "q_union_sources_agg": cfg() + f"""
with u as (
  select 'order' as src, customer_id, amount from {O}
  union all
  select 'payment', o.customer_id, p.amount from {P} p join {O} o on o.id = p.order_id)
select customer_id, src, sum(amount) as s, count(*) as n from u group by customer_id, src""",
 "q_having_count": cfg() + f"""
select customer_id, count(*) as n from {O} group by customer_id having count(*) > 4""",
})
# Session 59: windows over a join in their own SELECT (split from the join, winsplit.py):
# a rank of per-customer totals by region written in one SELECT, the newest order per
# product among orders of unblocked customers by QUALIFY, a running total over a join.
PROBES.update({
 "w_rank_totals_join": cfg('customer_id') + f"""
with per_customer as (select customer_id, sum(amount) as total from {O} group by customer_id)
select pc.customer_id, c.region, pc.total,
       dense_rank() over (partition by c.region order by pc.total desc, pc.customer_id) as rnk
from per_customer pc join {C} c on c.id = pc.customer_id""",
 "w_latest_per_product": cfg('product_id') + f"""
select o.product_id, o.id as order_id, o.amount, c.region from {O} o join {C} c on c.id = o.customer_id
where c.tier <> 'blocked'
qualify row_number() over (partition by o.product_id order by o.amount desc, o.id desc) = 1""",
 "w_running_join": cfg('id') + f"""
select o.id, c.region, sum(o.amount) over (partition by c.region order by o.id) as running
from {O} o left join {C} c on c.id = o.customer_id""",
})
# Session 65: dbt-labs' mrr-playbook as a Spark user ports it (its date spine an ephemeral
# model, dbt_utils.surrogate_key spelled out, lateral aliases in windows moved to a nested
# SELECT, which Spark refuses): a staging model of subscriptions over orders (periods of one or
# two months that never overlap), customer months by a range join to the spine, a left join
# with a range and an OR, windows per customer, the churn month after the last active one, and
# MRR changes by lag over the union of the two. Keyless as the playbook writes them and keyed by
# their grain.
REV = """
with subscription_periods as (select * from {{ ref('m_subscription_periods') }}),
months as (select * from {{ ref('m_util_months') }}),
customers as (
  select customer_id, date_trunc('month', min(start_date)) as date_month_start,
         date_trunc('month', max(end_date)) as date_month_end
  from subscription_periods group by 1),
customer_months as (
  select customers.customer_id, months.date_month from customers
  inner join months on months.date_month >= customers.date_month_start
                   and months.date_month < customers.date_month_end),
joined as (
  select customer_months.date_month, customer_months.customer_id,
         coalesce(subscription_periods.monthly_amount, 0) as mrr
  from customer_months
  left join subscription_periods
    on customer_months.customer_id = subscription_periods.customer_id
   and customer_months.date_month >= subscription_periods.start_date
   and (customer_months.date_month < subscription_periods.end_date
        or subscription_periods.end_date is null)),
flagged as (select *, mrr > 0 as is_active from joined),
windowed as (
  select *,
    min(case when is_active then date_month end) over (partition by customer_id) as first_active_month,
    max(case when is_active then date_month end) over (partition by customer_id) as last_active_month
  from flagged)
select *, first_active_month = date_month as is_first_month,
       last_active_month = date_month as is_last_month
from windowed"""
CHURN = """
with mrr as (select * from {{ ref('%s') }})
select dateadd(month, 1, date_month)::date as date_month, customer_id, 0::float as mrr,
       false as is_active, first_active_month, last_active_month,
       false as is_first_month, false as is_last_month
from mrr where is_last_month"""
MRR = """
with unioned as (
  select * from {{ ref('%s') }}
  union all
  select * from {{ ref('%s') }}),
lagged as (
  select *,
    coalesce(lag(is_active) over (partition by customer_id order by date_month), false)
      as previous_month_is_active,
    coalesce(lag(mrr) over (partition by customer_id order by date_month), 0) as previous_month_mrr
  from unioned),
mrr_with_changes as (select *, mrr - previous_month_mrr as mrr_change from lagged)
select md5(concat(coalesce(cast(date_month as string), ''), '-',
                  coalesce(cast(customer_id as string), ''))) as id,
  *,
  case when is_first_month then 'new'
       when not(is_active) and previous_month_is_active then 'churn'
       when is_active and not(previous_month_is_active) then 'reactivation'
       when mrr_change > 0 then 'upgrade'
       when mrr_change < 0 then 'downgrade'
  end as change_category,
  least(mrr, previous_month_mrr) as renewal_amount
from mrr_with_changes"""
GRAIN = "{{ config(materialized='batch_refresh', unique_key=['date_month', 'customer_id']) }}\n"
PROBES.update({
 "m_util_months": "{{ config(materialized='ephemeral') }}\n"
   "select explode(sequence(date'2018-01-01', date'2070-01-01', interval 1 month)) as date_month",
 "m_subscription_periods": cfg('subscription_id') + f"""
select id as subscription_id, customer_id,
       add_months(date'2018-01-01', id * 2) as start_date,
       add_months(date'2018-01-01', id * 2 + 1 + coalesce(amount, 0) % 2) as end_date,
       coalesce(amount, 0) + 1 as monthly_amount
from {O} where status <> 'cancelled'""",
 "m_customer_revenue_by_month": cfg() + REV,
 "m_customer_churn_month": cfg() + CHURN % "m_customer_revenue_by_month",
 "m_mrr": cfg() + MRR % ("m_customer_revenue_by_month", "m_customer_churn_month"),
 "mk_customer_revenue_by_month": GRAIN + REV,
 "mk_customer_churn_month": GRAIN + CHURN % "mk_customer_revenue_by_month",
 "mk_mrr": cfg('id') + MRR % ("mk_customer_revenue_by_month", "mk_customer_churn_month"),
})
# Session 66: dbt-labs' attribution-playbook as a Spark user ports it (its seeds staging models
# over orders and payments, `dateadd(days, ...)` spelled `dateadd(DAY, ...)`): sessions joined
# to each customer's conversion by USING, filtered to the 30 days before it, counted and
# numbered per customer by windows, points and revenue by lateral aliases; then spend and
# attributed revenue per month and source, aggregated and joined by a FULL OUTER JOIN USING.
# Keyless as the playbook writes them and keyed by their grain.
TOUCHES = """
with sessions as (select * from {{ ref('a_sessions') }}),
customer_conversions as (select * from {{ ref('a_customer_conversions') }}),
sessions_before_conversion as (
  select *,
    count(*) over (partition by customer_id) as total_sessions,
    row_number() over (partition by customer_id order by sessions.started_at) as session_index
  from sessions
  left join customer_conversions using (customer_id)
  where sessions.started_at <= customer_conversions.converted_at
    and sessions.started_at >= dateadd(DAY, -30, customer_conversions.converted_at)),
with_points as (
  select *,
    case when session_index = 1 then 1.0 else 0.0 end as first_touch_points,
    case when session_index = total_sessions then 1.0 else 0.0 end as last_touch_points,
    case when total_sessions = 1 then 1.0
         when total_sessions = 2 then 0.5
         when session_index = 1 then 0.4
         when session_index = total_sessions then 0.4
         else 0.2 / (total_sessions - 2) end as forty_twenty_forty_points,
    1.0 / total_sessions as linear_points,
    revenue * first_touch_points as first_touch_revenue,
    revenue * last_touch_points as last_touch_revenue,
    revenue * forty_twenty_forty_points as forty_twenty_forty_revenue,
    revenue * linear_points as linear_revenue
  from sessions_before_conversion)
select * from with_points"""
CPA = """
with ad_spend as (select * from {{ ref('a_ad_spend') }}),
attribution as (select * from {{ ref('%s') }}),
ad_spend_aggregated as (
  select date_trunc('month', date_day) as date_month, utm_source, sum(spend) as total_spend
  from ad_spend group by 1, 2),
attribution_aggregated as (
  select date_trunc('month', converted_at) as date_month, utm_source,
    sum(linear_points) as attribution_points, sum(linear_revenue) as attribution_revenue
  from attribution group by 1, 2),
joined as (
  select *,
    1.0 * nullif(total_spend, 0) / attribution_points as cost_per_acquisition,
    1.0 * attribution_revenue / nullif(total_spend, 0) as return_on_advertising_spend
  from attribution_aggregated
  full outer join ad_spend_aggregated using (date_month, utm_source))
select * from joined
order by date_month, utm_source"""
PROBES.update({
 # a session an hour slot of its own: every customer's sessions have distinct start times
 "a_sessions": cfg('session_id') + f"""
select id as session_id, customer_id,
       dateadd(HOUR, id * 9 + id % 7, timestamp'2020-02-01 00:00:00') as started_at,
       element_at(array('facebook_ads', 'google', 'email'), product_id % 3 + 1) as utm_source
from {O} where status <> 'cancelled'""",
 "a_customer_conversions": cfg('customer_id') + f"""
select customer_id, dateadd(HOUR, max(id) * 9 + 5, timestamp'2020-02-01 00:00:00') as converted_at,
       sum(amount) as revenue
from {O} where status in ('paid', 'shipped') group by customer_id""",
 "a_ad_spend": cfg('id') + f"""
select id, date_add(date'2020-02-01', (id * 7) % 120) as date_day,
       element_at(array('facebook_ads', 'google', 'email'), id % 3 + 1) as utm_source,
       amount as spend
from {P}""",
 "a_attribution_touches": cfg() + TOUCHES,
 "a_cpa_and_roas": cfg() + CPA % "a_attribution_touches",
 "ak_attribution_touches": cfg('session_id') + TOUCHES,
 "ak_cpa_and_roas": "{{ config(materialized='batch_refresh', "
                    "unique_key=['date_month', 'utm_source']) }}\n" + CPA % "ak_attribution_touches",
})
# Session 66: two aggregates joined USING their shared group key get it as inferred key; a
# NULL group on both sides never matches and repeats the key (customer 7 has no region from
# the start; a product's category turns NULL under the changes).
PROBES.update({
 "u_region_full_join": cfg() + f"""
with a as (select region, count(*) as n_customers from {C} group by region),
     b as (select c.region, sum(o.amount) as revenue
           from {O} o join {C} c on c.id = o.customer_id group by c.region)
select * from a full outer join b using (region)""",
 "u_category_full_join": cfg() + f"""
with a as (select category, count(*) as n_products from {PR} group by category),
     b as (select p.category, sum(o.amount) as amount, count(*) as n_orders
           from {O} o join {PR} p on p.id = o.product_id group by p.category)
select * from a full outer join b using (category)""",
 # the same joined ON the key and projected as coalesce (Fivetran's daily_shop form)
 "u_region_full_on": cfg() + f"""
with a as (select region, count(*) as n_customers from {C} group by region),
     b as (select c.region, sum(o.amount) as revenue
           from {O} o join {C} c on c.id = o.customer_id group by c.region)
select coalesce(a.region, b.region) as region, a.n_customers, b.revenue
from a full outer join b on a.region = b.region""",
 "u_category_full_on": cfg() + f"""
with a as (select category, count(*) as n_products from {PR} group by category),
     b as (select p.category, sum(o.amount) as amount, count(*) as n_orders
           from {O} o join {PR} p on p.id = o.product_id group by p.category)
select ifnull(b.category, a.category) as category, n_products, amount, n_orders
from a full outer join b on b.category = a.category""",
 "u_status_left_join": cfg() + f"""
with a as (select status, count(*) as n from {O} group by status),
     b as (select o.status, sum(p.amount) as paid
           from {P} p join {O} o on o.id = p.order_id group by o.status)
select status, n, paid from a left join b using (status)""",
 # one-to-many LEFT JOINs of tested sources: keyed by the pair (a payment's id NULL for an
 # order without payments), replayed as delta joins
 "u_left_lines": cfg() + f"""
select o.id as order_id, o.status, o.amount, p.id as payment_id, p.amount as paid, p.method
from {O} o left join {P} p on p.order_id = o.id""",
 "u_left_two": cfg() + f"""
select o.id as order_id, p.id as payment_id, p.amount as paid, pr.id as product_id, pr.category
from {O} o left join {P} p on p.order_id = o.id left join {PR} pr on pr.price = o.amount % 31""",
 # Session 73: RIGHT JOINs, the LEFT join seen from the preserved side: orders with their
 # customer (the order's key alone), then their payments (the pair), and customers with their
 # orders (the pair, the order's id NULL for a customer without one).
 "u_right_orders": cfg() + f"""
select c.id as customer_id, c.region, o.id as order_id, o.amount
from {C} c right join {O} o on c.id = o.customer_id""",
 "u_right_lines": cfg() + f"""
select c.id as customer_id, c.region, o.id as order_id, p.id as payment_id, p.amount as paid
from {C} c right join {O} o on c.id = o.customer_id left join {P} p on p.order_id = o.id""",
 "u_right_many": cfg() + f"""
select o.id as order_id, o.status, c.id as customer_id, c.name
from {O} o right join {C} c on o.customer_id = c.id""",
})
# Session 67: dbt-labs' segment package (sessionization of web page views) as a Spark user
# ports it: the raw `pages` table a staging model over orders (page view ids repeat, so the
# base model's dedup by row_number keeps one), dbt_utils' URL macros spelled as Spark's
# parse_url and split_part, dbt.datediff as unix_timestamp differences, dbt_utils.star as its
# column list, the referrer seed a model over products. Page views numbered, lagged and
# summed into sessions per anonymous id; sessions by `select distinct` over windows (first
# and last values); users stitched by `last_value(...) ignore nulls`; sessions joined USING
# the anonymous id and numbered per blended user. The package's incremental branches are
# left out (batch_refresh replaces them). Keyless (sg_), keyless with the package's own
# unique + not_null tests (sgt_, MODEL_TESTS), and keyed by each model's grain (sgk_).
SG_BASE = """
with source as (select * from {{ ref('sg_pages') }}),
row_numbering as (
  select *, row_number() over (partition by id order by received_at asc) as row_num from source),
deduped as (select * from row_numbering where row_num = 1),
renamed as (
  select id as page_view_id, anonymous_id, user_id,
    received_at as received_at_tstamp, sent_at as sent_at_tstamp, `timestamp` as tstamp,
    url as page_url, parse_url(url, 'HOST') as page_url_host, path as page_url_path,
    title as page_title, search as page_url_query,
    referrer, replace(parse_url(referrer, 'HOST'), 'www.', '') as referrer_host,
    context_campaign_source as utm_source, context_campaign_medium as utm_medium,
    context_campaign_name as utm_campaign, context_campaign_term as utm_term,
    context_campaign_content as utm_content, parse_url(url, 'QUERY', 'gclid') as gclid,
    context_ip as ip, context_user_agent as user_agent,
    case when lower(context_user_agent) like '%android%' then 'Android'
         else replace(split_part(split_part(context_user_agent, '(', 2), ' ', 1), ';', '')
    end as device
  from deduped),
final as (
  select *,
    case when device = 'iPhone' then 'iPhone'
         when device = 'Android' then 'Android'
         when device in ('iPad', 'iPod') then 'Tablet'
         when device in ('Windows', 'Macintosh', 'X11') then 'Desktop'
         else 'Uncategorized' end as device_category
  from renamed)
select * from final"""
SG_SESSIONIZED = """
with pageviews as (select * from {{ ref('%s') }}),
numbered as (
  select *, row_number() over (partition by anonymous_id order by tstamp) as page_view_number
  from pageviews),
lagged as (
  select *, lag(tstamp) over (partition by anonymous_id order by page_view_number) as previous_tstamp
  from numbered),
diffed as (
  select *, unix_timestamp(tstamp) - unix_timestamp(previous_tstamp) as period_of_inactivity
  from lagged),
new_sessions as (
  select *, case when period_of_inactivity <= 1800 then 0 else 1 end as new_session from diffed),
session_numbers as (
  select *, sum(new_session) over (partition by anonymous_id order by page_view_number
                                   rows between unbounded preceding and current row) as session_number
  from new_sessions),
session_ids as (
  select page_view_id, anonymous_id, user_id, received_at_tstamp, sent_at_tstamp, tstamp,
    page_url, page_url_host, page_url_path, page_title, page_url_query, referrer, referrer_host,
    utm_source, utm_medium, utm_campaign, utm_term, utm_content, gclid, ip, user_agent, device,
    device_category, page_view_number,
    md5(cast(concat(coalesce(cast(anonymous_id as string), '_dbt_utils_surrogate_key_null_'), '-',
                    coalesce(cast(session_number as string), '_dbt_utils_surrogate_key_null_'))
             as string)) as session_id
  from session_numbers)
select * from session_ids"""
_SG_WINDOW = ("partition by session_id order by page_view_number "
              "rows between unbounded preceding and unbounded following")
_SG_FIRST = {"utm_source": "utm_source", "utm_content": "utm_content", "utm_medium": "utm_medium",
             "utm_campaign": "utm_campaign", "utm_term": "utm_term", "gclid": "gclid",
             "page_url": "first_page_url", "page_url_host": "first_page_url_host",
             "page_url_path": "first_page_url_path", "page_url_query": "first_page_url_query",
             "referrer": "referrer", "referrer_host": "referrer_host", "device": "device",
             "device_category": "device_category"}
_SG_LAST = {"page_url": "last_page_url", "page_url_host": "last_page_url_host",
            "page_url_path": "last_page_url_path", "page_url_query": "last_page_url_query"}
SG_INITIAL = """
with pageviews_sessionized as (select * from {{ ref('%s') }}),
referrer_mapping as (select * from {{ ref('sg_referrer_mapping') }}),
agg as (
  select distinct session_id, anonymous_id,
    min(tstamp) over (partition by session_id) as session_start_tstamp,
    max(tstamp) over (partition by session_id) as session_end_tstamp,
    count(*) over (partition by session_id) as page_views,
""" + ",\n".join([f"    first_value({k}) over ({_SG_WINDOW}) as {v}" for k, v in _SG_FIRST.items()]
                  + [f"    last_value({k}) over ({_SG_WINDOW}) as {v}" for k, v in _SG_LAST.items()]) + """
  from pageviews_sessionized),
diffs as (
  select *, unix_timestamp(session_end_tstamp) - unix_timestamp(session_start_tstamp) as duration_in_s
  from agg),
tiers as (
  select *,
    case when duration_in_s between 0 and 9 then '0s to 9s'
         when duration_in_s between 10 and 29 then '10s to 29s'
         when duration_in_s between 30 and 59 then '30s to 59s'
         when duration_in_s > 59 then '60s or more'
         else null end as duration_in_s_tier
  from diffs),
mapped as (
  select tiers.*, referrer_mapping.medium as referrer_medium, referrer_mapping.source as referrer_source
  from tiers
  left join referrer_mapping on tiers.referrer_host = referrer_mapping.host)
select * from mapped"""
SG_STITCHING = """
with events as (select * from {{ ref('%s') }}),
mapping as (
  select distinct anonymous_id,
    last_value(user_id) ignore nulls over (
      partition by anonymous_id order by tstamp
      rows between unbounded preceding and unbounded following) as user_id,
    min(tstamp) over (partition by anonymous_id) as first_seen_at,
    max(tstamp) over (partition by anonymous_id) as last_seen_at
  from events)
select * from mapping"""
SG_STITCHED = """
with sessions as (select * from {{ ref('%s') }}),
id_stitching as (select * from {{ ref('%s') }}),
joined as (
  select sessions.*, coalesce(id_stitching.user_id, sessions.anonymous_id) as blended_user_id
  from sessions
  left join id_stitching using (anonymous_id))
select * from joined"""
SG_SESSIONS = """
with sessions as (select * from {{ ref('%s') }}),
windowed as (
  select *,
    row_number() over (partition by blended_user_id order by sessions.session_start_tstamp)
      as session_number
  from sessions)
select * from windowed"""
# the package's own form, incremental branches kept (a project moving the model from
# `incremental` to `batch_refresh` need not remove them: is_incremental() is false under
# batch_refresh, so the model renders its full query)
SG_SESSIONS_INCREMENTAL = """
with sessions as (
  select * from {{ ref('UPSTREAM') }}
  {% if is_incremental() %}
  where session_start_tstamp > (select dateadd(HOUR, -3, max(session_start_tstamp)) from {{ this }})
  {% endif %}
),
{% if is_incremental() %}
agg as (
  select blended_user_id, count(*) as starting_session_number
  from {{ this }}
  where session_start_tstamp <= (select dateadd(HOUR, -3, max(session_start_tstamp)) from {{ this }})
  group by 1),
{% endif %}
windowed as (
  select *,
    row_number() over (partition by blended_user_id order by sessions.session_start_tstamp)
      {% if is_incremental() %}+ coalesce(agg.starting_session_number, 0) {% endif %}
      as session_number
  from sessions
  {% if is_incremental() %}
  left join agg using (blended_user_id)
  {% endif %}
)
select * from windowed"""
# three minutes apart by order id, so an anonymous id's page views fall into sessions of
# several views and sessions apart (the cut at 30 minutes); no two views at one instant
_SG_AT = "dateadd(MINUTE, id * 3, timestamp'2021-01-01 00:00:00')"
PROBES.update({
 "sg_pages": cfg('event_id') + f"""
select id as event_id, id % 180 as id, concat('anon', customer_id % 17) as anonymous_id,
  case when id % 3 = 0 then concat('user', customer_id % 6) end as user_id,
  dateadd(SECOND, id % 4, {_SG_AT}) as received_at, {_SG_AT} as sent_at, {_SG_AT} as `timestamp`,
  concat('https://www.shop', product_id % 4, '.com/p/', status, '?gclid=g', id % 5, '&x=1') as url,
  concat('/p/', status) as path, concat('Product ', product_id) as title,
  concat('gclid=g', id % 5, '&x=1') as search,
  concat('https://www.ref', product_id, '.com/landing') as referrer,
  element_at(array('google', 'facebook', null), product_id % 3 + 1) as context_campaign_source,
  element_at(array('cpc', 'social', 'email'), customer_id % 3 + 1) as context_campaign_medium,
  concat('spring', customer_id % 2) as context_campaign_name,
  cast(null as string) as context_campaign_term, status as context_campaign_content,
  concat('10.0.0.', customer_id) as context_ip,
  element_at(array('Mozilla/5.0 (iPhone; CPU iPhone OS 16_0)', 'Mozilla/5.0 (Linux; Android 13)',
                   'Mozilla/5.0 (Windows NT 10.0; Win64)', 'Mozilla/5.0 (Macintosh; Intel Mac OS X)',
                   'Mozilla/5.0 (iPad; CPU OS 16_0)'), product_id % 5 + 1) as context_user_agent
from {O}""",
 "sg_referrer_mapping": cfg('host') + f"""
select concat('ref', id, '.com') as host, coalesce(category, 'other') as medium,
       concat('src', id) as source
from {PR}""",
})
for _p, _keys in (("sg_", {}), ("sgt_", {}), ("sgk_", {"page_views": "page_view_id",
                                         "sessionized": "page_view_id",
                                         "sessions_initial": "session_id",
                                         "user_stitching": "anonymous_id",
                                         "sessions_stitched": "session_id",
                                         "sessions": "session_id"})):
    PROBES.update({
     f"{_p}web_page_views": cfg(_keys.get("page_views")) + SG_BASE,
     f"{_p}web_page_views_sessionized": cfg(_keys.get("sessionized"))
         + SG_SESSIONIZED % f"{_p}web_page_views",
     f"{_p}web_sessions_initial": cfg(_keys.get("sessions_initial"))
         + SG_INITIAL % f"{_p}web_page_views_sessionized",
     f"{_p}web_user_stitching": cfg(_keys.get("user_stitching")) + SG_STITCHING % f"{_p}web_page_views",
     f"{_p}web_sessions_stitched": cfg(_keys.get("sessions_stitched"))
         + SG_STITCHED % (f"{_p}web_sessions_initial", f"{_p}web_user_stitching"),
     f"{_p}web_sessions": cfg(_keys.get("sessions"))
         + (SG_SESSIONS_INCREMENTAL.replace("UPSTREAM", f"{_p}web_sessions_stitched")
            if _p == "sgt_" else SG_SESSIONS % f"{_p}web_sessions_stitched"),
    })
# Session 67: dbt-labs' jaffle-shop (the current demo, not the classic jaffle_shop above) as
# a Spark user runs it: its raw tables synthesized in each staging model's `source` CTE from
# the probe's four tables, cents_to_dollars as its default `(x / 100)::numeric(16, 2)`,
# dbt.date_trunc and dbt_utils.generate_surrogate_key spelled out, the order number per customer
# ordered by order_id after the day (two orders of a day tie, and the check needs one answer);
# every model keyless with
# the project's own unique + not_null tests on its id (MODEL_TESTS), as jaffle-shop declares them.
PROBES.update({
 "js_stg_customers": cfg() + f"""
with source as (select id, name from {C}),
renamed as (select id as customer_id, name as customer_name from source)
select * from renamed""",
 "js_stg_locations": cfg() + f"""
with source as (
  select id, concat('store', id) as name, price / 100.0 as tax_rate,
         dateadd(DAY, id * 30, timestamp'2016-09-01 00:00:00') as opened_at
  from {PR} where id <= 4),
renamed as (
  select id as location_id, name as location_name, tax_rate,
         date_trunc('day', opened_at) as opened_date
  from source)
select * from renamed""",
 "js_stg_orders": cfg() + f"""
with source as (
  select id, customer_id as customer, product_id % 4 + 1 as store_id,
         amount * 100 as subtotal, amount * 6 as tax_paid, amount * 106 as order_total,
         dateadd(HOUR, id * 5, timestamp'2016-09-01 00:00:00') as ordered_at
  from {O}),
renamed as (
  select id as order_id, store_id as location_id, customer as customer_id,
    subtotal as subtotal_cents, tax_paid as tax_paid_cents, order_total as order_total_cents,
    (subtotal / 100)::numeric(16, 2) as subtotal,
    (tax_paid / 100)::numeric(16, 2) as tax_paid,
    (order_total / 100)::numeric(16, 2) as order_total,
    date_trunc('day', ordered_at) as ordered_at
  from source)
select * from renamed""",
 "js_stg_order_items": cfg() + f"""
with source as (
  select id, order_id, concat('SKU', coalesce(amount, 0) % 12 + 1) as sku from {P}),
renamed as (select id as order_item_id, order_id, sku as product_id from source)
select * from renamed""",
 "js_stg_products": cfg() + f"""
with source as (
  select concat('SKU', id) as sku, concat('product ', id) as name,
    case category when 'cat0' then 'jaffle' when 'cat1' then 'beverage' end as type,
    concat('about ', category) as description, price * 100 as price
  from {PR}),
renamed as (
  select sku as product_id, name as product_name, type as product_type,
    description as product_description, (price / 100)::numeric(16, 2) as product_price,
    coalesce(type = 'jaffle', false) as is_food_item,
    coalesce(type = 'beverage', false) as is_drink_item
  from source)
select * from renamed""",
 "js_stg_supplies": cfg() + f"""
with source as (
  select id, concat('SKU', id % 12 + 1) as sku, concat('supply ', id) as name,
         id * 7 % 300 as cost, tier = 'std' as perishable
  from {C}),
renamed as (
  select
    md5(cast(concat(coalesce(cast(id as string), '_dbt_utils_surrogate_key_null_'), '-',
                    coalesce(cast(sku as string), '_dbt_utils_surrogate_key_null_')) as string))
      as supply_uuid,
    id as supply_id, sku as product_id, name as supply_name,
    (cost / 100)::numeric(16, 2) as supply_cost, perishable as is_perishable_supply
  from source)
select * from renamed""",
 "js_order_items": cfg() + """
with order_items as (select * from {{ ref('js_stg_order_items') }}),
orders as (select * from {{ ref('js_stg_orders') }}),
products as (select * from {{ ref('js_stg_products') }}),
supplies as (select * from {{ ref('js_stg_supplies') }}),
order_supplies_summary as (
  select product_id, sum(supply_cost) as supply_cost from supplies group by 1),
joined as (
  select order_items.*, orders.ordered_at, products.product_name, products.product_price,
    products.is_food_item, products.is_drink_item, order_supplies_summary.supply_cost
  from order_items
  left join orders on order_items.order_id = orders.order_id
  left join products on order_items.product_id = products.product_id
  left join order_supplies_summary on order_items.product_id = order_supplies_summary.product_id)
select * from joined""",
 "js_orders": cfg() + """
with orders as (select * from {{ ref('js_stg_orders') }}),
order_items as (select * from {{ ref('js_order_items') }}),
order_items_summary as (
  select order_id,
    sum(supply_cost) as order_cost,
    sum(product_price) as order_items_subtotal,
    count(order_item_id) as count_order_items,
    sum(case when is_food_item then 1 else 0 end) as count_food_items,
    sum(case when is_drink_item then 1 else 0 end) as count_drink_items
  from order_items group by 1),
compute_booleans as (
  select orders.*,
    order_items_summary.order_cost, order_items_summary.order_items_subtotal,
    order_items_summary.count_food_items, order_items_summary.count_drink_items,
    order_items_summary.count_order_items,
    order_items_summary.count_food_items > 0 as is_food_order,
    order_items_summary.count_drink_items > 0 as is_drink_order
  from orders
  left join order_items_summary on orders.order_id = order_items_summary.order_id),
customer_order_count as (
  select *,
    row_number() over (partition by customer_id order by ordered_at asc, order_id) as customer_order_number
  from compute_booleans)
select * from customer_order_count""",
 "js_customers": cfg() + """
with customers as (select * from {{ ref('js_stg_customers') }}),
orders as (select * from {{ ref('js_orders') }}),
customer_orders_summary as (
  select orders.customer_id,
    count(distinct orders.order_id) as count_lifetime_orders,
    count(distinct orders.order_id) > 1 as is_repeat_buyer,
    min(orders.ordered_at) as first_ordered_at,
    max(orders.ordered_at) as last_ordered_at,
    sum(orders.subtotal) as lifetime_spend_pretax,
    sum(orders.tax_paid) as lifetime_tax_paid,
    sum(orders.order_total) as lifetime_spend
  from orders group by 1),
joined as (
  select customers.*,
    customer_orders_summary.count_lifetime_orders, customer_orders_summary.first_ordered_at,
    customer_orders_summary.last_ordered_at, customer_orders_summary.lifetime_spend_pretax,
    customer_orders_summary.lifetime_tax_paid, customer_orders_summary.lifetime_spend,
    case when customer_orders_summary.is_repeat_buyer then 'returning' else 'new' end
      as customer_type
  from customers
  left join customer_orders_summary
    on customers.customer_id = customer_orders_summary.customer_id)
select * from joined""",
})
# Session 67: dbt_utils.deduplicate as it compiles on Spark (no spark__ version: the default's
# NATURAL JOIN of the relation to its numbered self, which also drops rows with a NULL
# column) and on Databricks (QUALIFY); keyless, and keyed by the partition.
DEDUP_NATURAL = f"""
with row_numbered as (
  select _inner.*, row_number() over (partition by customer_id order by amount desc, id desc) as rn
  from {O} as _inner)
select distinct data.* from {O} as data
natural join row_numbered
where row_numbered.rn = 1"""
DEDUP_QUALIFY = f"""
select * from {O}
qualify row_number() over (partition by customer_id order by amount desc, id desc) = 1"""
# Fivetran's history staging: every version of a row kept, the latest flagged by
# `row_number() ... = 1 as is_most_recent_record`, the flag filtered in the same model.
FLAGGED = f"""
with fields as (
  select id as order_id, customer_id, amount, status,
    (row_number() over (partition by customer_id order by amount desc, id desc) = 1)
      as is_most_recent_record
  from {O})
select customer_id, order_id, amount, status from fields where is_most_recent_record"""
PROBES.update({
 "dd_flagged": cfg() + FLAGGED,
 "dd_natural": cfg() + DEDUP_NATURAL,
 "dd_qualify": cfg() + DEDUP_QUALIFY,
 "ddk_natural": cfg('customer_id') + DEDUP_NATURAL,
 "ddk_qualify": cfg('customer_id') + DEDUP_QUALIFY,
})
# Recursive CTEs (Spark 4.1+), as a dbt_artifacts-style critical path walks a DAG: each
# order's chain of following ids from a root (every tenth id), and a recursive number spine
# joined to the orders row by row; keyless and keyed.
RECURSIVE = {
 "chain": f"""
with recursive chain (id, root, depth) as (
  select id, id as root, 0 as depth from {O} where id % 10 = 0
  union all
  select o.id, chain.root, chain.depth + 1
  from chain join {O} as o on o.id = chain.id + 1
  where chain.depth < 3 and o.id % 10 <> 0)
select chain.id, chain.root, chain.depth, o.amount
from chain join {O} as o on o.id = chain.id""",
 "spine": f"""
with recursive spine (n) as (select 0 as n union all select n + 1 from spine where n < 3)
select o.id, o.customer_id, spine.n, o.amount + spine.n as shifted
from {O} as o join spine on o.amount % 4 = spine.n""",
}
for _name, _sql in RECURSIVE.items():
    PROBES[f"rc_{_name}"] = cfg() + _sql
    PROBES[f"rck_{_name}"] = cfg("id") + _sql
# Fivetran's staging style: `cast(id as {{ dbt.type_string() }}) as <x>_id` (string on
# Spark) over a source whose `id` is tested, then models over those string keys; a GROUP BY key
# projected as its string, ids concatenated with literals.
PROBES.update({
 "ft_stg_orders": cfg() + f"""
with base as (select * from {O}),
fields as (select id, customer_id, product_id, amount, status from base),
final as (
  select cast(id as string) as order_id, cast(customer_id as string) as customer_id,
    cast(product_id as string) as product_id, amount, status
  from fields)
select * from final""",
 "ft_stg_customers": cfg() + f"""
with base as (select * from {C}),
final as (select cast(id as string) as customer_id, region, name, tier from base)
select * from final""",
 "ft_customer_orders": cfg() + """
with customers as (select * from {{ ref('ft_stg_customers') }}),
orders as (select * from {{ ref('ft_stg_orders') }}),
summary as (
  select customer_id, count(order_id) as orders, sum(amount) as total
  from orders group by customer_id)
select customers.customer_id, customers.region, coalesce(summary.orders, 0) as orders,
  summary.total
from customers left join summary on summary.customer_id = customers.customer_id""",
 "ft_order_numbers": cfg() + """
select order_id, customer_id, amount,
  row_number() over (partition by customer_id order by order_id) as order_number
from {{ ref('ft_stg_orders') }}""",
 "ft_grouped_as_string": cfg() + f"""
select cast(customer_id as string) as cid, sum(amount) as s, count(*) as n
from {O} group by customer_id""",
 "ft_event_ids": cfg() + f"""
select cast(id as string) || ':order' as event_id, concat('c', customer_id) as customer_ref,
  amount
from {O} where amount > 10""",
})
for _port in (shopify, stripe, xero, quickbooks, salesforce):
    PROBES.update(_port.PROBES)
PROBES.update(dbt_artifacts.PROBES)
MODEL_TESTS = {"js_stg_customers": "customer_id", "js_stg_locations": "location_id",
            "js_stg_orders": "order_id", "js_stg_order_items": "order_item_id",
            "js_stg_products": "product_id", "js_stg_supplies": "supply_uuid",
            "js_order_items": "order_item_id", "js_orders": "order_id",
            "js_customers": "customer_id",
            # segment's schema.yml files
            "sgt_web_page_views": "page_view_id", "sgt_web_page_views_sessionized": "page_view_id",
            "sgt_web_sessions_initial": "session_id", "sgt_web_user_stitching": "anonymous_id",
            "sgt_web_sessions_stitched": "session_id", "sgt_web_sessions": "session_id",
            **dbt_artifacts.MODEL_TESTS, **shopify.MODEL_TESTS, **stripe.MODEL_TESTS,
            **xero.MODEL_TESTS, **quickbooks.MODEL_TESTS, **salesforce.MODEL_TESTS}
ONLY = [p for p in os.environ.get("PROBE_ONLY", "").split(",") if p]
# dbt_utils.unique_combination_of_columns as the package defines it (its `dbt_utils.` prefix
# dropped: the probe installs no packages; the plugin reads the test by its name)
UNIQUE_COMBINATION = """{% test unique_combination_of_columns(model, combination_of_columns) %}
select {{ combination_of_columns | join(', ') }}
from {{ model }}
group by {{ combination_of_columns | join(', ') }}
having count(*) > 1
{% endtest %}
"""


def _model_tests(model, key):
    """A model's key tests: unique + not_null on one column, or a tuple's
    unique_combination_of_columns."""
    if isinstance(key, tuple):
        return (f"  - name: {model}\n    data_tests:\n      - unique_combination_of_columns:\n"
                f"          combination_of_columns: [{', '.join(key)}]\n")
    return (f"  - name: {model}\n    columns:\n      - name: {key}\n"
            "        data_tests: [unique, not_null]\n")


PROBES = {n: s for n, s in PROBES.items() if not ONLY or any(n.startswith(p) for p in ONLY)}


class TestProbe:
    @pytest.fixture(scope="class")
    def macros(self):
        return {"unique_combination_of_columns.sql": UNIQUE_COMBINATION}

    @pytest.fixture(scope="class")
    def models(self):
        sources = sources_yml(*TABLES)
        for table in TABLES if TESTED else ():
            sources = sources.replace(f"- name: {table}\n", f"- name: {table}\n        columns:\n"
                                      "          - name: id\n            data_tests: [unique, not_null]\n")
        files = {"sources.yml": sources}
        tested = [m for m in MODEL_TESTS if m in PROBES]
        if tested:
            files["model_tests.yml"] = "version: 2\nmodels:\n" + "".join(
                _model_tests(m, MODEL_TESTS[m]) for m in tested)
        files.update({f"{n}.sql": s for n, s in PROBES.items()})
        return files

    def test_probe(self, project):
        create_tables(project)
        failures = []
        tally = defaultdict(Counter)
        reasons = {}

        def run_and_check(step):
            res = run_dbt(["run"], expect_pass=None)
            for r in res.results:
                name = r.node.name
                if str(r.status) != "success":
                    failures.append((step, name, str(r.message)[:600]))
                    print(f"PROBE FAIL step {step} {name}: {str(r.message)[:600]}")
                    continue
                a = r.adapter_response
                tally[name][a.get("action")] += 1
                if a.get("fallback_reason"):
                    reasons[name] = a["fallback_reason"]
                try:
                    assert_contract(project, name)
                except AssertionError as e:
                    failures.append((step, name, str(e)[:300]))
                    print(f"PROBE WRONG step {step} {name}: {e}")

        run_and_check(0)
        changes = Changes(project, SEED)
        for step in range(1, STEPS + 1):
            changes.apply()
            point = fault_point(SEED, step) if FAULTS else None
            if point is not None:
                failed = [r.node.name for r in faulted_dbt_run(point)
                          if str(r.status) not in ("success", "skipped")]
                print(f"PROBE step {step}: a run failing at {point} first ({len(failed)} failed)")
            run_and_check(step)
        for name in PROBES:
            print(f"PROBE {name}: {dict(tally[name])} {reasons.get(name, '')}")
        assert not failures, failures
