{#
    union_staged_changes()

    `union all` of every staging model named in the `batch_formats` var when set (an
    incremental build of the pipeline: the formats with new bronze rows), else in the
    `cdc_formats` var. Each staging model has the same columns in the same order, so adding
    a format is adding its model and its name to `cdc_formats`. With the environment
    variable `LAKEHOUSE_BATCH_INGESTED_SINCE_MS` (a lower bound of the ingested_at of every
    bronze row landed since the last build), each model is read from that moment on: Delta
    skips the older bronze files by their statistics. An environment variable, not a var:
    it changes every build, and dbt parses only the files that read it again, not the
    whole project as for a var (pyspark_jobs/silver/build.py).
#}
{% macro union_staged_changes() -%}
    {%- for fmt in var('batch_formats', none) or var('cdc_formats') %}
    select * from {{ ref('stg_cdc__' ~ fmt) }}
    {%- if env_var('LAKEHOUSE_BATCH_INGESTED_SINCE_MS', '') %}
    where ingested_at >= timestamp_millis({{ env_var('LAKEHOUSE_BATCH_INGESTED_SINCE_MS') | int }})
    {%- endif %}
    {%- if not loop.last %}
    union all
    {%- endif %}
    {%- endfor %}
{%- endmacro %}
