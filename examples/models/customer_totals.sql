{{ config(unique_key='customer_id') }}

-- Join + aggregate: replayed by affected keys. A changed order recomputes only its customer's
-- row (found by joining the order's change rows to customers); a changed customer only itself.
select
    c.customer_id,
    c.name,
    count(o.order_id) as orders,
    coalesce(sum(o.amount_cents), 0) as amount_cents
from {{ ref('customers') }} c
left join {{ ref('orders_enriched') }} o on o.customer_id = c.customer_id
group by c.customer_id, c.name
