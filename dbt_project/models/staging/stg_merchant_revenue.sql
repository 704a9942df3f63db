-- One row per merchant, event-time window and currency, as served.
select
    merchant_id,
    currency,
    window_start,
    window_end,
    cast(window_start as date) as revenue_date,
    orders,
    gross_cents,
    refunds_cents,
    net_cents,
    distinct_customers,
    {{ served_from('merchant_revenue') }}
from {{ source('serving', 'merchant_revenue') }}
