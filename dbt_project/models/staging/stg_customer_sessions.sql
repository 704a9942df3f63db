-- One row per customer session.
select
    concat(customer_id, '|', cast(session_start as string)) as session_key,
    customer_id,
    session_start,
    session_end,
    cast(session_start as date) as session_date,
    duration_ms,
    events,
    orders,
    payments,
    refunds,
    {{ served_from('customer_sessions') }}
from {{ source('serving', 'customer_sessions') }}
