{#- Which copy of a gold table a serving view reads: `lambda` (the batch snapshot of a reconciliation)
    or `kappa` (the stream table), as recorded on the view by the serving state machine. -#}
{% macro serving_properties(table) -%}
    {%- set found = {'mode': 'unknown', 'source': 'unknown'} -%}
    {%- if execute -%}
        {%- set rows = run_query("show tblproperties serving." ~ table) -%}
        {%- for row in rows -%}
            {%- if row[0] == 'kappa.serving.mode' -%}{%- do found.update({'mode': row[1]}) -%}{%- endif -%}
            {%- if row[0] == 'kappa.serving.source' -%}{%- do found.update({'source': row[1]}) -%}{%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(found) }}
{%- endmacro %}

{% macro served_from(table) -%}
    {%- set props = serving_properties(table) -%}
    '{{ props.mode }}' as served_mode,
    '{{ props.source }}' as served_from
{%- endmacro %}
