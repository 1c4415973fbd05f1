"""fivetran/dbt_stripe's subscription item MRR report as the probe runs it
(tests/functional/probe_real_projects.py, and test_real_sql's `mrr_report`): `st_` keyless,
`stk_` with the package's key tests (MODEL_TESTS)."""
from __future__ import annotations

from tests.functional.probes.common import O, P, PR, ported

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
PROBES, MODEL_TESTS = ported("st", {**ST_STAGING, **ST_MARTS}, ST_IDS)
