-- Per customer: how many sessions, how long, and how many of them led to an order.
select
    customer_id,
    count(*) as sessions,
    sum(events) as events,
    sum(orders) as orders,
    count_if(orders > 0) as converting_sessions,
    round(cast(count_if(orders > 0) as double) / count(*), 6) as conversion_rate,
    sum(duration_ms) as total_duration_ms,
    round(avg(duration_ms), 3) as avg_session_duration_ms,
    max(duration_ms) as longest_session_ms,
    min(session_start) as first_session_start,
    max(session_end) as last_session_end,
    max(served_mode) as served_mode,
    max(served_from) as served_from
from {{ ref('stg_customer_sessions') }}
group by customer_id
