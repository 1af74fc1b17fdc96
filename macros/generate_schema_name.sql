{#
    Use the folder's schema as is (bronze / staging / silver), not dbt's default
    "<target schema>_<custom schema>", so jobs, dbt and analysts name the same tables.
#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is none -%}{{ target.schema }}{%- else -%}{{ custom_schema_name | trim }}{%- endif -%}
{%- endmacro %}
