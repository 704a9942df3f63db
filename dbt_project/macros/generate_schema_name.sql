{#- Schemas are named as configured (staging, marts), not prefixed with the target schema. -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {{ (custom_schema_name or target.schema) | trim }}
{%- endmacro %}
