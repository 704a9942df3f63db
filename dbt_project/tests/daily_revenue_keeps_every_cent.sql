-- The daily mart neither drops nor invents money: its totals equal the served windows' totals.
with served as (
    select sum(gross_cents) as served_gross, sum(refunds_cents) as served_refunds, count(*) as served_windows
    from {{ ref('stg_merchant_revenue') }}
), daily as (
    select sum(gross_cents) as daily_gross, sum(refunds_cents) as daily_refunds, sum(windows) as daily_windows
    from {{ ref('merchant_daily_revenue') }}
)
select * from served cross join daily
where served_gross <> daily_gross or served_refunds <> daily_refunds or served_windows <> daily_windows
