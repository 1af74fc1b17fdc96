{#
    union_staged_changes()

    `union all` of every staging model named in the `batch_formats` var when set (an
    incremental build of the pipeline: the formats with new bronze rows), else in the
    `cdc_formats` var. Each staging model has the same columns in the same order, so adding
    a format is adding its model and its name to `cdc_formats`.
#}
{% macro union_staged_changes() -%}
    {%- for fmt in var('batch_formats', none) or var('cdc_formats') %}
    select * from {{ ref('stg_cdc__' ~ fmt) }}
    {%- if not loop.last %}
    union all
    {%- endif %}
    {%- endfor %}
{%- endmacro %}
