-- One row per order id. Orphans are payments or refunds whose order has not arrived (yet).
select
    order_id,
    customer_id,
    merchant_id,
    currency,
    status,
    status in ('orphan_payment', 'orphan_refund') as is_orphan,
    order_amount_cents,
    paid_cents,
    refunded_cents,
    placed_at,
    paid_at,
    refunded_at,
    cast(coalesce(placed_at, paid_at, refunded_at) as date) as order_date,
    {{ served_from('order_status') }}
from {{ source('serving', 'order_status') }}
