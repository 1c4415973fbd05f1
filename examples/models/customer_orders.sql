{{ config(unique_key='order_id') }}

-- Built on another batch_refresh model: it replays orders_enriched's own change feed.
select
    order_id,
    customer_id,
    amount_cents,
    size_band
from {{ ref('orders_enriched') }}
where size_band = 'large'
