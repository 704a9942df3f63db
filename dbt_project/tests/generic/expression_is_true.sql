{#- Rows for which a SQL expression over one row is not true; the test fails on any. -#}
{% test expression_is_true(model, expression) %}
select * from {{ model }} where not coalesce({{ expression }}, false)
{% endtest %}
