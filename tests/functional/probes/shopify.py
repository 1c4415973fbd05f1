"""fivetran/dbt_shopify's REST models as the probe runs them
(tests/functional/probe_real_projects.py): `sh_` keyless, `shk_` with the package's key tests
(MODEL_TESTS)."""
from __future__ import annotations

from tests.functional.probes.common import C, O, P, PR, ported

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
PROBES, MODEL_TESTS = ported("sh", {**SH_STAGING, **SH_MARTS}, SH_IDS)
