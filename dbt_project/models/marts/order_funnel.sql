-- Per merchant, day and currency: how many orders reached each stage (placed -> paid -> refunded),
-- and the payments and refunds still waiting for their order (payment-before-order orphans).
with counted as (
    select
        merchant_id,
        order_date,
        currency,
        count_if(not is_orphan) as orders_placed,
        count_if(status in ('paid', 'refunded')) as orders_paid,
        count_if(status = 'refunded') as orders_refunded,
        count_if(status = 'orphan_payment') as orphan_payments,
        count_if(status = 'orphan_refund') as orphan_refunds,
        sum(case when not is_orphan then paid_cents else 0 end) as paid_cents,
        sum(case when not is_orphan then refunded_cents else 0 end) as refunded_cents,
        sum(case when is_orphan then paid_cents else 0 end) as orphan_paid_cents,
        max(served_mode) as served_mode,
        max(served_from) as served_from
    from {{ ref('stg_orders') }}
    group by merchant_id, order_date, currency
)
select
    concat(merchant_id, '|', cast(order_date as string), '|', currency) as merchant_day_key,
    merchant_id,
    order_date,
    currency,
    orders_placed,
    orders_paid,
    orders_refunded,
    orphan_payments,
    orphan_refunds,
    paid_cents,
    refunded_cents,
    orphan_paid_cents,
    case when orders_placed > 0 then round(cast(orders_paid as double) / orders_placed, 6) end as payment_rate,
    case when orders_paid > 0 then round(cast(orders_refunded as double) / orders_paid, 6) end as refund_rate,
    served_mode,
    served_from
from counted
