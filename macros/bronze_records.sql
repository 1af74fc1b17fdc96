{#
    bronze_records(format)

    The bronze rows of one CDC format with their lineage, for a staging model to parse.
    `bronze_commit_version` is the Delta commit that landed the row (row tracking), the
    watermark silver's incremental models read from.

    Arguments:
      format: the `format` value of the sources to read, e.g. 'debezium'.
#}
{% macro bronze_records(format) -%}
    select
        source,
        format,
        topic,
        `partition`,
        `offset`,
        kafka_timestamp,
        key,
        value,
        ingested_at,
        batch_id,
        _metadata.row_commit_version as bronze_commit_version
    from {{ source('bronze', 'cdc_raw') }}
    where format = '{{ format }}'
{%- endmacro %}
