{{ config(unique_key='order_id', refresh_interval='0s') }}

-- Row-wise: projection + filter of one upstream, so each run replays the change feed.
select
    order_id,
    customer_id,
    status,
    amount,
    cast(amount * 100 as bigint) as amount_cents,
    case when amount >= 250 then 'large' else 'regular' end as size_band,
    to_date(ordered_at) as order_date
from {{ ref('orders') }}
where status <> 'cancelled'
