{#
    bronze_lineage_columns()

    The bronze columns every staging model ends with, in the staging contract's order
    (docs/architecture.md), so the union in int_change_log__keyed lines up: the lineage,
    then `field_twice_within` (bronze_records), which int_change_log__keyed checks.
#}
{% macro bronze_lineage_columns() -%}
        topic,
        `partition`,
        `offset`,
        kafka_timestamp,
        ingested_at,
        batch_id,
        bronze_commit_version,
        field_twice_within
{%- endmacro %}
