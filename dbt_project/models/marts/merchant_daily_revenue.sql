-- Daily revenue per merchant and currency: the event-time windows of a day added up.
select
    concat(merchant_id, '|', cast(revenue_date as string), '|', currency) as merchant_day_key,
    merchant_id,
    revenue_date,
    currency,
    count(*) as windows,
    sum(orders) as orders,
    sum(gross_cents) as gross_cents,
    sum(refunds_cents) as refunds_cents,
    sum(net_cents) as net_cents,
    case when sum(gross_cents) > 0
         then round(cast(sum(refunds_cents) as double) / sum(gross_cents), 6) end as refund_rate,
    max(served_mode) as served_mode,
    max(served_from) as served_from
from {{ ref('stg_merchant_revenue') }}
group by merchant_id, revenue_date, currency
