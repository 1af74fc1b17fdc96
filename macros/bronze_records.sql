{#
    bronze_records(format)

    The bronze rows of one CDC format with their lineage, for a staging model to parse.
    `bronze_commit_version` is the Delta commit that landed the row (row tracking), the
    watermark silver's incremental models read from. `inexact_number` is the first number
    in the value or the key that silver cannot keep exactly (inexact_json_number).

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
        coalesce({{ inexact_json_number('value') }}, {{ inexact_json_number('key') }})
            as inexact_number,
        ingested_at,
        batch_id,
        _metadata.row_commit_version as bronze_commit_version
    from {{ source('bronze', 'cdc_raw') }}
    where format = '{{ format }}'
{%- endmacro %}
