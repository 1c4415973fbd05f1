{{ config(unique_key='customer_id') }}

-- Join + aggregate: refreshed by a full recompute whose difference is merged (only changed
-- rows are written).
select
    c.customer_id,
    c.name,
    count(o.order_id) as orders,
    coalesce(sum(o.amount_cents), 0) as amount_cents
from {{ ref('customers') }} c
left join {{ ref('orders_enriched') }} o on o.customer_id = c.customer_id
group by c.customer_id, c.name
