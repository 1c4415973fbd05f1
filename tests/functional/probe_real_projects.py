"""A probe of SQL written as dbt projects write it, under random upstream changes (not part of
`make test`: run it by path, `PROBE_SEED=5 PROBE_STEPS=3 .venv/bin/python -m pytest
tests/functional/probe_real_projects.py -s`, over an hour). Every model must build and equal its SQL
from scratch after every run; what each refresh did and why it fell back is printed.
PROBE_ONLY=q_,p_jaffle runs only the models whose names start so (m_ mrr-playbook, a_
attribution-playbook, sg_ segment, js_ jaffle-shop, dd_ dbt_utils.deduplicate, da_
dbt_artifacts, rc_ recursive CTEs, ft_ Fivetran-style string keys, sh_/shk_
fivetran/dbt_shopify, st_/stk_ fivetran/dbt_stripe's MRR report, xr_/xrk_
fivetran/dbt_xero, qb_/qbk_ fivetran/dbt_quickbooks, sf_/sfk_ fivetran/dbt_salesforce). As in
the fuzz, every other change batch first meets a run in which every refresh fails at a fail
point (tests/fuzz/harness.py fault_point; PROBE_FAULTS=0 leaves them out)."""
from __future__ import annotations

import os
from collections import Counter, defaultdict

import pytest
from dbt.tests.util import run_dbt

from tests.functional.helpers import assert_contract, rows, sources_yml
from tests.functional.test_shapes import TABLES, Changes, create_tables
from tests.fuzz.harness import fault_point, faulted_dbt_run

SEED = int(os.environ.get("PROBE_SEED", "5"))
STEPS = int(os.environ.get("PROBE_STEPS", "4"))
# PROBE_TESTED=1: every source declares `id` with unique and not_null tests, as a dbt project
# would; the models then infer keys through them (keyinfer.py)
TESTED = os.environ.get("PROBE_TESTED", "") == "1"
FAULTS = os.environ.get("PROBE_FAULTS", "1") != "0"
O = "{{ source('raw', 'orders') }}"
C = "{{ source('raw', 'customers') }}"
P = "{{ source('raw', 'payments') }}"
PR = "{{ source('raw', 'products') }}"
CFG = "{{ config(materialized='batch_refresh'%s) }}\n"

def cfg(key=None):
    return CFG % (f", unique_key='{key}'" if key else "")

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
_SURROGATE = "md5(cast(concat(%s) as string))"


def _surrogate(*cols):
    return _SURROGATE % ", '-', ".join(
        f"coalesce(cast({c} as string), '_dbt_utils_surrogate_key_null_')" for c in cols)


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
    "SURROGATE_FLIP": _surrogate("test_node_id", "failed_at", "passed_at"),
    "SURROGATE_FLAKY": _surrogate("em.test_node_id", "em.month"),
    "SURROGATE_PERF": _surrogate("daily.date_day", "daily.node_id"),
    "SURROGATE_HEALTH": _surrogate("inv.date_day", "inv.target_name"),
    "SURROGATE_BOTTLENECK": _surrogate("command_invocation_id", "child_node_id"),
}
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
# fivetran/dbt_shopify's REST models (v1.7), ported as a Spark user would run them: one
# connector, so `source_relation` is '' (fivetran_utils.source_relation); string_agg is
# Spark's concat_ws over collect_set, sorted so the from-scratch comparison is not at the
# mercy of collect order; max_bool is bool_or; the metafield, discount, fulfillment and
# abandoned-checkout joins left out. Orders and customers come from the probe's orders and
# customers, order lines, transactions and refunds from its payments, tax lines from orders,
# customer tags from products.
_SH_AT = "timestamp'2024-01-01 00:00:00'"
SH_STAGING = {
 "stg_order": f"""
with base as (select * from {O}),
fields as (select id, customer_id, product_id, amount, status from base),
final as (
  select id as order_id, customer_id, concat('c', customer_id % 17, '@shop.test') as email,
    dateadd(HOUR, id * 5, {_SH_AT}) as created_timestamp,
    cast(amount as decimal(18, 2)) as total_price,
    case status when 'cancelled' then 'voided' when 'new' then 'pending' else 'paid' end as financial_status,
    status = 'cancelled' as is_deleted, cast(amount % 7 as decimal(18, 2)) as total_discounts,
    product_id % 3 as location_id, cast('' as string) as source_relation
  from fields)
select * from final""",
 "stg_order_line": f"""
select id as order_line_id, order_id, amount % 4 + 1 as quantity, cast(amount as decimal(18, 2)) as price,
  method = 'void' as is_gift_card, cast(amount % 3 as decimal(18, 2)) as total_discount,
  id % 12 + 1 as product_id, id % 5 as variant_id, method <> 'bank' as is_shipping_required,
  cast('' as string) as source_relation
from {P}""",
 "stg_tax_line": f"""
select id as tax_line_id, (id * 3) % 300 + 1 as order_line_id,
  cast(amount as decimal(18, 2)) / 10 as price, cast('' as string) as source_relation
from {O}""",
 "stg_transaction": f"""
select id as transaction_id, order_id,
  case when id % 5 = 0 then 'refund' when method = 'void' then 'void'
       when id % 2 = 0 then 'sale' else 'capture' end as kind,
  case when amount is null then 'failure' else 'success' end as status,
  case method when 'bank' then 'gift_card' else 'shopify_payments' end as gateway,
  cast(amount as decimal(18, 2)) as currency_exchange_calculated_amount,
  cast('' as string) as source_relation
from {P}""",
 "stg_refund": f"""
select id as refund_id, order_id, dateadd(HOUR, id * 3, {_SH_AT}) as created_at, id % 3 as user_id,
  cast('' as string) as source_relation
from {P} where id % 4 = 0""",
 "stg_order_line_refund": f"""
select id as order_line_refund_id, id - id % 4 as refund_id, (id * 7) % 300 + 1 as order_line_id,
  case method when 'card' then 'return' else 'no_restock' end as restock_type,
  amount % 3 as quantity, cast(amount as decimal(18, 2)) as subtotal,
  cast(amount as decimal(18, 2)) / 10 as total_tax, cast('' as string) as source_relation
from {P} where id % 2 = 1""",
 "stg_customer": f"""
select id as customer_id, concat('c', id % 17, '@shop.test') as email, name as phone,
  name as first_name, region as default_address_region,
  dateadd(DAY, id, {_SH_AT}) as created_timestamp, dateadd(DAY, id + 3, {_SH_AT}) as updated_timestamp,
  region = 'eu' as is_tax_exempt, tier = 'std' as is_verified_email,
  cast('' as string) as source_relation
from {C}""",
 "stg_customer_tag": f"""
select id % 40 + 1 as customer_id, id as tag_index, category as value, cast('' as string) as source_relation
from {PR}""",
}
SH_MARTS = {
 "orders__order_line_aggregates": """
with order_line as (
    select *
    from {{ ref('PFX_stg_order_line') }}
), tax as (
    select *
    from {{ ref('PFX_stg_tax_line') }}
), orders as (
    select order_id, source_relation, financial_status
    from {{ ref('PFX_stg_order') }}
), tax_aggregates as (
    select order_line_id, source_relation, sum(price) as price
    from tax
    group by 1,2
), order_line_aggregates as (
    select
        order_line.order_id,
        order_line.source_relation,
        count(*) as line_item_count,
        sum(order_line.quantity) as order_total_quantity,
        sum(tax_aggregates.price) as order_total_tax,
        sum(order_line.total_discount) as order_total_discount,
        sum(case when not order_line.is_gift_card and coalesce(orders.financial_status, '') != 'voided' then order_line.quantity * order_line.price else 0 end) as gross_sales
    from order_line
    left join orders
        on orders.order_id = order_line.order_id
        and orders.source_relation = order_line.source_relation
    left join tax_aggregates
        on tax_aggregates.order_line_id = order_line.order_line_id
        and tax_aggregates.source_relation = order_line.source_relation
    group by 1,2
)
select *
from order_line_aggregates""",
 "orders__order_refunds": """
with refunds as (
    select *
    from {{ ref('PFX_stg_refund') }}
), order_line_refunds as (
    select *
    from {{ ref('PFX_stg_order_line_refund') }}
), order_lines as (
    select order_line_id, source_relation, is_gift_card
    from {{ ref('PFX_stg_order_line') }}
), refund_join as (
    select
        refunds.refund_id,
        refunds.created_at,
        refunds.order_id,
        refunds.user_id,
        refunds.source_relation,
        order_line_refunds.order_line_refund_id,
        order_line_refunds.order_line_id,
        order_line_refunds.restock_type,
        order_line_refunds.quantity,
        order_line_refunds.subtotal,
        order_line_refunds.total_tax,
        order_lines.is_gift_card
    from refunds
    left join order_line_refunds
        on refunds.refund_id = order_line_refunds.refund_id
        and refunds.source_relation = order_line_refunds.source_relation
    left join order_lines
        on order_line_refunds.order_line_id = order_lines.order_line_id
        and order_line_refunds.source_relation = order_lines.source_relation
)
select *
from refund_join""",
 "customers__order_aggregates": """
with orders as (
    select *
    from {{ ref('PFX_stg_order') }}
    where customer_id is not null
), order_aggregates as (
    select *
    from {{ ref('PFX_orders__order_line_aggregates') }}
), transactions as (
    select *
    from {{ ref('PFX_stg_transaction')}}
    where lower(status) = 'success'
    and lower(kind) not in ('authorization', 'void')
    and lower(gateway) != 'gift_card' -- redeeming a giftcard does not introduce new revenue
), transaction_aggregates as (
    -- this is necessary as customers can pay via multiple payment gateways
    select
        order_id,
        source_relation,
        lower(kind) as kind,
        sum(currency_exchange_calculated_amount) as currency_exchange_calculated_amount
    from transactions
    group by 1,2,3
), aggregated as (
    select
        orders.customer_id,
        orders.source_relation,
        min(orders.created_timestamp) as first_order_timestamp,
        max(orders.created_timestamp) as most_recent_order_timestamp,
        avg(transaction_aggregates.currency_exchange_calculated_amount) as avg_order_value,
        sum(transaction_aggregates.currency_exchange_calculated_amount) as lifetime_total_spent,
        sum(refunds.currency_exchange_calculated_amount) as lifetime_total_refunded,
        count(distinct orders.order_id) as lifetime_count_orders,
        avg(order_aggregates.order_total_quantity) as avg_quantity_per_order,
        sum(order_aggregates.order_total_tax) as lifetime_total_tax,
        avg(order_aggregates.order_total_tax) as avg_tax_per_order
    from orders
    left join transaction_aggregates
        on orders.order_id = transaction_aggregates.order_id
        and orders.source_relation = transaction_aggregates.source_relation
        and transaction_aggregates.kind in ('sale','capture')
    left join transaction_aggregates as refunds
        on orders.order_id = refunds.order_id
        and orders.source_relation = refunds.source_relation
        and refunds.kind = 'refund'
    left join order_aggregates
        on orders.order_id = order_aggregates.order_id
        and orders.source_relation = order_aggregates.source_relation
    group by 1,2
)
select *
from aggregated""",
 "orders": """
with orders as (
    select
        *,
        md5(cast(concat(coalesce(cast(source_relation as string), '_dbt_utils_surrogate_key_null_'), '-', coalesce(cast(order_id as string), '_dbt_utils_surrogate_key_null_')) as string)) as orders_unique_key
    from {{ ref('PFX_stg_order') }}
), order_lines as (
    select *
    from {{ ref('PFX_orders__order_line_aggregates') }}
), refunds as (
    select *
    from {{ ref('PFX_orders__order_refunds') }}
), refund_aggregates as (
    select
        order_id,
        source_relation,
        sum(subtotal) as refund_subtotal,
        sum(total_tax) as refund_total_tax,
        sum(case when is_gift_card = false then coalesce(subtotal, 0) else 0 end) as refund_subtotal_non_gift_card
    from refunds
    group by 1,2
), joined as (
    select
        orders.*,
        refund_aggregates.refund_subtotal,
        refund_aggregates.refund_total_tax,
        (orders.total_price
            - coalesce(refund_aggregates.refund_subtotal,0) - coalesce(refund_aggregates.refund_total_tax,0)) as order_adjusted_total,
        order_lines.line_item_count,
        coalesce(order_lines.gross_sales, 0) as gross_sales,
        coalesce(refund_aggregates.refund_subtotal_non_gift_card, 0) as returns,
        coalesce(order_lines.gross_sales, 0) - coalesce(refund_aggregates.refund_subtotal_non_gift_card, 0) as net_sales
    from orders
    left join order_lines
        on orders.order_id = order_lines.order_id
        and orders.source_relation = order_lines.source_relation
    left join refund_aggregates
        on orders.order_id = refund_aggregates.order_id
        and orders.source_relation = refund_aggregates.source_relation
), windows as (
    select
        *,
        row_number() over (
            partition by customer_id, source_relation
            order by created_timestamp)
            as customer_order_seq_number
    from joined
), new_vs_repeat as (
    select
        *,
        case
            when customer_order_seq_number = 1 then 'new'
            else 'repeat'
        end as new_vs_repeat
    from windows
)
select *
from new_vs_repeat""",
 "customers": """
with customers as (
    select customer_id, email, phone, first_name, default_address_region, created_timestamp,
        updated_timestamp, is_tax_exempt, is_verified_email, source_relation
    from {{ ref('PFX_stg_customer') }}
), orders as (
    select *
    from {{ ref('PFX_customers__order_aggregates' )}}
), customer_tags_aggregated as (
    select
        customer_id,
        source_relation,
        concat_ws(', ', array_sort(collect_set(cast(value as string)))) as customer_tags
    from {{ ref('PFX_stg_customer_tag') }}
    group by 1,2
), joined as (
    select
        customers.*,
        orders.first_order_timestamp,
        orders.most_recent_order_timestamp,
        customer_tags_aggregated.customer_tags,
        orders.avg_order_value,
        coalesce(orders.lifetime_total_spent, 0) as lifetime_total_spent,
        coalesce(orders.lifetime_total_refunded, 0) as lifetime_total_refunded,
        (coalesce(orders.lifetime_total_spent, 0) - coalesce(orders.lifetime_total_refunded, 0)) as lifetime_total_net,
        coalesce(orders.lifetime_count_orders, 0) as lifetime_count_orders,
        orders.avg_quantity_per_order,
        coalesce(orders.lifetime_total_tax, 0) as lifetime_total_tax,
        orders.avg_tax_per_order
    from customers
    left join orders
        on customers.customer_id = orders.customer_id
        and customers.source_relation = orders.source_relation
    left join customer_tags_aggregated
        on customers.customer_id = customer_tags_aggregated.customer_id
        and customers.source_relation = customer_tags_aggregated.source_relation
)
select *
from joined""",
 "customer_email_rollup": """
with customers as (
    select
        *,
        row_number() over(
            partition by email, source_relation
            order by created_timestamp desc, customer_id desc)
            as customer_index
    from {{ ref('PFX_stg_customer') }}
    where email is not null -- nonsensical to include any null emails here
), customer_tags as (
    select *
    from {{ ref('PFX_stg_customer_tag') }}
), rollup_customers as (
    select
        -- fields to group by
        lower(customers.email) as email,
        customers.source_relation,
        -- fields to string agg together
        concat_ws(', ', array_sort(collect_set(cast(customers.customer_id as string)))) as customer_ids,
        concat_ws(', ', array_sort(collect_set(cast(customers.phone as string)))) as phone_numbers,
        concat_ws(', ', array_sort(collect_set(cast(customer_tags.value as string)))) as customer_tags,
        -- fields to take aggregates of
        min(customers.created_timestamp) as first_account_created_at,
        max(customers.created_timestamp) as last_account_created_at,
        max(customers.updated_timestamp) as last_updated_at,
        -- take true if ever given for boolean fields
        bool_or(case when customers.customer_index = 1 then customers.is_tax_exempt else null end) as is_tax_exempt, -- since this changes every year
        bool_or(customers.is_verified_email) as is_verified_email
        -- for all other fields, just take the latest value
        , max(case when customers.customer_index = 1 then customers.first_name else null end) as first_name
        , max(case when customers.customer_index = 1 then customers.default_address_region else null end) as default_address_region
    from customers
    left join customer_tags
        on customers.customer_id = customer_tags.customer_id
        and customers.source_relation = customer_tags.source_relation
    group by 1,2
)
select *
from rollup_customers""",
 "daily_orders": """
with orders as (
    select *
    from {{ ref('PFX_orders') }}
    where not coalesce(is_deleted, false)
),
order_refunds as (
    select *
    from {{ ref('PFX_orders__order_refunds') }}
),
order_lines as (
    select *
    from {{ ref('PFX_stg_order_line') }}
),
order_aggregates as (
    select
        source_relation,
        cast(date_trunc('day', created_timestamp) as date) as date_day,
        count(distinct order_id) as count_orders,
        sum(line_item_count) as count_line_items,
        avg(line_item_count) as avg_line_item_count,
        count(distinct customer_id) as count_customers,
        count(distinct email) as count_customer_emails,
        sum(order_adjusted_total) as order_adjusted_total,
        avg(order_adjusted_total) as avg_order_value,
        sum(total_discounts) as total_discounts,
        count(distinct location_id) as count_locations_ordered_from,
        min(created_timestamp) as first_order_timestamp,
        max(created_timestamp) as last_order_timestamp,
        sum(gross_sales) as gross_sales
    from orders
    group by 1,2
),
refund_aggregates as (
    select
        source_relation,
        cast(date_trunc('day', created_at) as date) as date_day,
        sum(subtotal) as refund_subtotal,
        sum(total_tax) as refund_total_tax,
        count(distinct order_id) as count_orders_with_refunds,
        sum(case when not is_gift_card then coalesce(subtotal, 0) else 0 end) as refund_subtotal_non_gift_card
    from order_refunds
    group by 1, 2
),
order_line_aggregates as (
    select
        order_lines.source_relation,
        cast(date_trunc('day', orders.created_timestamp) as date) as date_day,
        sum(order_lines.quantity) as quantity_sold,
        sum(order_lines.quantity) / count(distinct order_lines.order_id) as avg_quantity_sold,
        count(distinct order_lines.variant_id) as count_variants_sold,
        count(distinct order_lines.product_id) as count_products_sold,
        sum(case when order_lines.is_shipping_required then order_lines.quantity else 0 end) as quantity_requiring_shipping
    from order_lines
    left join orders -- just joining with order to get the created_timestamp
        on order_lines.order_id = orders.order_id
        and order_lines.source_relation = orders.source_relation
    group by 1,2
),
final as (
    select
        coalesce(order_aggregates.source_relation, refund_aggregates.source_relation) as source_relation,
        coalesce(order_aggregates.date_day, refund_aggregates.date_day) as date_day,
        coalesce(order_aggregates.count_orders, 0) as count_orders,
        coalesce(order_aggregates.count_line_items, 0) as count_line_items,
        order_aggregates.avg_line_item_count,
        coalesce(order_aggregates.count_customers, 0) as count_customers,
        coalesce(order_aggregates.count_customer_emails, 0) as count_customer_emails,
        coalesce(order_aggregates.order_adjusted_total, 0) as order_adjusted_total,
        order_aggregates.avg_order_value,
        coalesce(order_aggregates.total_discounts, 0) as total_discounts,
        coalesce(order_aggregates.count_locations_ordered_from, 0) as count_locations_ordered_from,
        order_aggregates.first_order_timestamp,
        order_aggregates.last_order_timestamp,
        coalesce(order_aggregates.gross_sales, 0) as gross_sales,
        coalesce(refund_aggregates.refund_subtotal, 0) as refund_subtotal,
        coalesce(refund_aggregates.refund_total_tax, 0) as refund_total_tax,
        coalesce(refund_aggregates.count_orders_with_refunds, 0) as count_orders_with_refunds,
        coalesce(refund_aggregates.refund_subtotal_non_gift_card, 0) as returns,
        order_line_aggregates.quantity_sold,
        order_line_aggregates.count_variants_sold,
        order_line_aggregates.count_products_sold,
        order_line_aggregates.quantity_requiring_shipping,
        order_line_aggregates.avg_quantity_sold
    from order_aggregates
    full outer join refund_aggregates
        on order_aggregates.date_day = refund_aggregates.date_day
        and order_aggregates.source_relation = refund_aggregates.source_relation
    left join order_line_aggregates
        on coalesce(order_aggregates.date_day, refund_aggregates.date_day) = order_line_aggregates.date_day
        and coalesce(order_aggregates.source_relation, refund_aggregates.source_relation) = order_line_aggregates.source_relation
)
select *
from final""",
 "customer_cohorts": """
with calendar as (
    select date_day
    from (select explode(sequence(date'2023-12-01', date'2024-06-30', interval 1 day)) as date_day) spine
    where cast(date_trunc('month', date_day) as date) = date_day
), customers as (
    select *
    from {{ ref('PFX_customers') }}
), orders as (
    select *
    from {{ ref('PFX_orders') }}
), customer_calendar as (
    select
        cast(calendar.date_day as date) as date_month,
        customers.customer_id,
        customers.first_order_timestamp,
        customers.source_relation,
        cast(date_trunc('month', first_order_timestamp) as date) as cohort_month
    from calendar
    inner join customers
        on cast(date_trunc('month', first_order_timestamp) as date) <= calendar.date_day
), orders_joined as (
    select
        customer_calendar.date_month,
        customer_calendar.customer_id,
        customer_calendar.first_order_timestamp,
        customer_calendar.cohort_month,
        customer_calendar.source_relation,
        coalesce(count(distinct orders.order_id), 0) as order_count_in_month,
        coalesce(sum(orders.order_adjusted_total), 0) as total_price_in_month,
        coalesce(sum(orders.line_item_count), 0) as line_item_count_in_month
    from customer_calendar
    left join orders
        on customer_calendar.customer_id = orders.customer_id
        and customer_calendar.source_relation = orders.source_relation
        and customer_calendar.date_month = cast(date_trunc('month', created_timestamp) as date)
    group by 1,2,3,4,5
), windows as (
    select
        *,
        sum(total_price_in_month) over (partition by customer_id, source_relation order by date_month rows between unbounded preceding and current row) as total_price_lifetime,
        sum(order_count_in_month) over (partition by customer_id, source_relation order by date_month rows between unbounded preceding and current row) as order_count_lifetime,
        sum(line_item_count_in_month) over (partition by customer_id, source_relation order by date_month rows between unbounded preceding and current row) as line_item_count_lifetime,
        row_number() over (
            partition by customer_id, source_relation
            order by date_month asc)
            as cohort_month_number
    from orders_joined
), final as (
    select
        *,
        md5(cast(concat(coalesce(cast(date_month as string), '_dbt_utils_surrogate_key_null_'), '-', coalesce(cast(customer_id as string), '_dbt_utils_surrogate_key_null_'), '-', coalesce(cast(source_relation as string), '_dbt_utils_surrogate_key_null_')) as string)) as customer_cohort_id
    from windows
)
select *
from final""",
}
# the package's tests: each staging model's id, shopify__orders' orders_unique_key, the
# cohorts' customer_cohort_id (its combination tests are dbt_utils', not keys dbt hands down)
SH_IDS = {"stg_order": "order_id", "stg_order_line": "order_line_id", "stg_tax_line": "tax_line_id",
          "stg_transaction": "transaction_id", "stg_refund": "refund_id",
          "stg_order_line_refund": "order_line_refund_id", "stg_customer": "customer_id",
          "orders": "orders_unique_key", "customer_cohorts": "customer_cohort_id"}
for _p in ("sh", "shk"):
    for _name, _sql in {**SH_STAGING, **SH_MARTS}.items():
        PROBES[f"{_p}_{_name}"] = cfg() + _sql.replace("PFX_", f"{_p}_")
# fivetran/dbt_stripe's subscription item MRR report (v1.x), ported: its date spine fixed
# (2024-01 to 2024-12, the current month 2024-12: the package reads current_date and the first
# month with a query at compile time), safe_divide spelled out, the coupon branch left out
# (its vars off). A dedup by row_number, a cross join of items and months, invoiced values
# carried forward through gap months by running counts and max over their groups, a range
# LEFT JOIN back to the items, aggregates joined back, lag and row_number per item.
# Subscriptions come from orders (two rows per subscription, the newest kept), items from
# payments, price plans from products, invoice lines from orders.
_ST_AT = "timestamp'2024-01-01 00:00:00'"
_ST_LAST = "date'2024-12-01'"
ST_STAGING = {
 "stg_subscription": f"""
select id as subscription_row_id, id div 2 as subscription_id, customer_id,
  case status when 'cancelled' then 'canceled' when 'new' then 'trialing' else 'active' end as status,
  dateadd(DAY, id, {_ST_AT}) as created_at, dateadd(DAY, id, {_ST_AT}) as current_period_start,
  dateadd(MONTH, amount % 5 + 1, dateadd(DAY, id, {_ST_AT})) as current_period_end,
  cast('' as string) as source_relation
from {O}""",
 "stg_subscription_item": f"""
select id as subscription_item_id, order_id div 2 as subscription_id, id % 12 + 1 as plan_id,
  amount % 3 + 1 as quantity,
  case when id % 4 = 0 then null else dateadd(DAY, id * 2, {_ST_AT}) end as created_at,
  dateadd(DAY, id * 2, {_ST_AT}) as current_period_start,
  case when amount is null then null
       else dateadd(MONTH, amount % 7 + 1, dateadd(DAY, id * 2, {_ST_AT})) end as current_period_end,
  cast('' as string) as source_relation
from {P}""",
 "stg_price_plan": f"""
select id as price_plan_id, id as product_id,
  element_at(array('month', 'year', 'week'), cast(id % 3 + 1 as int)) as recurring_interval,
  1 + id % 2 as recurring_interval_count, 'usd' as currency,
  cast(price as decimal(18, 2)) as unit_amount, cast('' as string) as source_relation
from {PR}""",
 "stg_invoice_line_item": f"""
select id as invoice_line_item_id, (id * 7) % 300 + 1 as subscription_item_id, amount % 4 as quantity,
  cast(amount as decimal(18, 2)) as unit_amount_excluding_tax,
  dateadd(DAY, id * 3, {_ST_AT}) as period_start, status = 'cancelled' as proration,
  cast('' as string) as source_relation
from {O}""",
}
_ST_QTY = (f"case when item_month_carried.subscription_month = {_ST_LAST} "
           "then coalesce(normalized.current_quantity, 1) "
           "else coalesce(item_month_carried.carried_quantity, normalized.current_quantity, 1) end")
_ST_UNIT = (f"case when item_month_carried.subscription_month = {_ST_LAST} "
            "then normalized.unit_amount "
            "else coalesce(item_month_carried.carried_unit_amount, normalized.unit_amount) end")
_ST_AMOUNT = f"({_ST_UNIT}) * ({_ST_QTY})"
ST_MARTS = {
 "subscription_item_mrr_report": f"""
with subscription_item as (
    select *
    from {{{{ ref('PFX_stg_subscription_item') }}}}
),
subscription as (
    select *,
         row_number() over (partition by subscription_id, source_relation
             order by created_at desc) as rn
    from {{{{ ref('PFX_stg_subscription') }}}}
),
subscription_deduped as (
    select *
    from subscription
    where rn = 1
),
price_plan as (
    select *
    from {{{{ ref('PFX_stg_price_plan') }}}}
),
invoice_line_item as (
    select *
    from {{{{ ref('PFX_stg_invoice_line_item') }}}}
    where subscription_item_id is not null
        and not coalesce(proration, false)
),
date_spine as (
    select date_month
    from (select explode(sequence(date'2024-01-01', date'2024-12-01', interval 1 month)) as date_month) spine
),
date_dimensions as (
    select
        cast(date_month as date) as subscription_month,
        cast(date_trunc('year', date_month) as date) as subscription_year
    from date_spine
),
invoiced_quantity_by_month as (
    select
        invoice_line_item.source_relation,
        invoice_line_item.subscription_item_id,
        date_dimensions.subscription_month,
        invoice_line_item.quantity,
        invoice_line_item.unit_amount_excluding_tax,
        row_number() over (
            partition by
                invoice_line_item.source_relation,
                invoice_line_item.subscription_item_id,
                date_dimensions.subscription_month
            order by invoice_line_item.period_start desc
        ) as rn
    from invoice_line_item
    inner join date_dimensions
        on date_dimensions.subscription_month = cast(date_trunc('month', invoice_line_item.period_start) as date)
),
invoiced_quantity_deduped as (
    select
        source_relation,
        subscription_item_id,
        subscription_month,
        quantity,
        unit_amount_excluding_tax
    from invoiced_quantity_by_month
    where rn = 1
),
base as (
    select
        subscription_item.source_relation,
        subscription_item.subscription_item_id,
        subscription_item.subscription_id,
        subscription.customer_id,
        subscription.status as subscription_status,
        coalesce(subscription_item.created_at, subscription.created_at) as item_created_at,
        coalesce(subscription_item.current_period_start, subscription.current_period_start) as current_period_start,
        coalesce(subscription_item.current_period_end, subscription.current_period_end) as current_period_end,
        subscription_item.quantity as current_quantity,
        price_plan.product_id,
        price_plan.price_plan_id,
        price_plan.recurring_interval,
        price_plan.recurring_interval_count,
        price_plan.currency,
        price_plan.unit_amount
    from subscription_item
    left join subscription_deduped as subscription
        on subscription_item.subscription_id = subscription.subscription_id
        and subscription_item.source_relation = subscription.source_relation
    left join price_plan
        on subscription_item.plan_id = price_plan.price_plan_id
        and subscription_item.source_relation = price_plan.source_relation
),
normalized as (
    select
        source_relation, subscription_item_id, subscription_id, customer_id, subscription_status,
        item_created_at, current_period_start, current_period_end, current_quantity, product_id,
        price_plan_id, recurring_interval, recurring_interval_count, currency, unit_amount
    from base
),
subscription_item_periods as (
    select
        source_relation,
        subscription_item_id,
        subscription_id,
        customer_id,
        product_id,
        price_plan_id,
        subscription_status,
        currency,
        min(cast(date_trunc('month', item_created_at) as date)) as first_active_month,
        cast(dateadd(MONTH, 3, max(cast(date_trunc('month', current_period_end) as date))) as date) as last_month_to_track
    from normalized
    group by 1, 2, 3, 4, 5, 6, 7, 8
),
all_item_months as (
    select
        subscription_item_periods.source_relation,
        subscription_item_periods.subscription_item_id,
        subscription_item_periods.subscription_id,
        subscription_item_periods.customer_id,
        subscription_item_periods.product_id,
        subscription_item_periods.price_plan_id,
        subscription_item_periods.subscription_status,
        subscription_item_periods.currency,
        date_dimensions.subscription_year,
        date_dimensions.subscription_month
    from subscription_item_periods
    cross join date_dimensions
    where date_dimensions.subscription_month >= subscription_item_periods.first_active_month
        and date_dimensions.subscription_month < subscription_item_periods.last_month_to_track
),
item_month_invoiced as (
    select
        all_item_months.*,
        invoiced_quantity_deduped.quantity as invoiced_quantity,
        invoiced_quantity_deduped.unit_amount_excluding_tax as invoiced_unit_amount
    from all_item_months
    left join invoiced_quantity_deduped
        on all_item_months.source_relation = invoiced_quantity_deduped.source_relation
        and all_item_months.subscription_item_id = invoiced_quantity_deduped.subscription_item_id
        and all_item_months.subscription_month = invoiced_quantity_deduped.subscription_month
),
item_month_grouped as (
    select
        *,
        sum(case when invoiced_quantity is not null then 1 else 0 end) over (
            partition by subscription_item_id, source_relation
            order by subscription_month
            rows between unbounded preceding and current row
        ) as invoiced_quantity_group,
        sum(case when invoiced_unit_amount is not null then 1 else 0 end) over (
            partition by subscription_item_id, source_relation
            order by subscription_month
            rows between unbounded preceding and current row
        ) as invoiced_unit_amount_group
    from item_month_invoiced
),
item_month_carried as (
    select
        *,
        max(invoiced_quantity) over (
            partition by subscription_item_id, invoiced_quantity_group, source_relation
        ) as carried_quantity,
        max(invoiced_unit_amount) over (
            partition by subscription_item_id, invoiced_unit_amount_group, source_relation
        ) as carried_unit_amount
    from item_month_grouped
),
item_months as (
    select
        item_month_carried.source_relation,
        item_month_carried.subscription_item_id,
        item_month_carried.subscription_id,
        item_month_carried.customer_id,
        item_month_carried.product_id,
        item_month_carried.price_plan_id,
        item_month_carried.subscription_status,
        item_month_carried.currency,
        item_month_carried.subscription_year,
        item_month_carried.subscription_month,
        coalesce(
            case
                when lower(normalized.recurring_interval) = 'week' then
                    ( {_ST_AMOUNT} * 52 / 12 ) / nullif( coalesce(normalized.recurring_interval_count, 1), 0)
                when lower(normalized.recurring_interval) = 'month' then
                    ( {_ST_AMOUNT} ) / nullif( coalesce(normalized.recurring_interval_count, 1), 0)
                when lower(normalized.recurring_interval) = 'year' then
                    ( {_ST_AMOUNT} ) / nullif( 12 * coalesce(normalized.recurring_interval_count, 1), 0)
                else null
            end, 0) as mrr
    from item_month_carried
    left join normalized
        on item_month_carried.source_relation = normalized.source_relation
        and item_month_carried.subscription_item_id = normalized.subscription_item_id
        and item_month_carried.price_plan_id = normalized.price_plan_id
        and item_month_carried.subscription_month >= cast(date_trunc('month', normalized.item_created_at) as date)
        and item_month_carried.subscription_month < cast(date_trunc('month', normalized.current_period_end) as date)
),
item_mrr_by_month as (
    select
        source_relation, subscription_item_id, subscription_id, customer_id, product_id,
        price_plan_id, subscription_status, currency, subscription_year, subscription_month,
        sum(mrr) as month_mrr
    from item_months
    group by 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
),
subscription_month_contracted as (
    select
        item_mrr_by_month.source_relation,
        item_mrr_by_month.subscription_id,
        item_mrr_by_month.currency,
        item_mrr_by_month.subscription_month,
        sum(item_mrr_by_month.month_mrr) as subscription_month_contracted_mrr
    from item_mrr_by_month
    group by 1, 2, 3, 4
),
item_mrr_with_discounts as (
    select
        item_mrr_by_month.source_relation,
        item_mrr_by_month.subscription_item_id,
        item_mrr_by_month.subscription_id,
        item_mrr_by_month.customer_id,
        item_mrr_by_month.product_id,
        item_mrr_by_month.price_plan_id,
        item_mrr_by_month.subscription_status,
        item_mrr_by_month.currency,
        item_mrr_by_month.subscription_year,
        item_mrr_by_month.subscription_month,
        item_mrr_by_month.month_mrr as month_contract_mrr,
        0 as month_discount_applied,
        item_mrr_by_month.month_mrr as month_billed_mrr,
        subscription_month_contracted.subscription_month_contracted_mrr
    from item_mrr_by_month
    left join subscription_month_contracted
        on item_mrr_by_month.source_relation = subscription_month_contracted.source_relation
        and item_mrr_by_month.subscription_id = subscription_month_contracted.subscription_id
        and item_mrr_by_month.currency = subscription_month_contracted.currency
        and item_mrr_by_month.subscription_month = subscription_month_contracted.subscription_month
),
lagged as (
    select
        item_mrr_with_discounts.source_relation,
        item_mrr_with_discounts.subscription_item_id,
        item_mrr_with_discounts.subscription_id,
        item_mrr_with_discounts.customer_id,
        item_mrr_with_discounts.product_id,
        item_mrr_with_discounts.price_plan_id,
        item_mrr_with_discounts.subscription_status,
        item_mrr_with_discounts.currency,
        item_mrr_with_discounts.subscription_month,
        item_mrr_with_discounts.subscription_year,
        item_mrr_with_discounts.month_contract_mrr,
        item_mrr_with_discounts.month_discount_applied,
        item_mrr_with_discounts.month_billed_mrr,
        lag(item_mrr_with_discounts.month_contract_mrr) over (
            partition by
                item_mrr_with_discounts.source_relation,
                item_mrr_with_discounts.subscription_item_id,
                item_mrr_with_discounts.price_plan_id
            order by
                item_mrr_with_discounts.subscription_year,
                item_mrr_with_discounts.subscription_month
        ) as prior_month_contract_mrr,
        row_number() over (
            partition by
                item_mrr_with_discounts.source_relation,
                item_mrr_with_discounts.subscription_item_id,
                item_mrr_with_discounts.price_plan_id
            order by
                item_mrr_with_discounts.subscription_year,
                item_mrr_with_discounts.subscription_month
        ) as item_month_number
    from item_mrr_with_discounts
),
classified as (
    select
        *,
        case
            when prior_month_contract_mrr is null
                and month_contract_mrr > 0
                then 'new'
            when month_contract_mrr > prior_month_contract_mrr
                then 'expansion'
            when prior_month_contract_mrr > month_contract_mrr
                and month_contract_mrr > 0
                then 'contraction'
            when (month_contract_mrr = 0 or month_contract_mrr is null)
                and prior_month_contract_mrr > 0
                then 'churned'
            when prior_month_contract_mrr = 0
                and month_contract_mrr > 0
                and item_month_number >= 3
                then 'reactivation'
            when month_contract_mrr = prior_month_contract_mrr
                then 'unchanged'
            else 'unknown'
        end as contract_mrr_type
    from lagged
)
select *
from classified""",
}
ST_IDS = {"stg_subscription": "subscription_row_id", "stg_subscription_item": "subscription_item_id",
          "stg_price_plan": "price_plan_id", "stg_invoice_line_item": "invoice_line_item_id"}
for _p in ("st", "stk"):
    for _name, _sql in {**ST_STAGING, **ST_MARTS}.items():
        PROBES[f"{_p}_{_name}"] = cfg() + _sql.replace("PFX_", f"{_p}_")
# fivetran/dbt_xero (v1.x), ported: one connector (`source_relation` ''), the calendar spine
# fixed to 2024 (the package runs it to next month from `current_date`), `current_date` in the
# balance sheet's year end fixed to 2024-06-30, dbt_utils' group_by(n) written as ordinals as
# it compiles, generate_surrogate_key spelled out, one pivoted tracking-category pair
# (`region`, `department`; the package pivots the names it reads at compile time) on journal
# lines and none on invoice lines. Journals come from orders, journal lines and their
# tracking from payments, accounts and tracking options from products, invoices, contacts and
# credit notes from customers, bank transactions from paid orders, invoice lines from orders.
_XR_AT = "date'2024-01-01'"
XR_STAGING = {
 "stg_journal": f"""
select id as journal_id, dateadd(DAY, id, {_XR_AT}) as journal_date,
  cast(dateadd(DAY, id, {_XR_AT}) as timestamp) as created_date_utc, id as journal_number,
  status as reference,
  case status when 'new' then 'ACCREC' when 'paid' then 'CASHREC'
              when 'cancelled' then 'ACCRECCREDIT' else 'MANJOURNAL' end as source_type,
  case status when 'paid' then id else customer_id end as source_id,
  cast('' as string) as source_relation
from {O}""",
 "stg_journal_line": f"""
select id as journal_line_id, order_id as journal_id, id % 10 + 1 as account_id, method as description,
  cast(amount as decimal(18, 2)) as net_amount, cast(amount as decimal(18, 2)) * 1.1 as gross_amount,
  cast(amount as decimal(18, 2)) * 0.1 as tax_amount, 'GST' as tax_name,
  case when method = 'void' then 'NONE' else 'OUTPUT' end as tax_type,
  cast('' as string) as source_relation
from {P}""",
 "stg_account": f"""
select id as account_id, concat('A', id) as account_code, concat(category, '-', id) as account_name,
  element_at(array('BANK', 'CURRENT', 'EQUITY', 'REVENUE', 'OVERHEADS'), cast(id % 5 + 1 as int)) as account_type,
  element_at(array('ASSET', 'LIABILITY', 'EQUITY', 'REVENUE', 'EXPENSE'), cast(id % 5 + 1 as int)) as account_class,
  cast('' as string) as source_relation
from {PR}""",
 "stg_invoice": f"""
select id as invoice_id, (id * 3) % 40 + 1 as contact_id, dateadd(DAY, id * 2, {_XR_AT}) as invoice_date,
  concat('INV-', id) as invoice_number, tier as invoice_status, 'ACCREC' as type,
  cast('' as string) as source_relation
from {C}""",
 "stg_bank_transaction": f"""
select id as bank_transaction_id, customer_id as contact_id, cast('' as string) as source_relation
from {O} where status = 'paid'""",
 "stg_credit_note": f"""
select id as credit_note_id, id % 40 + 1 as contact_id, cast('' as string) as source_relation
from {C} where region = 'eu'""",
 "stg_contact": f"""
select id as contact_id, name as contact_name, cast('' as string) as source_relation from {C}""",
 "stg_organization": f"""
select distinct 12 as financial_year_end_month, 31 as financial_year_end_day,
  cast('' as string) as source_relation
from {PR}""",
 "stg_journal_line_has_tracking_category": f"""
select order_id as journal_id, id as journal_line_id, id % 2 + 1 as tracking_category_id,
  id % 3 + 1 as tracking_category_option_id, cast('' as string) as source_relation
from {P} where method <> 'void'""",
 "stg_invoice_line_item": f"""
select id as line_item_id, customer_id as invoice_id, concat('A', product_id) as account_code,
  amount % 4 + 1 as quantity, cast(amount as decimal(18, 2)) as unit_amount,
  cast(amount as decimal(18, 2)) * (amount % 4 + 1) as line_amount, status as description,
  cast('' as string) as source_relation
from {O}""",
 "int_tracking_categories_with_options": f"""
select id % 2 + 1 as tracking_category_id,
  case id % 2 when 0 then 'department' else 'region' end as tracking_category_name,
  id as tracking_option_id, category as tracking_option_name, cast('' as string) as source_relation
from {PR}""",
}
XR_MARTS = {
 "calendar_spine": """
with spine as (
    select explode(sequence(date'2024-01-01', date'2024-12-01', interval 1 month)) as date_month
), cleaned as (
    select cast(date_month as date) as date_month
    from spine
)
select *
from cleaned""",
 "int_journal_line_pivoted_tracking_categories": """
with journal_line_has_tracking as (
    select *
    from {{ ref('PFX_stg_journal_line_has_tracking_category') }}
), tracking_categories_with_options as (
    select *
    from {{ ref('PFX_int_tracking_categories_with_options') }}
), journal_tracking as (
    select
        journal_line_has_tracking.journal_id,
        journal_line_has_tracking.journal_line_id,
        journal_line_has_tracking.source_relation,
        tracking_categories_with_options.tracking_category_name,
        tracking_categories_with_options.tracking_option_name
    from journal_line_has_tracking
    left join tracking_categories_with_options
        on journal_line_has_tracking.tracking_category_id = tracking_categories_with_options.tracking_category_id
        and journal_line_has_tracking.tracking_category_option_id = tracking_categories_with_options.tracking_option_id
        and journal_line_has_tracking.source_relation = tracking_categories_with_options.source_relation
),
final as (
    select
        journal_id,
        journal_line_id,
        source_relation
        ,
      max(
        case
        when tracking_category_name = 'department'
          then tracking_option_name
        else null
        end
      )
        as department
      ,
      max(
        case
        when tracking_category_name = 'region'
          then tracking_option_name
        else null
        end
      )
        as region
    from journal_tracking
    group by 1,2,3
)
select *
from final""",
 "general_ledger": """
with journals as (
    select *
    from {{ ref('PFX_stg_journal') }}
), journal_lines as (
    select *
    from {{ ref('PFX_stg_journal_line') }}
), accounts as (
    select *
    from {{ ref('PFX_stg_account') }}
), invoices as (
    select *
    from {{ ref('PFX_stg_invoice') }}
), bank_transactions as (
    select *
    from {{ ref('PFX_stg_bank_transaction') }}
), credit_notes as (
    select *
    from {{ ref('PFX_stg_credit_note') }}
), contacts as (
    select *
    from {{ ref('PFX_stg_contact') }}
)
, pivoted_tracking_categories as (
    select *
    from {{ ref('PFX_int_journal_line_pivoted_tracking_categories') }}
)
, joined as (
    select
        journals.journal_id,
        journals.created_date_utc,
        journals.journal_date,
        journals.journal_number,
        journals.reference,
        journals.source_id,
        journals.source_type,
        journals.source_relation,
        journal_lines.journal_line_id,
        accounts.account_code,
        accounts.account_id,
        accounts.account_name,
        accounts.account_type,
        journal_lines.description,
        journal_lines.gross_amount,
        journal_lines.net_amount,
        journal_lines.tax_amount,
        journal_lines.tax_name,
        journal_lines.tax_type,
        accounts.account_class,
        case when journals.source_type in ('ACCPAY', 'ACCREC') then journals.source_id end as invoice_id,
        case when journals.source_type in ('CASHREC','CASHPAID') then journals.source_id end as bank_transaction_id,
        case when journals.source_type in ('TRANSFER') then journals.source_id end as bank_transfer_id,
        case when journals.source_type in ('MANJOURNAL') then journals.source_id end as manual_journal_id,
        case when journals.source_type in ('APPREPAYMENT', 'APOVERPAYMENT', 'ACCPAYPAYMENT', 'ACCRECPAYMENT', 'ARCREDITPAYMENT', 'APCREDITPAYMENT') then journals.source_id end as payment_id,
        case when journals.source_type in ('ACCPAYCREDIT','ACCRECCREDIT') then journals.source_id end as credit_note_id
        -- Pivoted tracking categories, excluding duplicate columns
        , pivoted_tracking_categories.department, pivoted_tracking_categories.region
    from journals
    left join journal_lines
        on (journals.journal_id = journal_lines.journal_id
        and journals.source_relation = journal_lines.source_relation)
    left join accounts
        on (accounts.account_id = journal_lines.account_id
        and accounts.source_relation = journal_lines.source_relation)
    left join pivoted_tracking_categories
        on (journal_lines.journal_line_id = pivoted_tracking_categories.journal_line_id
        and journals.journal_id = pivoted_tracking_categories.journal_id
        and journals.source_relation = pivoted_tracking_categories.source_relation)
), first_contact as (
    select
        joined.*,
        coalesce(
            invoices.contact_id
                , bank_transactions.contact_id
            , credit_notes.contact_id
        )
        as contact_id
    from joined
    left join invoices
        on (joined.invoice_id = invoices.invoice_id
        and joined.source_relation = invoices.source_relation)
    left join bank_transactions
        on (joined.bank_transaction_id = bank_transactions.bank_transaction_id
        and joined.source_relation = bank_transactions.source_relation)
    left join credit_notes
        on (joined.credit_note_id = credit_notes.credit_note_id
        and joined.source_relation = credit_notes.source_relation)
), second_contact as (
    select
        first_contact.*,
        contacts.contact_name
    from first_contact
    left join contacts
        on (first_contact.contact_id = contacts.contact_id
        and first_contact.source_relation = contacts.source_relation)
)
select *
from second_contact""",
 "balance_sheet_report": """
with calendar as (
    select *
    from {{ ref('PFX_calendar_spine') }}
), ledger as (
    select *
    from {{ ref('PFX_general_ledger') }}
), organization as (
    select *
    from {{ ref('PFX_stg_organization') }}
), year_end as (
    select
        case
            when cast(extract(year from date'2024-06-30') || '-' || financial_year_end_month || '-' || financial_year_end_day as date) >= date'2024-06-30'
            then cast(extract(year from date'2024-06-30') || '-' || financial_year_end_month || '-' || financial_year_end_day as date)
            else cast(extract(year from add_months(date'2024-06-30', -12)) || '-' || financial_year_end_month || '-' || financial_year_end_day as date)
        end as current_year_end_date
    from organization
), joined as (
    select
        calendar.date_month,
        case
            when ledger.account_class in ('ASSET','EQUITY','LIABILITY') then ledger.account_name
            when ledger.journal_date <= add_months(year_end.current_year_end_date, -12) then 'Retained Earnings'
            else 'Current Year Earnings'
        end as account_name,
        case
            when ledger.account_class in ('ASSET','EQUITY','LIABILITY') then ledger.account_code
            else null
        end as account_code,
        case
            when ledger.account_class in ('ASSET','EQUITY','LIABILITY') then ledger.account_id
            else null
        end as account_id,
        case
            when ledger.account_class in ('ASSET','EQUITY','LIABILITY') then ledger.account_type
            else null
        end as account_type,
        case
            when ledger.account_class in ('ASSET','EQUITY','LIABILITY') then ledger.account_class
            else 'EQUITY'
        end as account_class,
        sum(ledger.net_amount) as net_amount
    from calendar
    inner join ledger
        on calendar.date_month >= cast(date_trunc('month', ledger.journal_date) as date)
    cross join year_end
    group by 1,2,3,4,5,6
)
select *
from joined""",
 "profit_and_loss_report": """
with calendar as (
    select *
    from {{ ref('PFX_calendar_spine') }}
), ledger as (
    select *
    from {{ ref('PFX_general_ledger') }}
)
, pivoted_tracking_categories as (
    select *
    from {{ ref('PFX_int_journal_line_pivoted_tracking_categories') }}
)
, joined as (
    select
        SURROGATE_PNL as profit_and_loss_id,
        calendar.date_month,
        ledger.account_id,
        ledger.account_name,
        ledger.account_code,
        ledger.account_type,
        ledger.account_class,
        ledger.source_relation,
        -- Dynamically pivoted tracking category columns
        pivoted_tracking_categories.department, pivoted_tracking_categories.region,
        coalesce(sum(ledger.net_amount * -1), 0) as net_amount
    from calendar
    left join ledger
        on calendar.date_month = cast(date_trunc('month', ledger.journal_date) as date)
    left join pivoted_tracking_categories
        on ledger.journal_line_id = pivoted_tracking_categories.journal_line_id
        and ledger.journal_id = pivoted_tracking_categories.journal_id
        and ledger.source_relation = pivoted_tracking_categories.source_relation
    where ledger.account_class in ('REVENUE','EXPENSE')
    group by 1,2,3,4,5,6,7,8,9,10
)
select *
from joined""",
 "invoice_line_items": """
with line_items as (
    select *
    from {{ ref('PFX_stg_invoice_line_item') }}
), invoices as (
    select *
    from {{ ref('PFX_stg_invoice') }}
), accounts as (
    select *
    from {{ ref('PFX_stg_account') }}
), contacts as (
    select *
    from {{ ref('PFX_stg_contact') }}
), joined as (
    select
        line_items.*,
        invoices.invoice_date,
        invoices.invoice_number,
        invoices.invoice_status,
        invoices.type,
        accounts.account_id,
        accounts.account_name,
        accounts.account_type,
        accounts.account_class,
        contacts.contact_name
    from line_items
    left join invoices
        on line_items.invoice_id = invoices.invoice_id
        and line_items.source_relation = invoices.source_relation
    left join accounts
        on line_items.account_code = accounts.account_code
        and line_items.source_relation = accounts.source_relation
    left join contacts
        on invoices.contact_id = contacts.contact_id
        and invoices.source_relation = contacts.source_relation
)
select *
from joined""",
}
# the package's schema.yml: unique + not_null on each staging id (the tracking and organization
# models have combination tests, not column keys) and on the two reports' ids
XR_IDS = {"stg_journal": "journal_id", "stg_journal_line": "journal_line_id",
          "stg_account": "account_id", "stg_invoice": "invoice_id",
          "stg_bank_transaction": "bank_transaction_id", "stg_credit_note": "credit_note_id",
          "stg_contact": "contact_id", "stg_invoice_line_item": "line_item_id",
          "profit_and_loss_report": "profit_and_loss_id"}
for _p in ("xr", "xrk"):
    for _name, _sql in {**XR_STAGING, **XR_MARTS}.items():
        _sql = _sql.replace("SURROGATE_PNL", _surrogate(
            "calendar.date_month", "ledger.account_id", "ledger.source_relation",
            "pivoted_tracking_categories.department", "pivoted_tracking_categories.region"))
        PROBES[f"{_p}_{_name}"] = cfg() + _sql.replace("PFX_", f"{_p}_")
# Session 73: fivetran/dbt_quickbooks (v1.9) as a Spark user ports it: one connector
# (`source_relation` ''), its default vars (no tax lines, home currency '', no ordinal seed)
# but `using_invoice_bundle: false` (no bundle staging), the bill and invoice double entries
# and the general ledger unioned over them as dbt_utils.union_relations compiles (each
# relation's columns cast to its types, `_dbt_source_relation` the quoted relation),
# dbt.date_trunc, dbt.last_day (Spark's dateadd with its assert_not_null checks) and
# generate_surrogate_key spelled out, group_by(n) as ordinals, the ledger's date spine fixed to
# 2024 (the package runs it from the ledger's first to last month), the intermediate models
# (ephemeral in the package) built as models. Staging keeps the package's base -> fields
# (fill_staging_columns: absent columns as typed NULLs) -> final casts. Accounts come from
# customers (the type by id % 8, so payable, receivable, income and expense accounts differ),
# items from products, bills from orders (cancelled ones `_fivetran_deleted`) and bill lines
# from payments (order_id the bill, void ones expensed by item), invoices from customers
# (blocked ones deleted) and invoice lines from orders (customer_id the invoice, status the
# line's detail type). Dates are ids in days (invoices twice theirs), so no two ledger rows of
# one account tie in the running balance's order. Keyless, and again (`qbk_`) with the
# package's unique + not_null on the ledger's unique_id and the source package's
# unique_combination_of_columns on the staging models ((<id>, source_relation) on the headers,
# (<id>, index, source_relation) on the lines).
_QB_AT = "date'2024-01-01'"


def _qb_nn(fn, arg):
    return f"coalesce({fn}({arg}), nvl2({fn}({arg}), assert_true({fn}({arg}) is not null), null))"


def _qb_dateadd(part, interval, x):
    clock = f"to_unix_timestamp({_qb_nn('to_timestamp', x)}) - to_unix_timestamp({_qb_nn('date', x)})"
    add = "date_add" if part == "day" else "add_months"
    return (f"to_timestamp(to_unix_timestamp({add}({_qb_nn('date', x)}, cast({interval} * 1 as int)))"
            f" + {clock})")


def _qb_last_day(x, part="month"):
    return f"cast({_qb_dateadd('day', '-1', _qb_dateadd(part, '1', f'date_trunc({part!r}, {x})'))} as date)"


QB_STAGING = {
 "stg_account": f"""
with base as (
    select id, cast(id * 10 as string) as account_number, id % 3 = 0 as sub_account,
        case when id % 3 = 0 then id - 1 end as parent_account_id, name,
        element_at(array('Accounts Receivable', 'Accounts Payable', 'Income', 'Expense', 'Bank', 'Equity',
                         'Cost of Goods Sold', 'Other Current Liability'), cast(id % 8 + 1 as int)) as account_type,
        element_at(array('AccountsReceivable', 'AccountsPayable', 'SalesOfProductIncome', 'OtherMiscellaneousServiceCost',
                         'Checking', 'OpeningBalanceEquity', 'SuppliesMaterialsCogs', 'OtherCurrentLiabilities'),
                   cast(id % 8 + 1 as int)) as account_sub_type,
        case when region is not null then
            element_at(array('Asset', 'Liability', 'Revenue', 'Expense', 'Asset', 'Equity', 'Expense', 'Liability'),
                       cast(id % 8 + 1 as int)) end as classification,
        cast(id * 25 as decimal(18, 2)) as balance, cast(id * 50 as decimal(18, 2)) as balance_with_sub_accounts,
        tier <> 'blocked' as active, cast(date_add({_QB_AT}, id) as timestamp) as created_at,
        case when id % 16 = 0 then 'EUR' else 'USD' end as currency_id, region as description,
        concat(region, ':', name) as fully_qualified_name, cast(date_add({_QB_AT}, id + 1) as timestamp) as updated_at
    from {C}
),
account as (
    select
        id, account_number, sub_account, parent_account_id, name, account_type, account_sub_type, classification,
        balance, balance_with_sub_accounts, active, created_at, currency_id, description, fully_qualified_name,
        updated_at, cast(null as boolean) as _fivetran_deleted
        , cast('' as string) as source_relation
    from base
),
final as (
    select
        cast(id as string) as account_id,
        cast(account_number as string) as account_number,
        sub_account as is_sub_account,
        cast(parent_account_id as string) as parent_account_id,
        name,
        account_type,
        account_sub_type,
        classification,
        balance,
        balance_with_sub_accounts,
        active as is_active,
        created_at,
        currency_id,
        description,
        fully_qualified_name,
        updated_at,
        source_relation,
        _fivetran_deleted
    from account
)
select *
from final
where not coalesce(_fivetran_deleted, false)""",
 "stg_item": f"""
with base as (
    select id, true as active, cast(date_add({_QB_AT}, id) as timestamp) as created_at,
        (id % 5) * 8 + 2 as income_account_id,
        case when category = 'cat0' then (id % 5) * 8 + 4 end as asset_account_id,
        (id % 5) * 8 + 6 as expense_account_id, concat('item', id) as name, category as description,
        cast(price as decimal(18, 2)) as unit_price, case when id > 5 then id - 5 end as parent_item_id,
        category is null as _fivetran_deleted
    from {PR}
),
fields as (
    select
        id, active, created_at, income_account_id, asset_account_id, expense_account_id, name, description,
        cast(null as string) as stock_keeping_unit, cast(null as decimal(18, 2)) as purchase_cost,
        cast(null as boolean) as taxable, cast(null as string) as type, unit_price,
        cast(null as decimal(18, 2)) as quantity_on_hand, cast(null as boolean) as track_quantity_on_hand,
        cast(null as string) as fully_qualified_name, cast(null as timestamp) as inventory_start_date,
        parent_item_id, _fivetran_deleted
        , cast('' as string) as source_relation
    from base
),
final as (
    select
        cast(id as string) as item_id,
        active as is_active,
        created_at,
        cast(income_account_id as string) as income_account_id,
        cast(asset_account_id as string) as asset_account_id,
        cast(expense_account_id as string) as expense_account_id,
        name,
        description,
        stock_keeping_unit,
        purchase_cost,
        taxable,
        type,
        unit_price,
        quantity_on_hand,
        track_quantity_on_hand,
        fully_qualified_name,
        inventory_start_date,
        cast(parent_item_id as string) as parent_item_id,
        source_relation,
        _fivetran_deleted
    from fields
)
select *
from final
where not coalesce(_fivetran_deleted, false)""",
 "stg_bill": f"""
with base as (
    select id, amount as balance, id as doc_number,
        case when product_id % 4 = 0 then 'EUR' else 'USD' end as currency_id, product_id as department_id,
        cast(date_add({_QB_AT}, id + 30) as timestamp) as due_date,
        cast(date_add({_QB_AT}, id) as timestamp) as transaction_date,
        cast(date_add({_QB_AT}, id) as timestamp) as created_at,
        cast(date_add({_QB_AT}, id + 2) as timestamp) as updated_at,
        case when product_id % 4 = 0 then cast(1.1 as decimal(18, 6)) end as exchange_rate,
        (customer_id % 5) * 8 + 1 as payable_account_id, amount as total_amount, customer_id as vendor_id,
        status as private_note, status = 'cancelled' as _fivetran_deleted
    from {O}
),
fields as (
    select
        id, balance, doc_number, currency_id, department_id, due_date, transaction_date, created_at, updated_at,
        exchange_rate, payable_account_id, total_amount, vendor_id, private_note, _fivetran_deleted
        , cast('' as string) as source_relation
    from base
),
final as (
    select
        cast(id as string) as bill_id,
        balance,
        cast(doc_number as string) as doc_number,
        currency_id,
        cast(department_id as string) as department_id,
        cast( date_trunc('day', due_date) as date) as due_date,
        cast( date_trunc('day', transaction_date) as date) as transaction_date,
        created_at,
        updated_at,
        exchange_rate,
        cast(payable_account_id as string) as payable_account_id,
        total_amount,
        cast(vendor_id as string) as vendor_id,
        private_note,
        _fivetran_deleted,
        source_relation
    from fields
)
select *
from final
where not coalesce(_fivetran_deleted, false)""",
 "stg_bill_line": f"""
with base as (
    select order_id as bill_id, id as index,
        case when method <> 'void' then (id % 5) * 8 + 3 end as account_expense_account_id,
        case method when 'card' then 'C1' when 'bank' then 'C2' end as account_expense_class_id,
        case when method = 'card' then order_id % 40 + 1 end as account_expense_customer_id,
        case when method = 'void' then order_id % 12 + 1 end as item_expense_item_id,
        case when method = 'void' and amount > 25 then 'C3' end as item_expense_class_id,
        amount, method as description
    from {P}
),
fields as (
    select
        bill_id, index, account_expense_account_id, account_expense_class_id,
        cast(null as string) as account_expense_billable_status, cast(null as string) as account_expense_tax_code_id,
        account_expense_customer_id, item_expense_item_id, cast(null as int) as item_expense_customer_id,
        cast(null as string) as item_expense_billable_status, item_expense_class_id,
        cast(null as decimal(18, 2)) as item_expense_quantity, cast(null as decimal(18, 2)) as item_expense_unit_price,
        amount, description
        , cast('' as string) as source_relation
    from base
),
final as (
    select
        cast(bill_id as string) as bill_id,
        index,
        cast(account_expense_account_id as string) as account_expense_account_id,
        cast(account_expense_class_id as string) as account_expense_class_id,
        account_expense_billable_status,
        account_expense_tax_code_id,
        cast(account_expense_customer_id as string) as account_expense_customer_id,
        cast(item_expense_item_id as string) as item_expense_item_id,
        cast(item_expense_customer_id as string) as item_expense_customer_id,
        item_expense_billable_status,
        cast(item_expense_class_id as string) as item_expense_class_id,
        item_expense_quantity,
        item_expense_unit_price,
        amount,
        description,
        source_relation
    from fields
)
select *
from final""",
 "stg_invoice": f"""
with base as (
    select id, id % 7 as balance, concat('INV-', id) as doc_number, id % 7 as total_amount,
        case region when 'eu' then 'EUR' when 'us' then 'USD' when 'apac' then 'USD' end as currency_id,
        case when region = 'eu' then cast(1.08 as decimal(18, 6)) end as exchange_rate,
        cast(date_add({_QB_AT}, id * 2) as timestamp) as transaction_date, id as customer_id,
        cast(date_add({_QB_AT}, id * 2 + 30) as timestamp) as due_date,
        case when id % 4 <> 0 then concat('K', id % 4) end as class_id,
        cast(date_add({_QB_AT}, id * 2) as timestamp) as created_at,
        cast(date_add({_QB_AT}, id * 2 + 1) as timestamp) as updated_at,
        tier = 'blocked' as _fivetran_deleted
    from {C}
),
fields as (
    select
        id, balance, doc_number, total_amount, currency_id, cast(null as int) as department_id,
        cast(null as int) as deposit_to_account_id, exchange_rate, transaction_date, customer_id,
        cast(null as int) as billing_address_id, cast(null as int) as shipping_address_id,
        cast(null as string) as delivery_type, due_date, class_id, created_at, updated_at, _fivetran_deleted
        , cast('' as string) as source_relation
    from base
),
final as (
    select
        cast(id as string) as invoice_id,
        balance,
        cast(doc_number as string) as doc_number,
        total_amount,
        currency_id,
        cast(department_id as string) as department_id,
        cast(deposit_to_account_id as string) as deposit_to_account_id,
        exchange_rate,
        cast( date_trunc('day', transaction_date) as date) as transaction_date,
        cast(customer_id as string) as customer_id,
        cast(billing_address_id as string) as billing_address_id,
        shipping_address_id,
        delivery_type,
        cast( date_trunc('day', due_date) as date) as due_date,
        cast(class_id as string) as class_id,
        created_at,
        updated_at,
        _fivetran_deleted,
        source_relation
    from fields
)
select *
from final
where not coalesce(_fivetran_deleted, false)""",
 "stg_invoice_line": f"""
with base as (
    select customer_id as invoice_id, id as index, amount,
        case when status = 'paid' then (product_id % 5) * 8 + 2 end as sales_item_account_id,
        product_id as sales_item_item_id,
        case when status = 'shipped' then 'K9' end as sales_item_class_id,
        case when status = 'new' then (customer_id % 5) * 8 + 5 end as discount_account_id,
        case status when 'new' then 'DiscountLineDetail' when 'cancelled' then 'SubTotalLineDetail'
                    when 'paid' then 'SalesItemLineDetail' end as detail_type,
        status as description, case when amount >= 100 then (product_id % 5) * 8 + 2 end as account_id,
        product_id as item_id
    from {O}
),
fields as (
    select
        invoice_id, index, amount, sales_item_account_id, sales_item_item_id, sales_item_class_id,
        cast(null as int) as sales_item_quantity, cast(null as decimal(18, 2)) as sales_item_unit_price,
        discount_account_id, detail_type, cast(null as string) as discount_class_id, description,
        cast(null as int) as quantity, cast(null as int) as bundle_quantity, cast(null as int) as bundle_id,
        account_id, item_id
        , cast('' as string) as source_relation
    from base
),
final as (
    select
        cast(invoice_id as string) as invoice_id,
        index,
        amount,
        cast(sales_item_account_id as string) as sales_item_account_id,
        cast(sales_item_item_id as string) as sales_item_item_id,
        cast(sales_item_class_id as string) as sales_item_class_id,
        cast(sales_item_quantity as float) as sales_item_quantity,
        sales_item_unit_price,
        cast(discount_account_id as string) as discount_account_id,
        detail_type,
        cast(discount_class_id as string) as discount_class_id,
        description,
        cast(quantity as float) as quantity,
        bundle_quantity,
        cast(bundle_id as string) as bundle_id,
        cast(account_id as string) as account_id,
        cast(item_id as string) as item_id,
        source_relation
    from fields
)
select *
from final""",
}
QB_MARTS = {
 "int_account_classifications": """
with accounts as (
    select *
    from {{ ref('PFX_stg_account') }}
),
classification_fix as (
    select
        account_id,
        source_relation,
        account_number,
        is_sub_account,
        parent_account_id,
        name,
        account_type,
        account_sub_type,
        balance,
        balance_with_sub_accounts,
        is_active,
        created_at,
        currency_id,
        description,
        fully_qualified_name,
        updated_at,
        cast(case when classification is not null
            then classification
            when classification is null and account_type in ('Bank', 'Other Current Asset', 'Fixed Asset', 'Other Asset', 'Accounts Receivable')
                then 'Asset'
            when classification is null and account_type = 'Equity'
                then 'Equity'
            when classification is null and account_type in ('Expense', 'Other Expense', 'Cost of Goods Sold')
                then 'Expense'
            when classification is null and account_type in ('Accounts Payable', 'Credit Card', 'Long Term Liability', 'Other Current Liability')
                then 'Liability'
            when classification is null and account_type in ('Income', 'Other Income')
                then 'Revenue'
                    end as string) as classification
    from accounts
),
classification_add as (
    select
        *,
        case when classification in ('Liability', 'Equity')
            then -1
        when classification = 'Asset'
            then 1
            else null
                end as multiplier,
        cast(case when classification in ('Asset', 'Liability', 'Equity')
            then 'balance_sheet'
            else 'income_statement'
                end as string) as financial_statement_helper,
        cast(case when classification in ('Asset', 'Expense')
            then 'debit'
            else 'credit'
                end as string) as transaction_type
    from classification_fix
),
adjusted_balances as (
    select
        *,
        (balance * multiplier) as adjusted_balance
    from classification_add
),
final as (
    select
        adjusted_balances.*,
        case when adjusted_balances.is_sub_account
            then parent_accounts.account_number
            else adjusted_balances.account_number
                end as parent_account_number,
        case when adjusted_balances.is_sub_account
            then parent_accounts.fully_qualified_name
            else adjusted_balances.fully_qualified_name
                end as parent_account_name
    from adjusted_balances
    left join accounts as parent_accounts
        on parent_accounts.account_id = adjusted_balances.parent_account_id
        and parent_accounts.source_relation = adjusted_balances.source_relation
)
select *
from final""",
 "int_bill_double_entry": """
with bills as (
    select *
    from {{ ref('PFX_stg_bill') }}
),
bill_lines as (
    select *
    from {{ ref('PFX_stg_bill_line') }}
),
items as (
    select
        item.*,
        parent.expense_account_id as parent_expense_account_id,
        parent.income_account_id as parent_income_account_id
    from {{ ref('PFX_stg_item') }} item
    left join {{ ref('PFX_stg_item') }} parent
        on item.parent_item_id = parent.item_id
        and item.source_relation = parent.source_relation
),
bill_join as (
    select
        bills.bill_id as transaction_id,
        bills.source_relation,
        bill_lines.index,
        bills.transaction_date,
        bill_lines.amount,
        case
            when bills.currency_id = ''
                then bill_lines.amount
            else bill_lines.amount * coalesce(bills.exchange_rate, 1)
        end as converted_amount,
        coalesce(bill_lines.account_expense_account_id,items.asset_account_id, items.expense_account_id, items.parent_expense_account_id, items.expense_account_id, items.parent_income_account_id, items.income_account_id) as paid_to_account_id,
        bills.payable_account_id,
        coalesce(bill_lines.account_expense_customer_id, bill_lines.item_expense_customer_id) as customer_id,
        coalesce(bill_lines.item_expense_class_id, bill_lines.account_expense_class_id) as class_id,
        bills.vendor_id,
        bills.department_id,
        bills.created_at,
        bills.updated_at
    from bills
    inner join bill_lines
        on bills.bill_id = bill_lines.bill_id
        and bills.source_relation = bill_lines.source_relation
    left join items
        on bill_lines.item_expense_item_id = items.item_id
        and bill_lines.source_relation = items.source_relation
),
final as (
    select
        transaction_id,
        source_relation,
        index,
        transaction_date,
        customer_id,
        vendor_id,
        amount,
        converted_amount,
        paid_to_account_id as account_id,
        class_id,
        department_id,
        created_at,
        updated_at,
        cast('debit' as string) as transaction_type,
        cast('bill' as string) as transaction_source
    from bill_join
    union all
    select
        transaction_id,
        source_relation,
        index,
        transaction_date,
        customer_id,
        vendor_id,
        amount,
        converted_amount,
        payable_account_id as account_id,
        class_id,
        department_id,
        created_at,
        updated_at,
        cast('credit' as string) as transaction_type,
        cast('bill' as string) as transaction_source
    from bill_join
)
select *
from final""",
 "int_invoice_double_entry": """
with invoices as (
    select *
    from {{ ref('PFX_stg_invoice') }}
),
invoice_lines as (
    select *
    from {{ ref('PFX_stg_invoice_line') }}
),
items as (
    select
        item.*,
        parent.income_account_id as parent_income_account_id
    from {{ ref('PFX_stg_item') }} item
    left join {{ ref('PFX_stg_item') }} parent
        on item.parent_item_id = parent.item_id
        and item.source_relation = parent.source_relation
),
accounts as (
    select *
    from {{ ref('PFX_stg_account') }}
),
ar_accounts as (
    select
        account_id,
        currency_id,
        source_relation
    from accounts
    where account_type = 'Accounts Receivable'
        and is_active
        and not is_sub_account
),
invoice_join as (
    select
        invoices.invoice_id as transaction_id,
        invoices.source_relation,
        invoice_lines.index,
        invoices.transaction_date as transaction_date,
        invoice_lines.amount as amount,
        invoice_lines.amount *
        (case when invoices.currency_id = ''
            then 1
            else coalesce(invoices.exchange_rate, 1)
        end) as converted_amount,
        cast(case when invoice_lines.detail_type is not null then invoice_lines.detail_type
            when coalesce(invoice_lines.account_id, invoice_lines.sales_item_account_id, items.parent_income_account_id, items.income_account_id) is not null then 'SalesItemLineDetail'
            when invoice_lines.discount_account_id is not null then 'DiscountLineDetail'
            when coalesce(invoice_lines.account_id, invoice_lines.sales_item_account_id, items.parent_income_account_id, items.income_account_id, invoice_lines.discount_account_id) is null then 'NoAccountMapping'
        end as string) as invoice_line_transaction_type,
        coalesce(invoice_lines.account_id, invoice_lines.sales_item_account_id, items.income_account_id, invoice_lines.discount_account_id) as account_id,
        coalesce(invoice_lines.sales_item_class_id, invoice_lines.discount_class_id, invoices.class_id) as class_id,
        invoices.customer_id,
        invoices.department_id,
        invoices.created_at,
        invoices.updated_at,
        invoices.currency_id
    from invoices
    inner join invoice_lines
        on invoices.invoice_id = invoice_lines.invoice_id
        and invoices.source_relation = invoice_lines.source_relation
    left join items
        on coalesce(invoice_lines.sales_item_item_id, invoice_lines.item_id) = items.item_id
        and invoice_lines.source_relation = items.source_relation
),
invoice_filter as (
    select *
    from invoice_join
    where invoice_line_transaction_type not in ('SubTotalLineDetail','NoAccountMapping')
),
final as (
    select
        transaction_id,
        invoice_filter.source_relation,
        index,
        transaction_date,
        customer_id,
        cast(null as string) as vendor_id,
        amount,
        converted_amount,
        account_id,
        class_id,
        department_id,
        created_at,
        updated_at,
        cast(case when invoice_line_transaction_type = 'DiscountLineDetail' then 'debit'
            else 'credit'
        end as string) as transaction_type,
        cast(case when invoice_line_transaction_type = 'DiscountLineDetail' then 'invoice discount'
            else 'invoice'
        end as string) as transaction_source
    from invoice_filter
    union all
    select
        transaction_id,
        invoice_filter.source_relation,
        index,
        transaction_date,
        customer_id,
        cast(null as string) as vendor_id,
        amount,
        converted_amount,
        ar_accounts.account_id,
        class_id,
        department_id,
        created_at,
        updated_at,
        cast(case when invoice_line_transaction_type = 'DiscountLineDetail' then 'credit'
            else 'debit'
        end as string) as transaction_type,
        cast(case when invoice_line_transaction_type = 'DiscountLineDetail' then 'invoice discount'
            else 'invoice'
        end as string) as transaction_source
    from invoice_filter
    left join ar_accounts
        on ar_accounts.currency_id = invoice_filter.currency_id
        and ar_accounts.source_relation = invoice_filter.source_relation
)
select *
from final""",
 "general_ledger": """
with unioned_models as (

        (
            select
                cast('{{ ref('PFX_int_bill_double_entry') }}' as string) as _dbt_source_relation,
                UNION_COLUMNS
            from {{ ref('PFX_int_bill_double_entry') }}
        )

        union all

        (
            select
                cast('{{ ref('PFX_int_invoice_double_entry') }}' as string) as _dbt_source_relation,
                UNION_COLUMNS
            from {{ ref('PFX_int_invoice_double_entry') }}
        )
),
gl_union as (
    select transaction_id,
        source_relation,
        index,
        transaction_date,
        customer_id,
        vendor_id,
        amount,
        converted_amount,
        account_id,
        class_id,
        department_id,
        transaction_type,
        transaction_source,
        created_at,
        updated_at
    from unioned_models
),
accounts as (
    select *
    from {{ ref('PFX_int_account_classifications') }}
),
adjusted_gl as (
    select
        SURROGATE_GL
            as unique_id,
        gl_union.transaction_id,
        gl_union.source_relation,
        gl_union.index as transaction_index,
        gl_union.transaction_date,
        cast(date_trunc('month', gl_union.transaction_date) as date) as period_first_day,
        LAST_DAY_GL as period_last_day,
        gl_union.customer_id,
        gl_union.vendor_id,
        gl_union.amount,
        gl_union.account_id,
        gl_union.class_id,
        gl_union.department_id,
        accounts.account_number,
        accounts.name as account_name,
        accounts.is_sub_account,
        accounts.parent_account_number,
        accounts.parent_account_name,
        accounts.account_type,
        accounts.account_sub_type,
        accounts.financial_statement_helper,
        accounts.balance as account_current_balance,
        accounts.classification as account_class,
        gl_union.transaction_type,
        gl_union.transaction_source,
        accounts.transaction_type as account_transaction_type,
        gl_union.created_at,
        gl_union.updated_at,
        case when accounts.transaction_type = gl_union.transaction_type
            then gl_union.amount
            else gl_union.amount * -1
        end as adjusted_amount,
        case when accounts.transaction_type = gl_union.transaction_type
            then gl_union.converted_amount
            else gl_union.converted_amount * -1
        end as adjusted_converted_amount
    from gl_union
    left join accounts
        on gl_union.account_id = accounts.account_id
        and gl_union.source_relation = accounts.source_relation
),
final as (
    select
        *,
        sum(adjusted_amount) over (partition by account_id, class_id
            order by transaction_date, transaction_id, transaction_index rows unbounded preceding) as running_balance,
        sum(adjusted_converted_amount) over (partition by account_id, class_id
            order by transaction_date, transaction_id, transaction_index rows unbounded preceding) as running_converted_balance
    from adjusted_gl
)
select *
from final""",
 "int_general_ledger_date_spine": """
with spine as (
    select explode(sequence(date'2024-01-01', date'2024-12-01', interval 1 month)) as date_month
),
general_ledger as (
    select *
    from {{ ref('PFX_general_ledger') }}
),
date_spine as (
    select
        cast(date_trunc('year', date_month) as date) as date_year,
        cast(date_trunc('month', date_month) as date) as period_first_day,
        LAST_DAY_SPINE as period_last_day,
        row_number() over (order by cast(date_trunc('month', date_month) as date)) as period_index
    from spine
),
final as (
    select distinct
        general_ledger.account_id,
        general_ledger.source_relation,
        general_ledger.account_number,
        general_ledger.account_name,
        general_ledger.is_sub_account,
        general_ledger.parent_account_number,
        general_ledger.parent_account_name,
        general_ledger.account_type,
        general_ledger.account_sub_type,
        general_ledger.account_class,
        general_ledger.financial_statement_helper,
        general_ledger.class_id,
        date_spine.date_year,
        date_spine.period_first_day,
        date_spine.period_last_day,
        date_spine.period_index
    from general_ledger
    cross join date_spine
)
select *
from final""",
 "int_general_ledger_balances": """
with general_ledger as (
    select *
    from {{ ref('PFX_general_ledger') }}
),
gl_accounting_periods as (
    select *
    from {{ ref('PFX_int_general_ledger_date_spine') }}
),
gl_period_balance as (
    select
        account_id,
        source_relation,
        account_number,
        account_name,
        is_sub_account,
        parent_account_number,
        parent_account_name,
        account_type,
        account_sub_type,
        financial_statement_helper,
        account_class,
        class_id,
        cast(date_trunc('year', transaction_date) as date) as date_year,
        cast(date_trunc('month', transaction_date) as date) as date_month,
        sum(adjusted_amount) as period_balance,
        sum(adjusted_converted_amount) as period_converted_balance
    from general_ledger
    group by 1,2,3,4,5,6,7,8,9,10,11,12,13,14
),
gl_cumulative_balance as (
    select
        *,
        case when financial_statement_helper = 'balance_sheet'
            then sum(period_balance) over (partition by account_id, class_id
            order by date_month, account_id, class_id rows unbounded preceding)
            else 0
                end as cumulative_balance,
        case when financial_statement_helper = 'balance_sheet'
            then sum(period_converted_balance) over (partition by account_id, class_id
            order by date_month, account_id, class_id rows unbounded preceding)
            else 0
                end as cumulative_converted_balance
    from gl_period_balance
),
gl_beginning_balance as (
    select
        account_id,
        source_relation,
        account_number,
        account_name,
        is_sub_account,
        parent_account_number,
        parent_account_name,
        account_type,
        account_sub_type,
        financial_statement_helper,
        account_class,
        class_id,
        date_year,
        date_month,
        period_balance as period_net_change,
        case when financial_statement_helper = 'balance_sheet'
            then (cumulative_balance - period_balance)
            else 0
                end as period_beginning_balance,
        cumulative_balance as period_ending_balance,
        period_converted_balance as period_net_converted_change,
        case when financial_statement_helper = 'balance_sheet'
            then (cumulative_converted_balance - period_converted_balance)
            else 0
                end as period_beginning_converted_balance,
        cumulative_converted_balance as period_ending_converted_balance
    from gl_cumulative_balance
),
gl_patch as (
    select
        coalesce(gl_beginning_balance.account_id, gl_accounting_periods.account_id) as account_id,
        coalesce(gl_beginning_balance.source_relation, gl_accounting_periods.source_relation) as source_relation,
        coalesce(gl_beginning_balance.account_number, gl_accounting_periods.account_number) as account_number,
        coalesce(gl_beginning_balance.account_name, gl_accounting_periods.account_name) as account_name,
        coalesce(gl_beginning_balance.is_sub_account, gl_accounting_periods.is_sub_account) as is_sub_account,
        coalesce(gl_beginning_balance.parent_account_number, gl_accounting_periods.parent_account_number) as parent_account_number,
        coalesce(gl_beginning_balance.parent_account_name, gl_accounting_periods.parent_account_name) as parent_account_name,
        coalesce(gl_beginning_balance.account_type, gl_accounting_periods.account_type) as account_type,
        coalesce(gl_beginning_balance.account_sub_type, gl_accounting_periods.account_sub_type) as account_sub_type,
        coalesce(gl_beginning_balance.account_class, gl_accounting_periods.account_class) as account_class,
        coalesce(gl_beginning_balance.class_id, gl_accounting_periods.class_id) as class_id,
        coalesce(gl_beginning_balance.financial_statement_helper, gl_accounting_periods.financial_statement_helper) as financial_statement_helper,
        coalesce(gl_beginning_balance.date_year, gl_accounting_periods.date_year) as date_year,
        gl_accounting_periods.period_first_day,
        gl_accounting_periods.period_last_day,
        gl_accounting_periods.period_index,
        gl_beginning_balance.period_net_change,
        gl_beginning_balance.period_beginning_balance,
        gl_beginning_balance.period_ending_balance,
        case when gl_beginning_balance.period_beginning_balance is null and period_index = 1
            then 0
            else gl_beginning_balance.period_beginning_balance
                end as period_beginning_balance_starter,
        case when gl_beginning_balance.period_ending_balance is null and period_index = 1
            then 0
            else gl_beginning_balance.period_ending_balance
                end as period_ending_balance_starter,
        gl_beginning_balance.period_net_converted_change,
        gl_beginning_balance.period_beginning_converted_balance,
        gl_beginning_balance.period_ending_converted_balance,
        case when gl_beginning_balance.period_beginning_converted_balance is null and period_index = 1
            then 0
            else gl_beginning_balance.period_beginning_converted_balance
                end as period_beginning_converted_balance_starter,
        case when gl_beginning_balance.period_ending_converted_balance is null and period_index = 1
            then 0
            else gl_beginning_balance.period_ending_converted_balance
                end as period_ending_converted_balance_starter
    from gl_accounting_periods
    left join gl_beginning_balance
        on gl_beginning_balance.account_id = gl_accounting_periods.account_id
            and gl_beginning_balance.source_relation = gl_accounting_periods.source_relation
            and gl_beginning_balance.date_month = gl_accounting_periods.period_first_day
            and gl_beginning_balance.date_year = gl_accounting_periods.date_year
            and coalesce(gl_beginning_balance.class_id, '0') = coalesce(gl_accounting_periods.class_id, '0')
),
gl_value_partition as (
    select
        *,
        sum(case when period_ending_balance_starter is null
            then 0
            else 1
                end) over (order by source_relation, account_id, class_id, period_last_day rows unbounded preceding) as gl_partition,
        sum(case when period_ending_converted_balance_starter is null
            then 0
            else 1
                end) over (order by source_relation, account_id, class_id, period_last_day rows unbounded preceding) as gl_converted_partition
    from gl_patch
),
final as (
    select
        account_id,
        source_relation,
        account_number,
        account_name,
        is_sub_account,
        parent_account_number,
        parent_account_name,
        account_type,
        account_sub_type,
        account_class,
        class_id,
        financial_statement_helper,
        date_year,
        period_first_day,
        period_last_day,
        coalesce(period_net_change, 0) as period_net_change,
        coalesce(period_beginning_balance_starter,
            first_value(period_ending_balance_starter) over (partition by gl_partition
            order by period_last_day rows unbounded preceding)) as period_beginning_balance,
        coalesce(period_ending_balance_starter,
            first_value(period_ending_balance_starter) over (partition by gl_partition
            order by period_last_day rows unbounded preceding)) as period_ending_balance,
        coalesce(period_net_converted_change, 0) as period_net_converted_change,
        coalesce(period_beginning_converted_balance_starter,
            first_value(period_ending_converted_balance_starter) over (partition by gl_converted_partition
            order by period_last_day rows unbounded preceding)) as period_beginning_converted_balance,
        coalesce(period_ending_converted_balance_starter,
            first_value(period_ending_converted_balance_starter) over (partition by gl_partition
            order by period_last_day rows unbounded preceding)) as period_ending_converted_balance
    from gl_value_partition
)
select *
from final""",
 "int_retained_earnings": """
with general_ledger_balances as (
    select *
    from {{ ref('PFX_int_general_ledger_balances') }}
),
net_income_loss as (
    select
        period_first_day,
        source_relation,
        sum(case when account_class = 'Revenue' then period_net_change else 0 end) as revenue_net_change,
        sum(case when account_class = 'Revenue' then period_net_converted_change else 0 end) as revenue_net_converted_change,
        sum(case when account_class = 'Expense' then period_net_change else 0 end) as expense_net_change,
        sum(case when account_class = 'Expense' then period_net_converted_change else 0 end) as expense_net_converted_change
    from general_ledger_balances
    group by 1,2
),
retained_earnings_starter as (
    select
        cast('9999' as string) as account_id,
        source_relation,
        cast('9999-00' as string) as account_number,
        cast('Net Income Adjustment' as string) as account_name,
        false as is_sub_account,
        cast(null as string) as parent_account_number,
        cast(null as string) as parent_account_name,
        cast('Equity' as string) as account_type,
        cast('RetainedEarnings' as string) as account_sub_type,
        cast('Equity' as string) as account_class,
        cast(null as string) as class_id,
        cast('balance_sheet' as string) as financial_statement_helper,
        cast(date_trunc('year', period_first_day) as date) as date_year,
        cast(period_first_day as date) as period_first_day,
        LAST_DAY_RE as period_last_day,
        (revenue_net_change - expense_net_change) as period_net_change,
        (revenue_net_converted_change - expense_net_converted_change) as period_net_converted_change
    from net_income_loss
),
retained_earnings_beginning as (
    select
        *,
        sum(coalesce(period_net_change, 0)) over (order by period_first_day, period_first_day rows unbounded preceding) as period_ending_balance,
        sum(coalesce(period_net_converted_change, 0)) over (order by period_first_day, period_first_day rows unbounded preceding) as period_ending_converted_balance
    from retained_earnings_starter
),
final as (
    select
        account_id,
        source_relation,
        account_number,
        account_name,
        is_sub_account,
        parent_account_number,
        parent_account_name,
        account_type,
        account_sub_type,
        account_class,
        class_id,
        financial_statement_helper,
        date_year,
        period_first_day,
        period_last_day,
        period_net_change,
        lag(coalesce(period_ending_balance,0)) over (order by period_first_day) as period_beginning_balance,
        period_ending_balance,
        period_net_converted_change,
        lag(coalesce(period_ending_balance,0)) over (order by period_first_day) as period_beginning_converted_balance,
        period_ending_converted_balance
    from retained_earnings_beginning
)
select *
from final""",
 "general_ledger_by_period": """
with general_ledger_balances as (
    select *
    from {{ ref('PFX_int_general_ledger_balances') }}
),
retained_earnings as (
    select *
    from {{ ref('PFX_int_retained_earnings') }}
),
balances_earnings_unioned as (
    select *
    from general_ledger_balances
    union all
    select *
    from retained_earnings
),
final as (
    select
        balances_earnings_unioned.*,
        case
            when account_class = 'Asset' then 1
            when account_class = 'Liability' then 2
            when account_class = 'Equity' then 3
            when account_class = 'Revenue' then 1
            when account_class = 'Expense' then 2
        end as account_ordinal
    from balances_earnings_unioned
)
select *
from final""",
}
# the package's schema.yml: unique + not_null on the ledger's unique_id; the source package's
# unique_combination_of_columns on each staging model, headers (<id>, source_relation) and
# lines (<id>, index, source_relation), as it declares them
QB_IDS = {"stg_account": ("account_id", "source_relation"), "stg_item": ("item_id", "source_relation"),
          "stg_bill": ("bill_id", "source_relation"), "stg_invoice": ("invoice_id", "source_relation"),
          "stg_bill_line": ("bill_id", "index", "source_relation"),
          "stg_invoice_line": ("invoice_id", "index", "source_relation"),
          "general_ledger": "unique_id"}
_QB_UNION_COLUMNS = ",\n                ".join(f"cast(`{c}` as {t}) as `{c}`" for c, t in (
    ("transaction_id", "string"), ("source_relation", "string"), ("index", "int"),
    ("transaction_date", "date"), ("customer_id", "string"), ("vendor_id", "string"),
    ("amount", "int"), ("converted_amount", "decimal(29,6)"), ("account_id", "string"),
    ("class_id", "string"), ("department_id", "string"), ("created_at", "timestamp"),
    ("updated_at", "timestamp"), ("transaction_type", "string"), ("transaction_source", "string")))
_QB_MARKS = {
    "UNION_COLUMNS": _QB_UNION_COLUMNS,
    "SURROGATE_GL": _surrogate("gl_union.transaction_id", "gl_union.source_relation", "gl_union.index",
                               "gl_union.account_id", " gl_union.transaction_type", "gl_union.transaction_source"),
    "LAST_DAY_GL": _qb_last_day("gl_union.transaction_date"),
    "LAST_DAY_SPINE": _qb_last_day("date_month"),
    "LAST_DAY_RE": _qb_last_day("period_first_day"),
}
for _p in ("qb", "qbk"):
    for _name, _sql in {**QB_STAGING, **QB_MARTS}.items():
        for _mark, _expr in _QB_MARKS.items():
            _sql = _sql.replace(_mark, _expr)
        PROBES[f"{_p}_{_name}"] = cfg() + _sql.replace("PFX_", f"{_p}_")
# fivetran/dbt_salesforce (v2.1.0, its staging package merged into it) as a Spark user ports
# it: its default vars (user_role, lead, task, event, product_2, order and opportunity_line_item
# all enabled; no pass-through columns, so persist/fill_pass_through_columns compile to
# nothing), the intermediate models (ephemeral in the package) built as models, stg_order kept
# though no end model reads it. Staging keeps the package's fields -> final (-> calculated)
# CTEs as they compile: get_<object>_columns plus add_renamed_columns (each multi-word column
# again in Salesforce's CamelCase spelling), fill_staging_columns (a column the source lacks as a
# typed NULL), coalesce_rename (`coalesce(cast(CamelCase as t), cast(snake_case as t)) as
# alias`), dbt's types as dbt-spark spells them (type_numeric decimal(28,6), type_float float,
# type_int integer). Each source table is a `base` CTE synthesized from one probe table, with
# snake_case columns but for user, whose connector kept Salesforce's CamelCase names (ManagerId,
# UserRoleId, ...). Accounts, users, contacts and leads come from customers (users 1-3 the
# managers of the others by id % 3 + 1, roles by id % 4 + 1; blocked accounts and contacts
# deleted at times; `apac` leads unconverted, NULL-region ones NULL), user roles and products
# from products, opportunities from orders (customer_id the account, user
# (customer_id + product_id) % 12 + 1 the owner, status the stage: paid won, cancelled lost, new
# and shipped open with a pipeline / forecast / best-case / omitted forecast category), events
# and orders from orders, opportunity line items and tasks from payments (order_id the
# opportunity). Dates are ids in days (line items' created dates ids in hours, so the line index
# has no ties). `current_timestamp` (dbt.current_timestamp_backcompat) in the opportunity's
# this-month / this-quarter flags and day counts is fixed to 2024-06-15 12:00; dbt.date_trunc
# and dbt.datediff (dbt-spark's `datediff(second, first)` with its assert_not_null checks, as
# _qb_nn) spelled out. The daily activity's date spine is fixed to 2024-01-01 .. 2024-12-31 (the
# package queries the first lead's created date and runs to `current_date` at compile time),
# dbt_utils.date_spine compiled as on Spark (generate_series of 9 powers of two cut at 366,
# dbt.dateadd of the row number as _qb_dateadd), its `-- depends_on` ref kept. Skipped: the
# history-mode models (salesforce__{account,contact,opportunity}_daily_history and their
# staging: disabled by default, incremental, reading Fivetran history-mode tables'
# _fivetran_start/_fivetran_end, a spine to `current_date`). Keyless, and again (`sfk_`) with the
# package's unique + not_null tests on each staging and end model's id.
_SF_AT = "date'2024-01-01'"
_SF_NOW = "timestamp'2024-06-15 12:00:00'"
# get_<object>_columns as they compile on Spark (dbt.type_string string, type_timestamp
# timestamp, type_float float, type_numeric decimal(28,6), type_int integer, type_boolean boolean)
_SF_COLUMNS = {
    "account": (
        "_fivetran_synced timestamp, _fivetran_active boolean, account_number string, "
        "account_source string, annual_revenue float, billing_city string, billing_country string, "
        "billing_postal_code string, billing_state string, billing_state_code string, "
        "billing_street string, description string, id string, industry string, is_deleted boolean, "
        "last_activity_date timestamp, last_referenced_date timestamp, last_viewed_date timestamp, "
        "master_record_id string, name string, number_of_employees integer, owner_id string, "
        "ownership string, parent_id string, rating string, record_type_id string, "
        "shipping_city string, shipping_country string, shipping_country_code string, "
        "shipping_postal_code string, shipping_state string, shipping_state_code string, "
        "shipping_street string, type string, website string"),
    "contact": (
        "_fivetran_synced timestamp, _fivetran_active boolean, account_id string, department string, "
        "description string, email string, first_name string, home_phone string, id string, "
        "individual_id string, is_deleted boolean, last_activity_date timestamp, "
        "last_modified_by_id string, last_modified_date timestamp, last_name string, "
        "last_referenced_date timestamp, last_viewed_date timestamp, lead_source string, "
        "mailing_city string, mailing_country string, mailing_country_code string, "
        "mailing_postal_code string, mailing_state string, mailing_state_code string, "
        "mailing_street string, master_record_id string, mobile_phone string, name string, "
        "owner_id string, phone string, reports_to_id string, title string"),
    "event": (
        "_fivetran_synced timestamp, _fivetran_active boolean, account_id string, "
        "activity_date timestamp, activity_date_time timestamp, created_by_id string, "
        "created_date timestamp, description string, end_date timestamp, end_date_time timestamp, "
        "event_subtype string, group_event_type string, id string, is_archived boolean, "
        "is_child boolean, is_deleted boolean, is_group_event boolean, is_recurrence boolean, "
        "last_modified_by_id string, last_modified_date timestamp, location string, owner_id string, "
        "start_date_time timestamp, subject string, type string, what_count integer, what_id string, "
        "who_count integer, who_id string"),
    "lead": (
        "_fivetran_synced timestamp, _fivetran_active boolean, annual_revenue float, city string, "
        "company string, converted_account_id string, converted_contact_id string, "
        "converted_date timestamp, converted_opportunity_id string, country string, "
        "country_code string, created_by_id string, created_date timestamp, description string, "
        "email string, email_bounced_date timestamp, email_bounced_reason string, first_name string, "
        "has_opted_out_of_email boolean, id string, individual_id string, industry string, "
        "is_converted boolean, is_deleted boolean, is_unread_by_owner boolean, "
        "last_activity_date timestamp, last_modified_by_id string, last_modified_date timestamp, "
        "last_name string, last_referenced_date timestamp, last_viewed_date timestamp, "
        "lead_source string, master_record_id string, mobile_phone string, name string, "
        "number_of_employees integer, owner_id string, phone string, postal_code string, "
        "state string, state_code string, status string, street string, title string, "
        "website string"),
    "opportunity": (
        "_fivetran_synced timestamp, _fivetran_active boolean, account_id string, amount float, "
        "campaign_id string, close_date timestamp, created_date timestamp, description string, "
        "expected_revenue decimal(28,6), fiscal string, fiscal_quarter integer, fiscal_year integer, "
        "forecast_category string, forecast_category_name string, has_open_activity boolean, "
        "has_opportunity_line_item boolean, has_overdue_task boolean, id string, is_closed boolean, "
        "is_deleted boolean, is_won boolean, last_activity_date timestamp, "
        "last_referenced_date timestamp, last_viewed_date timestamp, lead_source string, "
        "name string, next_step string, owner_id string, probability float, record_type_id string, "
        "stage_name string, synced_quote_id string, type string"),
    "opportunity_line_item": (
        "_fivetran_synced timestamp, _fivetran_active boolean, created_by_id string, "
        "created_date timestamp, description string, discount float, has_quantity_schedule boolean, "
        "has_revenue_schedule boolean, has_schedule boolean, id string, is_deleted boolean, "
        "last_modified_by_id string, last_modified_date timestamp, last_referenced_date timestamp, "
        "last_viewed_date timestamp, list_price float, name string, opportunity_id string, "
        "pricebook_entry_id string, product_2_id string, product_code string, quantity float, "
        "service_date timestamp, sort_order integer, total_price float, unit_price float"),
    "order": (
        "_fivetran_synced timestamp, _fivetran_active boolean, account_id string, "
        "activated_by_id string, activated_date timestamp, billing_city string, "
        "billing_country string, billing_country_code string, billing_postal_code string, "
        "billing_state string, billing_state_code string, billing_street string, contract_id string, "
        "created_by_id string, created_date timestamp, description string, end_date timestamp, "
        "id string, is_deleted boolean, last_modified_by_id string, last_modified_date timestamp, "
        "last_referenced_date timestamp, last_viewed_date timestamp, opportunity_id string, "
        "order_number string, original_order_id string, owner_id string, pricebook_2_id string, "
        "shipping_city string, shipping_country string, shipping_country_code string, "
        "shipping_postal_code string, shipping_state string, shipping_state_code string, "
        "shipping_street string, status string, total_amount float, type string"),
    "product_2": (
        "_fivetran_synced timestamp, _fivetran_active boolean, created_by_id string, "
        "created_date timestamp, description string, display_url string, external_id string, "
        "family string, id string, is_active boolean, is_archived boolean, is_deleted boolean, "
        "last_modified_by_id string, last_modified_date timestamp, last_referenced_date timestamp, "
        "last_viewed_date timestamp, name string, number_of_quantity_installments integer, "
        "number_of_revenue_installments integer, product_code string, "
        "quantity_installment_period string, quantity_schedule_type string, "
        "quantity_unit_of_measure string, record_type_id string, revenue_installment_period string, "
        "revenue_schedule_type string"),
    "task": (
        "_fivetran_synced timestamp, _fivetran_active boolean, account_id string, "
        "activity_date timestamp, call_disposition string, call_duration_in_seconds integer, "
        "call_object string, call_type string, completed_date_time timestamp, created_by_id string, "
        "created_date timestamp, description string, id string, is_archived boolean, "
        "is_closed boolean, is_deleted boolean, is_high_priority boolean, "
        "last_modified_by_id string, last_modified_date timestamp, owner_id string, priority string, "
        "record_type_id string, status string, subject string, task_subtype string, type string, "
        "what_count integer, what_id string, who_count integer, who_id string"),
    "user": (
        "_fivetran_deleted boolean, _fivetran_active boolean, _fivetran_synced timestamp, "
        "account_id string, alias string, city string, company_name string, contact_id string, "
        "country string, country_code string, department string, email string, first_name string, "
        "id string, individual_id string, is_active boolean, last_login_date timestamp, "
        "last_name string, last_referenced_date timestamp, last_viewed_date timestamp, "
        "manager_id string, name string, postal_code string, profile_id string, state string, "
        "state_code string, street string, title string, user_role_id string, user_type string, "
        "username string"),
    "user_role": (
        "_fivetran_deleted boolean, _fivetran_active boolean, _fivetran_synced timestamp, "
        "developer_name string, id string, name string, opportunity_access_for_account_owner string, "
        "parent_role_id string, rollup_description string"),
}
# each staging model's coalesce_rename calls in order: column[>alias][:datatype override]
_SF_FINAL = {
    "account": (
        "account_number, account_source, annual_revenue:decimal(28,6), billing_city, "
        "billing_country, billing_postal_code, billing_state, billing_state_code, billing_street, "
        "description>account_description, id>account_id, industry, is_deleted, last_activity_date, "
        "last_referenced_date, last_viewed_date, master_record_id, name>account_name, "
        "number_of_employees, owner_id, ownership, parent_id, rating, record_type_id, shipping_city, "
        "shipping_country, shipping_country_code, shipping_postal_code, shipping_state, "
        "shipping_state_code, shipping_street, type, website"),
    "contact": (
        "id>contact_id, account_id, department, description>contact_description, email, first_name, "
        "home_phone, individual_id, is_deleted, last_activity_date, last_modified_by_id, "
        "last_modified_date, last_name, last_referenced_date, last_viewed_date, lead_source, "
        "mailing_city, mailing_country, mailing_country_code, mailing_postal_code, mailing_state, "
        "mailing_state_code, mailing_street, master_record_id, mobile_phone, name>contact_name, "
        "owner_id, phone, reports_to_id, title"),
    "event": (
        "id>event_id, account_id, activity_date, activity_date_time, created_by_id, created_date, "
        "description>event_description, end_date, end_date_time, event_subtype, group_event_type, "
        "is_archived, is_child, is_deleted, is_group_event, is_recurrence, last_modified_by_id, "
        "last_modified_date, location, owner_id, start_date_time, subject, type, what_count, "
        "what_id, who_count, who_id"),
    "lead": (
        "id>lead_id, annual_revenue:decimal(28,6), city, company, converted_account_id, "
        "converted_contact_id, converted_date, converted_opportunity_id, country, country_code, "
        "created_by_id, created_date, description>lead_description, email, email_bounced_date, "
        "email_bounced_reason, first_name, has_opted_out_of_email, individual_id, industry, "
        "is_converted, is_deleted, is_unread_by_owner, last_activity_date, last_modified_by_id, "
        "last_modified_date, last_name, last_referenced_date, last_viewed_date, lead_source, "
        "master_record_id, mobile_phone, name>lead_name, number_of_employees, owner_id, phone, "
        "postal_code, state, state_code, status, street, title, website"),
    "opportunity": (
        "account_id, amount:decimal(28,6), campaign_id, close_date, created_date, "
        "description>opportunity_description, expected_revenue, fiscal, fiscal_quarter, fiscal_year, "
        "forecast_category, forecast_category_name, has_open_activity, has_opportunity_line_item, "
        "has_overdue_task, id>opportunity_id, is_closed, is_deleted, is_won, last_activity_date, "
        "last_referenced_date, last_viewed_date, lead_source, name>opportunity_name, next_step, "
        "owner_id, probability, record_type_id, stage_name, synced_quote_id, type"),
    "opportunity_line_item": (
        "id>opportunity_line_item_id, created_by_id, created_date, "
        "description>opportunity_line_item_description, discount, has_quantity_schedule, "
        "has_revenue_schedule, has_schedule, is_deleted, last_modified_by_id, last_modified_date, "
        "last_referenced_date, last_viewed_date, list_price:decimal(28,6), "
        "name>opportunity_line_item_name, opportunity_id, pricebook_entry_id, product_2_id, "
        "product_code, quantity, service_date, sort_order, total_price:decimal(28,6), "
        "unit_price:decimal(28,6)"),
    "order": (
        "id>order_id, account_id, activated_by_id, activated_date, billing_city, billing_country, "
        "billing_country_code, billing_postal_code, billing_state, billing_state_code, "
        "billing_street, contract_id, created_by_id, created_date, description>order_description, "
        "end_date, is_deleted, last_modified_by_id, last_modified_date, last_referenced_date, "
        "last_viewed_date, opportunity_id, order_number, original_order_id, owner_id, "
        "pricebook_2_id, shipping_city, shipping_country, shipping_country_code, "
        "shipping_postal_code, shipping_state, shipping_state_code, shipping_street, status, "
        "total_amount:decimal(28,6), type"),
    "product_2": (
        "id>product_2_id, created_by_id, created_date, description>product_2_description, "
        "display_url, external_id, family, is_active, is_archived, is_deleted, last_modified_by_id, "
        "last_modified_date, last_referenced_date, last_viewed_date, name>product_2_name, "
        "number_of_quantity_installments, number_of_revenue_installments, product_code, "
        "quantity_installment_period, quantity_schedule_type, quantity_unit_of_measure, "
        "record_type_id, revenue_installment_period, revenue_schedule_type"),
    "task": (
        "id>task_id, account_id, activity_date, call_disposition, call_duration_in_seconds, "
        "call_object, call_type, completed_date_time, created_by_id, created_date, "
        "description>task_description, is_archived, is_closed, is_deleted, is_high_priority, "
        "last_modified_by_id, last_modified_date, owner_id, priority, record_type_id, status, "
        "subject, task_subtype, type, what_count, what_id, who_count, who_id"),
    "user": (
        "account_id, alias, city, company_name, contact_id, country, country_code, department, "
        "email, first_name, id>user_id, individual_id, is_active, last_login_date, last_name, "
        "last_referenced_date, last_viewed_date, manager_id, name>user_name, postal_code, "
        "profile_id, state, state_code, street, title, user_role_id, user_type, username"),
    "user_role": (
        "developer_name, id>user_role_id, name>user_role_name, opportunity_access_for_account_owner, "
        "parent_role_id, rollup_description"),
}


def _sf_camel(name):
    # add_renamed_columns: Salesforce's own spelling, each '_'-separated part capitalized
    return "".join(part.capitalize() for part in name.split("_"))


def _sf_column_list(obj):
    columns = [tuple(c.split(" ", 1)) for c in _SF_COLUMNS[obj].split(", ")]
    return columns + [(_sf_camel(n), t) for n, t in columns
                      if "fivetran" not in n and _sf_camel(n).lower() != n.lower()]


def _sf_fill(obj, source):
    # fivetran_utils.fill_staging_columns: each column of the list read from the source when it
    # has it (matched lower-cased), else a typed NULL
    present = {name.lower() for name in source}
    return ",\n        ".join(f"{n} as {n}" if n.lower() in present else f"cast(null as {t}) as {n}"
                              for n, t in _sf_column_list(obj))


def _sf_renames(obj):
    # salesforce.coalesce_rename: the Salesforce spelling coalesced with the snake_case one
    types = dict(_sf_column_list(obj))
    out = []
    for item in _SF_FINAL[obj].split(", "):
        key, _, datatype = item.partition(":")
        key, _, alias = key.partition(">")
        datatype, alias, camel = datatype or types[key], alias or key, _sf_camel(key)
        out.append(f"cast({camel} as {datatype}) as {alias}" if camel.lower() == key.lower() else
                   f"coalesce(cast({camel} as {datatype}),\n        cast({key} as {datatype}))\n"
                   f"        as {alias}")
    return ",\n        ".join(out)


def _sf_staging(obj, table, source, head="", tail=None):
    tail = "\nselect *\nfrom final\nwhere not coalesce(is_deleted, false)" if tail is None else tail
    base = ",\n        ".join(f"{expr} as {name}" for name, expr in source.items())
    return f"""
with base as (
    select
        {base}
    from {table}
),
fields as (
    select
        {_sf_fill(obj, source)}
    from base
),
final as (
    select
        {head}cast(_fivetran_synced as timestamp) as _fivetran_synced,
        {_sf_renames(obj)}
    from fields
    where coalesce(_fivetran_active, true)
){tail}"""
_SF_SYNCED = f"cast(date_add({_SF_AT}, id) as timestamp)"
_SF_HOUR = "timestamp'2024-01-01 00:00:00'"
_SF_OPPORTUNITY_TAIL = f""",

calculated as (

    select
        *,
        created_date >= date_trunc('month', {_SF_NOW}) as is_created_this_month,
        created_date >= date_trunc('quarter', {_SF_NOW}) as is_created_this_quarter,
        datediff({_qb_nn('date', 'created_date')}, {_qb_nn('date', _SF_NOW)}) as days_since_created,
        datediff({_qb_nn('date', 'created_date')}, {_qb_nn('date', 'close_date')}) as days_to_close,
        date_trunc('month', close_date) = date_trunc('month', {_SF_NOW}) as is_closed_this_month,
        date_trunc('quarter', close_date) = date_trunc('quarter', {_SF_NOW}) as is_closed_this_quarter
    from final
)

select *
from calculated
where not coalesce(is_deleted, false)"""
SF_STAGING = {
 "stg_account": _sf_staging("account", C, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "name": "name",
     "account_number": "concat('ACC-', id)",
     "account_source": "element_at(array('Web', 'Referral', 'Partner'), cast(id % 3 + 1 as int))",
     "annual_revenue": "cast(id * 1000 as float)", "billing_state": "region",
     "description": "concat('account ', name)",
     "industry": "case region when 'eu' then 'Retail' when 'us' then 'Technology' "
                 "when 'apac' then 'Manufacturing' end",
     "is_deleted": "tier = 'blocked' and id % 20 = 0", "number_of_employees": "id * 10",
     "owner_id": "id % 12 + 1", "parent_id": "case when id % 5 = 0 then id - 1 end",
     "rating": "case id % 4 when 0 then 'Hot' when 1 then 'Warm' when 2 then 'Cold' end",
     "type": "case when tier = 'blocked' then 'Former Customer' else 'Customer' end"}),
 "stg_contact": _sf_staging("contact", C, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "name": "name", "first_name": "name",
     "last_name": "concat('C', id)", "account_id": "(id * 3) % 45 + 1", "owner_id": "id % 12 + 1",
     "department": "tier", "description": "concat('contact in ', region)",
     "email": "concat(name, '@mail.test')", "individual_id": "concat('IND-', id)",
     "is_deleted": "case when tier = 'blocked' and id % 3 = 0 then true end",
     "last_activity_date": f"cast(date_add({_SF_AT}, id * 2) as timestamp)",
     "lead_source": "element_at(array('Web', 'Phone Inquiry', 'Partner Referral'), cast(id % 3 + 1 as int))",
     "mailing_city": "region", "mailing_country": "case when region = 'us' then 'United States' end",
     "mailing_state": "upper(region)", "mobile_phone": "concat('555-', id)", "phone": "concat('556-', id)",
     "reports_to_id": "case when id > 5 then id - 5 end", "title": "case when id % 7 = 0 then 'VP' end"}),
 "stg_event": _sf_staging("event", O, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "account_id": "customer_id", "what_id": "id",
     "owner_id": "product_id",
     "activity_date": f"case when status <> 'new' then cast(date_add({_SF_AT}, id + 2) as timestamp) end",
     "activity_date_time": f"dateadd(HOUR, id * 5, {_SF_HOUR})",
     "start_date_time": f"dateadd(HOUR, id * 5, {_SF_HOUR})",
     "end_date_time": f"dateadd(HOUR, id * 5 + 1, {_SF_HOUR})",
     "created_date": f"cast(date_add({_SF_AT}, id) as timestamp)", "subject": "concat('Meeting: ', status)",
     "type": "status", "location": "case when amount > 60 then 'Onsite' else 'Remote' end",
     "is_deleted": "status = 'cancelled' and amount is null"}),
 "stg_lead": _sf_staging("lead", C, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "name": "name", "company": "concat(name, ' Inc')",
     "created_date": f"cast(date_add({_SF_AT}, id * 3) as timestamp)",
     "is_converted": "region <> 'apac'",
     "converted_date": f"case when region <> 'apac' then "
                       f"cast(date_add({_SF_AT}, id * 3 + id % 20) as timestamp) end",
     "converted_account_id": "case when region <> 'apac' then id end",
     "status": "case when region <> 'apac' then 'Closed - Converted' else 'Open - Not Contacted' end",
     "owner_id": "id % 12 + 1", "email": "concat(name, '@lead.test')", "city": "region",
     "industry": "tier", "annual_revenue": "cast(id * 500 as float)", "number_of_employees": "id * 3",
     "lead_source": "'Web'", "is_deleted": "case when id % 13 = 0 then true end"}),
 "stg_opportunity": _sf_staging("opportunity", O, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "account_id": "customer_id",
     "owner_id": "(customer_id + product_id) % 12 + 1",
     "amount": "cast(amount as float)", "name": "concat('Opportunity ', id)",
     "stage_name": "case status when 'new' then 'Prospecting' when 'shipped' then 'Negotiation/Review' "
                   "when 'paid' then 'Closed Won' else 'Closed Lost' end",
     "is_won": "status = 'paid'", "is_closed": "status in ('paid', 'cancelled')",
     "forecast_category": "case status when 'new' then case when id % 3 = 0 then 'Omitted' "
                          "else 'Pipeline' end when 'shipped' then case when id % 2 = 0 then 'Forecast' else 'BestCase' end "
                          "when 'paid' then 'Closed' else 'Omitted' end",
     "probability": "case status when 'new' then 10 when 'shipped' then 75 when 'paid' then 100 else 0 end",
     "created_date": f"cast(date_add({_SF_AT}, id) as timestamp)",
     "close_date": f"cast(date_add({_SF_AT}, id + id % 45) as timestamp)",
     "fiscal_year": f"year(date_add({_SF_AT}, id + id % 45))",
     "fiscal_quarter": f"quarter(date_add({_SF_AT}, id + id % 45))",
     "type": "element_at(array('New Business', 'Existing Business', 'Renewal'), cast(id % 3 + 1 as int))",
     "lead_source": "case when id % 4 = 0 then 'Web' end",
     "is_deleted": "case when id % 25 = 0 then true end"}, tail=_SF_OPPORTUNITY_TAIL),
 "stg_opportunity_line_item": _sf_staging("opportunity_line_item", P, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "opportunity_id": "order_id",
     "product_2_id": "(id * 7) % 12 + 1", "pricebook_entry_id": "concat('PBE-', (id * 7) % 12 + 1)",
     "name": "concat(method, ' line')", "description": "concat('line ', id)",
     "created_date": f"dateadd(HOUR, id, {_SF_HOUR})",
     "last_modified_date": f"dateadd(HOUR, id + 5, {_SF_HOUR})",
     "service_date": f"cast(date_add({_SF_AT}, id % 90) as timestamp)",
     "quantity": "cast(amount % 5 + 1 as float)", "unit_price": "cast(amount as float)",
     "list_price": "cast(amount + 5 as float)", "total_price": "cast(amount * (amount % 5 + 1) as float)",
     "has_quantity_schedule": "amount % 2 = 0", "has_revenue_schedule": "method = 'bank'",
     "is_deleted": "method = 'void' and id % 2 = 0"}),
 "stg_order": _sf_staging("order", O, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "account_id": "customer_id", "opportunity_id": "id",
     "owner_id": "product_id", "status": "case status when 'paid' then 'Activated' else 'Draft' end",
     "total_amount": "cast(amount as float)", "created_date": f"cast(date_add({_SF_AT}, id) as timestamp)",
     "activated_date": f"case when status = 'paid' then cast(date_add({_SF_AT}, id + 1) as timestamp) end",
     "order_number": "lpad(cast(id as string), 8, '0')", "description": "concat('order ', id)",
     "type": "'Standard'", "is_deleted": "status = 'cancelled'"}),
 "stg_product_2": _sf_staging("product_2", PR, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "name": "concat('Product ', id)",
     "product_code": "concat('P-', id)", "description": "category", "family": "category",
     "external_id": "concat('EXT-', id)", "is_active": "price > 10", "is_archived": "price > 50",
     "is_deleted": "category = 'cat3'", "created_date": f"cast(date_add({_SF_AT}, id) as timestamp)",
     "number_of_quantity_installments": "price % 4",
     "quantity_installment_period": "case when price % 4 > 0 then 'Monthly' end",
     "quantity_schedule_type": "case when price % 4 > 0 then 'Divide' end",
     "quantity_unit_of_measure": "'Each'", "number_of_revenue_installments": "price % 3",
     "revenue_installment_period": "case when price % 3 > 0 then 'Quarterly' end",
     "revenue_schedule_type": "case when price % 3 > 0 then 'Repeat' end"}),
 "stg_task": _sf_staging("task", P, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "what_id": "order_id", "owner_id": "id % 12 + 1",
     "activity_date": f"cast(date_add({_SF_AT}, order_id) as timestamp)",
     "created_date": f"dateadd(HOUR, id, {_SF_HOUR})", "subject": "concat('Call about ', order_id)",
     "description": "method", "status": "case when method = 'void' then 'Open' else 'Completed' end",
     "is_closed": "method <> 'void'", "priority": "case when amount > 40 then 'High' else 'Normal' end",
     "is_high_priority": "amount > 40", "type": "'Call'", "task_subtype": "'Call'",
     "call_duration_in_seconds": "amount * 10", "is_deleted": "case when id % 17 = 0 then true end"}),
 "stg_user": _sf_staging("user", C, {
     "Id": "id", "_fivetran_synced": _SF_SYNCED, "_fivetran_deleted": "tier = 'blocked'", "Name": "name",
     "FirstName": "name", "LastName": "concat('L', id)", "Alias": "concat('u', id)", "City": "region",
     "State": "upper(tier)", "Department": "region", "Email": "concat(name, '@example.com')",
     "Username": "lower(name)", "IsActive": "tier <> 'blocked'",
     "ManagerId": "case when id > 3 then id % 3 + 1 end", "UserRoleId": "id % 4 + 1",
     "Title": "case when id <= 3 then 'Sales Manager' else 'Account Executive' end",
     "UserType": "'Standard'"}, head="_fivetran_deleted,\n        ", tail="\nselect *\nfrom final"),
 "stg_user_role": _sf_staging("user_role", PR, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "_fivetran_deleted": "category is null",
     "name": "category", "developer_name": "concat('ROLE_', id)",
     "parent_role_id": "case when id > 1 then cast(id / 2 as int) end",
     "rollup_description": "concat(category, ' rollup')",
     "opportunity_access_for_account_owner": "case when price > 15 then 'Edit' else 'Read' end"},
     head="_fivetran_deleted,\n        ", tail="\nselect *\nfrom final"),
}
SF_MARTS = {
 "int_date_spine": f"""
-- depends_on: {{{{ ref('PFX_stg_lead') }}}}
with spine as (

with rawdata as (

    with p as (
        select 0 as generated_number union all select 1
    ), unioned as (

    select
    {(chr(10) + '    + ').join(f"p{i}.generated_number * power(2, {i})" for i in range(9))}
    + 1
    as generated_number

    from
    {(chr(10) + '    cross join ').join(f"p as p{i}" for i in range(9))}

    )

    select *
    from unioned
    where generated_number <= 366
    order by generated_number

),

all_periods as (

    select (
        {_qb_dateadd('day', 'row_number() over (order by generated_number) - 1', "cast('2024-01-01' as date)")}
    ) as date_day
    from rawdata

),

filtered as (

    select *
    from all_periods
    where date_day <= {_qb_dateadd('day', '1', "cast('2024-12-31' as date)")}

)

select * from filtered

)

select *
from spine""",
 "opportunity_enhanced": """
with opportunity as (

    select *
    from {{ ref('PFX_stg_opportunity') }}
),

salesforce_user as (

    select *
    from {{ ref('PFX_stg_user') }}
),

-- If using user_role table, the following will be included, otherwise it will not.
user_role as (

    select *
    from {{ ref('PFX_stg_user_role') }}
),

account as (

    select *
    from {{ ref('PFX_stg_account') }}
),

add_fields as (

    select
        opportunity.*,
        account.account_number,
        account.account_source,
        account.industry,
        account.account_name,
        account.number_of_employees,
        account.type as account_type,
        opportunity_owner.user_id as opportunity_owner_id,
        opportunity_owner.user_name as opportunity_owner_name,
        opportunity_owner.user_role_id as opportunity_owner_role_id,
        opportunity_owner.city opportunity_owner_city,
        opportunity_owner.state as opportunity_owner_state,
        opportunity_manager.user_id as opportunity_manager_id,
        opportunity_manager.user_name as opportunity_manager_name,
        opportunity_manager.city opportunity_manager_city,
        opportunity_manager.state as opportunity_manager_state,

        -- If using user_role table, the following will be included, otherwise it will not.
        user_role.user_role_name as opportunity_owner_position,
        user_role.developer_name as opportunity_owner_developer_name,
        user_role.parent_role_id as opportunity_owner_parent_role_id,
        user_role.rollup_description as opportunity_owner_rollup_description,

        case
            when opportunity.is_won then 'Won'
            when not opportunity.is_won and opportunity.is_closed then 'Lost'
            when not opportunity.is_closed and lower(opportunity.forecast_category) in ('pipeline','forecast','bestcase') then 'Pipeline'
            else 'Other'
        end as status,
        case when is_created_this_month then amount else 0 end as created_amount_this_month,
        case when is_created_this_quarter then amount else 0 end as created_amount_this_quarter,
        case when is_created_this_month then 1 else 0 end as created_count_this_month,
        case when is_created_this_quarter then 1 else 0 end as created_count_this_quarter,
        case when is_closed_this_month then amount else 0 end as closed_amount_this_month,
        case when is_closed_this_quarter then amount else 0 end as closed_amount_this_quarter,
        case when is_closed_this_month then 1 else 0 end as closed_count_this_month,
        case when is_closed_this_quarter then 1 else 0 end as closed_count_this_quarter

        --The below script allows for pass through columns.

        -- If using user_role table, the following will be included, otherwise it will not.

    from opportunity
    left join account
        on opportunity.account_id = account.account_id
    left join salesforce_user as opportunity_owner
        on opportunity.owner_id = opportunity_owner.user_id
    left join salesforce_user as opportunity_manager
        on opportunity_owner.manager_id = opportunity_manager.user_id

    -- If using user_role table, the following will be included, otherwise it will not.
    left join user_role
        on opportunity_owner.user_role_id = user_role.user_role_id
)

select *
from add_fields""",
 "int_opportunity_aggregation_by_owner": """
with salesforce_opportunity_enhanced as (

    select *
    from {{ ref('PFX_opportunity_enhanced') }}
),

salesforce_user as (

    select *
    from {{ ref('PFX_stg_user') }}
),

booking_by_owner as (

    select
        opportunity_manager_id as b_manager_id,
        opportunity_owner_id as b_owner_id,
        round(sum(closed_amount_this_month)) as bookings_amount_closed_this_month,
        round(sum(closed_amount_this_quarter)) as bookings_amount_closed_this_quarter,
        count(*) as total_number_bookings,
        round(sum(amount)) as total_bookings_amount,
        sum(closed_count_this_month) as bookings_count_closed_this_month,
        sum(closed_count_this_quarter) as bookings_count_closed_this_quarter,
        round(avg(amount)) as avg_bookings_amount,
        max(amount) as largest_booking,
        avg(days_to_close) as avg_days_to_close
    from salesforce_opportunity_enhanced
    where status = 'Won'
    group by 1, 2
),

lost_by_owner as (

    select
        opportunity_manager_id as l_manager_id,
        opportunity_owner_id as l_owner_id,
        round(sum(closed_amount_this_month)) as lost_amount_this_month,
        round(sum(closed_amount_this_quarter)) as lost_amount_this_quarter,
        count(*) as total_number_lost,
        round(sum(amount)) as total_lost_amount,
        sum(closed_count_this_month) as lost_count_this_month,
        sum(closed_count_this_quarter) as lost_count_this_quarter
    from salesforce_opportunity_enhanced
    where status = 'Lost'
    group by 1, 2
),

pipeline_by_owner as (

    select
        opportunity_manager_id as p_manager_id,
        opportunity_owner_id as p_owner_id,
        round(sum(created_amount_this_month)) as pipeline_created_amount_this_month,
        round(sum(created_amount_this_quarter)) as pipeline_created_amount_this_quarter,
        round(sum(created_amount_this_month * probability)) as pipeline_created_forecast_amount_this_month,
        round(sum(created_amount_this_quarter * probability)) as pipeline_created_forecast_amount_this_quarter,
        sum(created_count_this_month) as pipeline_count_created_this_month,
        sum(created_count_this_quarter) as pipeline_count_created_this_quarter,
        count(*) as total_number_pipeline,
        round(sum(amount)) as total_pipeline_amount,
        round(sum(amount * probability)) as total_pipeline_forecast_amount,
        round(avg(amount)) as avg_pipeline_opp_amount,
        max(amount) as largest_deal_in_pipeline,
        avg(days_since_created) as avg_days_open
    from salesforce_opportunity_enhanced
    where status = 'Pipeline'
    group by 1, 2
)

select
    salesforce_user.user_id as owner_id,
    coalesce(p_manager_id, b_manager_id, l_manager_id) as manager_id,
    booking_by_owner.*,
    lost_by_owner.*,
    pipeline_by_owner.*
from salesforce_user
left join booking_by_owner
    on booking_by_owner.b_owner_id = salesforce_user.user_id
left join lost_by_owner
    on lost_by_owner.l_owner_id = salesforce_user.user_id
left join pipeline_by_owner
    on pipeline_by_owner.p_owner_id = salesforce_user.user_id""",
 "owner_performance": """
with opportunity_aggregation_by_owner as (

    select *
    from {{ ref('PFX_int_opportunity_aggregation_by_owner') }}
),

salesforce_user as (

    select *
    from {{ ref('PFX_stg_user') }}
)

select
    opportunity_aggregation_by_owner.*,
    salesforce_user.user_name as owner_name,
    salesforce_user.city as owner_city,
    salesforce_user.state as owner_state,
    case
        when (bookings_amount_closed_this_month + lost_amount_this_month) > 0
            then bookings_amount_closed_this_month / (bookings_amount_closed_this_month + lost_amount_this_month) * 100
        else 0
    end as win_percent_this_month,
    case
        when (bookings_amount_closed_this_quarter + lost_amount_this_quarter) > 0
            then bookings_amount_closed_this_quarter / (bookings_amount_closed_this_quarter + lost_amount_this_quarter) * 100
        else 0
    end as win_percent_this_quarter,
    case
        when (total_bookings_amount + total_lost_amount) > 0
            then total_bookings_amount / (total_bookings_amount + total_lost_amount) * 100
        else 0
    end as total_win_percent
from opportunity_aggregation_by_owner
join salesforce_user
    on salesforce_user.user_id = opportunity_aggregation_by_owner.owner_id""",
 "manager_performance": """
with opportunity_aggregation_by_owner as (

    select *
    from {{ ref('PFX_int_opportunity_aggregation_by_owner') }}
),

-- If using user_role table, the following will be included, otherwise it will not.
user_role as (

    select *
    from {{ ref('PFX_stg_user_role') }}
),

salesforce_user as (

    select *
    from {{ ref('PFX_stg_user') }}
)

select
    coalesce(manager.user_id, 'No Manager Assigned') as manager_id,
    coalesce(manager.user_name, 'No Manager Assigned') as manager_name,
    manager.city as manager_city,
    manager.state as manager_state,

    -- If using user_role table, the following will be included, otherwise it will not.
    user_role.user_role_name as manager_position,

    count(distinct owner_id) as number_of_direct_reports,
    coalesce(sum(bookings_amount_closed_this_month), 0) as bookings_amount_closed_this_month,
    coalesce(sum(bookings_amount_closed_this_quarter), 0) as bookings_amount_closed_this_quarter,
    coalesce(sum(total_number_bookings), 0) as total_number_bookings,
    coalesce(sum(total_bookings_amount), 0) as total_bookings_amount,
    coalesce(sum(bookings_count_closed_this_month), 0) as bookings_count_closed_this_month,
    coalesce(sum(bookings_count_closed_this_quarter), 0) as bookings_count_closed_this_quarter,
    coalesce(max(largest_booking), 0) as largest_booking,
    coalesce(sum(lost_amount_this_month), 0) as lost_amount_this_month,
    coalesce(sum(lost_amount_this_quarter), 0) as lost_amount_this_quarter,
    coalesce(sum(total_number_lost), 0) as total_number_lost,
    coalesce(sum(total_lost_amount), 0) as total_lost_amount,
    coalesce(sum(lost_count_this_month), 0) as lost_count_this_month,
    coalesce(sum(lost_count_this_quarter), 0) as lost_count_this_quarter,
    coalesce(sum(pipeline_created_amount_this_month), 0) as pipeline_created_amount_this_month,
    coalesce(sum(pipeline_created_amount_this_quarter), 0) as pipeline_created_amount_this_quarter,
    coalesce(sum(pipeline_created_forecast_amount_this_month), 0) as pipeline_created_forecast_amount_this_month,
    coalesce(sum(pipeline_created_forecast_amount_this_quarter), 0) as pipeline_created_forecast_amount_this_quarter,
    coalesce(sum(pipeline_count_created_this_month), 0) as pipeline_count_created_this_month,
    coalesce(sum(pipeline_count_created_this_quarter), 0) as pipeline_count_created_this_quarter,
    coalesce(sum(total_number_pipeline), 0) as total_number_pipeline,
    coalesce(sum(total_pipeline_amount), 0) as total_pipeline_amount,
    coalesce(sum(total_pipeline_forecast_amount), 0) as total_pipeline_forecast_amount,
    coalesce(max(largest_deal_in_pipeline), 0) as largest_deal_in_pipeline,
    round(case
        when sum(bookings_amount_closed_this_month + lost_amount_this_month) > 0 then
        sum(bookings_amount_closed_this_month) / sum(bookings_amount_closed_this_month + lost_amount_this_month) * 100
        else 0
    end, 2) as win_percent_this_month,
    round(case
        when sum(bookings_amount_closed_this_quarter + lost_amount_this_quarter) > 0 then
        sum(bookings_amount_closed_this_quarter) / sum(bookings_amount_closed_this_quarter + lost_amount_this_quarter) * 100
        else 0
    end, 2) as win_percent_this_quarter,
    round(case
        when sum(total_bookings_amount + total_lost_amount) > 0 then
        sum(total_bookings_amount) / sum(total_bookings_amount + total_lost_amount) * 100
        else 0
    end, 2) as total_win_percent

from opportunity_aggregation_by_owner
left join salesforce_user as manager
    on manager.user_id = opportunity_aggregation_by_owner.manager_id

-- If using user_role table, the following will be included, otherwise it will not.
left join user_role
    on manager.user_role_id = user_role.user_role_id

group by 1, 2, 3, 4, 5

having count(distinct owner_id) > 0""",
 "sales_snapshot": """
with salesforce_opportunity_enhanced as (

    select *
    from {{ ref('PFX_opportunity_enhanced') }}
),

pipeline as (

    select
        round(sum(created_amount_this_month)) as pipeline_created_amount_this_month,
        round(sum(created_amount_this_quarter)) as pipeline_created_amount_this_quarter,
        round(sum(created_amount_this_month * probability)) as pipeline_created_forecast_amount_this_month,
        round(sum(created_amount_this_quarter * probability)) as pipeline_created_forecast_amount_this_quarter,
        sum(created_count_this_month) as pipeline_count_created_this_month,
        sum(created_count_this_quarter) as pipeline_count_created_this_quarter,
        count(*) as total_number_pipeline,
        round(sum(amount)) as total_pipeline_amount,
        round(sum(amount * probability)) as total_pipeline_forecast_amount,
        round(avg(amount)) as avg_pipeline_opp_amount,
        max(amount) as largest_deal_in_pipeline,
        avg(days_since_created) as avg_days_open
    from salesforce_opportunity_enhanced
    where status = 'Pipeline'
),

bookings as (

    select
        round(sum(closed_amount_this_month)) as bookings_amount_closed_this_month,
        round(sum(closed_amount_this_quarter)) as bookings_amount_closed_this_quarter,
        count(*) as total_number_bookings,
        round(sum(amount)) as total_bookings_amount,
        sum(closed_count_this_month) as bookings_count_closed_this_month,
        sum(closed_count_this_quarter) as bookings_count_closed_this_quarter,
        round(avg(amount)) as avg_bookings_amount,
        max(amount) as largest_booking,
        avg(days_to_close) as avg_days_to_close
    from salesforce_opportunity_enhanced
    where status = 'Won'
),

lost as (

    select
        round(sum(closed_amount_this_month)) as lost_amount_this_month,
        round(sum(closed_amount_this_quarter)) as lost_amount_this_quarter,
        count(*) as total_number_lost,
        round(sum(amount)) as total_lost_amount,
        sum(closed_count_this_month) as lost_count_this_month,
        sum(closed_count_this_quarter) as lost_count_this_quarter
    from salesforce_opportunity_enhanced
    where status = 'Lost'
)

select
    bookings.*,
    pipeline.*,
    lost.*,
    case
        when (bookings.bookings_amount_closed_this_month + lost.lost_amount_this_month) = 0 then null
        else round( (bookings.bookings_amount_closed_this_month / (bookings.bookings_amount_closed_this_month + lost.lost_amount_this_month) ) * 100, 2 )
    end as win_percent_this_month,
    case
        when (bookings.bookings_amount_closed_this_quarter + lost.lost_amount_this_quarter) = 0 then null
        else round( (bookings.bookings_amount_closed_this_quarter / (bookings.bookings_amount_closed_this_quarter + lost.lost_amount_this_quarter) ) * 100, 2 )
    end as win_percent_this_quarter,
    case
        when (bookings.total_bookings_amount + lost.total_lost_amount) = 0 then null
        else round( (bookings.total_bookings_amount / (bookings.total_bookings_amount + lost.total_lost_amount) ) * 100, 2)
    end as total_win_percent
from bookings, pipeline, lost""",
 "contact_enhanced": """
with contact as (

    select *
    from {{ ref('PFX_stg_contact') }}
),

account as (

    select *
    from {{ ref('PFX_stg_account') }}
),

salesforce_user as (

    select *
    from {{ ref('PFX_stg_user') }}
)

select
    contact.contact_id,
    contact.contact_name,
    contact.account_id,
    contact.department,
    contact.contact_description,
    contact.email,
    contact.individual_id,
    contact.is_deleted as contact_is_deleted,
    contact.last_activity_date,
    contact.lead_source,
    contact.mailing_city,
    contact.mailing_country,
    contact.mailing_country_code,
    contact.mailing_postal_code,
    contact.mailing_state,
    contact.mailing_state_code,
    contact.mailing_street,
    contact.master_record_id,
    contact.mobile_phone,
    contact.owner_id as contact_owner_id,
    contact.phone,
    contact.reports_to_id,
    salesforce_user.user_name as contact_owner_name,
    account.account_name,
    account.account_number,
    account.account_source,
    account.annual_revenue as account_annual_revenue,
    account.account_description,
    account.industry as account_industry,
    account.is_deleted as account_is_deleted,
    account.number_of_employees as account_number_of_employees,
    account.owner_id as account_owner_id,
    account.parent_id as account_parent_id,
    account.rating as account_rating,
    account.type as account_type

        --The below scripts allows for pass through columns.

from contact
left join account
    on contact.account_id = account.account_id
left join salesforce_user
    on contact.owner_id = salesforce_user.user_id""",
 "opportunity_line_item_enhanced": """
--This model will only run if you have the underlying opportunity line item table.
with opportunity_line_item as (

    select *
    from {{ ref('PFX_stg_opportunity_line_item') }}
),

-- If using product_2 table, the following will be included, otherwise it will not.
product_2 as (

    select *
    from {{ ref('PFX_stg_product_2') }}
),

final as (

    select
        oli.opportunity_line_item_id,
        oli.opportunity_line_item_name,
        oli.opportunity_line_item_description,
        oli.opportunity_id,
        row_number() over (partition by oli.opportunity_id order by oli.created_date) as line_item_index,
        count(opportunity_line_item_id) over (partition by oli.opportunity_id) as total_line_items,
        oli.created_date,
        oli.last_modified_date,
        oli.service_date,
        oli.pricebook_entry_id,
        oli.product_2_id,
        oli.list_price,
        oli.quantity,
        oli.unit_price,
        oli.total_price,
        oli.has_quantity_schedule,
        oli.has_revenue_schedule

        ,
        product_2.product_2_name,
        product_2.product_code,
        product_2.product_2_description,
        product_2.external_id as product_external_id,
        product_2.family as product_family,
        product_2.is_active as product_is_active,
        product_2.is_archived as product_is_archived,
        product_2.is_deleted as product_is_deleted,
        product_2.number_of_quantity_installments as product_number_of_quantity_installments,
        product_2.quantity_installment_period as product_quantity_installment_period,
        product_2.quantity_schedule_type as product_quantity_schedule_type,
        product_2.quantity_unit_of_measure as product_quantity_unit_of_measure,
        product_2.number_of_revenue_installments as product_number_of_revenue_installments,
        product_2.revenue_installment_period as product_revenue_installment_period,
        product_2.revenue_schedule_type as product_revenue_schedule_type

        --The below script allows for pass through columns.

    from opportunity_line_item as oli

    left join product_2
        on oli.product_2_id = product_2.product_2_id
)

select *
from final""",
 "daily_activity": """
with date_spine as (

    select
        date_trunc('day', date_day) as date_day
    from {{ ref('PFX_int_date_spine') }}
),

task as (

    select
        date_trunc('day', activity_date) as activity_date,
        count(task_id) as tasks_completed
    from {{ ref('PFX_stg_task') }}
    group by 1
),

salesforce_event as (

    select
        coalesce(date_trunc('day', activity_date), date_trunc('day', activity_date_time)) as activity_date,
        count(event_id) as events_completed
    from {{ ref('PFX_stg_event') }}
    group by 1
),

salesforce_lead as (

    select
        date_trunc('day', created_date) as created_date,
        count(lead_id) as leads_created
    from {{ ref('PFX_stg_lead') }}
    group by 1
),

salesforce_converted_lead as (

    select
        date_trunc('day', converted_date) as converted_date,
        count(lead_id) as leads_converted
    from {{ ref('PFX_stg_lead') }}
    where is_converted
    group by 1
),

opportunity as (

    select
        opportunity_id,
        date_trunc('day', created_date) as created_date,
        account_id,
        date_trunc('day', close_date) as close_date,
        is_closed,
        is_deleted,
        is_won,
        owner_id,
        stage_name,
        type,
        amount,
        case
            when is_won then 'Won'
            when not is_won and is_closed then 'Lost'
            when not is_closed and lower(forecast_category) in ('pipeline','forecast','bestcase') then 'Pipeline'
            else 'Other'
        end as status
    from {{ ref('PFX_stg_opportunity') }}
),

opportunities_created as (

    select
        created_date,
        count(opportunity_id) as opportunities_created,
        round(sum(amount)) as opportunities_created_amount
    from opportunity
    group by 1
),

opportunities_closed as (

    select
        close_date,
        count(case when status = 'Won' then opportunity_id else null end) as opportunities_won,
        round(sum(case when status = 'Won' then amount else 0 end)) as opportunities_won_amount,
        count(case when status = 'Lost' then opportunity_id else null end) as opportunities_lost,
        round(sum(case when status = 'Lost' then amount else null end)) as opportunities_lost_amount,
        round(sum(case when status = 'Pipeline' then amount else null end)) as pipeline_amount
    from opportunity
    group by 1
)

select
    date_spine.date_day,

    salesforce_lead.leads_created,
    salesforce_converted_lead.leads_converted,

    task.tasks_completed,

    salesforce_event.events_completed,

    opportunities_created.opportunities_created,
    opportunities_created.opportunities_created_amount,
    opportunities_closed.opportunities_won,
    opportunities_closed.opportunities_won_amount,
    opportunities_closed.opportunities_lost,
    opportunities_closed.opportunities_lost_amount,
    opportunities_closed.pipeline_amount
from date_spine

left join salesforce_lead
    on date_spine.date_day = salesforce_lead.created_date
left join salesforce_converted_lead
    on date_spine.date_day = salesforce_converted_lead.converted_date

left join task
    on date_spine.date_day = task.activity_date

left join salesforce_event
    on date_spine.date_day = salesforce_event.activity_date

left join opportunities_created
    on date_spine.date_day = opportunities_created.created_date
left join opportunities_closed
    on date_spine.date_day = opportunities_closed.close_date""",

}
# the package's yml files: unique + not_null on each staging model's id and each end model's id
SF_IDS = {"stg_account": "account_id", "stg_contact": "contact_id", "stg_event": "event_id",
          "stg_lead": "lead_id", "stg_opportunity": "opportunity_id",
          "stg_opportunity_line_item": "opportunity_line_item_id", "stg_order": "order_id",
          "stg_product_2": "product_2_id", "stg_task": "task_id", "stg_user": "user_id",
          "stg_user_role": "user_role_id", "opportunity_enhanced": "opportunity_id",
          "owner_performance": "owner_id", "manager_performance": "manager_id",
          "contact_enhanced": "contact_id", "daily_activity": "date_day",
          "opportunity_line_item_enhanced": "opportunity_line_item_id"}
for _p in ("sf", "sfk"):
    for _name, _sql in {**SF_STAGING, **SF_MARTS}.items():
        PROBES[f"{_p}_{_name}"] = cfg() + _sql.replace("PFX_", f"{_p}_")
# the package's schema.yml: unique + not_null on each mart's id
DA_IDS = {"current_models": "node_id", "flaky_tests_detail": "flaky_test_flip_id",
          "flaky_tests": "flaky_test_id", "model_performance": "model_performance_id",
          "run_health_daily_detail": "run_health_daily_detail_id",
          "dag_bottlenecks_detail": "dag_bottleneck_detail_id"}
for _p in ("da", "dak"):
    for _name, _sql in {**DA_STAGING, **DA_MARTS}.items():
        for _mark, _expr in _DA_SURROGATES.items():
            _sql = _sql.replace(_mark, _expr)
        PROBES[f"{_p}_{_name}"] = cfg() + _sql.replace("PFX_", f"{_p}_")
MODEL_TESTS = {"js_stg_customers": "customer_id", "js_stg_locations": "location_id",
            "js_stg_orders": "order_id", "js_stg_order_items": "order_item_id",
            "js_stg_products": "product_id", "js_stg_supplies": "supply_uuid",
            "js_order_items": "order_item_id", "js_orders": "order_id",
            "js_customers": "customer_id",
            # segment's schema.yml files
            "sgt_web_page_views": "page_view_id", "sgt_web_page_views_sessionized": "page_view_id",
            "sgt_web_sessions_initial": "session_id", "sgt_web_user_stitching": "anonymous_id",
            "sgt_web_sessions_stitched": "session_id", "sgt_web_sessions": "session_id",
            **{f"dak_{name}": key for name, key in DA_IDS.items()},
            **{f"shk_{name}": key for name, key in SH_IDS.items()},
            **{f"stk_{name}": key for name, key in ST_IDS.items()},
            **{f"xrk_{name}": key for name, key in XR_IDS.items()},
            **{f"qbk_{name}": key for name, key in QB_IDS.items()},
            **{f"sfk_{name}": key for name, key in SF_IDS.items()}}
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
